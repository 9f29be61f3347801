//! How long one operator change takes to reach a second instance, at 10 and at 10 000
//! overrides in the fleet's state: the same, since an instance applies only what changed
//! since the version it applied (before that fix every notice re-read and re-applied
//! every override: 16.7 ms a change at 1 000, 371 ms at ~5 000).
//!
//! `cargo bench -p ratekeeper-benches --bench fleet_spread` (about a minute);
//! `FLEET_SPREAD_CHANGES=20` for a quick run (seconds).
//!
//! Two instances, A and B, each its own store connection, limit and fleet, on one
//! `redis-server` started for the run (and on one memory store). The overrides are seeded
//! by writing the store's state directly (`HSET`), as an operator's years of changes
//! would have left it, and both instances read it once. Then A sets the quota again and
//! again, 50 ms apart; each change is timed from A's call to B applying it (B follows the
//! store's notices). Printed: p50 and p90 per size, and the ratio of the p50s.

use std::time::{Duration, Instant};

use ratekeeper_core::fleet::Fleet;
use ratekeeper_core::{AnyStore, Limit, MemoryStore, Principal};
use ratekeeper_testkit::redis::RedisServer;

const NAME: &str = "spread";

fn changes() -> usize {
    std::env::var("FLEET_SPREAD_CHANGES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(200)
}

struct Side {
    limit: Limit,
    fleet: Fleet,
}

fn side(store: AnyStore) -> Side {
    let limit = Limit::fixed_window(NAME, 10, Duration::from_secs(60)).unwrap();
    Side {
        fleet: Fleet::new(store, [limit.clone()]),
        limit,
    }
}

/// p50 and p90 of the time from A's change to B applying it, over `n` changes 50 ms
/// apart (an instance reads at most every 20 ms however many notices come: back-to-back
/// changes would time that gap, not the spread).
async fn spread(a: &Side, b: &Side, n: usize) -> (Duration, Duration) {
    let mut took = Vec::with_capacity(n);
    for i in 0..n {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let quota = 1_000 + i as u64;
        let t0 = Instant::now();
        a.fleet.set_quota(NAME, quota).await.unwrap();
        while b.limit.quota() != quota {
            tokio::task::yield_now().await;
        }
        took.push(t0.elapsed());
    }
    took.sort();
    (took[n / 2], took[n * 9 / 10])
}

async fn measure(store: impl Fn() -> AnyStore, seed: impl Fn(usize), overrides: usize) -> Duration {
    seed(overrides);
    let (a, b) = (side(store()), side(store()));
    a.fleet.sync().await.unwrap();
    b.fleet.sync().await.unwrap();
    assert_eq!(b.limit.overrides().len(), overrides, "seeded");
    let run = tokio::spawn(b.fleet.clone().run(Duration::from_secs(1)));
    while !b.fleet.applied().listening {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let (p50, p90) = spread(&a, &b, changes()).await;
    run.abort();
    println!("  {overrides:>6} overrides: p50 {p50:>10.3?}  p90 {p90:>10.3?}");
    p50
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    println!("fleet_spread: {} changes per size", changes());
    println!("redis (one redis-server, notices on)");
    let redis = RedisServer::start();
    let seed = |n: usize| {
        redis.cli(&["FLUSHALL"]);
        let key = "rl:v3:{x.fleet}:runtime";
        for chunk in (0..n).collect::<Vec<_>>().chunks(500) {
            let mut args = vec!["HSET".to_owned(), key.to_owned()];
            for i in chunk {
                args.push(format!("o:{NAME}:p:u{i}"));
                args.push("5".to_owned());
            }
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            redis.cli(&args);
        }
        redis.cli(&["HSET", key, "#v", &n.max(1).to_string(), "#e", "1"]);
    };
    let small = measure(|| redis.store(), &seed, 10).await;
    let large = measure(|| redis.store(), &seed, 10_000).await;
    println!("  ratio p50 10 000 / 10: {:.2}", ratio(large, small));

    println!("memory (one store, two fleets)");
    let small = measure_memory(10).await;
    let large = measure_memory(10_000).await;
    println!("  ratio p50 10 000 / 10: {:.2}", ratio(large, small));
}

/// On the memory store: the overrides made through a third fleet first (the store has no
/// other door), then the same measure.
async fn measure_memory(overrides: usize) -> Duration {
    let store = AnyStore::Memory(MemoryStore::new());
    let seeder = side(store.clone());
    for i in 0..overrides {
        let who = Principal::participant(format!("u{i}"));
        seeder.fleet.set_override(NAME, &who, 5).await.unwrap();
    }
    measure(|| store.clone(), |_| {}, overrides).await
}

fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64().max(1e-9)
}
