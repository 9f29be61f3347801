//! Every answer the layer makes itself, from one typed refusal through one responder: each
//! status (400, 401, 403, 429, 503, a held line's 429) as problem+json with the problem
//! responder, and as its gRPC status with a real tonic client, over TCP.

use std::time::Duration;

use axum::Router;
use axum::routing::get;
use http::uri::PathAndQuery;
use ratekeeper_core::{Delay, FailurePolicy, Limit, Limiter, PrincipalKind};
use ratekeeper_tests::{Server, client, connect_info_peer};
use ratekeeper_tower::access::{Access, List};
use ratekeeper_tower::extract::{Bearer, ClientIp, HeaderKey};
use ratekeeper_tower::{
    Answering, BanAnswer, PROBLEM_TYPES, ProblemResponder, QUOTA_EXCEEDED, RateLimitLayer, Rule,
    TEMPORARY_REDUCED_CAPACITY,
};
use tonic::Code;
use tonic_types::StatusExt;

const MINUTE: Duration = Duration::from_secs(60);

/// One route per kind of refusal, each with a layer of its own, all answering `answering`.
fn app(answering: &Answering) -> Router {
    let ip = || ClientIp::new().peer_source(connect_info_peer);
    let key = || HeaderKey::new("x-key".parse().unwrap(), PrincipalKind::User);
    let layer = || RateLimitLayer::in_memory().answering(answering.clone());
    let ok = || get(|| async { "ok" }).post(|| async { "ok" });
    let limited = layer().rule(Rule::new(
        Limit::fixed_window("one", 1, MINUTE).unwrap(),
        key(),
    ));
    let denied = layer()
        .rule(Rule::new(
            Limit::fixed_window("d", 9, MINUTE).unwrap(),
            key(),
        ))
        .access(Access::new(ip()).deny(List::parse(&["127.0.0.0/8"]).unwrap()));
    let auth = layer().rule(Rule::new(
        Limit::fixed_window("b", 9, MINUTE).unwrap(),
        Bearer::new(),
    ));
    // One refusal within a minute bans the address for a minute, answered 403.
    let banned = layer()
        .rule(
            Rule::new(Limit::ban("ban", 1, MINUTE, MINUTE).unwrap(), ip())
                .ban_answer(BanAnswer::Forbidden),
        )
        .rule(Rule::new(
            Limit::fixed_window("once", 1, MINUTE).unwrap(),
            ip(),
        ));
    let down = RateLimitLayer::new(Limiter::new(ratekeeper_tests::redis::down_store()))
        .answering(answering.clone())
        .rule(
            Rule::new(Limit::fixed_window("r", 9, MINUTE).unwrap(), key())
                .on_store_error(FailurePolicy::Closed),
        );
    // Held from the second request; no room to hold anyone.
    let delayed = Limit::sliding_log("held", 100, MINUTE)
        .unwrap()
        .delayed(Delay::doubling(1, Duration::from_secs(1), Duration::from_secs(8)).unwrap())
        .unwrap();
    let held = layer().rule(Rule::new(delayed, key())).max_held(0);
    Router::new()
        .route("/limited", ok().route_layer(limited))
        .route(
            "/missing",
            ok().route_layer(layer().rule(Rule::new(
                Limit::fixed_window("m", 9, MINUTE).unwrap(),
                key(),
            ))),
        )
        .route("/auth", ok().route_layer(auth))
        .route("/denied", ok().route_layer(denied))
        .route("/banned", ok().route_layer(banned))
        .route("/down", ok().route_layer(down))
        .route("/held", ok().route_layer(held))
}

/// How each route is refused: (path, requests before the refusal, status, code).
const CASES: [(&str, usize, u16, &str); 7] = [
    ("/missing", 0, 400, "principal.missing"),
    ("/auth", 0, 401, "principal.missing"),
    ("/denied", 0, 403, "access.denied"),
    ("/limited", 1, 429, "limit.exceeded"),
    ("/held", 1, 429, "delay.line_full"),
    ("/banned", 2, 403, "ban.active"),
    ("/down", 0, 503, "store.unavailable"),
];

/// Each case's refusal over HTTP: `before` requests first, then the one refused.
async fn refused(server: &Server, (path, before): (&str, usize)) -> reqwest::Response {
    let send = || {
        let r = client().get(server.url(path));
        if path == "/missing" {
            r
        } else {
            r.header("x-key", "k")
        }
    };
    for _ in 0..before {
        send().send().await.unwrap();
    }
    send().send().await.unwrap()
}

#[tokio::test]
async fn every_refusal_is_problem_details_with_the_problem_responder() {
    let answering = Answering::new().with_responder(ProblemResponder);
    let server = Server::start(app(&answering)).await.unwrap();
    for (path, before, status, code) in CASES {
        let r = refused(&server, (path, before)).await;
        assert_eq!(r.status().as_u16(), status, "{path}");
        assert_eq!(
            r.headers()["content-type"],
            "application/problem+json",
            "{path}"
        );
        if status == 401 {
            assert_eq!(r.headers()["www-authenticate"], "Bearer", "{path}");
        }
        let waits = r.headers().get("retry-after").is_some();
        assert_eq!(waits, matches!(status, 429 | 503), "{path}");
        let body: serde_json::Value = serde_json::from_str(&r.text().await.unwrap()).unwrap();
        assert_eq!(body["status"], status, "{path}: {body}");
        let ty = body["type"].as_str().unwrap();
        match status {
            429 => assert_eq!(ty, QUOTA_EXCEEDED, "{path}"),
            503 => assert_eq!(ty, TEMPORARY_REDUCED_CAPACITY, "{path}"),
            _ => assert!(ty.starts_with(PROBLEM_TYPES), "{path}: {ty}"),
        }
        assert!(
            body["title"].is_string() && body["detail"].is_string(),
            "{body}"
        );
        if code == "limit.exceeded" {
            // The draft's type says it; the policy is named.
            assert!(body.get("code").is_none(), "{body}");
            assert_eq!(body["violated-policies"][0], "one", "{body}");
        } else {
            assert_eq!(body["code"], code, "{path}: {body}");
        }
        assert_eq!(body.get("retry-after").is_some(), waits, "{path}: {body}");
    }
}

#[tokio::test]
async fn every_refusal_is_its_grpc_status_for_a_real_grpc_client() {
    let server = Server::start(app(&Answering::new())).await.unwrap();
    let channel = tonic::transport::Channel::from_shared(format!("http://{}", server.addr()))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut grpc = tonic::client::Grpc::new(channel);
    for (path, before, status, code) in CASES {
        let mut call = async || {
            let mut req = tonic::Request::new(());
            if path != "/missing" {
                req.metadata_mut().insert("x-key", "k".parse().unwrap());
            }
            grpc.ready().await.unwrap();
            let codec = tonic_prost::ProstCodec::<(), ()>::default();
            let path = PathAndQuery::try_from(path).unwrap();
            grpc.unary(req, path, codec).await
        };
        for _ in 0..before {
            // Admitted: the handler's plain "ok" is no gRPC message, whatever tonic makes of it.
            let _ = call().await;
        }
        let refused = call().await.unwrap_err();
        let want = match status {
            400 => Code::InvalidArgument,
            401 => Code::Unauthenticated,
            403 => Code::PermissionDenied,
            429 => Code::ResourceExhausted,
            _ => Code::Unavailable,
        };
        assert_eq!(refused.code(), want, "{path}: {refused:?}");
        assert!(
            refused.message().ends_with(&format!("({code})")),
            "{path}: {refused:?}"
        );
        let waits = matches!(status, 429 | 503);
        assert_eq!(refused.get_details_retry_info().is_some(), waits, "{path}");
        let pushback = refused.metadata().get("grpc-retry-pushback-ms");
        assert_eq!(pushback.is_some(), waits, "{path}");
    }
}

/// A responder of one's own sees every refusal, and hands the ones it does not answer to
/// a built-in responder.
#[tokio::test]
async fn a_responder_of_ones_own_sees_every_refusal_and_falls_back() {
    use ratekeeper_tower::{Refusal, RefusalKind, Responder};
    use std::sync::{Arc, Mutex};

    struct Mine(Arc<Mutex<Vec<(RefusalKind, &'static str)>>>);
    impl Responder for Mine {
        fn respond(&self, refusal: &Refusal) -> http::Response<bytes::Bytes> {
            self.0
                .lock()
                .unwrap()
                .push((refusal.kind(), refusal.code()));
            match refusal.kind() {
                RefusalKind::Limited => {
                    let mut r = http::Response::new(bytes::Bytes::from_static(b"slow down"));
                    *r.status_mut() = refusal.status();
                    r
                }
                _ => ProblemResponder.respond(refusal),
            }
        }
    }
    let seen = Arc::new(Mutex::new(Vec::new()));
    let answering = Answering::new().with_responder(Mine(Arc::clone(&seen)));
    let server = Server::start(app(&answering)).await.unwrap();
    for (path, before, status, _) in CASES {
        let r = refused(&server, (path, before)).await;
        assert_eq!(r.status().as_u16(), status, "{path}");
        let body = r.text().await.unwrap();
        if path == "/limited" {
            assert_eq!(body, "slow down");
        } else {
            assert!(body.starts_with("{\"type\":"), "{path}: {body}");
        }
    }
    let codes: Vec<&str> = seen.lock().unwrap().iter().map(|(_, c)| *c).collect();
    // The ban's route refuses once by its limit (the refusal that bans) before the ban.
    let want = [
        "principal.missing",
        "principal.missing",
        "access.denied",
        "limit.exceeded",
        "delay.line_full",
        "limit.exceeded",
        "ban.active",
        "store.unavailable",
    ];
    assert_eq!(
        codes, want,
        "every refusal, in order, seen by the responder"
    );
}
