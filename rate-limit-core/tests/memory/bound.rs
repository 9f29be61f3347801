//! The memory bound: a flood of fresh keys cannot grow the store past its cap, a key in
//! use keeps its count, and expired keys are swept.

use std::time::Duration;

use ratekeeper_core::clock::FakeClock;
use ratekeeper_core::{Chain, ConfigErrorKind, Limit, MemoryStore, Principal, Store};

use crate::support::T0;

#[tokio::test]
async fn a_million_fresh_keys_stay_under_the_cap_and_the_hot_key_keeps_its_count() {
    let clock = FakeClock::at_micros(T0);
    let store = MemoryStore::builder()
        .clock(clock.clone())
        .max_keys(100_000)
        .build()
        .unwrap();
    let flood = Limit::sliding_window("flood", 5, Duration::from_secs(60)).unwrap();
    let hot = Limit::fixed_window("hot", 1_000_000, Duration::from_secs(3_600)).unwrap();
    let hot_chain = Chain::new().check(&hot, Principal::user("regular"));
    let mut hot_checks = 0u64;
    for i in 0..1_000_000u32 {
        let chain = Chain::new().check(&flood, Principal::user(format!("rotating-{i}")));
        assert!(store.check_now(&chain).is_allowed());
        if i % 100 == 0 {
            assert!(store.check_now(&hot_chain).is_allowed());
            hot_checks += 1;
            assert!(store.len() <= 100_000);
        }
        if i % 10_000 == 0 {
            clock.advance(Duration::from_millis(1));
        }
    }
    assert!(store.len() <= 100_000, "{} keys", store.len());
    assert!(
        store.evictions() >= 900_000,
        "{} evictions",
        store.evictions()
    );
    let d = store
        .peek(&hot.key(Principal::user("regular")))
        .await
        .unwrap();
    assert_eq!(
        d.remaining(),
        1_000_000 - hot_checks,
        "the hot key lost its count"
    );

    // Two windows later every flood key has expired; an hour later the hot one too.
    clock.advance(Duration::from_secs(3_600));
    assert!(store.sweep() > 0);
    assert_eq!(store.len(), 0);
}

#[test]
fn expired_keys_are_swept_on_the_timer_without_a_call() {
    let clock = FakeClock::at_micros(T0);
    let store = MemoryStore::builder()
        .clock(clock.clone())
        .sweep_interval(Duration::from_secs(10))
        .build()
        .unwrap();
    let l = Limit::fixed_window("short", 5, Duration::from_secs(1)).unwrap();
    for i in 0..1_000 {
        store.check_now(&Chain::new().check(&l, Principal::user(format!("u{i}"))));
    }
    assert_eq!(store.len(), 1_000);
    clock.advance(Duration::from_secs(20));
    // Writes keep going; each shard sweeps itself when its timer is due.
    for i in 0..10_000 {
        store.check_now(&Chain::new().check(&l, Principal::user(format!("v{i}"))));
    }
    assert_eq!(store.len(), 10_000, "the first thousand were swept");
    assert_eq!(store.evictions(), 0);
}

#[test]
fn store_settings_are_validated() {
    let err = MemoryStore::builder().max_keys(0).build().unwrap_err();
    assert_eq!(
        (err.kind(), err.code()),
        (ConfigErrorKind::StoreInvalid, "store.invalid")
    );
    assert_eq!(err.field(), "max_keys");
    let err = MemoryStore::builder().shards(0).build().unwrap_err();
    assert_eq!(err.field(), "shards");
    // A cap below the shard count still holds.
    let store = MemoryStore::builder().max_keys(3).build().unwrap();
    let l = Limit::fixed_window("tiny", 5, Duration::from_secs(60)).unwrap();
    for i in 0..100 {
        store.check_now(&Chain::new().check(&l, Principal::user(format!("u{i}"))));
    }
    assert!(store.len() <= 3);
}
