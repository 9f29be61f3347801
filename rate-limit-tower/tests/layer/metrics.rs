//! Feature `metrics`: the table of `ratekeeper_tower::metrics`, series by series, and its
//! labels bounded whatever the number of principals.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use ratekeeper_core::store::{BoxStore, StoreErrorKind};
use ratekeeper_core::testing::{FaultyStore, Mode};
use ratekeeper_core::{AnyStore, Delay, FailurePolicy, InFlight, Limit, Limiter, PrincipalKind};
use ratekeeper_tower::access::{Access, List};
use ratekeeper_tower::extract::{ClientIp, Global, HeaderKey};
use ratekeeper_tower::{Answering, BanAnswer, InFlightRule, RateLimitLayer, Rule};

use tower::ServiceExt;

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

/// A series: its name and its labels, `k=v` sorted and joined with `,`.
type Series = (String, String);

/// Snapshots consume what they read, and tests run in parallel: every snapshot is added
/// to one tally.
fn tally() -> std::sync::MutexGuard<'static, HashMap<Series, f64>> {
    static TALLY: OnceLock<Mutex<HashMap<Series, f64>>> = OnceLock::new();
    let mut t = TALLY.get_or_init(Mutex::default).lock().unwrap();
    for (k, _, _, v) in snapshotter().snapshot().into_vec() {
        let key = k.key();
        let mut labels: Vec<String> = key
            .labels()
            .map(|l| format!("{}={}", l.key(), l.value()))
            .collect();
        labels.sort();
        let series = (key.name().to_owned(), labels.join(","));
        #[allow(clippy::cast_precision_loss)]
        match v {
            DebugValue::Counter(c) => *t.entry(series).or_default() += c as f64,
            DebugValue::Histogram(h) => *t.entry(series).or_default() += h.len() as f64,
            // Snapshots swap gauges out too; the layer only moves them by ±1.
            DebugValue::Gauge(g) => *t.entry(series).or_default() += g.into_inner(),
        }
    }
    t
}

/// The value of the series `name{labels}` (labels as written in the table, any order).
fn value(name: &str, labels: &[(&str, &str)]) -> f64 {
    let mut l: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    l.sort();
    tally()
        .get(&(name.to_owned(), l.join(",")))
        .copied()
        .unwrap_or(0.0)
}

/// `n` requests from one address through `layer` around a handler.
async fn requests(layer: &RateLimitLayer, n: usize) {
    let svc = app(layer);
    for _ in 0..n {
        send(svc.clone(), from("1.2.3.4:5").body(empty()).unwrap()).await;
    }
}

fn decisions(limit: &str, outcome: &str) -> f64 {
    value(
        "rate_limit_decisions_total",
        &[("limit", limit), ("outcome", outcome)],
    )
}

#[tokio::test]
async fn decisions_and_near_limit_are_counted_per_limit() {
    snapshotter();
    let (layer, _) = fresh();
    requests(&layer.rule(Rule::new(minute("metrics-a", 2), Global)), 5).await;
    assert_eq!(decisions("metrics-a", "allowed"), 2.0);
    assert_eq!(decisions("metrics-a", "limited"), 3.0);
    // 1 of 2 left is more than a fifth; 0 left is within it.
    assert_eq!(
        value("rate_limit_near_limit_total", &[("limit", "metrics-a")]),
        1.0
    );

    let (layer, _) = fresh();
    requests(
        &layer
            .rule(Rule::new(minute("metrics-s", 1), Global))
            .answering(Answering::new().shadow(true)),
        3,
    )
    .await;
    assert_eq!(decisions("metrics-s", "shadow_limited"), 2.0);
    // Answered in process memory: no store call to time.
    assert_eq!(
        value("rate_limit_store_seconds", &[("store", "memory")]),
        0.0
    );

    // The share is the layer's: half of 4 left or less, after the 2nd, 3rd and 4th.
    let (layer, _) = fresh();
    requests(
        &layer
            .rule(Rule::new(minute("metrics-n", 4), Global))
            .near_limit(0.5),
        4,
    )
    .await;
    assert_eq!(
        value("rate_limit_near_limit_total", &[("limit", "metrics-n")]),
        3.0
    );
}

/// Store errors carry no limit name (their domain is the store's), so this test counts
/// into a recorder of its own: other tests' failing stores, running at the same time,
/// cannot add to its figures.
#[test]
fn store_errors_and_fallbacks_are_counted() {
    let local = DebuggingRecorder::new();
    let snap = local.snapshotter();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    metrics::with_local_recorder(&local, || {
        let store = FaultyStore::new();
        store.set(Mode::Fails(StoreErrorKind::Indeterminate));
        let layer = RateLimitLayer::new(Limiter::new(AnyStore::Boxed(BoxStore::new(store))));
        rt.block_on(requests(
            &layer.rule(
                Rule::new(minute("metrics-f", 5), Global).on_store_error(FailurePolicy::Memory),
            ),
            3,
        ));
    });
    let mut seen: HashMap<(String, Vec<(String, String)>), f64> = HashMap::new();
    for (k, _, _, v) in snap.snapshot().into_vec() {
        let key = k.key();
        let mut labels: Vec<(String, String)> = key
            .labels()
            .map(|l| (l.key().to_owned(), l.value().to_owned()))
            .collect();
        labels.sort();
        #[allow(clippy::cast_precision_loss)]
        let n = match v {
            DebugValue::Counter(c) => c as f64,
            DebugValue::Histogram(h) => h.len() as f64,
            DebugValue::Gauge(g) => g.into_inner(),
        };
        *seen.entry((key.name().to_owned(), labels)).or_default() += n;
    }
    let get = |name: &str, labels: &[(&str, &str)]| {
        let mut l: Vec<(String, String)> = labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        l.sort();
        seen.get(&(name.to_owned(), l)).copied().unwrap_or(0.0)
    };
    let errors: f64 = seen
        .iter()
        .filter(|((name, _), _)| name == "rate_limit_store_errors_total")
        .map(|(_, v)| v)
        .sum();
    assert_eq!(errors, 3.0, "{:?}", seen.keys().collect::<Vec<_>>());
    assert!(
        seen.keys()
            .filter(|(n, _)| n == "rate_limit_store_errors_total")
            .all(|(_, l)| l.contains(&("domain".to_owned(), "store".to_owned())))
    );
    let fallbacks = [("limit", "metrics-f"), ("policy", "memory")];
    assert_eq!(get("rate_limit_fallbacks_total", &fallbacks), 3.0);
    let allowed = [("limit", "metrics-f"), ("outcome", "allowed")];
    assert_eq!(
        get("rate_limit_decisions_total", &allowed),
        3.0,
        "counted in memory"
    );
    // A store of one's own is called, and timed (once: the cool-down answers the rest).
    assert!(get("rate_limit_store_seconds", &[("store", "other")]) >= 1.0);
}

#[tokio::test]
async fn access_lists_and_bans_have_outcomes_of_their_own() {
    snapshotter();
    let before = (
        decisions("access-list", "allowed_by_list"),
        decisions("access-list", "denied_by_list"),
    );
    let access = Access::new(ClientIp::new())
        .allow(List::parse(&["10.0.0.1"]).unwrap())
        .deny(List::parse(&["10.0.0.66"]).unwrap());
    let (layer, _) = fresh();
    let svc = app(&layer
        .rule(Rule::new(minute("metrics-l", 100), Global))
        .access(access));
    send(svc.clone(), from("10.0.0.1:5").body(empty()).unwrap()).await;
    send(svc.clone(), from("10.0.0.66:5").body(empty()).unwrap()).await;
    send(svc.clone(), from("10.0.0.66:5").body(empty()).unwrap()).await;
    // Other tests' layers have no lists: these moved by this test's requests only.
    assert_eq!(decisions("access-list", "allowed_by_list") - before.0, 1.0);
    assert_eq!(decisions("access-list", "denied_by_list") - before.1, 2.0);
    assert_eq!(
        decisions("metrics-l", "allowed"),
        0.0,
        "a listed request skips the limits"
    );

    // Two refusals of the failures limit ban the key; the ban's refusals are `banned`.
    let ban = Limit::ban(
        "metrics-ban",
        2,
        Duration::from_secs(60),
        Duration::from_secs(60),
    )
    .unwrap();
    let key = || HeaderKey::new("x-api-key".parse().unwrap(), PrincipalKind::ApiKey);
    let (layer, _) = fresh();
    let svc = app(&layer
        .rule(Rule::new(ban, key()).ban_answer(BanAnswer::Forbidden))
        .rule(Rule::new(minute("metrics-b", 1), key())));
    for _ in 0..5 {
        let req = from("1.2.3.4:5")
            .header("x-api-key", "k-1")
            .body(empty())
            .unwrap();
        send(svc.clone(), req).await;
    }
    assert_eq!(decisions("metrics-b", "allowed"), 1.0);
    let (limited, banned) = (
        decisions("metrics-b", "limited"),
        decisions("metrics-ban", "banned"),
    );
    assert_eq!(limited + banned, 4.0);
    assert!(
        limited >= 2.0 && banned >= 1.0,
        "{limited} limited, {banned} banned"
    );
}

#[tokio::test(start_paused = true)]
async fn held_requests_and_in_flight_slots_are_gauged_while_they_last() {
    snapshotter();
    let delayed = Limit::sliding_log("metrics-h", 100, Duration::from_secs(60))
        .unwrap()
        .delayed(
            Delay::doubling(1, Duration::from_secs(1), Duration::from_secs(8))
                .unwrap()
                .max_held(3)
                .unwrap(),
        )
        .unwrap();
    let (layer, _) = fresh();
    let svc = app(&layer.rule(Rule::new(delayed, Global)));
    send(svc.clone(), from("1.2.3.4:5").body(empty()).unwrap()).await;
    let held = tokio::spawn(send(svc.clone(), from("1.2.3.4:5").body(empty()).unwrap()));
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(value("rate_limit_held", &[("limit", "metrics-h")]), 1.0);
    assert_eq!(held.await.unwrap().status, 200);
    assert_eq!(value("rate_limit_held", &[("limit", "metrics-h")]), 0.0);
    assert_eq!(decisions("metrics-h", "held"), 1.0);
    assert_eq!(decisions("metrics-h", "allowed"), 1.0);

    let exports = InFlight::new("metrics-i", 1, Duration::from_secs(30)).unwrap();
    let (layer, _) = fresh();
    let svc = app(&layer.in_flight(InFlightRule::new(exports, Global)));
    // Its body unread: the slot is held until the body ends or drops.
    let first = svc
        .clone()
        .oneshot(from("1.2.3.4:5").body(empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(
        value("rate_limit_in_flight", &[("limit", "metrics-i")]),
        1.0
    );
    let refused = send(svc.clone(), from("1.2.3.4:5").body(empty()).unwrap()).await;
    assert_eq!(refused.status, 429);
    drop(first);
    assert_eq!(
        value("rate_limit_in_flight", &[("limit", "metrics-i")]),
        0.0
    );
    assert_eq!(decisions("metrics-i", "allowed"), 1.0);
    assert_eq!(decisions("metrics-i", "limited"), 1.0);
}

/// 10 000 principals, each allowed then refused: the layer's series are the same few,
/// and no label holds anything a client sent.
#[tokio::test]
async fn ten_thousand_principals_make_no_new_series() {
    snapshotter();
    let (layer, _) = fresh();
    let svc = app(&layer.rule(Rule::new(minute("metrics-card", 1), ClientIp::new())));
    for i in 0..10_000u32 {
        let peer = format!("10.{}.{}.{}:5", i >> 16, (i >> 8) & 255, i & 255);
        send(svc.clone(), from(&peer).body(empty()).unwrap()).await;
        send(svc.clone(), from(&peer).body(empty()).unwrap()).await;
    }
    let t = tally();
    let mine: BTreeSet<&Series> = t
        .keys()
        .filter(|(_, labels)| labels.contains("limit=metrics-card"))
        .collect();
    assert_eq!(mine.len(), 3, "allowed, limited, near-limit: {mine:?}");
    assert!(
        t.keys().all(|(_, labels)| !labels.contains("10.")),
        "a client address reached a label"
    );
    drop(t);
    assert_eq!(decisions("metrics-card", "allowed"), 10_000.0);
    assert_eq!(decisions("metrics-card", "limited"), 10_000.0);
}
