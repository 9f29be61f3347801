//! What holding a request costs the server (delay instead of refuse, `Limit::delayed`):
//! the layer on an axum `Router`, called in process (no sockets, so the figures are the
//! server's alone), memory store.
//!
//! - CPU per request, allowed at once vs held 1 ms (every request over its principal's
//!   threshold, one principal per request so no queue serialises them), 1 000 in flight:
//!   the process's CPU time (`/proc/self/stat`) ÷ requests.
//! - Memory per held request: 10 000 requests held at once (a 60 s hold), the process's
//!   resident set before and while they wait, ÷ 10 000; and the same for 10 000 requests
//!   waiting 60 s in a handler with no limiter (what any pending request costs here: the
//!   task, the request, the router's future), so the difference is what holding adds.
//!
//! `cargo bench -p ratekeeper-benches --bench held`

use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::routing::get;
use http::Request;
use ratekeeper_core::{Delay, Limit, PrincipalKind};
use ratekeeper_tower::extract::HeaderKey;
use ratekeeper_tower::{RateLimitLayer, Rule};
use tokio::task::JoinSet;
use tower::ServiceExt;

/// User and system CPU time of this process so far.
fn cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("Linux /proc");
    // Fields after the command name (which ends with ')'): utime is the 14th, stime 15th.
    let rest = &stat[stat.rfind(')').expect("a command name") + 2..];
    let f: Vec<u64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    // Clock ticks of 10 ms (USER_HZ = 100 on Linux).
    Duration::from_millis((f[11] + f[12]) * 10)
}

fn router(delay: Option<Duration>) -> Router {
    let mut limit =
        Limit::fixed_window("held", 1_000_000, Duration::from_secs(3_600)).expect("valid");
    if let Some(d) = delay {
        limit = limit
            .delayed(Delay::linear(0, d, d).expect("valid"))
            .expect("valid");
    }
    let layer = RateLimitLayer::in_memory()
        .rule(Rule::new(
            limit,
            HeaderKey::new(http::HeaderName::from_static("x-key"), PrincipalKind::User),
        ))
        .max_held(1_000_000);
    Router::new().route("/", get(|| async { "ok" }).route_layer(layer))
}

fn request(i: u64) -> Request<Body> {
    Request::get("/")
        .header("x-key", format!("k{i}"))
        .body(Body::empty())
        .expect("valid request")
}

/// CPU per request for `n` requests, `in_flight` at a time.
async fn cpu_per_request(router: Router, n: u64, in_flight: u64) -> Duration {
    let started = cpu();
    let mut tasks = JoinSet::new();
    for i in 0..n {
        if tasks.len() as u64 >= in_flight {
            tasks.join_next().await;
        }
        let r = router.clone();
        tasks.spawn(async move {
            let resp = r.oneshot(request(i)).await.expect("infallible");
            assert_eq!(resp.status(), http::StatusCode::OK);
        });
    }
    while tasks.join_next().await.is_some() {}
    (cpu() - started) / u32::try_from(n).expect("small")
}

/// A router with no limiter whose handler waits a minute.
fn sleeping_router() -> Router {
    Router::new().route(
        "/",
        get(|| async {
            tokio::time::sleep(Duration::from_secs(60)).await;
            "ok"
        }),
    )
}

/// Bytes of resident memory per request, with 10 000 requests pending in `router`.
async fn pending(pid: u32, router: Router) -> u64 {
    let mut tasks = JoinSet::new();
    // One request first, so the router's and the store's first allocations are made.
    let r = router.clone();
    tasks.spawn(async move { drop(r.oneshot(request(u64::MAX)).await) });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = ratekeeper_testkit::rss_kib(pid);
    let n = 10_000u64;
    for i in 0..n {
        let r = router.clone();
        tasks.spawn(async move { drop(r.oneshot(request(i)).await) });
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let during = ratekeeper_testkit::rss_kib(pid);
    tasks.abort_all();
    while tasks.join_next().await.is_some() {}
    during.saturating_sub(before) * 1024 / n
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    rt.block_on(async {
        let n = 200_000;
        // Warm up both.
        cpu_per_request(router(None), 20_000, 1_000).await;
        cpu_per_request(router(Some(Duration::from_millis(1))), 20_000, 1_000).await;
        let allowed = cpu_per_request(router(None), n, 1_000).await;
        let held = cpu_per_request(router(Some(Duration::from_millis(1))), n, 1_000).await;
        println!(
            "cpu per request: allowed {:.2} us, held 1 ms {:.2} us, held / allowed {:.2}",
            allowed.as_secs_f64() * 1e6,
            held.as_secs_f64() * 1e6,
            held.as_secs_f64() / allowed.as_secs_f64()
        );

        let pid = std::process::id();
        let waiting = pending(pid, sleeping_router()).await;
        let held = pending(pid, router(Some(Duration::from_secs(60)))).await;
        println!(
            "memory per pending request at 10 000: waiting in a handler {waiting} B, held by the layer {held} B, holding adds {} B",
            held.saturating_sub(waiting)
        );
    });
}
