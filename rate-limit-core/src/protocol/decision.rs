//! Decisions: what a store answered for each limit of a chain.

use std::time::Duration;

use smallvec::SmallVec;

/// The smallest retry-after a denial reports: one millisecond.
pub(crate) const MIN_RETRY_AFTER: Duration = Duration::from_millis(1);
const MIN_RETRY_AFTER_US: u64 = 1_000;

/// What happened to one check.
///
/// You read it on each `Decision`, to tell a refusal a wait will cure (`Denied`) from one
/// no wait will (`NeverFits`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Outcome {
    /// The cost fit; it was charged (unless the chain was refused further on).
    Allowed,
    /// The cost does not fit now; it will after [`Decision::retry_after`].
    Denied,
    /// The cost is larger than the limit can ever admit; nothing changed, and waiting
    /// will not help, so there is no retry-after.
    NeverFits,
}

/// One limit's answer.
///
/// Times are relative to the store's "now" when it decided. `retry_after` is present only
/// for [`Outcome::Denied`], and is then at least [`Decision::MIN_RETRY_AFTER`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Decision {
    outcome: Outcome,
    limit: u64,
    remaining: u64,
    reset_after_us: u64,
    retry_after_us: u64,
    window_us: u64,
    /// For an allowed decision of a delayed limit: how long to hold the request (µs; at
    /// most a minute, so it fits the struct's padding).
    delay_us: u32,
    /// A ban's decision ([`Limit::ban`](crate::Limit::ban)).
    ban: bool,
    /// Refused because the line of requests held for a delayed limit was full.
    line_full: bool,
}

impl Decision {
    /// The shortest `retry_after` a refusal reports: a millisecond (never zero).
    pub const MIN_RETRY_AFTER: Duration = MIN_RETRY_AFTER;

    pub(crate) fn allowed(limit: u64, remaining: u64, reset_after_us: u64, window_us: u64) -> Self {
        Self {
            outcome: Outcome::Allowed,
            limit,
            remaining,
            reset_after_us,
            retry_after_us: 0,
            window_us,
            delay_us: 0,
            ban: false,
            line_full: false,
        }
    }

    pub(crate) fn denied(
        limit: u64,
        remaining: u64,
        reset_after_us: u64,
        retry_after_us: u64,
        window_us: u64,
    ) -> Self {
        let retry_after_us = retry_after_us.max(MIN_RETRY_AFTER_US);
        Self {
            outcome: Outcome::Denied,
            limit,
            remaining,
            reset_after_us: reset_after_us.max(retry_after_us),
            retry_after_us,
            window_us,
            delay_us: 0,
            ban: false,
            line_full: false,
        }
    }

    pub(crate) fn never_fits(
        limit: u64,
        remaining: u64,
        reset_after_us: u64,
        window_us: u64,
    ) -> Self {
        Self {
            outcome: Outcome::NeverFits,
            limit,
            remaining,
            reset_after_us,
            retry_after_us: 0,
            window_us,
            delay_us: 0,
            ban: false,
            line_full: false,
        }
    }

    /// Builds a decision from parts, e.g. as a store decoded it from its wire format.
    ///
    /// Times are in microseconds; a denial's retry-after is raised to [`Decision::MIN_RETRY_AFTER`].
    pub fn from_parts(
        outcome: Outcome,
        limit: u64,
        remaining: u64,
        reset_after_us: u64,
        retry_after_us: u64,
        window_us: u64,
    ) -> Self {
        match outcome {
            Outcome::Allowed => Self::allowed(limit, remaining, reset_after_us, window_us),
            Outcome::Denied => {
                Self::denied(limit, remaining, reset_after_us, retry_after_us, window_us)
            }
            Outcome::NeverFits => Self::never_fits(limit, remaining, reset_after_us, window_us),
        }
    }

    /// What happened.
    pub fn outcome(&self) -> Outcome {
        self.outcome
    }

    /// Whether the check was allowed.
    pub fn is_allowed(&self) -> bool {
        self.outcome == Outcome::Allowed
    }

    /// The quota (or capacity) of the limit.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Units still available now (after this check's charge, when it was charged).
    pub fn remaining(&self) -> u64 {
        self.remaining
    }

    /// Time until the limit is whole again (every unit available).
    pub fn reset_after(&self) -> Duration {
        Duration::from_micros(self.reset_after_us)
    }

    /// For a denial, the time after which the same cost fits: exact to the microsecond,
    /// and at least [`Decision::MIN_RETRY_AFTER`]. `None` for other outcomes.
    pub fn retry_after(&self) -> Option<Duration> {
        (self.outcome == Outcome::Denied).then(|| Duration::from_micros(self.retry_after_us))
    }

    /// The limit's window (for a token bucket, the time an empty bucket takes to fill).
    pub fn window(&self) -> Duration {
        Duration::from_micros(self.window_us)
    }

    /// For an admitted request over a delayed limit's threshold
    /// ([`Limit::delayed`](crate::Limit::delayed)): how long to hold it before answering
    /// (once held, how long it was held). Zero otherwise.
    pub fn delay(&self) -> Duration {
        Duration::from_micros(u64::from(self.delay_us))
    }

    /// The same decision, to be held for `delay` (allowed decisions only).
    pub(crate) fn with_delay(self, delay: Duration) -> Self {
        if self.outcome != Outcome::Allowed {
            return self;
        }
        let us = u32::try_from(delay.as_micros()).unwrap_or(u32::MAX);
        Self {
            delay_us: us,
            ..self
        }
    }

    /// Whether this is a ban's decision ([`Limit::ban`](crate::Limit::ban)): allowed, the
    /// principal is not banned (`remaining` refusals to go before it is); denied, it is
    /// banned, for [`retry_after`](Self::retry_after) more.
    pub fn is_ban(&self) -> bool {
        self.ban
    }

    /// Whether this refusal is a delayed limit's, whose line of held requests was full
    /// ([`Holding`](crate::limiter::Holding)): the request fit the limit but could not wait.
    pub fn is_line_full(&self) -> bool {
        self.line_full
    }

    /// The same decision, marked as a ban's.
    pub(crate) fn as_ban(self) -> Self {
        Self { ban: true, ..self }
    }

    /// The same decision with `units` more remaining (at most the limit).
    pub(crate) fn plus_remaining(&self, units: u64) -> Self {
        Self {
            remaining: self.remaining.saturating_add(units).min(self.limit),
            ..*self
        }
    }

    /// This decision `elapsed_us` later, with no check in between: its times counted
    /// down (a cached refusal's answer).
    #[cfg(feature = "redis")]
    pub(crate) fn aged(&self, elapsed_us: u64) -> Self {
        Self {
            ban: self.ban,
            ..Self::from_parts(
                self.outcome,
                self.limit,
                self.remaining,
                self.reset_after_us.saturating_sub(elapsed_us),
                self.retry_after_us.saturating_sub(elapsed_us),
                self.window_us,
            )
        }
    }
}

/// A chain's answer: one [`Decision`] per check that was evaluated, in chain order.
///
/// With [`ChainMode::InOrder`](crate::ChainMode::InOrder), evaluation stops at the first
/// denial, so the list ends with it; checks after it were not looked at.
///
/// ```
/// use ratekeeper_core::{Chain, Limit, MemoryStore, Outcome, Principal, Store};
/// use std::time::Duration;
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let burst = Limit::fixed_window("burst", 1, Duration::from_secs(60))?;
/// let day = Limit::fixed_window("day", 100, Duration::from_secs(86_400))?;
/// let store = MemoryStore::new();
/// let chain = Chain::new()
///     .check(&burst, Principal::user("ann"))
///     .check(&day, Principal::user("ann"));
/// let first = store.check(&chain).await.unwrap();
/// assert!(first.is_allowed());
/// assert_eq!(first.headline().unwrap().remaining(), 0); // the burst limit is closest to exhaustion
///
/// let second = store.check(&chain).await.unwrap();
/// let (index, why) = second.denied_by().unwrap();
/// assert_eq!((index, why.outcome()), (0, Outcome::Denied));
/// assert!(why.retry_after().unwrap() <= Duration::from_secs(60));
/// assert_eq!(second.decisions().len(), 1); // in order: the day limit was not touched
/// # Ok::<(), ratekeeper_core::ConfigError>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainDecision {
    // Inline up to four decisions: no allocation for the chains layers build.
    decisions: SmallVec<[Decision; 4]>,
    denied_at: Option<usize>,
    /// When the store charged, to give units back later (not part of the decision).
    pub(crate) receipt: Receipt,
}

/// What a store needs to give back what a chain charged: the store's time of the charge.
/// Bookkeeping, not part of the decision: two decisions that differ only here are equal.
/// Small (16 bytes) on the common path; what only the Redis store's Cluster groups and
/// leases need is boxed.
#[derive(Debug, Clone, Default)]
pub(crate) struct Receipt {
    /// The store's time of the charge (µs since the epoch, the store's clock).
    pub(crate) at: u64,
    extra: Option<Box<ReceiptExtra>>,
}

#[derive(Debug, Clone, Default)]
struct ReceiptExtra {
    /// Per check, when the checks were charged at different times (a Cluster's slot
    /// groups, each on its own node's clock); empty: `at` for every check.
    times: Vec<u64>,
    /// Units taken from this process's leased slices, by check index (the Redis store).
    #[cfg(feature = "redis")]
    leased: Vec<(usize, super::lease::LeasedUnits)>,
}

impl Receipt {
    /// When check `i` was charged.
    pub(crate) fn time(&self, i: usize) -> u64 {
        self.extra
            .as_ref()
            .and_then(|e| e.times.get(i).copied())
            .unwrap_or(self.at)
    }

    /// Sets the time of each check.
    #[cfg(feature = "redis")]
    pub(crate) fn set_times(&mut self, times: Vec<u64>) {
        self.extra.get_or_insert_default().times = times;
    }

    /// Sets the units taken from leased slices, by check index.
    #[cfg(feature = "redis")]
    pub(crate) fn set_leased(&mut self, leased: Vec<(usize, super::lease::LeasedUnits)>) {
        if !leased.is_empty() {
            self.extra.get_or_insert_default().leased = leased;
        }
    }

    /// The units check `i` took from a leased slice, if any.
    #[cfg(feature = "redis")]
    pub(crate) fn leased(&self, i: usize) -> Option<super::lease::LeasedUnits> {
        let e = self.extra.as_ref()?;
        e.leased.iter().find(|(j, _)| *j == i).map(|(_, l)| *l)
    }
}

impl PartialEq for Receipt {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for Receipt {}

impl ChainDecision {
    /// Builds a chain decision; the first non-allowed decision is the one that decides.
    pub fn new(decisions: Vec<Decision>) -> Self {
        Self::from_decisions(SmallVec::from_vec(decisions))
    }

    /// The decision of a one-check chain.
    pub fn one(decision: Decision) -> Self {
        Self::from_decisions(smallvec::smallvec![decision])
    }

    pub(crate) fn from_decisions(decisions: SmallVec<[Decision; 4]>) -> Self {
        let denied_at = decisions.iter().position(|d| !d.is_allowed());
        Self {
            decisions,
            denied_at,
            receipt: Receipt::default(),
        }
    }

    /// The same decision, charged at `at` (µs, the store's clock).
    pub(crate) fn charged_at(mut self, at: u64) -> Self {
        self.receipt.at = at;
        self
    }

    /// Whether every check was allowed (the request goes ahead).
    pub fn is_allowed(&self) -> bool {
        self.denied_at.is_none()
    }

    /// The index (in the chain) and decision of the first check that refused.
    pub fn denied_by(&self) -> Option<(usize, &Decision)> {
        self.denied_at.map(|i| (i, &self.decisions[i]))
    }

    /// The decisions, in chain order.
    pub fn decisions(&self) -> &[Decision] {
        &self.decisions
    }

    /// The decision to describe in single-valued headers: on a denial, the limit that
    /// denied; otherwise the one with the fewest units remaining (ties: the later reset).
    /// A ban that lets the request through is no quota, and is never the headline.
    pub fn headline(&self) -> Option<&Decision> {
        if let Some((_, d)) = self.denied_by() {
            return Some(d);
        }
        self.decisions.iter().filter(|d| !d.ban).min_by(|a, b| {
            a.remaining
                .cmp(&b.remaining)
                .then(b.reset_after_us.cmp(&a.reset_after_us))
        })
    }

    /// The longest delay of the chain's decisions (see [`Decision::delay`]): how long an
    /// admitted request is held. Zero when none.
    pub fn delay(&self) -> Duration {
        self.decisions
            .iter()
            .map(Decision::delay)
            .max()
            .unwrap_or(Duration::ZERO)
    }

    /// The decisions, to set their delays.
    pub(crate) fn decisions_mut(&mut self) -> &mut [Decision] {
        &mut self.decisions
    }

    /// The same chain decision, refused by check `i` with this retry-after: a request
    /// that could not be held, whose units (the costs of `chain`) were given back.
    pub(crate) fn refused_by(
        mut self,
        chain: &crate::Chain,
        i: usize,
        retry_after: Duration,
    ) -> Self {
        for (d, c) in self.decisions.iter_mut().zip(chain.checks()) {
            *d = d.plus_remaining(c.cost());
        }
        if let Some(d) = self.decisions.get(i).copied() {
            let retry = u64::try_from(retry_after.as_micros()).unwrap_or(u64::MAX);
            self.decisions[i] = Decision {
                line_full: true,
                ..Decision::denied(d.limit, d.remaining, d.reset_after_us, retry, d.window_us)
            };
            self.denied_at = Some(i);
        }
        self
    }

    /// The headline's index in the chain.
    pub fn headline_index(&self) -> Option<usize> {
        let h = self.headline()?;
        self.decisions.iter().position(|d| std::ptr::eq(d, h))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn denial_has_floor_retry_after() {
        let d = Decision::denied(5, 0, 0, 3, 1_000_000);
        assert_eq!(d.retry_after(), Some(MIN_RETRY_AFTER));
        assert!(d.reset_after() >= MIN_RETRY_AFTER);
        assert_eq!(Decision::allowed(5, 4, 10, 10).retry_after(), None);
    }

    #[test]
    fn headline_prefers_fewest_remaining_then_later_reset() {
        let a = Decision::allowed(10, 3, 100, 100);
        let b = Decision::allowed(10, 3, 200, 200);
        let c = Decision::allowed(10, 5, 900, 900);
        let chain = ChainDecision::new(vec![a, b, c]);
        assert_eq!(chain.headline(), Some(&b));
        assert_eq!(chain.headline_index(), Some(1));
        let denied = Decision::denied(10, 2, 50, 50, 100);
        let chain = ChainDecision::new(vec![a, denied]);
        assert_eq!(chain.headline(), Some(&denied));
        assert!(!chain.is_allowed());
    }
}
