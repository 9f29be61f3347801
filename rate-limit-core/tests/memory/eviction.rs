//! A flood of fresh keys cannot undo a limit: each limit has its own room, so traffic on one
//! never evicts another's state, and within a limit the keys that refuse or slow someone are
//! the last to go.

use std::time::Duration;

use ratekeeper_core::clock::FakeClock;
use ratekeeper_core::{Chain, Delay, Limit, MemoryStore, Principal, Store};

use crate::support::{T0, every_algorithm};

fn check(store: &MemoryStore, limit: &Limit, who: &str) -> ratekeeper_core::Decision {
    let d = store.check_now(&Chain::new().check(limit, Principal::user(who)));
    d.decisions()[0]
}

#[tokio::test]
async fn a_30_000_key_flood_leaves_every_refusing_counter_refusing_and_other_limits_untouched() {
    let clock = FakeClock::at_micros(T0);
    let store = MemoryStore::builder()
        .clock(clock.clone())
        .max_keys(10_000)
        .build()
        .unwrap();
    let quarter = Duration::from_secs(900);
    // Every algorithm, quota 3: 40 principals each refused (the flood's own limit among
    // them), 40 at quota, and for every limit 200 that refuse nobody.
    let limits = every_algorithm("lim", 3);
    let account = Limit::sliding_log("account", 1_000, quarter)
        .unwrap()
        .delayed(Delay::doubling(5, Duration::from_secs(1), Duration::from_secs(8)).unwrap())
        .unwrap();
    for l in &limits {
        for i in 0..40 {
            for _ in 0..3 {
                assert!(check(&store, l, &format!("refused-{i}")).is_allowed());
            }
            assert!(!check(&store, l, &format!("refused-{i}")).is_allowed());
            for _ in 0..3 {
                assert!(check(&store, l, &format!("at-quota-{i}")).is_allowed());
            }
        }
        for i in 0..200 {
            assert!(check(&store, l, &format!("light-{i}")).is_allowed());
        }
    }
    // Accounts with five failures: the next is held (by the limiter, from this count).
    for i in 0..40 {
        for _ in 0..5 {
            assert!(check(&store, &account, &format!("acct-{i}")).is_allowed());
        }
    }
    // The flood: 30 000 fresh principals on each limit in turn (3 × its room).
    for l in limits.iter().chain([&account]) {
        for n in 0..30_000 {
            check(&store, l, &format!("flood-{n}"));
        }
    }
    assert!(
        store.evictions() > 100_000,
        "{} evictions",
        store.evictions()
    );
    for l in &limits {
        for i in 0..40 {
            let d = check(&store, l, &format!("refused-{i}"));
            assert!(!d.is_allowed(), "{}: refused-{i} refuses again", l.name());
            let d = check(&store, l, &format!("at-quota-{i}"));
            assert!(!d.is_allowed(), "{}: at-quota-{i} refuses", l.name());
        }
    }
    for i in 0..40 {
        let key = account.key(Principal::user(format!("acct-{i}")));
        let left = store.peek(&key).await.unwrap().remaining();
        assert_eq!(
            left, 995,
            "acct-{i} keeps its five failures: the next is held"
        );
    }
    // Nothing refused on the lighter keys either while another limit was flooded: a light
    // key of the last limit flooded went (its own flood), those of the others only to
    // their own floods — so check one limit against a flood of another alone.
    let fresh = MemoryStore::builder()
        .clock(clock.clone())
        .max_keys(10_000)
        .build()
        .unwrap();
    let (a, b) = (&limits[0], &limits[1]);
    for i in 0..200 {
        assert!(check(&fresh, a, &format!("light-{i}")).is_allowed());
    }
    for n in 0..30_000 {
        check(&fresh, b, &format!("flood-{n}"));
    }
    assert!(fresh.evictions() > 0);
    for i in 0..200 {
        let left = fresh
            .peek(&a.key(Principal::user(format!("light-{i}"))))
            .await
            .unwrap()
            .remaining();
        assert_eq!(left, 2, "light-{i} of {} kept its count", a.name());
    }
}
