//! Bytes per key at 1M keys: the memory store against governor's keyed limiter.
//!
//! `cargo bench -p ratekeeper-benches --bench memory`
//!
//! Each case runs in a fresh child process and reports its resident-memory growth while
//! it fills 1M keys of 24-byte string principals (governor keeps the `String`s as its
//! keys; the memory store keeps a 128-bit digest).

use std::hint::black_box;
use std::num::NonZeroU32;
use std::process::Command;
use std::time::Duration;

use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use ratekeeper_core::{Chain, Limit, MemoryStore, Principal};

const KEYS: usize = 1_000_000;

fn resident_bytes() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: usize = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

fn text(i: usize) -> String {
    format!("user-{i:019}")
}

fn run_case(case: &str) -> (usize, usize) {
    let before = resident_bytes();
    match case {
        "governor" => {
            let gov: DefaultKeyedRateLimiter<String> =
                RateLimiter::keyed(Quota::per_second(NonZeroU32::MAX));
            for i in 0..KEYS {
                let _ = gov.check_key(&text(i));
            }
            let after = resident_bytes();
            black_box(&gov);
            (after - before, gov.len())
        }
        kind => {
            let store = MemoryStore::builder().max_keys(2_000_000).build().unwrap();
            let hour = Duration::from_secs(3_600);
            let l = match kind {
                "token_bucket" => Limit::token_bucket("b", 1_000, 1, hour),
                "sliding_window" => Limit::sliding_window("s", 1_000, hour),
                _ => Limit::fixed_window("f", 1_000, hour),
            }
            .unwrap();
            for i in 0..KEYS {
                store.check_now(&Chain::new().check(&l, Principal::user(text(i))));
            }
            let after = resident_bytes();
            (after - before, store.len())
        }
    }
}

fn main() {
    if let Ok(case) = std::env::var("RATE_LIMIT_MEMORY_CASE") {
        let (bytes, keys) = run_case(&case);
        println!("{bytes} {keys}");
        return;
    }
    let exe = std::env::current_exe().expect("current exe");
    println!(
        "{:<16}{:>10}{:>14}{:>12}",
        "case", "keys", "RSS growth", "bytes/key"
    );
    let mut figures = Vec::new();
    for case in ["governor", "token_bucket", "sliding_window", "fixed_window"] {
        let out = Command::new(&exe)
            .env("RATE_LIMIT_MEMORY_CASE", case)
            .output()
            .expect("child runs");
        let text = String::from_utf8_lossy(&out.stdout);
        let mut it = text
            .split_whitespace()
            .map(|v| v.parse::<usize>().unwrap_or(0));
        let (bytes, keys) = (it.next().unwrap_or(0), it.next().unwrap_or(0));
        let per_key = bytes as f64 / keys.max(1) as f64;
        println!(
            "{case:<16}{keys:>10}{:>12} MB{per_key:>12.1}",
            bytes / 1_000_000
        );
        figures.push((case, per_key));
    }
    let gov = figures[0].1;
    for (case, per_key) in &figures[1..] {
        println!("{case}: {:.2}× governor's bytes per key", per_key / gov);
    }
}
