//! Rules that share an extractor: the layer names the principal once a request and both
//! rules count it; rules whose extractors differ each run their own.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use http::request::Parts;
use ratekeeper_core::{HashKey, Limit, Principal, PrincipalKind};
use ratekeeper_tests::{Server, client, connect_info_peer};
use ratekeeper_tower::extract::{
    Bearer, ClientIp, Global, HeaderKey, KeyExtractor, KeyExtractorExt, Rejection,
};
use ratekeeper_tower::{RateLimitLayer, Rule};
use reqwest::StatusCode;

/// `x-user` as a user, counting its calls; no `same_key_as` of its own.
struct Counted(Arc<AtomicUsize>);

impl KeyExtractor for Counted {
    fn extract(&self, parts: &Parts) -> Result<Principal, Rejection> {
        self.0.fetch_add(1, Ordering::SeqCst);
        HeaderKey::new("x-user".parse().unwrap(), PrincipalKind::User).extract(parts)
    }
}

/// Serves `/` behind a burst rule (2 a minute) and a sustained one (5 an hour) keyed by
/// `burst` and `sustained`; three requests from one user, then one from another. The
/// extractor's calls.
async fn three_then_another(burst: impl KeyExtractor, sustained: impl KeyExtractor) -> Vec<u16> {
    let layer = RateLimitLayer::in_memory()
        .rule(Rule::new(
            Limit::fixed_window("burst", 2, Duration::from_secs(60)).unwrap(),
            burst,
        ))
        .rule(Rule::new(
            Limit::fixed_window("sustained", 5, Duration::from_secs(3_600)).unwrap(),
            sustained,
        ));
    let server = Server::start(
        Router::new()
            .route("/", get(|| async { "ok" }))
            .layer(layer),
    )
    .await
    .unwrap();
    let http = client();
    let mut statuses = Vec::new();
    for user in ["ada", "ada", "ada", "bob"] {
        let r = http
            .get(server.url("/"))
            .header("x-user", user)
            .send()
            .await
            .unwrap();
        if r.status() == StatusCode::OK {
            // Both rules counted the user: burst 2 − n, sustained 5 − n.
            let now = r.headers()["ratelimit"].to_str().unwrap().to_owned();
            assert!(
                now.contains("\"burst\";r=") && now.contains("\"sustained\";r="),
                "{now}"
            );
        }
        statuses.push(r.status().as_u16());
    }
    // Missing header: the first rule's rejection, whoever extracts.
    let r = http.get(server.url("/")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    statuses
}

#[tokio::test]
async fn rules_sharing_an_extractor_name_the_principal_once_and_both_count_it() {
    let calls = Arc::new(AtomicUsize::new(0));
    let shared = Arc::new(Counted(Arc::clone(&calls)));
    let statuses = three_then_another(Arc::clone(&shared), shared).await;
    assert_eq!(statuses, [200, 200, 429, 200]);
    assert_eq!(calls.load(Ordering::SeqCst), 5, "once a request");

    // Two extractors alike but not the same value: each runs.
    let calls = Arc::new(AtomicUsize::new(0));
    let statuses =
        three_then_another(Counted(Arc::clone(&calls)), Counted(Arc::clone(&calls))).await;
    assert_eq!(statuses, [200, 200, 429, 200]);
    assert_eq!(
        calls.load(Ordering::SeqCst),
        9,
        "twice a request (once for the one without the header)"
    );
}

#[test]
fn the_crates_extractors_are_the_same_when_their_settings_are() {
    let same = |a: &dyn KeyExtractor, b: &dyn KeyExtractor| a.same_key_as(b);
    let user = HeaderKey::new("x-user".parse().unwrap(), PrincipalKind::User);
    assert!(same(&user, &user.clone()));
    assert!(same(
        &user,
        &HeaderKey::new("x-user".parse().unwrap(), PrincipalKind::User)
    ));
    assert!(!same(
        &user,
        &HeaderKey::new("x-team".parse().unwrap(), PrincipalKind::User)
    ));
    assert!(!same(
        &user,
        &HeaderKey::new("x-user".parse().unwrap(), PrincipalKind::ApiKey)
    ));
    assert!(!same(&user, &user.clone().max_len(8)));
    assert!(!same(&user, &Global));
    assert!(same(&Global, &Global));

    let k = |b: &[u8]| HashKey::new(b).unwrap();
    let keyed = user.clone().keyed(k(&[1; 32]));
    assert!(same(&keyed, &user.clone().keyed(k(&[1; 32]))));
    assert!(!same(&keyed, &user.clone().keyed(k(&[2; 32]))));
    assert!(!same(&keyed, &user));
    assert!(same(&Bearer::new(), &Bearer::new()));
    assert!(!same(&Bearer::new(), &Bearer::new().keyed(k(&[1; 32]))));

    let ip = ClientIp::new();
    assert!(same(&ip, &ClientIp::new()));
    let proxied = ClientIp::new().trusted_proxies(["10.0.0.0/8".parse().unwrap()]);
    assert!(!same(&ip, &proxied));
    assert!(same(&proxied, &proxied.clone()));
    // A peer function has no equality: the same one only through a clone.
    let peer = ClientIp::new().peer_source(connect_info_peer);
    assert!(same(&peer, &peer.clone()));
    assert!(!same(
        &peer,
        &ClientIp::new().peer_source(connect_info_peer)
    ));
    assert!(!same(&peer, &ip));

    let either = user.clone().or_else(ip.clone());
    assert!(same(&either, &user.clone().or_else(ClientIp::new())));
    assert!(!same(&either, &user.clone().or_else(proxied)));
    // An Arc: the same as its clones.
    let arc = Arc::new(user.clone());
    assert!(same(&arc, &Arc::clone(&arc)));
}
