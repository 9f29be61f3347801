//! Latency added by Redis at 25%, 50% and 90% of the Redis store's peak throughput (issue
//! #13, item 4): the peak measured first (64 tasks, closed loop), then an open-loop load at
//! each fraction of it — every millisecond a batch of checks starts, each timed from when
//! it was due — on the Redis store and, at the same rates, on the memory store.
//!
//! `cargo bench -p ratekeeper-benches --bench redis_latency`

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use ratekeeper_core::{AnyStore, Chain, Limit, MemoryStore, Principal, RedisStore, Store};
use ratekeeper_testkit::redis::RedisServer;
use tokio::time::Instant;

const SECS: u64 = 3;

fn chain(limit: &Limit, i: u64) -> Chain {
    Chain::new().check(limit, Principal::user(format!("u{}", i % 10_000)))
}

/// Checks per second with 64 tasks in a closed loop.
async fn peak(store: &AnyStore, limit: &Limit) -> f64 {
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = (0..64u64)
        .map(|t| {
            let (store, limit, stop, done) =
                (store.clone(), limit.clone(), stop.clone(), done.clone());
            tokio::spawn(async move {
                let mut i = t;
                while !stop.load(Ordering::Relaxed) {
                    store.check(&chain(&limit, i)).await.expect("answers");
                    done.fetch_add(1, Ordering::Relaxed);
                    i += 64;
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_secs(SECS)).await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.unwrap();
    }
    done.load(Ordering::Relaxed) as f64 / SECS as f64
}

/// Open loop at `rate` checks per second: (p50, p99) in µs, from when each check was due.
async fn at_rate(store: &AnyStore, limit: &Limit, rate: f64) -> (u64, u64) {
    let per_ms = rate / 1_000.0;
    let start = Instant::now();
    let mut handles = Vec::new();
    let mut owed = 0.0;
    let mut i = 0u64;
    let mut tick = tokio::time::interval(Duration::from_millis(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    while start.elapsed() < Duration::from_secs(SECS) {
        let due = tick.tick().await;
        owed += per_ms;
        while owed >= 1.0 {
            owed -= 1.0;
            i += 1;
            let (store, c) = (store.clone(), chain(limit, i));
            handles.push(tokio::spawn(async move {
                store.check(&c).await.expect("answers");
                u64::try_from(due.elapsed().as_micros()).unwrap_or(u64::MAX)
            }));
        }
    }
    let mut lat = Vec::with_capacity(handles.len());
    for h in handles {
        lat.push(h.await.unwrap());
    }
    lat.sort_unstable();
    (lat[lat.len() / 2], lat[lat.len() * 99 / 100])
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let server = RedisServer::start();
    let limit = Limit::token_bucket("lat", 1_000_000, 1_000_000, Duration::from_secs(60)).unwrap();
    rt.block_on(async {
        let redis = AnyStore::Redis(
            RedisStore::builder(server.url())
                .deny_cache(0)
                .build()
                .unwrap(),
        );
        let memory = AnyStore::Memory(MemoryStore::new());
        let top = peak(&redis, &limit).await;
        println!("Redis store peak: {top:.0} checks/s (64 tasks, closed loop)");
        println!("load        rate/s   Redis p50   p99 µs   memory p50   p99 µs");
        for f in [0.25, 0.5, 0.9] {
            let rate = top * f;
            let (rp50, rp99) = at_rate(&redis, &limit, rate).await;
            let (mp50, mp99) = at_rate(&memory, &limit, rate).await;
            println!(
                "{:>3.0}%   {rate:>10.0}   {rp50:>9}   {rp99:>6}   {mp50:>10}   {mp99:>6}",
                f * 100.0
            );
        }
    });
}
