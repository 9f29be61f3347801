//! The room test, small: 20 phones behind one IP on quiz-night's answer socket; the socket
//! server becomes unreachable and every phone falls back to polling at the same instant;
//! then it returns and every phone goes back to it. The full room (100 phones, minutes)
//! is `cargo bench -p ratekeeper-benches --bench room`, with its figures in RELIABILITY.md.

use std::time::Duration;

use ratekeeper_core::{AnyStore, MemoryStore};
use ratekeeper_tests::redis::RedisServer;
use ratekeeper_tests::room::{Plan, run};

const PHONES: usize = 20;
const IMPATIENT: usize = 6;

async fn room(store: AnyStore) {
    let plan = Plan {
        phones: PHONES,
        impatient: IMPATIENT,
        poll_every: Duration::from_secs(3),
        // 20 polls in 8 s: the poll limit (20 a minute) refuses them.
        impatient_every: Duration::from_millis(400),
        reconnect_every: Duration::from_secs(2),
        before: Duration::from_secs(1),
        outage: Duration::from_secs(12),
        after: Duration::from_secs(5),
    };
    let r = run(store, plan).await;
    println!("{}", r.lines(PHONES));
    assert_eq!(r.global_refusals, 0, "the bot guard refused the room");
    assert_eq!(
        r.burst, PHONES as u64,
        "every phone polls at the instant its socket drops"
    );
    assert!(
        r.phones_limited >= 1 && r.phones_limited <= IMPATIENT,
        "{}",
        r.lines(PHONES)
    );
    assert!(
        r.retry_afters.len() >= 2,
        "jitter spreads the refused: {:?}",
        r.retry_afters
    );
    assert_eq!(r.back_after.len(), PHONES, "every phone back on a socket");
    assert!(r.back_after.iter().all(|&s| s < 4.0), "{:?}", r.back_after);
    assert_eq!(
        r.answers,
        4 * PHONES as u64,
        "three answers over the socket, one by POST"
    );
    assert!(r.miscounted.is_empty(), "{:#?}", r.miscounted);
}

#[tokio::test]
async fn a_room_falls_back_to_polling_and_returns_on_memory() {
    room(AnyStore::Memory(MemoryStore::new())).await;
}

#[tokio::test]
async fn a_room_falls_back_to_polling_and_returns_on_redis() {
    let redis = RedisServer::start();
    room(redis.store()).await;
}
