//! Delay instead of refuse: over a limit's threshold a request is held, not refused; held
//! requests of one principal are released one at a time, each its delay after the one
//! before; from a source already in a full line a request is refused at once and its
//! unit given back. Real time (the Redis stores count with Redis's clock): delays of tens of ms.

use std::time::{Duration, Instant};

use axum::Router;
use axum::http::StatusCode;
use axum::routing::post;
use ratekeeper_core::{AnyStore, Delay, Limit, MemoryStore, Principal, PrincipalKind, Store};
use ratekeeper_tests::redis::{RedisCluster, RedisServer};
use ratekeeper_tests::{Server, client};
use ratekeeper_tower::extract::HeaderKey;
use ratekeeper_tower::{RateLimitLayer, Rule};

const MS: Duration = Duration::from_millis(1);

fn limit(name: &str) -> Limit {
    Limit::sliding_log(name, 100, Duration::from_secs(60))
        .unwrap()
        .delayed(
            Delay::doubling(3, 40 * MS, 160 * MS)
                .unwrap()
                .max_held(3)
                .unwrap(),
        )
        .unwrap()
}

async fn server(store: AnyStore, limit: &Limit) -> Server {
    let layer = RateLimitLayer::new(ratekeeper_core::Limiter::new(store)).rule(Rule::new(
        limit.clone(),
        HeaderKey::new("x-account".parse().unwrap(), PrincipalKind::User),
    ));
    let app = Router::new().route(
        "/",
        post(|| async { StatusCode::UNAUTHORIZED }).layer(layer),
    );
    Server::start(app).await.unwrap()
}

/// One request: its status, the `Server-Timing` hold it reports (ms), and how long it took.
async fn attempt(server: &Server, account: &str) -> (u16, Option<u64>, Duration) {
    let started = Instant::now();
    let r = client()
        .post(server.url("/"))
        .header("x-account", account)
        .send()
        .await
        .unwrap();
    let held = r.headers().get("server-timing").map(|v| {
        let v = v.to_str().unwrap();
        v.strip_prefix("rate-limit-hold;dur=")
            .unwrap()
            .parse()
            .unwrap()
    });
    (r.status().as_u16(), held, started.elapsed())
}

async fn holds(store: AnyStore) {
    let limit = limit("held");
    let server = server(store.clone(), &limit).await;

    // One at a time: 3 at once, then held 40, 80, 160, 160 ms, answered as usual.
    for (i, want) in [0, 0, 0, 40, 80, 160, 160].into_iter().enumerate() {
        let (status, held, took) = attempt(&server, "ada").await;
        assert_eq!(status, 401, "attempt {i}");
        assert_eq!(held.unwrap_or(0), want, "attempt {i}: held");
        assert!(
            took >= Duration::from_millis(want),
            "attempt {i}: answered after {took:?}"
        );
    }

    // Eight at once past the threshold: three held, released in turn; five refused at
    // once, their units given back.
    for _ in 0..3 {
        assert_eq!(attempt(&server, "grace").await.0, 401);
    }
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..8 {
        let url = server.url("/");
        tasks.spawn(async move {
            let r = client()
                .post(url)
                .header("x-account", "grace")
                .send()
                .await
                .unwrap();
            (
                r.status().as_u16(),
                r.headers().get("retry-after").is_some(),
                started.elapsed(),
            )
        });
    }
    let mut seen = Vec::new();
    while let Some(r) = tasks.join_next().await {
        seen.push(r.unwrap());
    }
    seen.sort_by_key(|s| s.2);
    let refused: Vec<_> = seen.iter().filter(|s| s.0 == 429).collect();
    let held: Vec<_> = seen.iter().filter(|s| s.0 == 401).collect();
    assert_eq!((held.len(), refused.len()), (3, 5), "{seen:?}");
    assert!(refused.iter().all(|s| s.1), "a refusal says when to retry");
    // Released one at a time: each at least its delay after the one before (the three
    // held got counts 4, 5, 6 or later: delays of 40 ms or more each).
    let last = held.last().unwrap().2;
    assert!(last >= 120 * MS, "the third was released after {last:?}");
    // Three (before) + three held counted; the refused five given back.
    let used = store
        .peek(&limit.key(Principal::new(PrincipalKind::User, "grace")))
        .await
        .unwrap();
    assert_eq!(used.remaining(), 94);
}

#[tokio::test]
async fn held_requests_wait_one_at_a_time_on_the_memory_store() {
    holds(AnyStore::Memory(MemoryStore::new())).await;
}

#[tokio::test]
async fn held_requests_wait_one_at_a_time_on_redis() {
    let redis = RedisServer::start();
    holds(redis.store()).await;
}

#[tokio::test]
async fn held_requests_wait_one_at_a_time_on_a_cluster() {
    let cluster = RedisCluster::start();
    holds(cluster.store()).await;
}

/// A limiter over a memory store that follows Tokio's (paused) time.
fn paused_limiter() -> ratekeeper_core::Limiter {
    let store = MemoryStore::builder()
        .clock(ratekeeper_core::clock::TokioClock::new())
        .build()
        .unwrap();
    ratekeeper_core::Limiter::new(AnyStore::Memory(store))
}

/// Virtual time: exact release times, the caps, and a held request that goes away.
#[tokio::test(start_paused = true)]
async fn holding_spaces_releases_caps_queues_and_frees_a_place_when_dropped() {
    use ratekeeper_core::limiter::Holding;
    use ratekeeper_core::{Chain, FailurePolicy};

    let s = Duration::from_secs;
    let limit = Limit::sliding_log("sign-in-account", 1_000, s(900))
        .unwrap()
        .delayed(Delay::doubling(5, s(1), s(8)).unwrap().max_held(5).unwrap())
        .unwrap();
    let limiter = paused_limiter();
    let holding = Holding::new(10_000);
    let chain = Chain::new().check(&limit, Principal::new(PrincipalKind::User, "ada"));
    let start = tokio::time::Instant::now();
    // Seven at once: five answered at once; the 6th and 7th held 1 s and then 2 s after it.
    let mut tasks = Vec::new();
    for _ in 0..7 {
        let (limiter, holding, chain) = (limiter.clone(), holding.clone(), chain.clone());
        tasks.push(tokio::spawn(async move {
            let answer = limiter.check(&chain, FailurePolicy::Closed).await;
            let answer = holding.hold(&limiter, &chain, answer).await;
            (answer.is_allowed(), start.elapsed())
        }));
    }
    let mut seen = Vec::new();
    for t in tasks {
        seen.push(t.await.unwrap());
    }
    seen.sort_by_key(|s| s.1);
    let times: Vec<u64> = seen.iter().map(|s| s.1.as_secs()).collect();
    assert_eq!(times, [0, 0, 0, 0, 0, 1, 3]);
    assert!(seen.iter().all(|s| s.0));

    // Six at once at counts 8..13: five held (4 s, then 8 s apart), the sixth refused at
    // once with the delay as its retry-after, its unit given back.
    let start = tokio::time::Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..6 {
        let (limiter, holding, chain) = (limiter.clone(), holding.clone(), chain.clone());
        tasks.push(tokio::spawn(async move {
            let answer = limiter.check(&chain, FailurePolicy::Closed).await;
            let answer = holding.hold(&limiter, &chain, answer).await;
            let retry = answer
                .decision()
                .and_then(|d| d.denied_by())
                .and_then(|(_, d)| d.retry_after());
            (answer.is_allowed(), retry, start.elapsed())
        }));
    }
    tokio::task::yield_now().await;
    let mut seen = Vec::new();
    for t in tasks {
        seen.push(t.await.unwrap());
    }
    seen.sort_by_key(|s| s.2);
    assert!(!seen[0].0, "the sixth is refused");
    assert_eq!(seen[0].1, Some(s(8)));
    assert_eq!(seen[0].2, Duration::ZERO);
    let released: Vec<u64> = seen[1..].iter().map(|s| s.2.as_secs()).collect();
    // The queue was empty: the 8th waits its 4 s from now, the next 8 s after each other.
    assert_eq!(released, [4, 12, 20, 28, 36]);
    let key = limit.key(Principal::new(PrincipalKind::User, "ada"));
    assert_eq!(
        limiter.store().peek(&key).await.unwrap().remaining(),
        1_000 - 12
    );

    // A held request that goes away frees its place at once.
    let (l2, h2, c2) = (limiter.clone(), holding.clone(), chain.clone());
    let held = tokio::spawn(async move {
        let answer = l2.check(&c2, FailurePolicy::Closed).await;
        h2.hold(&l2, &c2, answer).await
    });
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(holding.held(), 1);
    held.abort();
    let _ = held.await;
    assert_eq!(holding.held(), 0);

    // The total cap, across principals.
    let one = Holding::new(1);
    let mut tasks = Vec::new();
    for who in ["grace", "linus"] {
        let chain = Chain::new().check(&limit, Principal::new(PrincipalKind::User, who));
        for _ in 0..5 {
            let _ = limiter.check(&chain, FailurePolicy::Closed).await;
        }
        let (limiter, one) = (limiter.clone(), one.clone());
        tasks.push(tokio::spawn(async move {
            let answer = limiter.check(&chain, FailurePolicy::Closed).await;
            one.hold(&limiter, &chain, answer).await.is_allowed()
        }));
        tokio::task::yield_now().await;
    }
    let mut allowed = Vec::new();
    for t in tasks {
        allowed.push(t.await.unwrap());
    }
    assert_eq!(allowed, [true, false]);
}
