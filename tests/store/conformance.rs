//! The same cases, the same expected decisions, on every store.

use std::time::Duration;

use ratekeeper_core::{AnyStore, Chain, Check, Limit, MemoryStore, Principal, RedisStore, Store};
use ratekeeper_tests::redis::{RedisCluster, RedisServer};

use crate::conformance_bans::bans;
use crate::support::{clear_of_boundary, quick_run, run};

const MINUTE: Duration = Duration::from_secs(60);

fn every_algorithm(tag: &str, quota: u64) -> Vec<Limit> {
    vec![
        Limit::fixed_window(&format!("{tag}-fixed"), quota, MINUTE).unwrap(),
        Limit::sliding_window(&format!("{tag}-sliding"), quota, MINUTE).unwrap(),
        Limit::sliding_log(&format!("{tag}-log"), quota, MINUTE).unwrap(),
        Limit::token_bucket(&format!("{tag}-bucket"), quota, quota, MINUTE).unwrap(),
    ]
}

async fn counting(store: &AnyStore) {
    for limit in every_algorithm("count", 3) {
        let chain = Chain::new().check(&limit, Principal::user("u"));
        let (s, ds) = run(store, &chain, 5).await;
        assert_eq!(s, "AAADD", "{}", limit.name());
        let remaining: Vec<u64> = ds.iter().map(|d| d.decisions()[0].remaining()).collect();
        assert_eq!(remaining, [2, 1, 0, 0, 0], "{}", limit.name());
        let retry = ds[3].denied_by().unwrap().1.retry_after().unwrap();
        // The sliding window may wait into the next window: up to two windows.
        assert!(
            retry > Duration::ZERO && retry <= 2 * MINUTE,
            "{} {retry:?}",
            limit.name()
        );
    }
}

async fn costs(store: &AnyStore) {
    for limit in every_algorithm("cost", 5) {
        let p = Principal::user("u");
        let (s, _) = run(store, &Chain::new().check_cost(&limit, p.clone(), 3), 2).await;
        assert_eq!(s, "AD", "{}", limit.name());
        let (s, ds) = run(store, &Chain::new().check_cost(&limit, p.clone(), 6), 1).await;
        assert_eq!(s, "N", "{}", limit.name());
        assert_eq!(ds[0].decisions()[0].retry_after(), None);
        let peek = store.peek(&limit.key(p.clone())).await.unwrap();
        assert_eq!(
            (peek.would_admit(1), peek.remaining()),
            (true, 2),
            "{}",
            limit.name()
        );
        // Used up: the key's state says the next request is refused (a look admits nothing).
        let (s, _) = run(store, &Chain::new().check_cost(&limit, p.clone(), 2), 1).await;
        assert_eq!(s, "A", "{}", limit.name());
        let peek = store.peek(&limit.key(p)).await.unwrap();
        assert_eq!(
            (peek.would_admit(1), peek.remaining()),
            (false, 0),
            "{}",
            limit.name()
        );
    }
}

async fn chains(store: &AnyStore) {
    for (first, second) in every_algorithm("c1", 2)
        .iter()
        .zip(every_algorithm("c2", 10).iter())
    {
        let p = Principal::user("u");
        let chain = Chain::new()
            .check(first, p.clone())
            .check(second, p.clone());
        let (s, ds) = run(store, &chain, 4).await;
        assert_eq!(s, "AADD");
        assert_eq!(
            ds[2].decisions().len(),
            1,
            "the second limit is not evaluated"
        );
        assert_eq!(
            store.peek(&second.key(p)).await.unwrap().remaining(),
            8,
            "{}",
            second.name()
        );
    }
    for (first, second) in every_algorithm("c3", 10)
        .iter()
        .zip(every_algorithm("c4", 2).iter())
    {
        let p = Principal::user("u");
        let chain = Chain::new()
            .check(first, p.clone())
            .check(second, p.clone());
        let (s, ds) = run(store, &chain, 4).await;
        assert_eq!(s, "AADD");
        assert_eq!(
            ds[3].decisions()[0].remaining(),
            8,
            "uncharged, {}",
            first.name()
        );
        assert_eq!(
            store.peek(&first.key(p)).await.unwrap().remaining(),
            8,
            "{}",
            first.name()
        );
    }
    for (first, second) in every_algorithm("c5", 2)
        .iter()
        .zip(every_algorithm("c6", 10).iter())
    {
        let p = Principal::user("u");
        let chain = Chain::charge_all()
            .check(first, p.clone())
            .check(second, p.clone());
        let (s, ds) = run(store, &chain, 3).await;
        assert_eq!(s, "AAD");
        assert_eq!(ds[2].decisions().len(), 2, "every limit is evaluated");
        assert_eq!(
            store.peek(&second.key(p)).await.unwrap().remaining(),
            7,
            "{}",
            second.name()
        );
    }
}

/// A key twice in one chain (the second check sees the first's charge, and a refusal by
/// the second undoes both); eight limits in one chain, their keys new, then found, then
/// found beside a new one.
async fn repeats_and_long_chains(store: &AnyStore) {
    for limit in every_algorithm("twice", 3) {
        let p = Principal::user("u");
        let chain = Chain::new()
            .check(&limit, p.clone())
            .check(&limit, p.clone());
        let (s, ds) = run(store, &chain, 2).await;
        assert_eq!(s, "AD", "{}", limit.name());
        let remaining: Vec<u64> = ds[0].decisions().iter().map(|d| d.remaining()).collect();
        assert_eq!(remaining, [2, 1], "{}", limit.name());
        assert_eq!(
            store.peek(&limit.key(p)).await.unwrap().remaining(),
            1,
            "the refusal charged nothing: {}",
            limit.name()
        );
    }
    let limits: Vec<Limit> = (0..8)
        .flat_map(|i| {
            every_algorithm(&format!("eight{i}"), 3)
                .into_iter()
                .skip(i % 4)
                .take(1)
        })
        .collect();
    let p = Principal::user("u");
    let chain = limits
        .iter()
        .fold(Chain::new(), |c, l| c.check(l, p.clone()));
    let (s, ds) = run(store, &chain, 4).await;
    assert_eq!(s, "AAAD");
    assert!(ds[2].decisions().iter().all(|d| d.remaining() == 0));
    for l in &limits {
        assert_eq!(store.peek(&l.key(p.clone())).await.unwrap().remaining(), 0);
    }
    // Found keys beside a new one: the new principal's limit charged, the others refuse.
    let other = Limit::fixed_window("eight-new", 3, MINUTE).unwrap();
    let (s, _) = run(store, &chain.clone().check(&other, Principal::user("v")), 1).await;
    assert_eq!(s, "D");
    let fresh = Chain::new()
        .check(&other, Principal::user("v"))
        .check(&limits[0], Principal::user("w"));
    let (s, _) = run(store, &fresh, 3).await;
    assert_eq!(s, "AAA");
    assert_eq!(
        store
            .peek(&other.key(Principal::user("v")))
            .await
            .unwrap()
            .remaining(),
        0
    );
}

/// `CountAttempts`: every attempt charges each limit it reaches, the refusing one too, and
/// nothing after it. Sign-in's shape: client IP, then account — two principals, so on a
/// Cluster two slot groups.
async fn count_attempts(store: &AnyStore) {
    for (ip_limit, account_limit) in every_algorithm("ca-ip", 3)
        .iter()
        .zip(every_algorithm("ca-acct", 5).iter())
    {
        let attacker = Principal::ip([198, 51, 100, 7].into());
        let victim = Principal::user("victim");
        let chain = Chain::count_attempts()
            .check(ip_limit, attacker.clone())
            .check(account_limit, victim.clone());
        let (s, ds) = run(store, &chain, 6).await;
        assert_eq!(s, "AAADDD", "{}", ip_limit.name());
        assert_eq!(ds[4].decisions().len(), 1, "the account is not reached");
        assert_eq!(
            store
                .peek(&account_limit.key(victim.clone()))
                .await
                .unwrap()
                .remaining(),
            2,
            "only the 3 attempts the IP admitted reached the account, {}",
            account_limit.name()
        );
        // The refused attempts were counted against the IP: it stays refused.
        assert_eq!(
            store
                .peek(&ip_limit.key(attacker))
                .await
                .unwrap()
                .remaining(),
            0
        );
        // From another IP, the victim's account still has room.
        let other = Chain::count_attempts()
            .check(ip_limit, Principal::ip([203, 0, 113, 9].into()))
            .check(account_limit, victim);
        assert!(
            store.check(&other).await.unwrap().is_allowed(),
            "{}",
            account_limit.name()
        );
    }
    // A refusal by the later limit is charged too: every attempt counts.
    for limit in every_algorithm("ca-one", 2) {
        let chain = Chain::count_attempts().check(&limit, Principal::user("u"));
        let (s, _) = run(store, &chain, 3).await;
        assert_eq!(s, "AAD", "{}", limit.name());
    }
}

async fn principals_in_different_slots(store: &AnyStore) {
    // Different principals hash to different Cluster slots: the chain runs group by group
    // and a refusal in a later group refunds the earlier one.
    for (first, second) in every_algorithm("x1", 10)
        .iter()
        .zip(every_algorithm("x2", 1).iter())
    {
        let (a, b) = (
            Principal::participant("alpha"),
            Principal::ip([192, 0, 2, 1].into()),
        );
        let chain = Chain::new()
            .check(first, a.clone())
            .check(second, b.clone());
        let (s, ds) = run(store, &chain, 3).await;
        assert_eq!(s, "ADD", "{}", first.name());
        assert_eq!(ds[2].decisions()[0].remaining(), 9, "{}", first.name());
        assert_eq!(
            store.peek(&first.key(a)).await.unwrap().remaining(),
            9,
            "refunded, {}",
            first.name()
        );
    }
}

async fn overdraw_and_reset(store: &AnyStore) {
    let tokens = Limit::token_bucket("tokens", 100, 100, MINUTE).unwrap();
    let key = tokens.key(Principal::user("u"));
    let d = store.charge(&Check::new(key.clone(), 250)).await.unwrap();
    assert!(!d.is_allowed());
    let peek = store.peek(&key).await.unwrap();
    assert!(!peek.would_admit(0));
    let wait = peek.retry_after().unwrap();
    // 250 tokens from a bucket of 100: debt stops at one full bucket (100 × 0.6 s).
    assert!(
        wait > Duration::from_secs(59) && wait <= Duration::from_secs(60),
        "{wait:?}"
    );
    store.reset(&key).await.unwrap();
    assert_eq!(store.peek(&key).await.unwrap().remaining(), 100);
}

async fn rollover_and_exact_retry(store: &AnyStore) {
    let second = Duration::from_secs(1);
    let fixed = Limit::fixed_window("roll-fixed", 2, second).unwrap();
    let (s, ds, chain) = quick_run(store, &fixed, 3, true).await;
    assert_eq!(s, "AAD");
    let retry = ds[2].denied_by().unwrap().1.retry_after().unwrap();
    assert!(retry <= Duration::from_millis(950), "{retry:?}");
    tokio::time::sleep(retry).await;
    assert_eq!(
        run(store, &chain, 1).await.0,
        "A",
        "the next window starts on the boundary"
    );
    for limit in [
        Limit::sliding_window("short-sliding", 2, second).unwrap(),
        Limit::sliding_log("short-log", 2, second).unwrap(),
        Limit::token_bucket("short-bucket", 2, 4, second).unwrap(),
    ] {
        let (s, ds, chain) = quick_run(store, &limit, 3, false).await;
        assert_eq!(s, "AAD", "{}", limit.name());
        let retry = ds[2].denied_by().unwrap().1.retry_after().unwrap();
        tokio::time::sleep(retry).await;
        assert_eq!(
            run(store, &chain, 1).await.0,
            "A",
            "{} after {retry:?}",
            limit.name()
        );
    }
}

async fn overrides(store: &AnyStore) {
    let limit = Limit::fixed_window("keys", 2, MINUTE).unwrap();
    let partner = Principal::api_key("sk_partner");
    limit.set_override(&partner, 5).unwrap();
    let (s, ds) = run(store, &Chain::new().check(&limit, partner.clone()), 6).await;
    assert_eq!(s, "AAAAAD");
    assert_eq!(ds[0].decisions()[0].limit(), 5);
    let (s, _) = run(
        store,
        &Chain::new().check(&limit, Principal::api_key("sk_other")),
        3,
    )
    .await;
    assert_eq!(s, "AAD", "everyone else keeps the limit's quota");
    limit.clear_override(&partner);
    let d = store.peek(&limit.key(partner)).await.unwrap();
    assert_eq!((d.limit(), d.remaining()), (2, 0));
}

pub(crate) async fn suite(store: &AnyStore) {
    // The minute windows below must not roll over mid-suite (a few seconds at most).
    clear_of_boundary(MINUTE, Duration::from_secs(10)).await;
    overrides(store).await;
    counting(store).await;
    costs(store).await;
    chains(store).await;
    repeats_and_long_chains(store).await;
    count_attempts(store).await;
    principals_in_different_slots(store).await;
    overdraw_and_reset(store).await;
    rollover_and_exact_retry(store).await;
    bans(store).await;
}

/// Runs the suite on `make(attempt)`'s store until it is conclusive: a failure while the
/// minute rolled over mid-suite (a busy machine can stretch its few seconds past the
/// margin it starts with) says nothing about the store, and the suite runs again, on keys
/// of its own. Any other failure fails the test. The store of the last run.
async fn conclusive_suite(make: impl Fn(u32) -> AnyStore) -> AnyStore {
    let minute = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
            / 60
    };
    for attempt in 0..3 {
        let store = make(attempt);
        let (run, started) = (store.clone(), minute());
        match tokio::spawn(async move { suite(&run).await }).await {
            Ok(()) => return store,
            Err(e) if e.is_panic() && minute() != started && attempt < 2 => {
                println!("the minute rolled over mid-suite: inconclusive, again");
            }
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        }
    }
    unreachable!()
}

/// A Redis store on `urls` (a Cluster when there are several) whose keys start `rl{n}`.
fn prefixed(urls: &[String], n: u32) -> AnyStore {
    let store = if urls.len() == 1 {
        RedisStore::builder(&urls[0])
            .prefix(format!("rl{n}"))
            .build()
    } else {
        RedisStore::cluster_builder(urls.iter().cloned())
            .prefix(format!("rl{n}"))
            .build()
    };
    AnyStore::Redis(store.unwrap())
}

#[tokio::test]
async fn conformance_memory() {
    conclusive_suite(|_| AnyStore::Memory(MemoryStore::new())).await;
}

#[tokio::test]
async fn conformance_standalone_redis() {
    let server = RedisServer::start();
    conclusive_suite(|n| prefixed(&[server.url()], n)).await;
    assert!(crate::redis_only::assert_key_hygiene(&server, 121_000) > 0);
}

#[tokio::test]
async fn conformance_redis_cluster() {
    let c = RedisCluster::start();
    let store = conclusive_suite(|n| prefixed(&c.urls(), n)).await;
    // The eviction check reads every master.
    let AnyStore::Redis(redis) = &store else {
        unreachable!()
    };
    assert_eq!(
        redis.check_eviction_policy().await.unwrap(),
        ["noeviction"; 3]
    );
    let keys: usize = c
        .nodes()
        .iter()
        .map(|node| crate::redis_only::assert_key_hygiene(node, 121_000))
        .sum();
    assert!(keys > 0);
}
