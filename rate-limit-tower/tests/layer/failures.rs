//! Store failures: each rule's policy, the strictest wins, on paused time.

use std::time::Duration;

use http::StatusCode;
use ratekeeper_core::store::{BoxStore, StoreErrorKind};
use ratekeeper_core::testing::{FaultyStore, Mode};
use ratekeeper_core::{AnyStore, FailurePolicy, Limiter};
use ratekeeper_tower::extract::Global;
use ratekeeper_tower::{RateLimitLayer, Rule};
use tokio::time::Instant;

use crate::support::*;

fn faulty(mode: Mode) -> (RateLimitLayer, FaultyStore) {
    let store = FaultyStore::new();
    store.set(mode);
    let limiter = Limiter::new(AnyStore::Boxed(BoxStore::new(store.clone())));
    (RateLimitLayer::new(limiter), store)
}

#[tokio::test(start_paused = true)]
async fn fail_closed_answers_503_within_the_timeout() {
    for mode in [Mode::Hangs, Mode::Fails(StoreErrorKind::Indeterminate)] {
        let (layer, _) = faulty(mode);
        let svc = app(&layer.rule(Rule::new(minute("closed", 5), Global)));
        let t0 = Instant::now();
        let r = send(svc, from("1.2.3.4:5").body(empty()).unwrap()).await;
        assert!(
            t0.elapsed() <= Duration::from_millis(500 + 250),
            "{:?}",
            t0.elapsed()
        );
        assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{mode:?}");
        assert_eq!(r.header("retry-after"), Some("1"));
        assert!(r.body.contains("\"error\""));
        assert!(r.header("ratelimit-limit").is_none());
    }
}

#[tokio::test(start_paused = true)]
async fn fail_open_lets_the_request_through_without_headers() {
    let (layer, _) = faulty(Mode::Hangs);
    let svc =
        app(&layer.rule(Rule::new(minute("open", 1), Global).on_store_error(FailurePolicy::Open)));
    for _ in 0..3 {
        let r = send(svc.clone(), from("1.2.3.4:5").body(empty()).unwrap()).await;
        assert_eq!(r.status, StatusCode::OK);
        assert!(r.header("ratelimit-limit").is_none() && r.header("retry-after").is_none());
    }
}

#[tokio::test(start_paused = true)]
async fn memory_fallback_keeps_limiting_and_the_cool_down_skips_the_store() {
    let (layer, store) = faulty(Mode::Hangs);
    let svc =
        app(&layer.rule(Rule::new(minute("mem", 2), Global).on_store_error(FailurePolicy::Memory)));
    let mut codes = Vec::new();
    let t0 = Instant::now();
    for _ in 0..4 {
        codes.push(
            send(svc.clone(), from("1.2.3.4:5").body(empty()).unwrap())
                .await
                .status
                .as_u16(),
        );
    }
    assert_eq!(codes, [200, 200, 429, 429]);
    assert_eq!(
        store.calls(),
        1,
        "one timeout, then skipped during the cool-down"
    );
    assert_eq!(
        t0.elapsed(),
        Duration::from_millis(500),
        "only the first request waited"
    );
}

#[tokio::test(start_paused = true)]
async fn the_strictest_policy_of_a_chain_wins() {
    for (policies, expected) in [
        (
            [FailurePolicy::Open, FailurePolicy::Closed],
            StatusCode::SERVICE_UNAVAILABLE,
        ),
        ([FailurePolicy::Open, FailurePolicy::Memory], StatusCode::OK),
        ([FailurePolicy::Open, FailurePolicy::Open], StatusCode::OK),
    ] {
        let (layer, _) = faulty(Mode::Fails(StoreErrorKind::Indeterminate));
        let layer = layer
            .rule(Rule::new(minute("a", 5), Global).on_store_error(policies[0]))
            .rule(Rule::new(minute("b", 5), Global).on_store_error(policies[1]));
        let r = send(app(&layer), from("1.2.3.4:5").body(empty()).unwrap()).await;
        assert_eq!(r.status, expected, "{policies:?}");
        // Memory answers with headers: it did count.
        assert_eq!(
            r.header("ratelimit-limit").is_some(),
            policies.contains(&FailurePolicy::Memory)
        );
    }
}

#[tokio::test(start_paused = true)]
async fn the_store_recovers_without_a_restart() {
    let (layer, store) = faulty(Mode::Fails(StoreErrorKind::NotExecuted));
    let svc = app(&layer.rule(Rule::new(minute("r", 5), Global)));
    assert_eq!(
        send(svc.clone(), from("1.2.3.4:5").body(empty()).unwrap())
            .await
            .status,
        StatusCode::SERVICE_UNAVAILABLE
    );
    store.set(Mode::Works);
    tokio::time::advance(Duration::from_secs(1)).await;
    let r = send(svc, from("1.2.3.4:5").body(empty()).unwrap()).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.header("ratelimit-remaining"), Some("4"));
}
