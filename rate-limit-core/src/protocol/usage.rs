//! A calendar quota's usage, as a customer's dashboard shows it.

use jiff::Timestamp;

use super::KeyState;
use crate::key::Key;
use crate::limit::calendar::PeriodSpan;

/// What a principal has used of a calendar quota in the current period: for a dashboard
/// or a `GET /usage` route. Made from a key and its state as
/// [`Store::peek`](crate::Store::peek) read it (a peek charges nothing).
///
/// ```
/// use ratekeeper_core::calendar::{Calendar, Period, Timestamp, Usage};
/// use ratekeeper_core::{Chain, Limit, MemoryStore, Principal, Store};
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let plan = Limit::calendar("plan", 10_000, Calendar::new(Period::Month, "UTC")?)?;
/// let store = MemoryStore::new();
/// let key = plan.key(Principal::user("acme"));
/// store.check(&Chain::new().check_cost(&plan, Principal::user("acme"), 40)).await?;
/// let usage = Usage::new(&key, &store.peek(&key).await?, Timestamp::now()).unwrap();
/// assert_eq!((usage.used(), usage.remaining(), usage.quota()), (40, 9_960, 10_000));
/// assert!(usage.period().end() > Timestamp::now()); // when it renews
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    quota: u64,
    used: u64,
    remaining: u64,
    period: PeriodSpan,
}

impl Usage {
    /// The usage `state` (a peek of `key`) shows in the period holding `at` (now, by this
    /// process's clock: the period shown; the counts are the store's). `None` when `key`
    /// is not a calendar quota's.
    pub fn new(key: &Key, state: &KeyState, at: Timestamp) -> Option<Self> {
        let calendar = key.calendar()?;
        let quota = state.limit();
        Some(Self {
            quota,
            used: quota.saturating_sub(state.remaining()),
            remaining: state.remaining(),
            period: calendar.span(at),
        })
    }

    /// The principal's quota per period (its override, if it has one).
    pub fn quota(&self) -> u64 {
        self.quota
    }

    /// Units used in the current period.
    pub fn used(&self) -> u64 {
        self.used
    }

    /// Units left in the current period.
    pub fn remaining(&self) -> u64 {
        self.remaining
    }

    /// The current period: its start, and its end, when the quota renews.
    pub fn period(&self) -> PeriodSpan {
        self.period
    }
}
