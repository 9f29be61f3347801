//! De-duplication on the memory store at any size: new ids per second for the first
//! 100 000, and again past the 1 000 000-id cap (where every new id evicts the oldest).
//! Prints the figures and their ratio (goal: ≥ 0.8). `cargo bench -p rate-limit-core --bench dedupe`

use std::time::{Duration, Instant};

use rate_limit_core::{Dedupe, MemoryStore};

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

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let store = MemoryStore::new();
    let first = rate(&store, &rt, 0, 100_000);
    // Fill to the cap; the last 100k show what a map this large costs without eviction.
    rate(&store, &rt, 100_000, 800_000);
    let full = rate(&store, &rt, 900_000, 100_000);
    let past = rate(&store, &rt, 1_000_000, 200_000);
    println!("new ids per second, first 100k:             {first:>10.0}");
    println!("new ids per second, 900k-1M (no eviction):  {full:>10.0}");
    println!("new ids per second, past 1M (at the cap):   {past:>10.0}");
    println!(
        "ratio past-cap / first 100k:                {:>10.3}",
        past / first
    );
    println!(
        "ratio past-cap / 900k-1M:                   {:>10.3}",
        past / full
    );
}
