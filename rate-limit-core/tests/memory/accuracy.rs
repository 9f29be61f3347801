//! How far the approximate sliding window strays from an exact count.
//!
//! A client sends Poisson traffic at several multiples of the limit. For every request we
//! compare the approximate window's decision with what an exact count of the requests it
//! admitted over the last `w` would have said: an *over-admission* is a request it allowed
//! that the exact count would have refused; an *under-admission* the reverse. The figures
//! are printed (`cargo test -p ratekeeper-core --test memory accuracy -- --nocapture`) and
//! quoted in the limits guide (docs/limits.md); the assertions hold the guaranteed bounds.

use std::collections::VecDeque;
use std::time::Duration;

use ratekeeper_core::clock::FakeClock;
use ratekeeper_core::{Chain, Limit, MemoryStore, Principal};

use crate::support::T0;

const QUOTA: u64 = 100;
const WINDOW_US: u64 = 60_000_000;

struct AccuracyTally {
    requests: u64,
    over: u64,
    under: u64,
    max_rolling: u64,
}

fn simulate(rate_multiple: f64, windows: u64, seed: u64) -> AccuracyTally {
    let clock = FakeClock::at_micros(T0);
    let store = MemoryStore::builder().clock(clock.clone()).build().unwrap();
    let limit = Limit::sliding_window("acc", QUOTA, Duration::from_micros(WINDOW_US)).unwrap();
    let chain = Chain::new().check(&limit, Principal::user("client"));
    let mean_gap = WINDOW_US as f64 / (QUOTA as f64 * rate_multiple);
    let mut rng = seed | 1;
    let mut uniform = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        (rng >> 11) as f64 / (1u64 << 53) as f64
    };
    let mut admitted: VecDeque<u64> = VecDeque::new();
    let mut t = T0;
    let end = T0 + windows * WINDOW_US;
    let mut tally = AccuracyTally {
        requests: 0,
        over: 0,
        under: 0,
        max_rolling: 0,
    };
    while t < end {
        t += (-(1.0 - uniform()).ln() * mean_gap) as u64 + 1;
        clock.set_micros(t);
        while admitted.front().is_some_and(|&a| a + WINDOW_US <= t) {
            admitted.pop_front();
        }
        let exact_allows = (admitted.len() as u64) < QUOTA;
        let allowed = store.check_now(&chain).is_allowed();
        tally.requests += 1;
        match (allowed, exact_allows) {
            (true, false) => tally.over += 1,
            (false, true) => tally.under += 1,
            _ => {}
        }
        if allowed {
            admitted.push_back(t);
            tally.max_rolling = tally.max_rolling.max(admitted.len() as u64);
        }
    }
    tally
}

#[test]
fn sliding_window_error_against_an_exact_count() {
    println!("rate × limit   requests   over-admitted   under-admitted   most in a rolling window");
    for (i, multiple) in [0.5, 0.9, 1.0, 1.5, 3.0, 10.0].into_iter().enumerate() {
        let t = simulate(multiple, 200, 0x5eed + i as u64);
        let pct = |n: u64| 100.0 * n as f64 / t.requests as f64;
        println!(
            "{multiple:>12.1}   {:>8}   {:>12.3}%   {:>13.3}%   {:>10} (limit {QUOTA})",
            t.requests,
            pct(t.over),
            pct(t.under),
            t.max_rolling
        );
        // The guaranteed bound: under twice the quota in any rolling window.
        assert!(t.max_rolling < 2 * QUOTA);
        // Well below the limit, the estimate never misjudges.
        if multiple <= 0.5 {
            assert_eq!((t.over, t.under), (0, 0));
        }
    }
}
