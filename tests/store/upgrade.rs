//! A rolling upgrade across a key version: instances of the previous release (key version
//! `v2`, its chain script in `tests/store/fixtures/chain_v2.lua`, one text state per key)
//! and of this one (`v3`, a key per window for the windows) run on one Redis for the
//! length of a deploy. They count in separate keys, so a client can be admitted by both:
//! up to twice the quota, for the window the deploy spans; once the previous release's
//! instances are gone, the next window counts the quota exactly, and the old keys expire
//! by themselves.

use std::time::Duration;

use ratekeeper_core::{Chain, Limit, Principal, RedisStore, Store};
use ratekeeper_tests::redis::RedisServer;

use crate::support::clear_of_boundary;

const PREVIOUS: &[u8] = include_bytes!("fixtures/chain_v2.lua");

/// One check through the previous release's script on its key (`rl:v2:…`): allowed?
fn previous_check(server: &RedisServer, key: &str, algo: u64, p1: u64, p2: u64) -> bool {
    // Slack 1000 ms, one chain, in order, one check: algorithm, quota or capacity, window
    // or interval (µs), cost 1; as one string of little-endian doubles. The answer: now,
    // chains, status, n, outcome (0 allowed), …, also doubles.
    let args: Vec<u8> = [1000, 1, 0, 1, algo, p1, p2, 1]
        .iter()
        .flat_map(|&n| (n as f64).to_le_bytes())
        .collect();
    let script = String::from_utf8_lossy(PREVIOUS);
    let reply = server.cli_with_last(&["EVAL", &script, "1", key], &args);
    let packed = reply.strip_suffix(b"\n").unwrap_or(&reply);
    let nums: Vec<f64> = packed
        .chunks_exact(8)
        .map(|b| f64::from_le_bytes(b.try_into().unwrap()))
        .collect();
    assert!(
        nums.len() >= 5 && nums[2] == 0.0,
        "the previous script answered {reply:?}"
    );
    nums[4] == 0.0
}

/// The server's window of `w` µs now.
fn server_window(server: &RedisServer, w: u64) -> u64 {
    let time = server.cli(&["TIME"]);
    let mut parts = time.lines().map(|l| l.trim().parse::<u64>().unwrap());
    (parts.next().unwrap() * 1_000_000 + parts.next().unwrap()) / w
}

/// Alternates 30 checks between the previous release (on `old`) and this one: how many
/// each admitted.
async fn alternate(
    server: &RedisServer,
    store: &RedisStore,
    chain: &Chain,
    old: &str,
    (algo, p1, p2): (u64, u64, u64),
) -> (u32, u32) {
    let (mut previous, mut this) = (0, 0);
    for i in 0..30 {
        if i % 2 == 0 {
            previous += u32::from(previous_check(server, old, algo, p1, p2));
        } else {
            this += u32::from(store.check(chain).await.unwrap().is_allowed());
        }
    }
    (previous, this)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_previous_release_and_this_one_count_apart_for_one_window_at_most() {
    let server = RedisServer::start();
    let store = RedisStore::builder(server.url())
        .deny_cache(0)
        .build()
        .unwrap();
    let hour = Duration::from_secs(3_600);
    let h = 3_600_000_000u64;
    // (limit, the previous script's algorithm code and parameters)
    let cases = [
        (Limit::fixed_window("up-fw", 10, hour).unwrap(), (1, 10, h)),
        (
            Limit::sliding_window("up-sw", 10, hour).unwrap(),
            (2, 10, h),
        ),
        (Limit::sliding_log("up-log", 10, hour).unwrap(), (3, 10, h)),
        // 10 tokens, 10 an hour: one per 360 s.
        (
            Limit::token_bucket("up-tb", 10, 10, hour).unwrap(),
            (4, 10, h / 10),
        ),
    ];
    // The deploy: both releases answer, alternately.
    clear_of_boundary(hour, Duration::from_secs(60)).await;
    for (limit, previous) in &cases {
        let key = limit.key(Principal::user("u"));
        // The previous release's key: the same name under `v2`.
        let old = store.key_name(&key).replacen(":v3:", ":v2:", 1);
        let chain = Chain::new().check(limit, Principal::user("u"));
        assert_eq!(
            alternate(&server, &store, &chain, &old, *previous).await,
            (10, 10),
            "{}: each release admits its own quota, twice the quota between them",
            limit.name()
        );
        // The previous release's key expires by itself (its state's life plus the slack).
        let pttl: i64 = server.cli(&["PTTL", &old]).trim().parse().unwrap();
        assert!(pttl > 0, "{}: {old} has a TTL: {pttl}", limit.name());
    }

    // For one window at most: a window of 2 s, both releases within one window, then the
    // previous release gone and the next window counted once. A phase the server's clock
    // carried across a boundary (a loaded machine) is run again with a new principal.
    let w = 2_000_000u64;
    let limit = Limit::fixed_window("up-next", 10, Duration::from_micros(w)).unwrap();
    for attempt in 0.. {
        assert!(attempt < 5, "every attempt straddled a window boundary");
        let user = format!("n{attempt}");
        let key = limit.key(Principal::user(user.as_str()));
        let old = store.key_name(&key).replacen(":v3:", ":v2:", 1);
        let chain = Chain::new().check(&limit, Principal::user(user.as_str()));
        clear_of_boundary(Duration::from_micros(w), Duration::from_millis(1_500)).await;
        let during = server_window(&server, w);
        let both = alternate(&server, &store, &chain, &old, (1, 10, w)).await;
        if server_window(&server, w) != during {
            continue;
        }
        assert_eq!(both, (10, 10), "the deploy's window: twice the quota");
        clear_of_boundary(Duration::from_micros(w), Duration::from_micros(w)).await;
        let after = server_window(&server, w);
        assert!(after > during);
        let mut admitted = 0;
        for _ in 0..15 {
            admitted += u32::from(store.check(&chain).await.unwrap().is_allowed());
        }
        if server_window(&server, w) != after {
            continue;
        }
        assert_eq!(admitted, 10, "the next window counts the quota once");
        break;
    }
}
