//! A rolling upgrade across #13's script change: instances running the previous chain
//! script (one chain per call, `tests/store/fixtures/chain_before_coalescing.lua`, as
//! released before coalescing) and instances running this one count in the same keys,
//! alternately, without misreading each other's state: each algorithm admits exactly its
//! quota between them, not up to twice it.

use std::time::Duration;

use ratekeeper_core::{Chain, Limit, Principal, RedisStore, Store};
use ratekeeper_tests::redis::RedisServer;

use crate::support::clear_of_boundary;

const PREVIOUS: &str = include_str!("fixtures/chain_before_coalescing.lua");

/// One check through the previous script (`EVAL` by `redis-cli`): allowed?
fn previous_check(server: &RedisServer, key: &str, algo: u64, p1: u64, p2: u64) -> bool {
    // KEYS[1]; mode 0 (in order), slack 1000 ms; algorithm, quota or capacity, window or
    // interval (µs), cost 1. Answer: now, n, outcome (0 allowed), …
    let (algo, p1, p2) = (algo.to_string(), p1.to_string(), p2.to_string());
    let reply = server.cli(&[
        "EVAL", PREVIOUS, "1", key, "0", "1000", &algo, &p1, &p2, "1",
    ]);
    let outcome = reply.lines().nth(2).map(str::trim);
    match outcome {
        Some("0") => true,
        Some(_) => false,
        None => panic!("the previous script answered {reply:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_previous_script_and_this_one_share_keys_exactly() {
    let server = RedisServer::start();
    let store = RedisStore::builder(server.url())
        .deny_cache(0)
        .build()
        .unwrap();
    let hour = Duration::from_secs(3_600);
    let h = 3_600_000_000u64;
    // (limit, the previous script's algorithm code and parameters)
    let cases = [
        (Limit::fixed_window("up-fw", 10, hour).unwrap(), 1, 10, h),
        (Limit::sliding_window("up-sw", 10, hour).unwrap(), 2, 10, h),
        (Limit::sliding_log("up-log", 10, hour).unwrap(), 3, 10, h),
        // 10 tokens, 10 an hour: one per 360 s.
        (
            Limit::token_bucket("up-tb", 10, 10, hour).unwrap(),
            4,
            10,
            h / 10,
        ),
    ];
    clear_of_boundary(hour, Duration::from_secs(60)).await;
    for (limit, algo, p1, p2) in cases {
        let key = limit.key(Principal::user("u"));
        let name = store.key_name(&key);
        let chain = Chain::new().check(&limit, Principal::user("u"));
        let (mut previous, mut this) = (0, 0);
        for i in 0..24 {
            if i % 2 == 0 {
                previous += u32::from(previous_check(&server, &name, algo, p1, p2));
            } else {
                this += u32::from(store.check(&chain).await.unwrap().is_allowed());
            }
        }
        assert_eq!(
            (previous, this),
            (5, 5),
            "{}: the two scripts admitted {previous} + {this} of a quota of 10",
            limit.name()
        );
        // And each sees the other's last write: both refuse now.
        assert!(!previous_check(&server, &name, algo, p1, p2));
        assert!(!store.check(&chain).await.unwrap().is_allowed());
    }
}
