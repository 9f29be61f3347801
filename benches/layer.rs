//! The layer's own cost, without sockets: an axum `Router` called in process, bare, with
//! this crate's layer (memory store, token bucket) and with tower_governor, on allowed
//! traffic (10 000 keys) and refused traffic (one exhausted key). Both limiters send their
//! rate-limit headers.
//!
//! `cargo bench -p ratekeeper-benches --bench layer`
//!
//! For an instruction count (repeatable, unlike time on a shared VM), run one case a fixed
//! number of times under callgrind:
//!
//! ```text
//! LAYER_RUN=ours-allowed:200000 valgrind --tool=callgrind target/release/deps/layer-*
//! (`LAYER_METRICS=1`: with a Prometheus recorder installed)
//! ```
//!
//! and subtract the same run with `bare-allowed`: the difference ÷ 200 000 is the layer's
//! instructions per request. `scripts/rules-curve.sh` measures the steady state for 1 to 8
//! rules on both stores and plots it (`LAYER_PLOT=<csv>:<svg>`).

use std::hint::black_box;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use criterion::{Criterion, criterion_group};
use http::Request;
use http_body_util::BodyExt;
use tower::{Service, ServiceExt};

mod common;
use common::Peer;

#[path = "layer/curve.rs"]
mod curve;

const KEYS: usize = 10_000;

fn keys(refused: bool) -> Vec<http::HeaderValue> {
    if refused {
        vec![http::HeaderValue::from_static("hot")]
    } else {
        (0..KEYS)
            .map(|i| http::HeaderValue::try_from(format!("key-{i:08}")).expect("ascii"))
            .collect()
    }
}

/// Sends `n` requests through `router`, one after another; returns the 2xx and 429 counts.
/// With `LAYER_GRPC=1` each request is a gRPC call (`content-type: application/grpc`): the
/// layer's gRPC path, refusals answered as gRPC statuses.
async fn drive(router: &mut Router, keys: &[http::HeaderValue], n: u64) -> [u64; 2] {
    let mut statuses = [0u64; 2];
    let content_type = if std::env::var("LAYER_GRPC").as_deref() == Ok("1") {
        "application/grpc"
    } else {
        "text/plain"
    };
    for i in 0..n {
        let key = &keys[(i as usize * 7_919) % keys.len()];
        let req = Request::get("/")
            .header("host", "bench")
            .header("x-key", key.clone())
            .header("content-type", content_type)
            .body(Body::empty())
            .expect("valid request");
        let svc = ServiceExt::<Request<Body>>::ready(router)
            .await
            .expect("router is always ready");
        let resp = svc.call(req).await.expect("infallible");
        let refused = resp.status() == http::StatusCode::TOO_MANY_REQUESTS
            || resp.headers().get("grpc-status").is_some_and(|s| s == "8");
        statuses[usize::from(refused)] += 1;
        black_box(resp.into_body().collect().await.ok());
    }
    statuses
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
}

/// `LAYER_RUN=<peer>-<allowed|refused>:<n>`: one case, `n` requests, then exit.
fn run_one(spec: &str) {
    let (case, n) = spec.split_once(':').expect("LAYER_RUN=<case>:<n>");
    let n: u64 = n.parse().expect("a request count");
    let (peer, traffic) = case.rsplit_once('-').expect("<peer>-<traffic>");
    let peer = Peer::parse(peer)
        .expect("bare, noop-layer, ours, governor, ours-redis or ours-redis-lease");
    let refused = traffic == "refused";
    let rt = runtime();
    // `LAYER_METRICS=1`: a Prometheus recorder installed, as a service exporting its
    // metrics has (the layer's feature `metrics` is on in the examples either way).
    let _metrics = (std::env::var("LAYER_METRICS").as_deref() == Ok("1")).then(|| {
        metrics_exporter_prometheus::PrometheusBuilder::new()
            .install_recorder()
            .expect("the only recorder")
    });
    // The Redis peers count in a redis-server of the bench's own (one request at a time:
    // the client side of one uncoalesced check per request).
    let redis = peer
        .on_redis()
        .then(|| ratekeeper_testkit::redis::RedisServer::try_start().expect("redis-server"));
    let url = redis
        .as_ref()
        .map(ratekeeper_testkit::redis::RedisServer::url);
    let mut r = rt.block_on(async { peer.router(refused, url.as_deref()) });
    let keys = keys(refused);
    let statuses = rt.block_on(async {
        if refused {
            // Exhaust the key before counting.
            drive(&mut r, &keys, 1).await;
        }
        drive(&mut r, &keys, n).await
    });
    println!(
        "{case}: {n} requests, 2xx {} 429 {}",
        statuses[0], statuses[1]
    );
}

fn bench(c: &mut Criterion) {
    let rt = runtime();
    for refused in [false, true] {
        let mut g = c.benchmark_group(if refused { "refused" } else { "allowed" });
        g.measurement_time(Duration::from_secs(3));
        for peer in [Peer::Bare, Peer::Noop, Peer::Ours, Peer::Governor] {
            if refused && peer == Peer::Bare {
                continue;
            }
            let mut r = peer.router(refused, None);
            let keys = keys(refused);
            rt.block_on(drive(&mut r, &keys, 1));
            g.bench_function(peer.name(), |b| {
                b.iter_custom(|iters| {
                    rt.block_on(async {
                        let t = Instant::now();
                        drive(&mut r, &keys, iters).await;
                        t.elapsed()
                    })
                });
            });
        }
        g.finish();
    }
}

criterion_group!(benches, bench);

fn main() {
    if let Ok(spec) = std::env::var("LAYER_PLOT") {
        curve::plot(&spec);
        return;
    }
    if let Ok(spec) = std::env::var("LAYER_RUN") {
        run_one(&spec);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
