//! Feature `metrics`: counters per limit name, and the store latency histogram.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use rate_limit_core::store::{BoxStore, StoreErrorKind};
use rate_limit_core::testing::{FaultyStore, Mode};
use rate_limit_core::{AnyStore, FailurePolicy, Limiter};
use rate_limit_tower::extract::Global;
use rate_limit_tower::{Answering, RateLimitLayer, Rule};

use crate::support::*;

/// One recorder for the whole test binary; tests use limit names of their own.
fn snapshotter() -> &'static Snapshotter {
    static S: OnceLock<Snapshotter> = OnceLock::new();
    S.get_or_init(|| {
        let recorder = DebuggingRecorder::new();
        let s = recorder.snapshotter();
        recorder.install().expect("the first recorder");
        s
    })
}

/// Snapshots consume what they read, and tests run in parallel: every snapshot is added
/// to one tally, keyed by (metric, limit label).
fn tally() -> std::sync::MutexGuard<'static, HashMap<(String, String), u64>> {
    static TALLY: OnceLock<Mutex<HashMap<(String, String), u64>>> = OnceLock::new();
    let mut t = TALLY.get_or_init(Mutex::default).lock().unwrap();
    for (k, _, _, v) in snapshotter().snapshot().into_vec() {
        let key = k.key();
        let limit = key
            .labels()
            .find(|l| l.key() == "limit")
            .map_or(String::new(), |l| l.value().to_owned());
        let n = match v {
            DebugValue::Counter(c) => c,
            DebugValue::Histogram(h) => h.len() as u64,
            _ => 0,
        };
        *t.entry((key.name().to_owned(), limit)).or_default() += n;
    }
    t
}

fn counter(name: &str, limit: &str) -> u64 {
    tally()
        .get(&(name.to_owned(), limit.to_owned()))
        .copied()
        .unwrap_or(0)
}

#[tokio::test]
async fn allowed_limited_and_shadowed_are_counted_per_limit() {
    snapshotter();
    let (layer, _) = fresh();
    let svc = app(&layer.rule(Rule::new(minute("metrics-a", 2), Global)));
    for _ in 0..5 {
        send(svc.clone(), from("1.2.3.4:5").body(empty()).unwrap()).await;
    }
    assert_eq!(counter("rate_limit_allowed_total", "metrics-a"), 2);
    assert_eq!(counter("rate_limit_limited_total", "metrics-a"), 3);
    let (layer, _) = fresh();
    let svc = app(&layer
        .rule(Rule::new(minute("metrics-s", 1), Global))
        .answering(Answering::new().shadow(true)));
    for _ in 0..3 {
        send(svc.clone(), from("1.2.3.4:5").body(empty()).unwrap()).await;
    }
    assert_eq!(counter("rate_limit_shadow_limited_total", "metrics-s"), 2);
    assert!(
        counter("rate_limit_store_seconds", "") >= 8,
        "one latency per store call"
    );
}

#[tokio::test(start_paused = true)]
async fn store_errors_and_fallbacks_are_counted() {
    snapshotter();
    let store = FaultyStore::new();
    store.set(Mode::Fails(StoreErrorKind::Indeterminate));
    let layer = RateLimitLayer::new(Limiter::new(AnyStore::Boxed(BoxStore::new(store))));
    let svc = app(&layer
        .rule(Rule::new(minute("metrics-f", 5), Global).on_store_error(FailurePolicy::Memory)));
    for _ in 0..3 {
        send(svc.clone(), from("1.2.3.4:5").body(empty()).unwrap()).await;
    }
    assert_eq!(counter("rate_limit_store_error_total", "metrics-f"), 3);
    assert_eq!(counter("rate_limit_fallback_total", "metrics-f"), 3);
    assert_eq!(
        counter("rate_limit_allowed_total", "metrics-f"),
        3,
        "counted in memory"
    );
}
