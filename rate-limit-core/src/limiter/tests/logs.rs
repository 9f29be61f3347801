//! `rate_limit.fallback` once per store and reason; again after recovery; never a key.

use std::time::Duration;

use crate::{Chain, FailurePolicy, Limit, Limiter, Principal, StoreErrorKind};

use crate::testing::{FaultyStore as Faulty, LogCapture, Mode};

#[tokio::test(start_paused = true)]
async fn each_store_and_reason_is_logged_once_and_again_after_recovery() {
    let capture = LogCapture::global();

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
    for fields in capture.lines() {
        assert!(!fields.contains(secret), "{fields}");
        assert!(
            !fields.contains(Principal::participant(secret).as_str()),
            "{fields}"
        );
    }
}
