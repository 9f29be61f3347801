//! Reservations: what an admitted chain charged, kept or given back once the request's
//! outcome is known (count by outcome: only failed sign-ins, only successful exports).

use crate::chain::{Chain, Check};
use crate::limit::AlgorithmKind;
use crate::protocol::ChainDecision;

/// Units an admitted chain charged, held until the request's outcome is known: kept (drop
/// it, or call [`keep`](Self::keep)), or given back with
/// [`Limiter::give_back`](crate::Limiter::give_back).
///
/// Counting by outcome is race-free because the unit is *reserved before* the work runs:
/// concurrent requests cannot all slip through while their outcomes are unknown, and
/// nothing is ever counted after the fact. The price: while requests are in flight, their
/// reserved units count, so a limit on failures also caps concurrent successes at the
/// quota until they are given back. A process that dies between the reservation and the
/// give-back leaves the unit counted until its window ends (or, for a token bucket, until
/// it refills).
///
/// ```
/// use ratekeeper_core::{AnyStore, Chain, FailurePolicy, Limit, Limiter, MemoryStore, Principal, PrincipalKind};
/// use std::time::Duration;
///
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// let failed = Limit::sliding_log("sign-in-failures", 5, Duration::from_secs(900))?;
/// let limiter = Limiter::new(AnyStore::from(MemoryStore::new()));
/// let account = Principal::personal(PrincipalKind::User, "ada@example.com");
/// let chain = Chain::new().check(&failed, account);
///
/// for _ in 0..10 {
///     let answer = limiter.check(&chain, FailurePolicy::Closed).await;
///     assert!(answer.is_allowed());
///     // The password was right: this attempt does not count.
///     let reservation = answer.reservation(&chain).unwrap();
///     limiter.give_back(reservation).await.unwrap();
/// }
/// let answer = limiter.check(&chain, FailurePolicy::Closed).await;
/// let remaining = answer.decision().unwrap().headline().unwrap().remaining();
/// assert_eq!(remaining, 4); // only this attempt, still reserved, counts
/// # Ok::<(), ratekeeper_core::ConfigError>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone)]
#[must_use = "a reservation is kept unless it is given back"]
pub struct Reservation {
    pub(crate) items: Vec<ReservedCheck>,
    /// Where the units were charged.
    pub(crate) counted: CountedIn,
}

/// Where an admitted chain's units were charged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CountedIn {
    /// The limiter's store.
    Store,
    /// The limiter's fallback memory store (the store had failed).
    Fallback,
}

/// One check's reserved units.
#[derive(Debug, Clone)]
pub(crate) struct ReservedCheck {
    /// The check's position in its chain.
    pub(crate) index: usize,
    pub(crate) check: Check,
    /// The store's time of the charge (µs).
    pub(crate) at: u64,
    /// Units taken from this process's leased slice (the Redis store): they go back there.
    #[cfg(feature = "redis")]
    pub(crate) leased: Option<super::lease::LeasedUnits>,
}

impl Reservation {
    /// The reservation of an admitted decision of `chain` (`None` if it was refused: a
    /// refusal reserves nothing). Checks of cost 0 reserve nothing.
    pub(crate) fn of(chain: &Chain, decision: &ChainDecision, counted: CountedIn) -> Option<Self> {
        if !decision.is_allowed() {
            return None;
        }
        let receipt = &decision.receipt;
        let items = chain
            .checks()
            .iter()
            .enumerate()
            .take(decision.decisions().len())
            // A ban's gate charges nothing.
            .filter(|(_, c)| c.cost() > 0 && c.key().limit().kind() != AlgorithmKind::Ban)
            .map(|(i, c)| ReservedCheck {
                index: i,
                check: c.clone(),
                at: receipt.time(i),
                #[cfg(feature = "redis")]
                leased: receipt.leased(i),
            })
            .collect();
        Some(Self { items, counted })
    }

    /// The checks whose units are reserved, in chain order.
    pub fn checks(&self) -> impl Iterator<Item = &Check> {
        self.items.iter().map(|r| &r.check)
    }

    /// Each reserved check with the store's time of its charge (µs since the epoch, by the
    /// store's clock): what a [`Store`](crate::Store) of your own needs to give it back.
    pub fn charges(&self) -> impl Iterator<Item = (&Check, u64)> {
        self.items.iter().map(|r| (&r.check, r.at))
    }

    /// Keeps in the reservation only the checks for which `f` (given each check's position
    /// in its chain) is true: the others stay counted, whatever is done with the
    /// reservation. E.g. give back a sign-in's per-account unit after the right password,
    /// while its per-IP unit stays counted.
    pub fn retain(&mut self, mut f: impl FnMut(usize, &Check) -> bool) {
        self.items.retain(|r| f(r.index, &r.check));
    }

    /// Whether nothing is reserved (nothing to give back).
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Whether the units were charged in the limiter's fallback memory store (the store
    /// had failed; they go back there).
    pub(crate) fn in_fallback(&self) -> bool {
        self.counted == CountedIn::Fallback
    }

    /// Keeps the units counted (the same as dropping the reservation; says so in code).
    pub fn keep(self) {}

    /// A chain of the reserved checks (for the store's failure domains).
    pub(crate) fn chain(&self) -> Chain {
        let mut chain = Chain::new();
        for r in &self.items {
            chain.push(r.check.clone());
        }
        chain
    }
}
