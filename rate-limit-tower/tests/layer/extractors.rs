//! Principals from requests, and every way a request can fail to name one.

use http::{HeaderValue, Request, StatusCode};
use ratekeeper_core::{Principal, PrincipalKind};
use ratekeeper_tower::Rule;
use ratekeeper_tower::extract::{
    Bearer, ClientIp, ExtensionKey, KeyExtractorExt, Rejection, key_fn,
};

use crate::support::*;

#[tokio::test]
async fn bad_header_principals_are_400_never_a_panic_or_a_5xx() {
    let (layer, _) = fresh();
    let svc = app(&layer.rule(Rule::new(minute("p", 5), participant())));
    let huge = vec![b'a'; 1 << 20];
    let cases: Vec<(Option<&[u8]>, &str)> = vec![
        (None, "principal.missing"),
        (Some(b""), "principal.empty"),
        (Some(&[0xff, 0xfe]), "principal.invalid"),
        (Some(b"has space"), "principal.invalid"),
        (Some("caf\u{e9}".as_bytes()), "principal.invalid"),
        (Some(&[b'a'; 129]), "principal.too_long"),
        (Some(&huge), "principal.too_long"),
    ];
    for (value, code) in cases {
        let mut b = from("1.2.3.4:5");
        if let Some(v) = value {
            b = b.header("x-participant-id", HeaderValue::from_bytes(v).unwrap());
        }
        let r = send(svc.clone(), b.body(empty()).unwrap()).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{code}");
        assert!(
            r.body.contains(&format!("\"code\":\"{code}\"")),
            "{}",
            r.body
        );
        assert!(r.body.len() < 200, "the value is never echoed back");
    }
    // 128 bytes of visible ASCII is fine.
    let ok = from("1.2.3.4:5")
        .header("x-participant-id", "~".repeat(128))
        .body(empty())
        .unwrap();
    assert_eq!(send(svc, ok).await.status, StatusCode::OK);
}

#[tokio::test]
async fn a_missing_bearer_is_401_with_a_challenge() {
    let (layer, _) = fresh();
    let svc = app(&layer.rule(Rule::new(minute("host", 5), Bearer::new())));
    for auth in [
        None,
        Some("Basic Zm9vOmJhcg=="),
        Some("Bearer "),
        Some("Bearer a b"),
    ] {
        let mut b = from("1.2.3.4:5");
        if let Some(a) = auth {
            b = b.header("authorization", a);
        }
        let r = send(svc.clone(), b.body(empty()).unwrap()).await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{auth:?}");
        assert_eq!(r.header("www-authenticate"), Some("Bearer"));
    }
    let ok = from("1.2.3.4:5")
        .header("authorization", "bearer host-7")
        .body(empty())
        .unwrap();
    assert_eq!(send(svc, ok).await.status, StatusCode::OK);
}

/// A bearer token names the kind it is given (an API key here), hashed either way.
#[test]
fn a_bearer_names_its_kind() {
    use ratekeeper_tower::extract::KeyExtractor;
    let (parts, ()) = Request::get("/")
        .header("authorization", "Bearer sk-live-123")
        .body(())
        .unwrap()
        .into_parts();
    let user = Bearer::new().extract(&parts).unwrap();
    let key = Bearer::new()
        .kind(PrincipalKind::ApiKey)
        .extract(&parts)
        .unwrap();
    assert_eq!(user.kind(), &PrincipalKind::User);
    assert_eq!(key.kind(), &PrincipalKind::ApiKey);
    for p in [&user, &key] {
        assert!(!p.as_str().contains("sk-live"), "hashed: {p:?}");
    }
}

#[derive(Clone)]
struct SignedIn(String);

#[tokio::test]
async fn extensions_set_by_auth_name_the_user() {
    let (layer, _) = fresh();
    let key = ExtensionKey::new(|u: &SignedIn| Principal::user(&u.0));
    let svc = app(&layer.rule(Rule::new(minute("acct", 1), key)));
    let signed_in = |id: &str| {
        from("1.2.3.4:5")
            .extension(SignedIn(id.into()))
            .body(empty())
            .unwrap()
    };
    assert_eq!(
        send(svc.clone(), signed_in("ann")).await.status,
        StatusCode::OK
    );
    assert_eq!(
        send(svc.clone(), signed_in("ann")).await.status,
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(
        send(svc.clone(), signed_in("bob")).await.status,
        StatusCode::OK
    );
    let anonymous = send(svc, from("1.2.3.4:5").body(empty()).unwrap()).await;
    assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn a_missing_principal_can_fall_back_to_another() {
    let (layer, _) = fresh();
    let key = participant().or_else(ClientIp::new());
    let svc = app(&layer.rule(Rule::new(minute("p", 1), key)));
    // No participant id: counted by IP.
    assert_eq!(
        send(svc.clone(), from("1.2.3.4:5").body(empty()).unwrap())
            .await
            .status,
        StatusCode::OK
    );
    let r = send(svc.clone(), from("1.2.3.4:6").body(empty()).unwrap()).await;
    assert_eq!(
        r.status,
        StatusCode::TOO_MANY_REQUESTS,
        "same IP, another port"
    );
    // An invalid one falls back too.
    let bad = from("9.9.9.9:1")
        .header("x-participant-id", "")
        .body(empty())
        .unwrap();
    assert_eq!(send(svc.clone(), bad).await.status, StatusCode::OK);
    // A valid one is its own key.
    let p = from("1.2.3.4:5")
        .header("x-participant-id", "p1")
        .body(empty())
        .unwrap();
    assert_eq!(send(svc, p).await.status, StatusCode::OK);
}

#[tokio::test]
async fn no_peer_where_the_ip_is_needed_is_the_operators_500() {
    let (layer, _) = fresh();
    let svc = app(&layer.rule(Rule::new(minute("ip", 5), ClientIp::new())));
    let r = send(svc, Request::builder().uri("/").body(empty()).unwrap()).await;
    assert_eq!(r.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(r.body.contains("server.peer_missing"));
    // It says exactly what to use, for axum and for plain hyper/tower.
    assert!(
        r.body.contains("ratekeeper_axum::client_ip()"),
        "{}",
        r.body
    );
    assert!(r.body.contains("into_make_service_with_connect_info"));
    assert!(r.body.contains("SocketAddr as a request extension"));
}

#[tokio::test]
async fn closures_name_principals_and_reject_with_their_own_answer() {
    let (layer, _) = fresh();
    let key = key_fn(|parts| match parts.uri.path().strip_prefix("/games/") {
        Some(game) if !game.is_empty() => {
            Ok(Principal::new(PrincipalKind::custom("game").unwrap(), game))
        }
        _ => Err(Rejection::missing("game.missing", "which game?")),
    });
    let svc = app(&layer.rule(Rule::new(minute("game", 1), key)));
    let game = |p: &str| from("1.2.3.4:5").uri(p).body(empty()).unwrap();
    assert_eq!(
        send(svc.clone(), game("/games/a")).await.status,
        StatusCode::OK
    );
    assert_eq!(
        send(svc.clone(), game("/games/a")).await.status,
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(
        send(svc.clone(), game("/games/b")).await.status,
        StatusCode::OK
    );
    let r = send(svc, game("/elsewhere")).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(r.body.contains("which game?"));
}
