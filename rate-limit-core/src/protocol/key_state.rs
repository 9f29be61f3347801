//! A key's state as an admin reads it ([`Store::peek`](crate::Store::peek)).

use std::time::Duration;

use super::Decision;

/// A key's state, read without charging it ([`Store::peek`](crate::Store::peek)).
///
/// It says what a request would meet, in words that cannot be taken for an admission:
/// [`would_admit`](Self::would_admit) asks about a request of a given cost; there is no
/// `is_allowed`, since looking admits nothing.
///
/// ```
/// use ratekeeper_core::{Chain, Limit, MemoryStore, Principal, Store};
/// use std::time::Duration;
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let store = MemoryStore::new();
/// let limit = Limit::fixed_window("exports", 1, Duration::from_secs(60))?;
/// let ann = Principal::user("ann");
/// store.check(&Chain::new().check(&limit, ann.clone())).await?;
/// let state = store.peek(&limit.key(ann)).await?;
/// assert_eq!(state.remaining(), 0);
/// assert!(!state.would_admit(1)); // used up: the next request is refused
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyState {
    now: Decision,
}

impl KeyState {
    /// The state a cost-0 check of the key answered (what the stores compute).
    pub fn from_free_check(decision: Decision) -> Self {
        Self { now: decision }
    }

    /// Whether a request costing `cost` would be admitted now (nothing is charged, and
    /// another request may take the units first).
    pub fn would_admit(&self, cost: u64) -> bool {
        // A ban's key admits while no ban holds, whatever the cost (it counts refusals).
        self.now.is_allowed() && (self.now.is_ban() || self.now.remaining() >= cost)
    }

    /// Units left now: a request costing more is refused. A ban's key: the refusals left
    /// before the ban.
    pub fn remaining(&self) -> u64 {
        self.now.remaining()
    }

    /// The limit's quota (or capacity).
    pub fn limit(&self) -> u64 {
        self.now.limit()
    }

    /// Until the window resets, or the bucket is full again.
    pub fn reset_after(&self) -> Duration {
        self.now.reset_after()
    }

    /// Whether a ban holds the principal now.
    pub fn is_banned(&self) -> bool {
        self.now.is_ban() && !self.now.is_allowed()
    }

    /// How long the key refuses even a request of no cost: while a ban holds, or while a
    /// post-hoc charge's debt is repaid. `None` otherwise (a used-up window says
    /// [`reset_after`](Self::reset_after)).
    pub fn retry_after(&self) -> Option<Duration> {
        self.now.retry_after()
    }
}
