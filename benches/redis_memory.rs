//! Redis memory per key at 1 000 000 keys, for each algorithm (issue #13, item 4): a fresh
//! `redis-server` this program starts, one million principals checked once each through
//! the Redis store, and `INFO memory`'s `used_memory` before and after, divided by the keys
//! (`DBSIZE`) and by the principals. Since key version `v3` a fixed or sliding window keeps
//! a key per window, and a sliding window's previous window's key lives on through the
//! next: the last case checks each principal in two consecutive windows of 60 s (it waits
//! for the boundary), the steady state of a busy sliding window. Beside them, the floor: a
//! million `SET … PX` of names as long as ours.
//!
//! `cargo bench -p ratekeeper-benches --bench redis_memory` (`KEYS=` to change the count)

#![allow(clippy::too_many_lines, reason = "a bench reads top to bottom")]

use std::sync::Arc;
use std::time::{Duration, Instant};

use ratekeeper_core::{Chain, Limit, Principal, RedisStore, Store};
use ratekeeper_testkit::redis::RedisServer;

fn used_memory(server: &RedisServer) -> u64 {
    server
        .cli(&["INFO", "memory"])
        .lines()
        .find_map(|l| l.strip_prefix("used_memory:")?.trim().parse().ok())
        .expect("INFO memory has used_memory")
}

fn dbsize(server: &RedisServer) -> u64 {
    server.cli(&["DBSIZE"]).trim().parse().expect("DBSIZE")
}

fn main() {
    let keys: u64 = std::env::var("KEYS")
        .ok()
        .and_then(|k| k.parse().ok())
        .unwrap_or(1_000_000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let hour = Duration::from_secs(3_600);
    let limits = [
        Limit::fixed_window("fw", 100, hour).unwrap(),
        Limit::sliding_window("sw", 100, hour).unwrap(),
        Limit::sliding_log("log", 5, hour).unwrap(),
        Limit::token_bucket("tb", 100, 100, hour).unwrap(),
    ];
    println!("{keys} principals, one check each; used_memory growth ÷ DBSIZE, ÷ principals");
    let steady = Limit::sliding_window("sw2", 100, Duration::from_secs(60)).unwrap();
    for (limit, windows) in limits.iter().map(|l| (l, 1)).chain([(&steady, 2)]) {
        let server = RedisServer::start();
        let base = used_memory(&server);
        let t0 = Instant::now();
        rt.block_on(async {
            let store = RedisStore::builder(server.url())
                .deny_cache(0)
                .build()
                .unwrap();
            for round in 0..windows {
                if round > 0 {
                    // The next window of 60 s, by this machine's clock (the server's here).
                    let now = std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .unwrap()
                        .as_millis();
                    let left = 60_000 - now % 60_000;
                    tokio::time::sleep(Duration::from_millis(u64::try_from(left).unwrap() + 100))
                        .await;
                }
                check_all(&store, limit, keys).await;
            }
        });
        let n = dbsize(&server);
        let grew = used_memory(&server).saturating_sub(base);
        println!(
            "{:<16} {:>8.1} B per key, {:>8.1} B per principal ({n} keys, {} window(s), {:.0} s)",
            format!("{:?}", limit.kind()),
            grew as f64 / n.max(1) as f64,
            grew as f64 / keys.max(1) as f64,
            windows,
            t0.elapsed().as_secs_f64()
        );
    }
    // The floor: plain strings with a TTL under names of the same length.
    let server = RedisServer::start();
    let base = used_memory(&server);
    let store = rt.block_on(async { RedisStore::builder(server.url()).build().unwrap() });
    let sample = store.key_name(&limits_name_sample());
    let pad = sample.len().saturating_sub(8);
    let mut script = String::new();
    for i in 0..keys {
        script.push_str(&format!("SET {}{i:08} 1 PX 3600000\n", "k".repeat(pad)));
    }
    let mut child = std::process::Command::new("redis-cli")
        .args(["-p", &server.port().to_string(), "--pipe"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("redis-cli");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(script.as_bytes()).unwrap();
    }
    child.wait().unwrap();
    let n = dbsize(&server);
    println!(
        "{:<16} {:>8.1} B per key ({n} keys, names of {} bytes as ours)",
        "SET … PX",
        used_memory(&server).saturating_sub(base) as f64 / n.max(1) as f64,
        sample.len()
    );
}

/// Checks each of `keys` principals once against `limit`, 64 tasks.
async fn check_all(store: &RedisStore, limit: &Limit, keys: u64) {
    let limit = Arc::new(limit.clone());
    let tasks: Vec<_> = (0..64u64)
        .map(|t| {
            let (store, limit) = (store.clone(), limit.clone());
            tokio::spawn(async move {
                let mut i = t;
                while i < keys {
                    let chain = Chain::new().check(&limit, Principal::user(format!("u{i:07}")));
                    store.check(&chain).await.expect("Redis answers");
                    i += 64;
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
}

fn limits_name_sample() -> ratekeeper_core::Key {
    Limit::fixed_window("fw", 100, Duration::from_secs(3_600))
        .unwrap()
        .key(Principal::user("u0000000"))
}
