//! No secret is ever stored or logged. A marker secret goes through every constructor and
//! extractor that takes credentials — on a real `redis-server`, through the layer over
//! TCP, and through a store that is down — then every key (`SCAN`), the `MONITOR` stream
//! and the captured logs are searched for it. A readable control value is searched for
//! the same way and must be found, so the search itself is shown to work.

use std::time::Duration;

use axum::Router;
use axum::routing::get;
use ratekeeper_core::testing::LogCapture;
use ratekeeper_core::{
    AnyStore, Chain, HashKey, Limit, Principal, PrincipalKind, RedisStore, Store,
};
use ratekeeper_tests::redis::{RedisServer, down_store};
use ratekeeper_tests::{Server, client};
use ratekeeper_tower::extract::{Bearer, HeaderKey};
use ratekeeper_tower::{RateLimitLayer, Rule};

use crate::monitor::Monitor;

const SECRET: &str = "sk_live_Q7marker";
const CONTROL: &str = "readable-control-Q7";

fn scan_all(server: &RedisServer) -> String {
    server.cli(&["--scan", "--pattern", "*"])
}

/// A route limited by one rule over `store`, quota 1: the second request is refused, so
/// refusals (and the deny cache) see the secret too.
fn route<K: ratekeeper_tower::extract::KeyExtractor>(
    store: &AnyStore,
    name: &str,
    key: K,
) -> axum::routing::MethodRouter {
    let limit = Limit::fixed_window(name, 1, Duration::from_secs(60)).unwrap();
    get(|| async { "ok" }).route_layer(
        RateLimitLayer::new(ratekeeper_core::Limiter::new(store.clone()))
            .rule(Rule::new(limit, key)),
    )
}

fn app(store: &AnyStore, hash_key: &HashKey) -> Router {
    let header = |n: &'static str| http::HeaderName::from_static(n);
    Router::new()
        .route(
            "/api-key",
            route(
                store,
                "s-api-key",
                HeaderKey::new(header("x-api-key"), PrincipalKind::ApiKey),
            ),
        )
        .route(
            "/authorization",
            route(
                store,
                "s-authorization",
                HeaderKey::new(http::header::AUTHORIZATION, PrincipalKind::User),
            ),
        )
        .route(
            "/proxy-authorization",
            route(
                store,
                "s-proxy-auth",
                HeaderKey::new(http::header::PROXY_AUTHORIZATION, PrincipalKind::User),
            ),
        )
        .route(
            "/cookie",
            route(
                store,
                "s-cookie",
                HeaderKey::new(http::header::COOKIE, PrincipalKind::Participant),
            ),
        )
        .route("/bearer", route(store, "s-bearer", Bearer::new()))
        .route(
            "/bearer-keyed",
            route(
                store,
                "s-bearer-keyed",
                Bearer::new().keyed(hash_key.clone()),
            ),
        )
        .route(
            "/email-keyed",
            route(
                store,
                "s-email-keyed",
                HeaderKey::new(header("x-email"), PrincipalKind::User).keyed(hash_key.clone()),
            ),
        )
        .route(
            "/personal",
            route(
                store,
                "s-personal",
                HeaderKey::new(header("x-email"), PrincipalKind::User).personal(),
            ),
        )
        .route(
            "/control",
            route(
                store,
                "s-control",
                HeaderKey::new(header("x-player"), PrincipalKind::Participant),
            ),
        )
}

async fn drive(server: &Server) {
    let http = client();
    let cases: [(&str, &str, String); 9] = [
        ("/api-key", "x-api-key", SECRET.to_owned()),
        ("/authorization", "authorization", format!("Basic {SECRET}")),
        (
            "/proxy-authorization",
            "proxy-authorization",
            format!("Basic {SECRET}"),
        ),
        ("/cookie", "cookie", format!("session={SECRET}")),
        ("/bearer", "authorization", format!("Bearer {SECRET}")),
        ("/bearer-keyed", "authorization", format!("Bearer {SECRET}")),
        ("/email-keyed", "x-email", SECRET.to_owned()),
        ("/personal", "x-email", SECRET.to_owned()),
        ("/control", "x-player", CONTROL.to_owned()),
    ];
    for (path, name, value) in &cases {
        for _ in 0..3 {
            http.get(server.url(path))
                .header(*name, value)
                .send()
                .await
                .unwrap();
        }
    }
}

#[tokio::test]
async fn no_secret_reaches_a_redis_key_the_monitor_stream_or_a_log() {
    // The fixed windows' keys live to the end of their minute: started near its end, the
    // keys were gone before the scan looked for them (CI failed once so).
    crate::support::clear_of_boundary(Duration::from_secs(60), Duration::from_secs(20)).await;
    let logs = LogCapture::global();
    let redis = RedisServer::start();
    let monitor = Monitor::start(redis.port());
    let store = AnyStore::Redis(RedisStore::builder(redis.url()).build().unwrap());
    let hash_key = HashKey::new([7u8; 32]).unwrap();

    // Every core constructor that takes a secret.
    let limit = Limit::fixed_window("s-core", 1, Duration::from_secs(60)).unwrap();
    for p in [
        Principal::api_key(SECRET),
        Principal::new(PrincipalKind::ApiKey, SECRET),
        Principal::composite(PrincipalKind::ApiKey, [SECRET, "scope"]),
        Principal::personal(PrincipalKind::User, SECRET),
        Principal::keyed(PrincipalKind::User, &hash_key, SECRET),
        Principal::user(CONTROL),
    ] {
        for _ in 0..2 {
            store
                .check(&Chain::new().check(&limit, p.clone()))
                .await
                .unwrap();
        }
        assert!(!format!("{p:?}").contains(SECRET));
    }

    // Every extractor, through the layer over TCP: on Redis, and on a Redis that is down
    // (the failure paths log).
    let up = Server::start(app(&store, &hash_key)).await.unwrap();
    drive(&up).await;
    let down = Server::start(app(&down_store(), &hash_key)).await.unwrap();
    drive(&down).await;

    let stream = monitor.finish();
    let keys = scan_all(&redis);
    let lines = logs.lines();

    // The search finds what is there: the readable control, in keys and in the stream.
    assert!(keys.contains(CONTROL), "SCAN misses the control: {keys}");
    assert!(stream.contains(CONTROL), "MONITOR misses the control");
    assert!(
        keys.lines().count() == 14,
        "every route and constructor wrote a key: {keys}"
    );
    assert!(
        lines.iter().any(|l| l.starts_with("rate_limit.fallback ")),
        "the down store logged"
    );
    // And the secret is nowhere.
    assert!(!keys.contains(SECRET), "a key holds the secret: {keys}");
    assert!(!stream.contains(SECRET), "MONITOR saw the secret");
    for l in &lines {
        assert!(!l.contains(SECRET), "a log line holds the secret: {l}");
    }
}

#[test]
fn a_hash_key_is_long_enough_and_never_shown() {
    let err = HashKey::new(b"short").unwrap_err();
    assert_eq!(err.code(), "principal.hash_key_invalid");
    let key = HashKey::new(SECRET.repeat(2)).unwrap();
    assert!(!format!("{key:?}").contains(SECRET));
    // Keyed hashes are stable across processes and differ by key.
    let other = HashKey::new(SECRET.repeat(3)).unwrap();
    let a = Principal::keyed(PrincipalKind::User, &key, "ann@example.com");
    let b = Principal::keyed(PrincipalKind::User, &key, "ann@example.com");
    let c = Principal::keyed(PrincipalKind::User, &other, "ann@example.com");
    assert_eq!(a, b);
    assert_ne!(a, c);
}
