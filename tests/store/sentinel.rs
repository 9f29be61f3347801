//! Redis behind Sentinel: the store asks the Sentinels for the primary and follows a
//! failover without a restart — after the primary is killed, and after it is frozen past
//! `down-after-milliseconds` and comes back as a replica (`READONLY`), where the store must
//! never stay on the old primary. Real processes: a primary, a replica, three Sentinels.

use std::time::Duration;

use ratekeeper_core::{Chain, Limit, Principal, RedisStore, Store};
use ratekeeper_tests::redis::{RedisSentinels, SENTINEL_MASTER};
use tokio::time::Instant;

fn counter() -> (Limit, Chain) {
    let limit = Limit::fixed_window("sentinel", 1_000_000, Duration::from_secs(3_600)).unwrap();
    let chain = Chain::new().check(&limit, Principal::user("u"));
    (limit, chain)
}

/// Checks until the store answers again (at most `for_`); how long that took.
pub(super) async fn until_answered(
    store: &RedisStore,
    chain: &Chain,
    for_: Duration,
) -> Option<Duration> {
    let t0 = Instant::now();
    while t0.elapsed() < for_ {
        if store.check(chain).await.is_ok() {
            return Some(t0.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    None
}

/// Waits until the Sentinels name another primary than `old`.
pub(super) async fn failed_over(s: &RedisSentinels, old: u16, for_: Duration) -> u16 {
    let t0 = Instant::now();
    loop {
        if let Some(p) = s.primary_port().filter(|p| *p != old) {
            return p;
        }
        assert!(t0.elapsed() < for_, "the Sentinels did not fail over");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn store(s: &RedisSentinels) -> RedisStore {
    RedisStore::sentinel_builder(s.urls(), SENTINEL_MASTER)
        .build()
        .unwrap()
}

#[tokio::test]
async fn the_store_follows_the_new_primary_after_the_old_one_is_killed() {
    follows_the_new_primary(RedisSentinels::start()).await;
}

/// The same on Valkey 8: its servers and its Sentinels (the compatibility matrix).
#[tokio::test]
async fn the_store_follows_the_new_primary_on_valkey_8_0() {
    use ratekeeper_tests::redis::versions::Matrix;
    let valkey = Matrix::Valkey8_0.require("the_store_follows_the_new_primary_on_valkey_8_0");
    let s = RedisSentinels::start_on(&valkey);
    let info = s.sentinels[0].cli(&["INFO", "server"]);
    assert!(info.contains(Matrix::Valkey8_0.info_mark()), "{info}");
    assert!(
        info.contains("mode:sentinel") || info.contains("server_mode:sentinel"),
        "{info}"
    );
    follows_the_new_primary(s).await;
}

async fn follows_the_new_primary(mut s: RedisSentinels) {
    let store = store(&s);
    assert!(
        store.endpoint().starts_with("redis-sentinel "),
        "{}",
        store.endpoint()
    );
    let (limit, chain) = counter();
    for _ in 0..5 {
        store.check(&chain).await.unwrap();
    }
    let old = s.servers[0].port();
    s.servers[0].kill();
    let new = failed_over(&s, old, Duration::from_secs(20)).await;
    assert_eq!(new, s.servers[1].port());
    let took = until_answered(&store, &chain, Duration::from_secs(10))
        .await
        .expect("the store answers again without a restart");
    println!("answered by the new primary {took:?} after the Sentinels named it");
    // The count lives on the new primary (what replication had carried, plus the new one).
    let names = store.key_names(&limit.key(Principal::user("u")));
    let raw = crate::support::stored(&s.servers[1], &names);
    assert!(!raw.is_empty(), "the key is on the new primary");
}

#[tokio::test]
async fn a_frozen_primary_that_returns_as_a_replica_is_left_behind() {
    let s = RedisSentinels::start();
    let store = store(&s);
    let (limit, chain) = counter();
    store.check(&chain).await.unwrap();
    let old = s.servers[0].port();
    s.servers[0].pause();
    let new = failed_over(&s, old, Duration::from_secs(20)).await;
    s.servers[0].resume();
    // No check while it is frozen: the store still holds its connection to the old primary
    // when that one comes back and is demoted to a replica.
    let deadline = Instant::now() + Duration::from_secs(15);
    while !s.servers[0].cli(&["ROLE"]).contains("slave") {
        assert!(Instant::now() < deadline, "the old primary was not demoted");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let names = store.key_names(&limit.key(Principal::user("u")));
    let count = |port_is_new: bool| {
        let server = if port_is_new {
            &s.servers[1]
        } else {
            &s.servers[0]
        };
        crate::support::stored(server, &names)
    };
    let before = count(true);
    let mut answered = 0;
    for _ in 0..20 {
        answered += usize::from(store.check(&chain).await.is_ok());
    }
    assert_eq!(new, s.servers[1].port());
    // At most the first check meets the connection the demotion closed (this Redis closes
    // its clients' connections when it becomes a replica; where a server does not, it
    // answers READONLY, which the store treats alike); the store then asks the Sentinels
    // again and every later check lands on the new primary.
    assert!(answered >= 19, "{answered} of 20 answered");
    assert_ne!(count(true), before, "the new primary counted them");
    assert_eq!(
        s.servers[0].cli(&["ROLE"]).lines().next().unwrap_or(""),
        "slave",
        "the old primary stays a replica"
    );
}
