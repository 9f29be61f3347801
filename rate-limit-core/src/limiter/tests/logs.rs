//! `rate_limit.fallback` once per store, reason and episode; an episode ends after a quiet
//! period of good answers; never a key.

use std::time::Duration;

use crate::store::StoreErrorKind;
use crate::{Chain, FailurePolicy, Limit, Limiter, Principal};

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
            let l = Limiter::builder_with_store(s.clone())
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

    // Recovery is logged once, after the quiet period; a new failure is logged again.
    let (store, limiter) = &stores[0];
    store.set(Mode::Works);
    for _ in 0..3 {
        limiter.check(&chain, FailurePolicy::Memory).await;
    }
    assert_eq!(capture.count("rate_limit.recovered", "store=logs-alpha"), 0);
    tokio::time::advance(super::super::DEFAULT_QUIET_PERIOD).await;
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

/// A store flapping between failing and answering (Redis at its memory cap) is one episode:
/// one line when it starts, one when it has stayed healthy for the quiet period.
#[tokio::test(start_paused = true)]
async fn a_flapping_store_logs_one_episode() {
    let capture = LogCapture::global();
    let limit = Limit::fixed_window("flap", 1_000_000, Duration::from_secs(60)).unwrap();
    let chain = Chain::new().check(&limit, Principal::participant("p"));
    let store = Faulty::new();
    let limiter = Limiter::builder_with_store(store.clone())
        .name("flapping-logs")
        .cooldown(Duration::ZERO)
        .build()
        .unwrap();
    for i in 0..200 {
        store.set(if i % 3 == 0 {
            Mode::Fails(StoreErrorKind::Rejected)
        } else {
            Mode::Works
        });
        limiter.check(&chain, FailurePolicy::Memory).await;
        tokio::time::advance(Duration::from_millis(20)).await;
    }
    assert_eq!(
        capture.count("rate_limit.fallback", "store=flapping-logs"),
        1
    );
    assert_eq!(
        capture.count("rate_limit.recovered", "store=flapping-logs"),
        0
    );
    store.set(Mode::Works);
    for _ in 0..7 {
        limiter.check(&chain, FailurePolicy::Memory).await;
        tokio::time::advance(Duration::from_secs(1)).await;
    }
    assert_eq!(
        capture.count("rate_limit.recovered", "store=flapping-logs"),
        1
    );
}
