//! Budgets: one threshold, written in one place, shared by routes and background jobs.
//!
//! A budget caps what each spender may spend, with separate caps for users and for jobs,
//! all under one global ceiling. Costs are weighted (tokens, bytes). The spender's own
//! counter is checked before the global one, in one all-or-nothing chain: a caller
//! already over its own cap cannot drain the shared budget with calls it will be refused
//! anyway. Every route and job takes the same [`Budget`] value (clone it), so raising a
//! cap in one place raises it everywhere — and [`Limit::set_quota`] changes it at run time.

use std::time::Duration;

use crate::chain::{Chain, Check};
use crate::error::ConfigError;
use crate::limit::Limit;
use crate::principal::Principal;

/// Who spends a budget.
///
/// You name one each time a budget is spent (`Budget::chain`): a user, or a background job
/// with its own cap.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Spender {
    /// A signed-in user or account.
    User(String),
    /// A background job, by name: its own cap, never a made-up user id.
    Job(String),
}

impl Spender {
    /// A user.
    pub fn user(id: impl Into<String>) -> Self {
        Self::User(id.into())
    }

    /// A job.
    pub fn job(name: impl Into<String>) -> Self {
        Self::Job(name.into())
    }
}

/// A shared budget: a cap per user, a cap per job, one global ceiling.
///
/// ```
/// use ratekeeper_core::{MemoryStore, Store};
/// use ratekeeper_core::budget::{Budget, Spender};
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// // Model tokens per UTC day: 20k per user, 200k per job, 1M in all.
/// let tokens = Budget::daily("model-tokens", 20_000, 200_000, 1_000_000)?;
/// let store = MemoryStore::new();
/// let d = store.check(&tokens.chain(&Spender::user("ann"), 1_500)).await.unwrap();
/// assert!(d.is_allowed());
/// let d = store.check(&tokens.chain(&Spender::job("resolve-ingredients"), 50_000)).await.unwrap();
/// assert!(d.is_allowed());
/// # Ok::<(), ratekeeper_core::ConfigError>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct Budget {
    user: Limit,
    job: Limit,
    global: Limit,
}

impl Budget {
    /// A budget from three limits: per user, per job, global.
    pub fn new(per_user: Limit, per_job: Limit, global: Limit) -> Self {
        Self {
            user: per_user,
            job: per_job,
            global,
        }
    }

    /// A budget per UTC day (fixed windows aligned to midnight UTC), its limits named
    /// `<name>-user`, `<name>-job` and `<name>-global`.
    pub fn daily(
        name: &str,
        per_user: u64,
        per_job: u64,
        global: u64,
    ) -> Result<Self, ConfigError> {
        let day = Duration::from_secs(86_400);
        Ok(Self::new(
            Limit::fixed_window(&format!("{name}-user"), per_user, day)?,
            Limit::fixed_window(&format!("{name}-job"), per_job, day)?,
            Limit::fixed_window(&format!("{name}-global"), global, day)?,
        ))
    }

    fn own(&self, who: &Spender) -> (&Limit, Principal) {
        match who {
            Spender::User(id) => (&self.user, Principal::user(id)),
            Spender::Job(name) => (&self.job, Principal::job(name)),
        }
    }

    /// The chain that spends `cost` for `who`: own cap first, then the ceiling.
    pub fn chain(&self, who: &Spender, cost: u64) -> Chain {
        let (own, principal) = self.own(who);
        Chain::new().check_cost(own, principal, cost).check_cost(
            &self.global,
            Principal::global(),
            cost,
        )
    }

    /// The checks that charge a cost known only afterwards (see
    /// [`Store::charge`](crate::Store::charge)), own cap first.
    pub fn charges(&self, who: &Spender, cost: u64) -> [Check; 2] {
        let (own, principal) = self.own(who);
        [
            Check::new(own.key(principal), cost),
            Check::new(self.global.key(Principal::global()), cost),
        ]
    }

    /// The per-user limit.
    pub fn per_user(&self) -> &Limit {
        &self.user
    }

    /// The per-job limit.
    pub fn per_job(&self) -> &Limit {
        &self.job
    }

    /// The global ceiling.
    pub fn global(&self) -> &Limit {
        &self.global
    }
}
