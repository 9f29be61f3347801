//! `rate_limit.fallback` once per store and reason; again after recovery; never a key.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use crate::{Chain, FailurePolicy, Limit, Limiter, Principal, StoreErrorKind};
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

use crate::testing::{FaultyStore as Faulty, Mode};

#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<(String, String)>>>);

struct Fields(String);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.push_str(&format!("{}={:?} ", field.name(), value));
    }
}

impl<S: Subscriber> Layer<S> for Capture {
    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        let mut f = Fields(String::new());
        event.record(&mut f);
        self.0
            .lock()
            .unwrap()
            .push((event.metadata().name().to_owned(), f.0));
    }
}

impl Capture {
    fn count(&self, name: &str, needle: &str) -> usize {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|(n, f)| n == name && f.contains(needle))
            .count()
    }
}

/// One process-wide subscriber: a thread-local one misses events when parallel tests
/// share callsites (tracing caches callsite interest). Tests filter by store name.
fn capture() -> Capture {
    static CAPTURE: OnceLock<Capture> = OnceLock::new();
    CAPTURE
        .get_or_init(|| {
            let c = Capture::default();
            let subscriber = tracing_subscriber::registry().with(c.clone());
            tracing::subscriber::set_global_default(subscriber).expect("first subscriber");
            c
        })
        .clone()
}

#[tokio::test(start_paused = true)]
async fn each_store_and_reason_is_logged_once_and_again_after_recovery() {
    let capture = capture();

    let secret = "secret-principal-4711";
    let limit = Limit::sliding_window("logged-limit", 5, Duration::from_secs(60)).unwrap();
    let chain = Chain::new().check(&limit, Principal::participant(secret));
    let stores: Vec<(Faulty, Limiter<Faulty>)> = ["logs-alpha", "logs-beta"]
        .into_iter()
        .map(|name| {
            let s = Faulty::new();
            let l = Limiter::builder(s.clone())
                .name(name)
                .cooldown(Duration::ZERO)
                .build()
                .unwrap();
            (s, l)
        })
        .collect();
    let reasons = [
        (Mode::Fails(StoreErrorKind::Missing), "missing"),
        (Mode::Fails(StoreErrorKind::Indeterminate), "failed"),
        (Mode::Hangs, "timed_out"),
    ];
    for (store, limiter) in &stores {
        for (mode, _) in reasons {
            store.set(mode);
            for _ in 0..5 {
                limiter.check(&chain, FailurePolicy::Memory).await;
            }
        }
    }
    for name in ["logs-alpha", "logs-beta"] {
        for (_, reason) in reasons {
            let needle = format!("store={name} reason=\"{reason}\"");
            assert_eq!(capture.count("rate_limit.fallback", &needle), 1, "{needle}");
        }
    }
    assert_eq!(capture.count("rate_limit.fallback", "store=logs-"), 6);

    // Recovery is logged once; a new failure is logged again.
    let (store, limiter) = &stores[0];
    store.set(Mode::Works);
    for _ in 0..3 {
        limiter.check(&chain, FailurePolicy::Memory).await;
    }
    assert_eq!(capture.count("rate_limit.recovered", "store=logs-alpha"), 1);
    store.set(Mode::Fails(StoreErrorKind::Indeterminate));
    for _ in 0..3 {
        limiter.check(&chain, FailurePolicy::Memory).await;
    }
    assert_eq!(
        capture.count("rate_limit.fallback", "store=logs-alpha reason=\"failed\""),
        2
    );
    assert_eq!(capture.count("rate_limit.fallback", "store=logs-"), 7);

    // No log line holds the key, the principal or the limit's key text.
    for (_, fields) in capture.0.lock().unwrap().iter() {
        assert!(!fields.contains(secret), "{fields}");
        assert!(
            !fields.contains(Principal::participant(secret).as_str()),
            "{fields}"
        );
    }
}
