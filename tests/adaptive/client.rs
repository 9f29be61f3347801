//! The client layer (`ratekeeper_tower::client::PaceLayer`) over TCP: three workers, each
//! its own pacer on one store, against an upstream that allows 50 a second and says so (our
//! own layer, IETF fields): after the first second, 429s at most 1% of calls and the
//! combined rate at least 80% of 50/s, on memory, Redis and a Cluster; an upstream that only
//! answers a bare 429 is found by AIMD; a `Retry-After` of a week is held to the layer's
//! bound; a worker killed mid-run leaves the others the whole rate.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use http::StatusCode;
use ratekeeper_core::pace::{Aimd, SharedPacer};
use ratekeeper_core::{AnyStore, MemoryStore};
use ratekeeper_tests::Server;
use ratekeeper_tests::redis::{RedisCluster, RedisServer};
use ratekeeper_tower::HeaderStyle;
use ratekeeper_tower::client::{PaceError, PaceLayer};
use tokio::time::Instant;
use tower::{Service, ServiceBuilder, ServiceExt};

pub(crate) type Client = tower::util::BoxCloneService<
    http::Request<String>,
    http::Response<reqwest::Body>,
    PaceError<reqwest::Error>,
>;

/// reqwest, paced.
pub(crate) fn client(pacer: SharedPacer, tune: impl FnOnce(PaceLayer) -> PaceLayer) -> Client {
    tower::util::BoxCloneService::new(
        ServiceBuilder::new()
            .layer(tune(PaceLayer::new(pacer)))
            .service(ratekeeper_tests::reqwest_service()),
    )
}

fn aimd() -> Aimd {
    Aimd {
        initial: 5.0,
        period: Duration::from_secs(1),
        ..Aimd::default()
    }
}

#[derive(Default)]
struct Tally {
    ok: AtomicU64,
    refused: AtomicU64,
}

/// Calls `url` through `c` until `until`, counting answers after `from`.
async fn work(mut c: Client, url: String, from: Instant, until: Instant, tally: Arc<Tally>) {
    while Instant::now() < until {
        let req = http::Request::get(&url).body(String::new()).unwrap();
        let Ok(answer) = c.ready().await.unwrap().call(req).await else {
            continue;
        };
        if Instant::now() < from {
            continue;
        }
        match answer.status() {
            StatusCode::OK => tally.ok.fetch_add(1, Ordering::Relaxed),
            _ => tally.refused.fetch_add(1, Ordering::Relaxed),
        };
    }
}

async fn three_workers_under_a_stated_limit(store: impl Fn() -> AnyStore, tag: &str) {
    let up = ratekeeper_tests::upstream(50, HeaderStyle::Ietf).await;
    let url = up.url("/items");
    let start = Instant::now();
    let (from, until) = (
        start + Duration::from_secs(1),
        start + Duration::from_secs(6),
    );
    let tally = Arc::new(Tally::default());
    let workers: Vec<_> = (0..3)
        .map(|_| {
            let pacer = SharedPacer::new(store(), &format!("{tag}-up"), aimd()).unwrap();
            tokio::spawn(work(
                client(pacer, |l| l),
                url.clone(),
                from,
                until,
                tally.clone(),
            ))
        })
        .collect();
    for w in workers {
        w.await.unwrap();
    }
    let (ok, refused) = (
        tally.ok.load(Ordering::Relaxed),
        tally.refused.load(Ordering::Relaxed),
    );
    let rate = ok as f64 / 5.0;
    let share = refused as f64 / (ok + refused).max(1) as f64;
    println!(
        "{tag}: after the first second, {rate:.1} calls/s admitted ({:.0}% of 50), {refused} refused ({:.2}%)",
        rate * 2.0,
        share * 100.0
    );
    assert!(rate >= 40.0, "{tag}: {rate}/s");
    assert!(share <= 0.01, "{tag}: {refused} of {}", ok + refused);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_workers_stay_under_a_stated_limit_on_memory() {
    let store = AnyStore::Memory(MemoryStore::new());
    three_workers_under_a_stated_limit(|| store.clone(), "client-memory").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_workers_stay_under_a_stated_limit_on_redis() {
    let redis = RedisServer::start();
    three_workers_under_a_stated_limit(|| redis.store(), "client-redis").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_workers_stay_under_a_stated_limit_on_a_cluster() {
    let cluster = RedisCluster::start();
    three_workers_under_a_stated_limit(|| cluster.store(), "client-cluster").await;
}

/// An upstream that answers a bare 429 past 20 calls a second, saying nothing else.
async fn silent_upstream(per_second: u64) -> Server {
    let window = Arc::new((AtomicU64::new(0), AtomicU64::new(0)));
    let t0 = std::time::Instant::now();
    let app = Router::new().route(
        "/items",
        get(move || {
            let window = window.clone();
            async move {
                let second = t0.elapsed().as_secs();
                if window.0.swap(second, Ordering::Relaxed) != second {
                    window.1.store(0, Ordering::Relaxed);
                }
                if window.1.fetch_add(1, Ordering::Relaxed) < per_second {
                    (StatusCode::OK, "item")
                } else {
                    (StatusCode::TOO_MANY_REQUESTS, "")
                }
            }
        }),
    );
    Server::start(app).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_that_only_refuses_is_found_by_aimd() {
    let up = silent_upstream(20).await;
    let pacer = SharedPacer::new(
        AnyStore::Memory(MemoryStore::new()),
        "silent",
        Aimd {
            initial: 60.0,
            period: Duration::from_millis(500),
            ..Aimd::default()
        },
    )
    .unwrap();
    let start = Instant::now();
    let tally = Arc::new(Tally::default());
    let until = start + Duration::from_secs(6);
    work(
        client(pacer.clone(), |l| l),
        up.url("/items"),
        start,
        until,
        tally.clone(),
    )
    .await;
    let (ok, refused) = (
        tally.ok.load(Ordering::Relaxed),
        tally.refused.load(Ordering::Relaxed),
    );
    println!(
        "silent upstream (20/s): {refused} refusals in 6 s, {ok} admitted, the rate at {:.1}/s",
        pacer.rate("127.0.0.1")
    );
    assert!(refused <= 40, "found within 40 refusals: {refused}");
    assert!(ok as f64 / 6.0 >= 10.0, "{ok} admitted");
}

#[tokio::test]
async fn a_retry_after_of_a_week_is_held_to_the_layers_bound() {
    let app = Router::new().route(
        "/items",
        get(|| async {
            (
                StatusCode::TOO_MANY_REQUESTS,
                [("retry-after", "604800")],
                "",
            )
        }),
    );
    let up = Server::start(app).await.unwrap();
    let pacer = SharedPacer::new(AnyStore::Memory(MemoryStore::new()), "week", aimd()).unwrap();
    let mut c = client(pacer, |l| {
        l.max_pause(Duration::from_secs(2))
            .max_wait(Duration::from_millis(500))
    });
    let req = || {
        http::Request::get(up.url("/items"))
            .body(String::new())
            .unwrap()
    };
    let first = c.ready().await.unwrap().call(req()).await.unwrap();
    assert_eq!(first.status(), 429);
    match c.ready().await.unwrap().call(req()).await {
        Err(PaceError::WouldWait { wait, .. }) => {
            println!("a week asked, {wait:?} held");
            assert!(
                wait <= Duration::from_secs(2) && wait > Duration::from_millis(1_500),
                "{wait:?}"
            );
        }
        other => panic!("{:?}", other.map(|r| r.status())),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_mid_run_leaves_the_others_the_whole_rate() {
    let redis = RedisServer::start();
    let up = ratekeeper_tests::upstream(50, HeaderStyle::Ietf).await;
    let url = up.url("/items");
    let start = Instant::now();
    let until = start + Duration::from_secs(5);
    let after = Arc::new(Tally::default());
    let mut workers: Vec<_> = (0..3)
        .map(|_| {
            let pacer = SharedPacer::new(redis.store(), "killed", aimd()).unwrap();
            let from = start + Duration::from_secs(3);
            tokio::spawn(work(
                client(pacer, |l| l),
                url.clone(),
                from,
                until,
                after.clone(),
            ))
        })
        .collect();
    tokio::time::sleep(Duration::from_secs(2)).await;
    workers.pop().unwrap().abort();
    for w in workers {
        w.await.unwrap();
    }
    let ok = after.ok.load(Ordering::Relaxed);
    println!(
        "the two left: {:.1} calls/s in the last 2 s",
        ok as f64 / 2.0
    );
    assert!(ok as f64 / 2.0 >= 40.0, "{ok} in 2 s");
    assert_eq!(after.refused.load(Ordering::Relaxed), 0);
}
