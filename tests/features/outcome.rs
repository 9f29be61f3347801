//! Count by outcome: a rule counts only the responses it names. The unit is reserved
//! before the handler runs and given back once the response does not count, so concurrent
//! requests cannot all slip through while their outcomes are unknown.

use std::time::Duration;

use axum::Router;
use axum::http::StatusCode;
use axum::routing::post;
use ratekeeper_core::{
    AnyStore, Chain, FailurePolicy, Limit, Limiter, MemoryStore, Principal, PrincipalKind, Store,
};
use ratekeeper_tests::redis::{RedisCluster, RedisServer};
use ratekeeper_tests::{Server, client};
use ratekeeper_tower::extract::HeaderKey;
use ratekeeper_tower::{CountWhen, RateLimitLayer, Rule};

/// A route whose handler answers `x-answer` (a status) after `x-ms` milliseconds, limited
/// to `quota` responses per account that `when` counts.
async fn server(store: AnyStore, quota: u64, when: CountWhen) -> Server {
    let limit = Limit::sliding_log("outcome", quota, Duration::from_secs(60)).unwrap();
    let layer = RateLimitLayer::new(Limiter::new(store)).rule(
        Rule::new(
            limit,
            HeaderKey::new("x-account".parse().unwrap(), PrincipalKind::User),
        )
        .count_when(when),
    );
    let app = Router::new().route(
        "/attempt",
        post(|headers: axum::http::HeaderMap| async move {
            let n = |h: &str| headers[h].to_str().unwrap().parse::<u64>().unwrap();
            tokio::time::sleep(Duration::from_millis(n("x-ms"))).await;
            StatusCode::from_u16(u16::try_from(n("x-answer")).unwrap()).unwrap()
        })
        .layer(layer),
    );
    Server::start(app).await.unwrap()
}

/// `n` requests at once for `account`, answered `answer` after `ms`: the statuses seen.
async fn burst(server: &Server, account: &str, n: usize, answer: u16, ms: u64) -> Vec<u16> {
    let http = client();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..n {
        let req = http
            .post(server.url("/attempt"))
            .header("x-account", account)
            .header("x-answer", answer.to_string())
            .header("x-ms", ms.to_string());
        tasks.spawn(async move { req.send().await.unwrap().status().as_u16() });
    }
    let mut seen = Vec::new();
    while let Some(s) = tasks.join_next().await {
        seen.push(s.unwrap());
    }
    seen
}

fn count(seen: &[u16], status: u16) -> usize {
    seen.iter().filter(|&&s| s == status).count()
}

/// What every store must show through the layer.
async fn counts_by_outcome(store: AnyStore) {
    let failures = server(store.clone(), 5, CountWhen::failed()).await;
    // 64 concurrent failed attempts at a limit of 5: exactly 5 reach the handler.
    let seen = burst(&failures, "ada", 64, 401, 50).await;
    assert_eq!((count(&seen, 401), count(&seen, 429)), (5, 59), "{seen:?}");

    // Successes are given back: twenty in a row, then five failures, then refused.
    for i in 0..20 {
        let seen = burst(&failures, "grace", 1, 200, 0).await;
        assert_eq!(seen, [200], "success {i}");
    }
    for i in 0..5 {
        assert_eq!(
            burst(&failures, "grace", 1, 401, 0).await,
            [401],
            "failure {i}"
        );
    }
    assert_eq!(burst(&failures, "grace", 1, 200, 0).await, [429]);

    // While in flight, reserved units count: 64 concurrent successes, 5 at once.
    let seen = burst(&failures, "linus", 64, 200, 300).await;
    assert_eq!((count(&seen, 200), count(&seen, 429)), (5, 59), "{seen:?}");
    // ... and all came back once answered.
    assert_eq!(burst(&failures, "linus", 5, 200, 0).await, [200; 5]);

    // The other way round: only successes count (failed exports are free).
    let successes = server(store, 3, CountWhen::succeeded()).await;
    for _ in 0..10 {
        assert_eq!(burst(&successes, "edsger", 1, 500, 0).await, [500]);
    }
    for _ in 0..3 {
        assert_eq!(burst(&successes, "edsger", 1, 200, 0).await, [200]);
    }
    assert_eq!(burst(&successes, "edsger", 1, 500, 0).await, [429]);
}

#[tokio::test]
async fn counts_by_outcome_on_the_memory_store() {
    counts_by_outcome(AnyStore::Memory(MemoryStore::new())).await;
}

#[tokio::test]
async fn counts_by_outcome_on_redis() {
    let redis = RedisServer::start();
    counts_by_outcome(redis.store()).await;
}

#[tokio::test]
async fn counts_by_outcome_on_a_cluster() {
    let cluster = RedisCluster::start();
    counts_by_outcome(cluster.store()).await;
}

/// One command for a request whose outcome counts, two for one given back: measured on
/// the server (`INFO commandstats`: the scripts, not the commands they run).
#[tokio::test]
async fn a_counted_outcome_costs_one_command_and_a_given_back_one_two() {
    let redis = RedisServer::start();
    let store = AnyStore::Redis(
        ratekeeper_core::RedisStore::builder(redis.url())
            .deny_cache(0)
            .build()
            .unwrap(),
    );
    let server = server(store, 1_000, CountWhen::failed()).await;
    let scripts = || redis.command_calls("evalsha") + redis.command_calls("eval");
    // The first call loads the scripts (a NOSCRIPT, then EVAL): not counted here.
    assert_eq!(burst(&server, "ada", 1, 200, 0).await, [200]);
    redis.cli(&["CONFIG", "RESETSTAT"]);
    for _ in 0..50 {
        assert_eq!(burst(&server, "ada", 1, 401, 0).await, [401]);
    }
    assert_eq!(scripts(), 50, "counted outcomes");
    redis.cli(&["CONFIG", "RESETSTAT"]);
    for _ in 0..50 {
        assert_eq!(burst(&server, "ada", 1, 200, 0).await, [200]);
    }
    assert_eq!(scripts(), 100, "given-back outcomes");
}

/// The in-handler limiter: a sign-in chain (per IP, then per account) whose per-account
/// unit goes back after the right password, while the per-IP unit stays.
async fn in_handler(store: AnyStore) {
    let per_ip = Limit::sliding_log("ip", 20, Duration::from_secs(60)).unwrap();
    let per_account = Limit::sliding_log("account-failures", 3, Duration::from_secs(60)).unwrap();
    let limiter = ratekeeper_axum::HandlerLimiter::new(Limiter::new(store));
    let ip = Principal::ip("192.0.2.1".parse().unwrap());
    let account = Principal::personal(PrincipalKind::User, "ada@example.com");
    let chain = Chain::new()
        .check(&per_ip, ip.clone())
        .check(&per_account, account);
    let headers = axum::http::HeaderMap::new();
    let attempt = |right: bool| {
        let (limiter, chain, headers) = (limiter.clone(), chain.clone(), headers.clone());
        async move {
            let Ok(reserved) = limiter
                .reserve(&chain, FailurePolicy::Closed, &headers)
                .await
            else {
                return 429;
            };
            if right {
                let _ = reserved.give_back_only(|i, _| i == 1).await;
                200
            } else {
                let _ = reserved.keep();
                401
            }
        }
    };
    // Five right passwords: the account is never charged, the IP five times.
    for _ in 0..5 {
        assert_eq!(attempt(true).await, 200);
    }
    // Three wrong ones exhaust the account; the fourth is refused, charging nothing.
    for _ in 0..3 {
        assert_eq!(attempt(false).await, 401);
    }
    assert_eq!(attempt(false).await, 429);
    let ip_state = limiter
        .limiter()
        .store()
        .peek(&per_ip.key(ip))
        .await
        .unwrap();
    assert_eq!(
        ip_state.remaining(),
        12,
        "every admitted attempt counts per IP"
    );
}

#[tokio::test]
async fn the_in_handler_limiter_gives_back_one_check_of_a_chain_on_every_store() {
    in_handler(AnyStore::Memory(MemoryStore::new())).await;
    let redis = RedisServer::start();
    in_handler(redis.store()).await;
    let cluster = RedisCluster::start();
    in_handler(cluster.store()).await;
}

/// Units taken from a leased slice and given back return to the slice (or, once it has
/// ended, to Redis): when every slice has ended, the key's quota is whole again.
async fn leased_units_come_back(store: ratekeeper_core::RedisStore) {
    let limit = Limit::fixed_window("leased-outcome", 10_000, Duration::from_secs(3_600))
        .unwrap()
        .leased(50, Duration::from_millis(50))
        .unwrap();
    let chain = Chain::new().check(&limit, Principal::global());
    let key = limit.key(Principal::global());
    let limiter = Limiter::new(AnyStore::Redis(store.clone()));
    let mut from_slices = 0;
    for _ in 0..400 {
        let answer = limiter.check(&chain, FailurePolicy::Closed).await;
        let held = store.leased_units(&key);
        limiter
            .give_back(answer.reservation(&chain).unwrap())
            .await
            .unwrap();
        // Back into the slice it came from, while that slice lives.
        if store.leased_units(&key) == held + 1 {
            from_slices += 1;
        }
    }
    assert!(from_slices > 100, "the key earned slices: {from_slices}");
    // Slices end within 50 ms; what they did not use goes back in the background.
    let mut remaining = 0;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(20)).await;
        remaining = store.peek(&key).await.unwrap().remaining();
        if remaining == 10_000 && store.leased_units(&key) == 0 {
            break;
        }
    }
    assert_eq!(remaining, 10_000);
}

#[tokio::test]
async fn leased_units_given_back_come_back_on_redis_and_a_cluster() {
    let redis = RedisServer::start();
    leased_units_come_back(
        ratekeeper_core::RedisStore::builder(redis.url())
            .build()
            .unwrap(),
    )
    .await;
    let cluster = RedisCluster::start();
    leased_units_come_back(
        ratekeeper_core::RedisStore::cluster_builder(cluster.urls())
            .build()
            .unwrap(),
    )
    .await;
}
