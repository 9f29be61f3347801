//! The room: 100 phones in one pub behind one IP, all on quiz-night's answer socket; the
//! socket server becomes unreachable and every phone falls back to polling at the same
//! instant (each polling every 10 s, the design's six a minute; ten impatient ones every
//! 2 s, over their own limit of 20 a minute); after a minute the socket server returns and the phones go back to it. On the
//! memory store and a real `redis-server`; prints the figures (RELIABILITY.md quotes them).
//!
//! `cargo bench -p ratekeeper-benches --bench room` (about three minutes; `ROOM_PHONES`,
//! `ROOM_OUTAGE_SECS` change the room).

use std::time::Duration;

use ratekeeper_core::{AnyStore, MemoryStore};
use ratekeeper_testkit::redis::RedisServer;
use ratekeeper_tests::room::{Plan, run};

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let phones = env("ROOM_PHONES", 100) as usize;
    let plan = Plan {
        phones,
        impatient: phones / 10,
        poll_every: Duration::from_secs(10),
        impatient_every: Duration::from_secs(2),
        reconnect_every: Duration::from_secs(5),
        before: Duration::from_secs(5),
        outage: Duration::from_secs(env("ROOM_OUTAGE_SECS", 60)),
        after: Duration::from_secs(15),
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    println!(
        "room: {phones} phones behind one IP, {} impatient; {plan:?}",
        plan.impatient
    );
    // `ROOM_STORES=redis` (or `memory`) runs one of the two.
    let stores = std::env::var("ROOM_STORES").unwrap_or_else(|_| "memory,redis".to_owned());
    for name in stores.split(',') {
        let redis = (name == "redis").then(RedisServer::start);
        let r = rt.block_on(async {
            let store = match &redis {
                Some(server) => server.store(), // built inside the runtime
                None => AnyStore::Memory(MemoryStore::new()),
            };
            run(store, plan.clone()).await
        });
        println!("\n== {name}\n{}", r.lines(phones));
        for m in &r.miscounted {
            println!("{name}: miscounted {m}");
        }
    }
}
