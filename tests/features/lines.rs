//! The lines of held requests, in virtual time: a request that goes away while held gives
//! its units back and pushes nobody back; a full line turns away only a source already in
//! it, never a newcomer.

use std::time::Duration;

use ratekeeper_core::limiter::Holding;
use ratekeeper_core::{
    AnyStore, Chain, Delay, FailurePolicy, Limit, Limiter, MemoryStore, Principal, PrincipalKind,
    Store,
};
use tokio::time::Instant;

fn limiter() -> Limiter {
    let store = MemoryStore::builder()
        .clock(ratekeeper_core::clock::TokioClock::new())
        .build()
        .unwrap();
    Limiter::new(AnyStore::Memory(store))
}

fn s(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// An account limit held from its 3rd attempt (1 s, doubling to 8 s), at most 2 waiting
/// from one source; the chain is IP then account, as a sign-in's.
fn account() -> Limit {
    Limit::sliding_log("acct", 1_000, s(900))
        .unwrap()
        .delayed(Delay::doubling(2, s(1), s(8)).unwrap().max_held(2).unwrap())
        .unwrap()
}

fn chain(ip: &str, per_ip: &Limit, acct: &Limit) -> Chain {
    Chain::count_attempts()
        .check(per_ip, Principal::ip(ip.parse().unwrap()))
        .check(acct, Principal::new(PrincipalKind::User, "ada"))
}

/// Checks and holds `chain`; (allowed, when it was answered since `start`).
fn attempt(
    limiter: &Limiter,
    holding: &Holding,
    chain: Chain,
    start: Instant,
) -> tokio::task::JoinHandle<(bool, Duration)> {
    let (limiter, holding) = (limiter.clone(), holding.clone());
    tokio::spawn(async move {
        let answer = limiter.check(&chain, FailurePolicy::Closed).await;
        let answer = holding.hold(&limiter, &chain, answer).await;
        (answer.is_allowed(), start.elapsed())
    })
}

#[tokio::test(start_paused = true)]
async fn a_request_gone_while_held_gives_back_and_pushes_nobody_back() {
    let (limiter, holding) = (limiter(), Holding::new(100));
    let (per_ip, acct) = (Limit::sliding_log("ip", 100, s(900)).unwrap(), account());
    let start = Instant::now();
    let from = |ip| attempt(&limiter, &holding, chain(ip, &per_ip, &acct), start);
    for _ in 0..2 {
        assert!(from("192.0.2.1").await.unwrap().0);
    }
    // The 3rd is held 1 s; the 4th (another source) waits behind it for 2 s more.
    let third = from("192.0.2.1");
    tokio::task::yield_now().await;
    let fourth = from("192.0.2.2");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(holding.held(), 2);
    let key = acct.key(Principal::new(PrincipalKind::User, "ada"));
    let ip_key = per_ip.key(Principal::ip("192.0.2.1".parse().unwrap()));
    assert_eq!(
        limiter.store().peek(&key).await.unwrap().remaining(),
        1_000 - 4
    );
    // The 3rd goes away half-way through its hold: its units come back, on every check.
    third.abort();
    assert!(third.await.is_err());
    assert_eq!(holding.held(), 1);
    assert_eq!(
        limiter.store().peek(&key).await.unwrap().remaining(),
        1_000 - 3
    );
    assert_eq!(
        limiter.store().peek(&ip_key).await.unwrap().remaining(),
        100 - 2
    );
    // The 4th is released its own 2 s after its arrival, not 2 s after the 3rd's slot.
    let (allowed, at) = fourth.await.unwrap();
    assert!(allowed);
    assert_eq!(at.as_millis(), 2_000);
}

#[tokio::test(start_paused = true)]
async fn a_full_line_turns_away_a_source_already_in_it_never_a_newcomer() {
    let (limiter, holding) = (limiter(), Holding::new(100));
    let (per_ip, acct) = (Limit::sliding_log("ip", 100, s(900)).unwrap(), account());
    let start = Instant::now();
    let from = |ip| attempt(&limiter, &holding, chain(ip, &per_ip, &acct), start);
    for _ in 0..2 {
        from("203.0.113.9").await.unwrap();
    }
    // The attacker's address fills the line (2), a third from it is refused at once.
    let mut held = Vec::new();
    for _ in 0..2 {
        held.push(from("203.0.113.9"));
        tokio::task::yield_now().await;
    }
    let (allowed, at) = from("203.0.113.9").await.unwrap();
    assert_eq!((allowed, at), (false, Duration::ZERO));
    // The owner's address joins the full line and waits its turn: 1 s, 2 s, then its 4 s.
    let (allowed, at) = from("192.0.2.10").await.unwrap();
    assert!(allowed, "a newcomer is never refused by the line");
    assert_eq!(at, s(1 + 2 + 4));
    for h in held {
        assert!(h.await.unwrap().0);
    }
}
