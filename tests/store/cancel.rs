//! A take of an in-flight slot whose caller goes away (a cancelled request, a reset
//! stream) before it reads the answer: the take may still land, and its slot is released
//! by id once it has, never left held by nobody for its whole TTL. Cancelled at each point
//! of the take, on a standalone server and a Cluster.

use std::future::Future;
use std::task::Poll;
use std::time::Duration;

use ratekeeper_core::limiter::SlotAnswer;
use ratekeeper_core::{AnyStore, FailurePolicy, InFlight, Limiter, Principal};
use ratekeeper_tests::redis::{RedisCluster, RedisServer};
use tokio::time::Instant;

use crate::support::{slots_held, standalone};

/// Where the taker goes away.
#[derive(Debug, Clone, Copy)]
enum Cancel {
    /// Polled once and dropped: the call is queued for the connection, not yet written.
    BeforeItLeaves,
    /// The server frozen: the call is on the wire and not yet run; the server runs it on
    /// the thaw.
    InFlight,
    /// The call written and the thread then blocked: the server runs it and answers, and
    /// the taker is dropped with that answer unread.
    LandedUnread,
}

async fn cancel_at_every_point(store: AnyStore, servers: &[RedisServer]) {
    // A time budget longer than any cancel point: the taker leaves first, every time.
    let limiter = Limiter::builder(store)
        .timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let watch = InFlight::new("cancel-watch", 1, Duration::from_secs(30)).unwrap();
    for (i, cancel) in [
        Cancel::BeforeItLeaves,
        Cancel::InFlight,
        Cancel::LandedUnread,
    ]
    .into_iter()
    .enumerate()
    {
        let key = watch.slots(Principal::user(format!("viewer-{i}")));
        // The connection is up before the cancel (a take and its release).
        match limiter.take_slot(&key, FailurePolicy::Closed).await {
            SlotAnswer::Taken(slot) => drop(slot),
            other => panic!("{cancel:?}: {other:?}"),
        }
        until_free(servers, cancel, Duration::from_secs(3)).await;
        let mut take = Box::pin(limiter.take_slot(&key, FailurePolicy::Closed));
        match cancel {
            Cancel::BeforeItLeaves => assert!(poll_once(take.as_mut()).await.is_pending()),
            Cancel::InFlight => {
                servers.iter().for_each(RedisServer::pause);
                let cut = tokio::time::timeout(Duration::from_millis(100), take.as_mut()).await;
                assert!(cut.is_err(), "{cancel:?}: answered while frozen");
            }
            Cancel::LandedUnread => {
                assert!(poll_once(take.as_mut()).await.is_pending());
                // The connection's task writes the call; then this (only) thread blocks
                // while the server runs it and answers.
                for _ in 0..20 {
                    tokio::task::yield_now().await;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        drop(take);
        if matches!(cancel, Cancel::InFlight) {
            tokio::time::sleep(Duration::from_millis(200)).await;
            servers.iter().for_each(RedisServer::resume);
        }
        let freed = until_free(servers, cancel, Duration::from_secs(3)).await;
        println!("{cancel:?}: the cancelled take's slot was free {freed:?} after the cancel");
        match limiter.take_slot(&key, FailurePolicy::Closed).await {
            SlotAnswer::Taken(slot) => drop(slot),
            other => panic!("{cancel:?}: the next take was refused: {other:?}"),
        }
    }
}

/// Polls `fut` once; whether it finished.
async fn poll_once<F: Future>(mut fut: std::pin::Pin<&mut F>) -> Poll<()> {
    std::future::poll_fn(|cx| Poll::Ready(fut.as_mut().poll(cx).map(|_| ()))).await
}

/// Waits until no in-flight slot is held on any of `servers`, at most `bound` (the slots'
/// TTL is 30 s: a slot left to its lease fails this).
async fn until_free(servers: &[RedisServer], cancel: Cancel, bound: Duration) -> Duration {
    let start = Instant::now();
    // Let a take that is still on its way land first.
    tokio::time::sleep(Duration::from_millis(100)).await;
    while slots_held(servers) > 0 {
        assert!(
            start.elapsed() < bound,
            "{cancel:?}: a slot is still held {:?} after its taker went away",
            start.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    start.elapsed()
}

#[tokio::test]
async fn a_cancelled_take_leaves_no_slot_on_redis() {
    let server = RedisServer::start();
    cancel_at_every_point(standalone(&server.url()), std::slice::from_ref(&server)).await;
}

#[tokio::test]
async fn a_cancelled_take_leaves_no_slot_on_a_cluster() {
    let cluster = RedisCluster::start();
    cancel_at_every_point(cluster.store(), cluster.nodes()).await;
}
