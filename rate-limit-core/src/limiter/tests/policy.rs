//! Time budget, retries, cool-down and policies, on paused Tokio time.

use std::time::Duration;

use crate::limiter::FailureReason;
use crate::store::StoreErrorKind;
use crate::{Answer, Chain, FailurePolicy, Limit, Limiter, Principal};
use tokio::time::Instant;

use crate::testing::{FaultyStore as Faulty, Mode};

fn chain() -> Chain {
    let l = Limit::fixed_window("p", 3, Duration::from_secs(3_600)).unwrap();
    Chain::new().check(&l, Principal::user("u"))
}

#[tokio::test(start_paused = true)]
async fn a_store_that_never_answers_is_not_waited_for() {
    let store = Faulty::new();
    store.set(Mode::Hangs);
    let limiter = Limiter::with_store(store.clone());
    let t0 = Instant::now();
    let answer = limiter.check(&chain(), FailurePolicy::Closed).await;
    assert_eq!(t0.elapsed(), Duration::from_millis(500));
    match answer {
        Answer::Closed {
            reason,
            retry_after,
        } => {
            assert_eq!(reason, FailureReason::TimedOut);
            assert_eq!(retry_after, Duration::from_secs(1));
        }
        other => panic!("{other:?}"),
    }
    // A timeout is never replayed: it may have counted already.
    assert_eq!(store.calls(), 1);
}

#[tokio::test(start_paused = true)]
async fn only_calls_that_surely_did_not_run_are_retried() {
    let store = Faulty::new();
    let limiter = Limiter::builder_with_store(store.clone())
        .cooldown(Duration::ZERO)
        .build()
        .unwrap();
    store.set(Mode::Fails(StoreErrorKind::NotExecuted));
    let t0 = Instant::now();
    let a = limiter.check(&chain(), FailurePolicy::Open).await;
    assert_eq!(a, Answer::Open(FailureReason::Missing));
    assert_eq!(store.calls(), 3, "one call and two retries");
    assert_eq!(t0.elapsed(), Duration::from_millis(200), "100 ms apart");

    store.set(Mode::Fails(StoreErrorKind::Indeterminate));
    let a = limiter.check(&chain(), FailurePolicy::Open).await;
    assert_eq!(a, Answer::Open(FailureReason::Failed));
    assert_eq!(store.calls(), 4, "an indeterminate call is never replayed");

    // A retry that succeeds answers normally.
    store.set(Mode::Works);
    assert!(matches!(
        limiter.check(&chain(), FailurePolicy::Open).await,
        Answer::Store(_)
    ));
}

#[tokio::test(start_paused = true)]
async fn retries_stay_inside_the_time_budget() {
    let store = Faulty::new();
    let limiter = Limiter::builder_with_store(store.clone())
        .timeout(Duration::from_millis(150))
        .cooldown(Duration::ZERO)
        .build()
        .unwrap();
    store.set(Mode::Fails(StoreErrorKind::NotExecuted));
    let t0 = Instant::now();
    limiter.check(&chain(), FailurePolicy::Open).await;
    assert_eq!(store.calls(), 2, "a second retry would end past the budget");
    assert!(t0.elapsed() <= Duration::from_millis(150));
}

#[tokio::test(start_paused = true)]
async fn the_cool_down_skips_the_store_then_probes_it_again() {
    let store = Faulty::new();
    let limiter = Limiter::with_store(store.clone());
    store.set(Mode::Hangs);
    limiter.check(&chain(), FailurePolicy::Open).await;
    assert_eq!(store.calls(), 1);
    let t0 = Instant::now();
    for _ in 0..100 {
        let a = limiter.check(&chain(), FailurePolicy::Closed).await;
        assert!(matches!(
            a,
            Answer::Closed {
                reason: FailureReason::TimedOut,
                ..
            }
        ));
    }
    assert_eq!(store.calls(), 1, "skipped during the cool-down");
    assert_eq!(t0.elapsed(), Duration::ZERO, "and answered at once");
    store.set(Mode::Works);
    tokio::time::advance(Duration::from_secs(1)).await;
    assert!(matches!(
        limiter.check(&chain(), FailurePolicy::Closed).await,
        Answer::Store(_)
    ));
    assert_eq!(store.calls(), 2);
}

#[tokio::test(start_paused = true)]
async fn memory_fallback_keeps_limiting() {
    let store = Faulty::new();
    let limiter = Limiter::with_store(store.clone());
    store.set(Mode::Fails(StoreErrorKind::Indeterminate));
    let c = chain();
    let mut allowed = 0;
    for _ in 0..10 {
        match limiter.check(&c, FailurePolicy::Memory).await {
            Answer::Memory { decision, reason } => {
                assert_eq!(reason, FailureReason::Failed);
                allowed += u32::from(decision.is_allowed());
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(allowed, 3, "the limit still holds in process memory");
    assert_eq!(store.calls(), 1, "one failure, then the cool-down");
}

#[tokio::test(start_paused = true)]
async fn post_hoc_charges_follow_the_policy() {
    let store = Faulty::new();
    let limiter = Limiter::with_store(store.clone());
    let l = Limit::token_bucket("tokens", 100, 100, Duration::from_secs(60)).unwrap();
    let check = crate::Check::new(l.key(Principal::user("u")), 250);
    assert!(
        !limiter
            .charge(&check, FailurePolicy::Closed)
            .await
            .unwrap()
            .is_allowed()
    );
    store.set(Mode::Fails(StoreErrorKind::Indeterminate));
    assert_eq!(
        limiter.charge(&check, FailurePolicy::Open).await,
        Err(FailureReason::Failed)
    );
    let d = limiter.charge(&check, FailurePolicy::Memory).await.unwrap();
    assert!(!d.is_allowed(), "charged to the fallback, overdrawn");
}

#[test]
fn a_zero_timeout_is_a_config_error() {
    let err = Limiter::builder_with_store(Faulty::new())
        .timeout(Duration::ZERO)
        .build()
        .unwrap_err();
    assert_eq!((err.code(), err.field()), ("store.invalid", "timeout"));
}
