//! A guard on the hot path: heap allocations per allowed request through the layer on the
//! memory store, over bare axum, counted by a counting global allocator (`stats_alloc`).
//!
//! The count is deterministic: one thread, keys seen before the measured requests, no
//! background task. The bounds are the figures reached (issue "The hot path"); a change
//! that adds an allocation to every request fails here, and one that removes some should
//! lower the bound.

use std::alloc::System;

use axum::Router;
use axum::body::Body;
use http::Request;
use http_body_util::BodyExt;
use ratekeeper_core::top::TopSettings;
use ratekeeper_examples::bench_server::{BenchConfig, app, bare_app};
use ratekeeper_tower::HeaderStyle;
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};
use tower::ServiceExt;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Keys the measured requests walk (each seen once before measuring).
const KEYS: usize = 100;
/// Measured requests per case.
const REQUESTS: usize = 1_000;

/// The most allocations the layer may add to an allowed request over bare axum: with the
/// default headers (the trio and the IETF pair), and with the IETF pair only. Two of them
/// are any `Router::layer`'s (a no-op layer costs them too: axum clones the layered route
/// per request). The `metrics` feature is on (this crate turns it on, as the workspace's
/// `--all-features` run does) with a real recorder installed (Prometheus): each series'
/// handle is kept, so counting adds nothing (a memory store's check is not timed, so no
/// histogram sample either). The decision's record rides inline in the
/// response future (one limit admitted: four numbers, no box). The fraction is also the
/// header values' arena: one 4 KiB buffer every ~100 values. The trio's one more is the
/// header map growing past six headers.
const MAX_EXTRA_DEFAULT: f64 = 3.1;
const MAX_EXTRA_IETF: f64 = 2.1;

fn request(i: usize) -> Request<Body> {
    Request::builder()
        .uri("/")
        .header("x-key", format!("k{}", i % KEYS))
        .body(Body::empty())
        .expect("a valid request")
}

/// Allocations per request of `router`, after one warm pass over the keys.
async fn allocations_per_request(router: Router) -> f64 {
    for i in 0..KEYS {
        let r = router
            .clone()
            .oneshot(request(i))
            .await
            .expect("infallible");
        assert!(r.status().is_success(), "{}", r.status());
        let _ = r.into_body().collect().await;
    }
    let requests: Vec<_> = (0..REQUESTS).map(request).collect();
    let region = Region::new(GLOBAL);
    for req in requests {
        let r = router.clone().oneshot(req).await.expect("infallible");
        let _ = r.into_body().collect().await;
    }
    let change = region.change();
    change.allocations as f64 / REQUESTS as f64
}

fn ours(headers: HeaderStyle, heavy_hitters: Option<TopSettings>) -> Router {
    app(&BenchConfig {
        headers,
        heavy_hitters,
        ..BenchConfig::default()
    })
    .expect("a valid bench config")
    .with_state(())
}

#[test]
fn an_allowed_request_through_the_layer_allocates_no_more_than_its_bound() {
    // A real recorder (Prometheus), as a service exporting its metrics has: every series
    // the layer counts goes to it.
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    metrics::set_global_recorder(recorder).expect("the only recorder");
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    // Routes built once, as `axum::serve` builds them (`with_state(())`), not per request.
    let bare = rt.block_on(allocations_per_request(bare_app().with_state(())));
    let noop = bare_app()
        .layer(tower::util::MapResponseLayer::new(
            |r: axum::response::Response| r,
        ))
        .with_state(());
    let noop = rt.block_on(allocations_per_request(noop)) - bare;
    let default = rt.block_on(allocations_per_request(ours(HeaderStyle::default(), None))) - bare;
    let ietf = rt.block_on(allocations_per_request(ours(HeaderStyle::Ietf, None))) - bare;
    // Heavy hitters tracked (the admin's sketch), with 16 counters for the 100 keys: most
    // requests take the smallest counter from another key. No allocation once the sketch
    // is built (at the warm pass).
    let top = Some(TopSettings::new(16, std::time::Duration::from_secs(60)));
    let tracked = rt.block_on(allocations_per_request(ours(HeaderStyle::Ietf, top))) - bare;
    let scrape = handle.render();
    assert!(
        scrape.contains("rate_limit_decisions_total{limit=\"bench\",outcome=\"allowed\"}"),
        "the recorder saw the layer: {scrape}"
    );
    println!(
        "allocations per allowed request over bare axum ({bare:.2}): a no-op layer {noop:.2}, \
         ours with the default headers {default:.2}, with the IETF pair {ietf:.2}, \
         the IETF pair with heavy hitters tracked {tracked:.2}"
    );
    assert!(
        tracked <= MAX_EXTRA_IETF,
        "IETF pair, heavy hitters tracked: {tracked:.2} allocations over bare axum (bound {MAX_EXTRA_IETF})"
    );
    assert!(
        default <= MAX_EXTRA_DEFAULT,
        "default headers: {default:.2} allocations over bare axum (bound {MAX_EXTRA_DEFAULT})"
    );
    assert!(
        ietf <= MAX_EXTRA_IETF,
        "IETF pair: {ietf:.2} allocations over bare axum (bound {MAX_EXTRA_IETF})"
    );
}
