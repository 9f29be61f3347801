//! Chains: in order, the first denial decides, all or nothing; the sibling charges all.

use std::time::Duration;

use ratekeeper_core::clock::FakeClock;
use ratekeeper_core::{Chain, ChainMode, Limit, Outcome, Principal, Store};

use crate::support::{T0, every_algorithm, store};

async fn remaining(store: &impl Store, limit: &Limit, p: &Principal) -> u64 {
    store.peek(&limit.key(p.clone())).await.unwrap().remaining()
}

#[tokio::test]
async fn denial_by_the_first_limit_leaves_the_second_untouched() {
    let clock = FakeClock::at_micros(T0);
    let store = store(&clock);
    for (first, second) in every_algorithm("x", 2)
        .iter()
        .zip(every_algorithm("y", 10).iter())
    {
        let p = Principal::user("u");
        let chain = Chain::new()
            .check(first, p.clone())
            .check(second, p.clone());
        for _ in 0..2 {
            assert!(store.check(&chain).await.unwrap().is_allowed());
        }
        for _ in 0..5 {
            let d = store.check(&chain).await.unwrap();
            let (i, why) = d.denied_by().unwrap();
            assert_eq!((i, why.outcome()), (0, Outcome::Denied));
            // The second limit was never even evaluated.
            assert_eq!(d.decisions().len(), 1);
        }
        assert_eq!(remaining(&store, second, &p).await, 8, "{}", second.name());
    }
}

#[tokio::test]
async fn denial_by_the_second_limit_leaves_the_first_untouched() {
    let clock = FakeClock::at_micros(T0);
    let store = store(&clock);
    for (first, second) in every_algorithm("x", 10)
        .iter()
        .zip(every_algorithm("y", 2).iter())
    {
        let p = Principal::user("u");
        let chain = Chain::new()
            .check(first, p.clone())
            .check(second, p.clone());
        for _ in 0..2 {
            assert!(store.check(&chain).await.unwrap().is_allowed());
        }
        for _ in 0..5 {
            let d = store.check(&chain).await.unwrap();
            assert_eq!(d.denied_by().map(|(i, _)| i), Some(1));
            assert!(d.decisions()[0].is_allowed());
            // Regression: the first limit reports what it really has left (nothing was
            // charged), not what a charge would have left.
            assert_eq!(d.decisions()[0].remaining(), 8, "{}", first.name());
        }
        assert_eq!(remaining(&store, first, &p).await, 8, "{}", first.name());
        assert_eq!(remaining(&store, second, &p).await, 0);
    }
}

#[tokio::test]
async fn charge_all_charges_every_limit_the_denying_one_included() {
    let clock = FakeClock::at_micros(T0);
    let store = store(&clock);
    for (first, second) in every_algorithm("x", 2)
        .iter()
        .zip(every_algorithm("y", 10).iter())
    {
        let p = Principal::user("u");
        let chain = Chain::charge_all()
            .check(first, p.clone())
            .check(second, p.clone());
        for _ in 0..2 {
            assert!(store.check(&chain).await.unwrap().is_allowed());
        }
        for _ in 0..3 {
            let d = store.check(&chain).await.unwrap();
            assert_eq!(d.denied_by().map(|(i, _)| i), Some(0));
            assert_eq!(d.decisions().len(), 2, "every limit is evaluated");
        }
        assert_eq!(remaining(&store, second, &p).await, 5, "{}", second.name());
        // The denying limit counted the refused attempts too: it is in debt.
        let d = store.peek(&first.key(p.clone())).await.unwrap();
        assert!(d.retry_after().is_some(), "{}", first.name());
        assert_eq!(chain.chain_mode(), ChainMode::ChargeAll);
    }
}

#[tokio::test]
async fn never_fits_changes_nothing_and_has_no_retry_after() {
    let clock = FakeClock::at_micros(T0);
    let store = store(&clock);
    for limit in every_algorithm("n", 5) {
        let p = Principal::user("u");
        let d = store
            .check(&Chain::new().check_cost(&limit, p.clone(), 6))
            .await
            .unwrap();
        let (_, why) = d.denied_by().unwrap();
        assert_eq!(why.outcome(), Outcome::NeverFits);
        assert_eq!(why.retry_after(), None);
        assert_eq!(remaining(&store, &limit, &p).await, 5);
    }
}

#[tokio::test]
async fn post_hoc_charge_overdraws_and_later_checks_wait_for_the_debt() {
    let clock = FakeClock::at_micros(T0);
    let store = store(&clock);
    // 1 000 tokens per minute; a model call reports 2 500 tokens after the fact.
    let tokens = Limit::token_bucket("llm-tokens", 1_000, 1_000, Duration::from_secs(60)).unwrap();
    let key = tokens.key(Principal::user("u"));
    assert!(
        store
            .check(&Chain::new().check_cost(&tokens, Principal::user("u"), 10))
            .await
            .unwrap()
            .is_allowed()
    );
    let charged = store
        .charge(&ratekeeper_core::Check::new(key.clone(), 2_500))
        .await
        .unwrap();
    assert!(!charged.is_allowed());
    // 2 510 tokens spent from a bucket of 1 000: debt stops at one full bucket, so the
    // bucket is empty for 1 000 × 60 ms, and one token fits after 1 001 × 60 ms.
    let peek = store.peek(&key).await.unwrap();
    assert!(!peek.would_admit(0));
    assert_eq!(peek.retry_after(), Some(Duration::from_millis(1_000 * 60)));
    let one = Chain::new().check(&tokens, Principal::user("u"));
    let d = store.check(&one).await.unwrap();
    let wait = d.denied_by().unwrap().1.retry_after().unwrap();
    assert_eq!(wait, Duration::from_millis(1_001 * 60));
    clock.advance(wait - Duration::from_micros(1));
    assert!(!store.check(&one).await.unwrap().is_allowed());
    clock.advance(Duration::from_micros(1));
    assert!(store.check(&one).await.unwrap().is_allowed());
}

#[tokio::test]
async fn reset_forgets_a_key() {
    let clock = FakeClock::at_micros(T0);
    let store = store(&clock);
    let l = Limit::fixed_window("r", 1, Duration::from_secs(60)).unwrap();
    let chain = Chain::new().check(&l, Principal::user("u"));
    assert!(store.check(&chain).await.unwrap().is_allowed());
    assert!(!store.check(&chain).await.unwrap().is_allowed());
    store.reset(&l.key(Principal::user("u"))).await.unwrap();
    assert!(store.check(&chain).await.unwrap().is_allowed());
}

#[tokio::test]
async fn a_key_twice_in_one_chain_sees_its_own_charge() {
    let clock = FakeClock::at_micros(T0);
    let store = store(&clock);
    let l = Limit::fixed_window("twice", 3, Duration::from_secs(60)).unwrap();
    let p = Principal::user("u");
    let chain = Chain::new()
        .check_cost(&l, p.clone(), 2)
        .check_cost(&l, p.clone(), 2);
    let d = store.check(&chain).await.unwrap();
    assert_eq!(d.denied_by().map(|(i, _)| i), Some(1));
    assert_eq!(remaining(&store, &l, &p).await, 3, "all or nothing");
}
