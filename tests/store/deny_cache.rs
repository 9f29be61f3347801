//! The Redis store's deny cache, against a real `redis-server`: what a flood from one
//! refused key costs in Redis commands (`INFO commandstats`), that the cached answer is
//! Redis's, and what drops an entry. Token buckets and sliding logs: no window boundary
//! can fall inside a test and change its counts.

use std::time::{Duration, Instant};

use ratekeeper_core::{AnyStore, Chain, ChainMode, Limit, Outcome, Principal, RedisStore, Store};
use ratekeeper_tests::redis::RedisServer;

/// A store on `server` whose script is loaded, so that every check is one EVALSHA.
async fn store(server: &RedisServer, deny_cache: usize) -> RedisStore {
    let s = RedisStore::builder(server.url())
        .deny_cache(deny_cache)
        .build()
        .unwrap();
    s.health().await.unwrap();
    s
}

/// Checks `chain` `n` times; returns how many were refused.
async fn flood(store: &RedisStore, chain: &Chain, n: usize) -> usize {
    let mut refused = 0;
    for _ in 0..n {
        refused += usize::from(!store.check(chain).await.unwrap().is_allowed());
    }
    refused
}

#[tokio::test]
async fn a_ten_thousand_request_flood_from_one_refused_key_is_one_redis_command() {
    let server = RedisServer::start();
    let store = store(&server, 10_000).await;
    let limit = Limit::token_bucket("flood", 3, 1, Duration::from_secs(3)).unwrap();
    let chain = Chain::new().check(&limit, Principal::user("mallory"));
    assert_eq!(flood(&store, &chain, 3).await, 0);
    server.cli(&["CONFIG", "RESETSTAT"]);
    let refused_at = Instant::now();
    let first = store.check(&chain).await.unwrap();
    let retry = first.denied_by().unwrap().1.retry_after().unwrap();
    assert_eq!(flood(&store, &chain, 9_999).await, 9_999);
    let flood_took = refused_at.elapsed();
    assert!(
        flood_took < retry,
        "the flood outlasted the retry-after ({flood_took:?} ≥ {retry:?}): nothing proven"
    );
    assert_eq!(
        server.command_calls("evalsha"),
        1,
        "{:?}",
        server.command_stats()
    );
    assert_eq!(store.deny_cache_hits(), 9_999);
    // Once the retry-after has passed, the key goes to Redis again (a token: allowed).
    tokio::time::sleep(retry.saturating_sub(refused_at.elapsed()) + Duration::from_millis(20))
        .await;
    assert!(store.check(&chain).await.unwrap().is_allowed());
    assert_eq!(server.command_calls("evalsha"), 2);
}

#[tokio::test]
async fn without_the_cache_every_refusal_is_a_command() {
    let server = RedisServer::start();
    let store = store(&server, 0).await;
    let limit = Limit::sliding_log("flood-off", 1, Duration::from_secs(60)).unwrap();
    let chain = Chain::new().check(&limit, Principal::user("mallory"));
    server.cli(&["CONFIG", "RESETSTAT"]);
    assert_eq!(flood(&store, &chain, 200).await, 199);
    assert_eq!(server.command_calls("evalsha"), 200);
    assert_eq!(store.deny_cache_hits(), 0);
}

#[tokio::test]
async fn the_cached_refusal_is_the_one_redis_gives() {
    let server = RedisServer::start();
    let cached = store(&server, 100).await;
    let direct = store(&server, 0).await;
    let limit = Limit::token_bucket("same", 4, 1, Duration::from_secs(2)).unwrap();
    let outer = Limit::fixed_window("outer", 100, Duration::from_secs(60)).unwrap();
    let chain = Chain::new()
        .check(&outer, Principal::global())
        .check(&limit, Principal::user("ann"));
    assert_eq!(flood(&cached, &chain, 4).await, 0);
    let first = cached.check(&chain).await.unwrap();
    assert_eq!(first.denied_by().unwrap().0, 1);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let t1 = Instant::now();
    let from_cache = cached.check(&chain).await.unwrap();
    let from_redis = direct.check(&chain).await.unwrap();
    let between = t1.elapsed();
    assert_eq!(cached.deny_cache_hits(), 1);
    let (i, c) = from_cache.denied_by().unwrap();
    let (j, r) = from_redis.denied_by().unwrap();
    assert_eq!((i, c.outcome(), c.limit()), (j, r.outcome(), r.limit()));
    assert_eq!(c.outcome(), Outcome::Denied);
    let (rc, rr) = (c.retry_after().unwrap(), r.retry_after().unwrap());
    // Counted down locally from when the command was sent: never later than Redis's own
    // (beyond the time between the two reads), and short of it by at most a round trip.
    assert!(
        rc <= rr + between + Duration::from_millis(1),
        "{rc:?} vs {rr:?}"
    );
    assert!(rc + Duration::from_millis(100) >= rr, "{rc:?} vs {rr:?}");
    assert!(rc < first.denied_by().unwrap().1.retry_after().unwrap());
    // The allowed check before the refusal is reported as Redis reported it.
    assert_eq!(from_cache.decisions().len(), 2);
    assert!(from_cache.decisions()[0].is_allowed());
    assert_eq!(from_cache.decisions()[0].limit(), 100);
}

#[tokio::test]
async fn a_changed_limit_a_reset_an_override_or_another_cost_go_to_redis() {
    let server = RedisServer::start();
    let store = store(&server, 100).await;
    let any = AnyStore::Redis(store.clone());
    let limit = Limit::sliding_log("lifted", 2, Duration::from_secs(60)).unwrap();
    let p = Principal::user("bob");
    let chain = Chain::new().check(&limit, p.clone());
    assert_eq!(flood(&store, &chain, 3).await, 1);
    assert_eq!(flood(&store, &chain, 5).await, 5);
    assert_eq!(store.deny_cache_hits(), 5);
    server.cli(&["CONFIG", "RESETSTAT"]);

    // Another cost: another answer (here: never fits), from Redis.
    let costly = Chain::new().check_cost(&limit, p.clone(), 3);
    let d = store.check(&costly).await.unwrap();
    assert_eq!(d.denied_by().unwrap().1.outcome(), Outcome::NeverFits);
    assert_eq!(server.command_calls("evalsha"), 1);

    // The limit raised at run time: the cached refusal is dropped.
    limit.set_quota(3).unwrap();
    assert!(store.check(&chain).await.unwrap().is_allowed());
    assert_eq!(server.command_calls("evalsha"), 2);
    assert_eq!(flood(&store, &chain, 2).await, 2); // refused once by Redis, once cached
    assert_eq!(server.command_calls("evalsha"), 3);

    // A reset through this store forgets it.
    any.reset(&limit.key(p.clone())).await.unwrap();
    assert!(store.check(&chain).await.unwrap().is_allowed());
    assert_eq!(server.command_calls("evalsha"), 4);

    // An override for this principal: the key's parameters differ, so Redis decides.
    assert_eq!(flood(&store, &chain, 3).await, 1);
    limit.set_override(&p, 10).unwrap();
    let chain = Chain::new().check(&limit, p.clone());
    let before = server.command_calls("evalsha");
    assert!(store.check(&chain).await.unwrap().is_allowed());
    assert_eq!(server.command_calls("evalsha"), before + 1);
}

#[tokio::test]
async fn charge_all_chains_are_never_answered_from_the_cache() {
    let server = RedisServer::start();
    let store = store(&server, 100).await;
    let tight = Limit::sliding_log("tight", 1, Duration::from_secs(60)).unwrap();
    let loose = Limit::sliding_log("loose", 1_000, Duration::from_secs(60)).unwrap();
    let chain = Chain::new()
        .mode(ChainMode::ChargeAll)
        .check(&tight, Principal::user("c"))
        .check(&loose, Principal::global());
    server.cli(&["CONFIG", "RESETSTAT"]);
    assert_eq!(flood(&store, &chain, 20).await, 19);
    assert_eq!(server.command_calls("evalsha"), 20);
    // Every one of them charged the loose limit, as ChargeAll promises.
    let peek = AnyStore::Redis(store.clone())
        .peek(&loose.key(Principal::global()))
        .await
        .unwrap();
    assert_eq!(peek.remaining(), 1_000 - 20);
}

#[tokio::test]
async fn the_cache_is_bounded() {
    let server = RedisServer::start();
    let store = store(&server, 16).await;
    let limit = Limit::sliding_log("many", 1, Duration::from_secs(60)).unwrap();
    let chains: Vec<Chain> = (0..200)
        .map(|i| Chain::new().check(&limit, Principal::user(format!("u{i}"))))
        .collect();
    for c in &chains {
        assert_eq!(flood(&store, c, 2).await, 1);
    }
    server.cli(&["CONFIG", "RESETSTAT"]);
    for c in &chains {
        assert_eq!(flood(&store, c, 1).await, 1);
    }
    // At most 16 keys (two a shard) are answered from memory; Redis answers the rest.
    let hits = store.deny_cache_hits();
    assert!((1..=16).contains(&hits), "{hits}");
    assert_eq!(server.command_calls("evalsha"), 200 - hits);
}

#[tokio::test]
async fn a_key_refused_before_an_outage_stays_refused_during_it_whatever_the_policy() {
    use ratekeeper_core::{Answer, FailurePolicy, Limiter};

    let mut server = RedisServer::start();
    let store = store(&server, 100).await;
    let limiter = Limiter::builder(AnyStore::Redis(store.clone()))
        .timeout(Duration::from_millis(200))
        .build()
        .unwrap();
    let limit = Limit::sliding_log("outage", 1, Duration::from_secs(60)).unwrap();
    let refused = Chain::new().check(&limit, Principal::user("mallory"));
    let other = Chain::new().check(&limit, Principal::user("ann"));
    assert!(matches!(
        limiter.check(&refused, FailurePolicy::Open).await,
        Answer::Store(d) if d.is_allowed()
    ));
    assert!(matches!(
        limiter.check(&refused, FailurePolicy::Open).await,
        Answer::Store(d) if !d.is_allowed()
    ));
    server.kill();
    // Redis is gone: a new key gets the policy's answer (open), and the store cools down.
    assert!(matches!(
        limiter.check(&other, FailurePolicy::Open).await,
        Answer::Open(_)
    ));
    // The key Redis refused is still refused, from the deny cache, synchronously too.
    for _ in 0..100 {
        let a = limiter.check(&refused, FailurePolicy::Open).await;
        assert!(
            matches!(a, Answer::Store(ref d) if !d.is_allowed()),
            "{a:?}"
        );
    }
    let a = limiter.try_check(&refused, FailurePolicy::Open);
    assert!(
        matches!(a, Some(Answer::Store(ref d)) if !d.is_allowed()),
        "{a:?}"
    );
    assert!(matches!(
        limiter.try_check(&other, FailurePolicy::Open),
        Some(Answer::Open(_))
    ));
    assert_eq!(store.deny_cache_hits(), 101);
}

/// On a Cluster, the Ask AI chain (visitor, visitor+game, game, everybody) spans four slot
/// groups, and refusals of a later group refund the earlier ones: a refusal of the burst
/// limit can be undone by other requests' refunds, so it must never be cached. A visitor
/// bursts 100 concurrent questions on one game (at most 15 admitted, the rest refused by
/// the per-game limit, and the burst limit transiently full while refunds are under way),
/// then asks about a fresh game: Redis holds at most 15 of 20 burst units, so it is admitted.
/// Before the rule, 4 runs in 5 answered 429 from the cache (`Retry-After` 27–29 s).
#[tokio::test]
async fn split_chains_on_a_cluster_are_never_refused_from_the_cache() {
    use ratekeeper_tests::redis::RedisCluster;
    let cluster = RedisCluster::start();
    let store = RedisStore::cluster_builder(cluster.urls()).build().unwrap();
    store.health().await.unwrap();
    let minute = Duration::from_secs(60);
    let day = Duration::from_secs(86_400);
    let burst = Limit::fixed_window("ask-burst", 20, minute).unwrap();
    let per_game = Limit::fixed_window("ask-visitor-game", 15, day).unwrap();
    let game = Limit::fixed_window("ask-game", 500, day).unwrap();
    let all = Limit::fixed_window("ask-all", 100_000, day).unwrap();
    let vg = ratekeeper_core::PrincipalKind::custom("visitor-game").unwrap();
    let gk = ratekeeper_core::PrincipalKind::custom("game").unwrap();
    let ask = |visitor: &str, g: &str| {
        Chain::new()
            .check(&burst, Principal::participant(visitor))
            .check(&per_game, Principal::composite(vg.clone(), [visitor, g]))
            .check(&game, Principal::new(gk.clone(), g))
            .check(&all, Principal::global())
    };
    let mut wrong = 0;
    for rep in 0..20 {
        crate::support::clear_of_boundary(minute, Duration::from_secs(5)).await;
        let visitor = format!("v{rep}");
        let g1 = format!("g1-{rep}");
        let tasks: Vec<_> = (0..100)
            .map(|_| {
                let (store, chain) = (store.clone(), ask(&visitor, &g1));
                tokio::spawn(async move { store.check(&chain).await.unwrap().is_allowed() })
            })
            .collect();
        let mut admitted = 0;
        for t in tasks {
            admitted += usize::from(t.await.unwrap());
        }
        // At most the per-game limit (a request refused by a transiently full burst limit
        // is not retried, so fewer may pass).
        assert!((1..=15).contains(&admitted), "{admitted}");
        let fresh = store
            .check(&ask(&visitor, &format!("g2-{rep}")))
            .await
            .unwrap();
        if !fresh.is_allowed() {
            wrong += 1;
        }
    }
    assert_eq!(wrong, 0, "refusals Redis would not give");
}
