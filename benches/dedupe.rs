//! De-duplication on the memory store at any size: new ids per second for the first
//! 100 000, and again past the 1 000 000-id cap (where every new id evicts the oldest).
//! Prints the figures and their ratio (goal: ≥ 0.8). `cargo bench -p ratekeeper-benches --bench dedupe`

use std::time::{Duration, Instant};

use ratekeeper_core::MemoryStore;
use ratekeeper_core::store::Dedupe;

fn rate(store: &MemoryStore, rt: &tokio::runtime::Runtime, from: u64, n: u64) -> f64 {
    let day = Duration::from_secs(86_400);
    let t0 = Instant::now();
    rt.block_on(async {
        for i in from..from + n {
            let first = store
                .first_seen(&format!("delivery-{i}"), day)
                .await
                .unwrap();
            assert!(first);
        }
    });
    n as f64 / t0.elapsed().as_secs_f64()
}

/// This process's resident set, in KiB.
fn rss_kib() -> u64 {
    ratekeeper_testkit::rss_kib(std::process::id())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    // Each phase five times, the median: one 100k run lasts ~50 ms, short enough for the
    // machine's noise to move it by half.
    let first = median(
        (0..5)
            .map(|_| rate(&MemoryStore::new(), &rt, 0, 100_000))
            .collect(),
    );
    let store = MemoryStore::new();
    let rss0 = rss_kib();
    // Fill to the cap; the last 100k show what a map this large costs without eviction.
    rate(&store, &rt, 0, 900_000);
    let full = rate(&store, &rt, 900_000, 100_000);
    let past = median(
        (0..5)
            .map(|r| rate(&store, &rt, 1_000_000 + r * 200_000, 200_000))
            .collect(),
    );
    let grew = rss_kib().saturating_sub(rss0);
    println!(
        "memory for 1 000 000 ids (RSS growth):         {:>10.1} B per id",
        grew as f64 * 1024.0 / 1_000_000.0
    );
    println!("new ids per second, first 100k (median of 5):  {first:>10.0}");
    println!("new ids per second, 900k-1M (no eviction):     {full:>10.0}");
    println!("new ids per second, past 1M (median of 5):     {past:>10.0}");
    println!(
        "ratio past-cap / first 100k:                   {:>10.3}",
        past / first
    );
    println!(
        "ratio past-cap / 900k-1M:                      {:>10.3}",
        past / full
    );
}
