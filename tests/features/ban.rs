//! Bans through the layer, over TCP: refusals of a client's own limits ban it, in the
//! store (every instance's refusals add up), in the same store call as the check; a banned
//! client is answered at once (429 with the ban's remaining time, or 403) and nothing is
//! counted; an admin lists bans (an API key hashed) and lifts them; a ban ends by itself;
//! `rate_limit_bans_active` follows the bans in the store.

use std::sync::OnceLock;
use std::time::Duration;

use axum::Router;
use axum::http::StatusCode;
use axum::routing::post;
use metrics_exporter_prometheus::PrometheusHandle;
use ratekeeper_core::{AnyStore, Limit, MemoryStore, PrincipalKind, Store};
use ratekeeper_tests::redis::{RedisCluster, RedisServer};
use ratekeeper_tests::{Server, client, retry_after};
use ratekeeper_tower::extract::HeaderKey;
use ratekeeper_tower::metrics::BansActive;
use ratekeeper_tower::{BanAnswer, CountWhen, RateLimitLayer, Rule};

const KEY: &str = "sk_live_s3cret-value";

fn limits(ban_for: Duration) -> (Limit, Limit) {
    limits_named("sign-in-ban", ban_for)
}

fn limits_named(ban_name: &str, ban_for: Duration) -> (Limit, Limit) {
    let ban = Limit::ban(ban_name, 3, Duration::from_secs(60), ban_for).unwrap();
    // Two failed sign-ins per key per minute; successes are free.
    let failures = Limit::sliding_log("sign-in-failures", 2, Duration::from_secs(60)).unwrap();
    (ban, failures)
}

/// A sign-in route keyed by API key: 204 with the right password, 401 otherwise. The ban
/// counts the failure limit's refusals.
async fn server(store: AnyStore, ban: &Limit, failures: &Limit, answer: BanAnswer) -> Server {
    let key = || HeaderKey::new("x-api-key".parse().unwrap(), PrincipalKind::ApiKey);
    let layer = RateLimitLayer::new(ratekeeper_core::Limiter::new(store))
        .rule(Rule::new(ban.clone(), key()).ban_answer(answer))
        .rule(Rule::new(failures.clone(), key()).count_when(CountWhen::failed()));
    let app = Router::new().route(
        "/sign-in",
        post(|headers: axum::http::HeaderMap| async move {
            if headers["x-password"] == "right" {
                StatusCode::NO_CONTENT
            } else {
                StatusCode::UNAUTHORIZED
            }
        })
        .layer(layer),
    );
    Server::start(app).await.unwrap()
}

async fn sign_in(server: &Server, password: &str) -> reqwest::Response {
    client()
        .post(server.url("/sign-in"))
        .header("x-api-key", KEY)
        .header("x-password", password)
        .send()
        .await
        .unwrap()
}

async fn statuses(server: &Server, password: &str, n: usize) -> Vec<u16> {
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(sign_in(server, password).await.status().as_u16());
    }
    out
}

/// This binary's Prometheus recorder, installed at first use.
pub(crate) fn prometheus() -> &'static PrometheusHandle {
    static H: OnceLock<PrometheusHandle> = OnceLock::new();
    H.get_or_init(|| {
        metrics_exporter_prometheus::PrometheusBuilder::new()
            .install_recorder()
            .expect("the only recorder in this binary")
    })
}

/// `rate_limit_bans_active{limit="…"}` after one sample, as Prometheus scrapes it.
async fn bans_active(gauge: &BansActive, ban: &Limit) -> f64 {
    let recorder = prometheus();
    gauge.sample().await.unwrap();
    let series = format!("rate_limit_bans_active{{limit=\"{}\"}} ", ban.name());
    let text = recorder.render();
    text.lines()
        .find_map(|l| l.strip_prefix(series.as_str()))
        .unwrap_or_else(|| panic!("no {series} in {text}"))
        .parse()
        .unwrap()
}

/// Two instances on one store: their refusals add up to one ban; the ban gauge, read from
/// the store, follows it.
async fn bans_end_to_end(a: AnyStore, b: AnyStore, ban_name: &str) {
    let ban_for = Duration::from_secs(2);
    let (ban, failures) = limits_named(ban_name, ban_for);
    let gauge = BansActive::new(&a, [ban.clone(), failures.clone()]);
    assert_eq!(bans_active(&gauge, &ban).await, 0.0);
    let (one, two) = (
        server(a.clone(), &ban, &failures, BanAnswer::TooManyRequests).await,
        server(b, &ban, &failures, BanAnswer::TooManyRequests).await,
    );
    // Two failures are answered (the ban, no quota, is not in their headers); the third
    // attempt is refused by the failure limit.
    let first = sign_in(&one, "wrong").await;
    assert_eq!(first.status(), 401);
    let policy = first.headers()["ratelimit-policy"].to_str().unwrap();
    assert!(
        policy.contains("sign-in-failures") && !policy.contains("ban"),
        "{policy}"
    );
    assert_eq!(statuses(&one, "wrong", 1).await, [401]);
    assert_eq!(statuses(&one, "wrong", 1).await, [429]);
    let refused = sign_in(&two, "wrong").await;
    assert_eq!(refused.status(), 429);
    assert_eq!(
        refused.headers()["retry-after"],
        "60",
        "refused by the limit"
    );
    // The third refusal, on the other instance, bans the key.
    assert_eq!(statuses(&two, "wrong", 1).await, [429]);
    let banned = sign_in(&one, "right").await;
    assert_eq!(banned.status(), 429, "banned: even the right password");
    assert_eq!(
        banned.headers()["retry-after"],
        "2",
        "the ban's remaining time"
    );
    let policy = banned.headers()["ratelimit-policy"].to_str().unwrap();
    assert!(policy.contains("sign-in-ban"), "{policy}");
    // While banned, nothing counts: the ban does not grow, the limit is not read.
    assert_eq!(statuses(&two, "wrong", 5).await, [429; 5]);
    let peek = a
        .peek(&ban.key(ratekeeper_core::Principal::api_key(KEY)))
        .await
        .unwrap();
    assert!(peek.is_banned() && peek.retry_after().unwrap() <= ban_for);
    // The admin list shows the key hashed, never the key.
    let listed = a.bans(&ban).await.unwrap();
    assert_eq!(listed.len(), 1);
    let shown = listed[0].principal().as_str();
    assert!(
        shown.starts_with("k:~") && !shown.contains("s3cret"),
        "{shown}"
    );
    assert!(format!("{listed:?}").find("s3cret").is_none());
    assert_eq!(bans_active(&gauge, &ban).await, 1.0);
    assert!(!prometheus().render().contains("s3cret"));
    // Lifted: the next attempt reaches the failure limit again (still full: 429).
    a.reset(listed[0].key()).await.unwrap();
    assert_eq!(bans_active(&gauge, &ban).await, 0.0);
    let after = sign_in(&one, "wrong").await;
    assert_eq!(after.status(), 429);
    assert_eq!(after.headers()["retry-after"], "60");
    // The other instance had the ban in its deny cache: held there for a second at most.
    tokio::time::sleep(Duration::from_millis(1_050)).await;
    let other = sign_in(&two, "wrong").await;
    let wait: u64 = retry_after(&other);
    assert!(wait > 50, "lifted on the other instance too: {wait}");
    // One more refusal bans again; then the ban ends by itself.
    assert_eq!(statuses(&one, "wrong", 1).await, [429]);
    let banned = sign_in(&one, "wrong").await;
    assert_eq!(banned.headers()["retry-after"], "2");
    assert_eq!(bans_active(&gauge, &ban).await, 1.0, "banned again");
    tokio::time::sleep(ban_for + Duration::from_millis(100)).await;
    assert!(a.bans(&ban).await.unwrap().is_empty());
    assert_eq!(bans_active(&gauge, &ban).await, 0.0, "the ban ended");
    let after = sign_in(&two, "wrong").await;
    let wait: u64 = retry_after(&after);
    assert!(wait > 50, "the limit refuses, not the ban: {wait}");
}

#[tokio::test]
async fn bans_memory() {
    let store = AnyStore::Memory(MemoryStore::new());
    bans_end_to_end(store.clone(), store, "sign-in-ban-memory").await;
}

#[tokio::test]
async fn bans_standalone_redis() {
    let redis = RedisServer::start();
    bans_end_to_end(redis.store(), redis.store(), "sign-in-ban-redis").await;
}

#[tokio::test]
async fn bans_redis_cluster() {
    let cluster = RedisCluster::start();
    bans_end_to_end(cluster.store(), cluster.store(), "sign-in-ban-cluster").await;
}

/// A ban check rides in the chain's one script call: an admitted request costs one script
/// call with the ban rule as without it. The refusals on the way to a ban reach Redis each
/// (they are counted there; without a ban the deny cache answers all but the first), at
/// most `after` per window; a banned client then costs none (the deny cache holds the ban).
#[tokio::test]
async fn a_ban_costs_no_redis_command() {
    let redis = RedisServer::start();
    let (ban, failures) = limits(Duration::from_secs(30));
    let scripts = || redis.command_calls("evalsha") + redis.command_calls("eval");
    let per_request = |with_ban: bool| {
        let (store, ban, failures) = (redis.store(), ban.clone(), failures.clone());
        async move {
            let key = || HeaderKey::new("x-api-key".parse().unwrap(), PrincipalKind::ApiKey);
            let mut layer = RateLimitLayer::new(ratekeeper_core::Limiter::new(store));
            if with_ban {
                layer = layer.rule(Rule::new(ban, key()));
            }
            let layer = layer.rule(Rule::new(failures, key()));
            let app = Router::new().route("/sign-in", post(|| async { "ok" }).layer(layer));
            Server::start(app).await.unwrap()
        }
    };
    for with_ban in [false, true] {
        let server = per_request(with_ban).await;
        // Warm: the script cached in Redis (a first EVALSHA meets NOSCRIPT).
        statuses(&server, "x", 1).await;
        redis.cli(&["FLUSHALL"]);
        redis.cli(&["CONFIG", "RESETSTAT"]);
        assert_eq!(statuses(&server, "x", 2).await, [200, 200]);
        assert_eq!(scripts(), 2, "admitted, with the ban: {with_ban}");
        assert_eq!(statuses(&server, "x", 3).await, [429; 3]);
        // Without a ban, the deny cache answers the second and third refusal.
        assert_eq!(scripts(), if with_ban { 5 } else { 3 });
        if with_ban {
            // Banned: Redis answers the first, the deny cache the rest.
            assert_eq!(statuses(&server, "x", 10).await, [429; 10]);
            assert_eq!(scripts(), 6);
        }
    }
}

/// 403 where the rule says so; a ban rule naming an account is the operator's error.
#[tokio::test]
async fn forbidden_answer_and_principals_others_can_name() {
    let (ban, failures) = limits(Duration::from_secs(30));
    let store = AnyStore::Memory(MemoryStore::new());
    let server = server(store, &ban, &failures, BanAnswer::Forbidden).await;
    assert_eq!(
        statuses(&server, "wrong", 5).await,
        [401, 401, 429, 429, 429]
    );
    let banned = sign_in(&server, "right").await;
    assert_eq!(banned.status(), 403);
    assert!(banned.headers().get("retry-after").is_none());
    let body = banned.text().await.unwrap();
    assert_eq!(body, r#"{"error":"Banned.","code":"ban.active"}"#);

    let layer = RateLimitLayer::in_memory().rule(Rule::new(
        ban,
        HeaderKey::new("x-account".parse().unwrap(), PrincipalKind::User),
    ));
    let app = Router::new().route("/sign-in", post(|| async { "ok" }).layer(layer));
    let server = Server::start(app).await.unwrap();
    let resp = client()
        .post(server.url("/sign-in"))
        .header("x-account", "ann")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 500);
    let body = resp.text().await.unwrap();
    assert!(body.contains("ban.principal_not_owned"), "{body}");
}
