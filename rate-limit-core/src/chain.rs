//! Chains: ordered checks that a store answers in one call.

use smallvec::SmallVec;

use crate::key::Key;
use crate::limit::Limit;
use crate::principal::Principal;

/// How a chain charges its limits.
///
/// | mode | a request refused by limit *i* | use it when |
/// |---|---|---|
/// | [`InOrder`](Self::InOrder) (default) | charges nothing anywhere; limits after *i* are not even read | always, unless you know why not |
/// | [`CountAttempts`](Self::CountAttempts) | charges limits 1 to *i*, the refusing one included; limits after *i* are untouched | every attempt counts, but an attempt refused early must not count against later principals (sign-in: client IP, then account) |
/// | [`ChargeAll`](Self::ChargeAll) | charges every limit, the refusing ones included | each counter must count every attempt, independently |
///
/// `InOrder` is what a per-minute limit in front of a per-day limit needs: a client hammering
/// a route while refused by the minute limit does not burn its daily allowance, and a
/// request refused by the day limit does not eat into the minute limit either. `ChargeAll`
/// behaves like a pipeline of independent counters (one `INCR` per limit): every attempt is
/// counted by every limit, so a refused client keeps itself refused. `CountAttempts` sits
/// between them: every attempt is counted by each limit it reaches, and a refusal stops it
/// there. On a sign-in chain (client IP, then account) an attacker whose IP is exhausted
/// keeps counting against its own IP but can no longer charge the victim's account, so it
/// cannot lock the victim out from that IP; with `ChargeAll` it could. Each costs one store
/// call. Do not move a caller from one to the other without checking that it does not rely
/// on the short circuit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ChainMode {
    /// In order; the first refusal decides, later limits are untouched, and a refused
    /// request consumes nothing from any limit (all or nothing).
    #[default]
    InOrder,
    /// Every limit is evaluated and charged, the refusing ones included (a cost a limit
    /// can never admit is still not charged to it). The first refusal in chain order decides.
    ChargeAll,
    /// In order, every attempt counted: each limit up to and including the first refusal is
    /// charged (the refusing one too, so hammering keeps a client refused); limits after it
    /// are untouched. The first refusal decides.
    CountAttempts,
}

/// One check of a chain: a key and the cost to charge it.
///
/// A chain is made of them (`Chain::check`, `Chain::check_cost`); you build one yourself
/// only to push a key made elsewhere (`Chain::push`), or read them back from a chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    key: Key,
    cost: u64,
}

impl Check {
    /// A check of `key` for `cost` units. A cost of 0 peeks: it reports and changes nothing.
    #[inline]
    pub fn new(key: Key, cost: u64) -> Self {
        Self { key, cost }
    }

    /// The key.
    pub fn key(&self) -> &Key {
        &self.key
    }

    /// The cost.
    pub fn cost(&self) -> u64 {
        self.cost
    }
}

/// An ordered list of checks, answered by a store in one call (one Redis round trip).
///
/// ```
/// use ratekeeper_core::{Chain, Limit, Principal};
/// use std::time::Duration;
///
/// let per_account = Limit::sliding_log("sign-in-account", 5, Duration::from_secs(900))?;
/// let per_ip = Limit::sliding_log("sign-in-ip", 20, Duration::from_secs(900))?;
/// let chain = Chain::new()
///     .check(&per_ip, Principal::ip("203.0.113.9".parse().unwrap()))
///     .check(&per_account, Principal::user("ann"));
/// assert_eq!(chain.len(), 2);
/// # Ok::<(), ratekeeper_core::ConfigError>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Chain {
    // Most chains are one or two checks: those need no allocation.
    checks: SmallVec<[Check; 2]>,
    mode: ChainMode,
}

impl Chain {
    /// The first check that bans a principal the requester does not control (see
    /// [`PrincipalKind::may_be_banned`](crate::PrincipalKind::may_be_banned)): such a chain is
    /// a setup error, which the Tower layer and the axum crate answer with a 500.
    pub fn unowned_ban(&self) -> Option<&Check> {
        self.checks()
            .iter()
            .find(|c| !c.key().limit().may_name(c.key().principal()))
    }

    /// An empty chain in [`ChainMode::InOrder`].
    #[inline]
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty chain in [`ChainMode::ChargeAll`].
    pub fn charge_all() -> Self {
        Self {
            checks: SmallVec::new(),
            mode: ChainMode::ChargeAll,
        }
    }

    /// An empty chain in [`ChainMode::CountAttempts`]: sign-in and other chains where every
    /// attempt counts, without letting an attempt refused early count against a later
    /// principal.
    pub fn count_attempts() -> Self {
        Self {
            checks: SmallVec::new(),
            mode: ChainMode::CountAttempts,
        }
    }

    /// Sets the mode.
    #[must_use]
    #[inline]
    pub fn mode(mut self, mode: ChainMode) -> Self {
        self.mode = mode;
        self
    }

    /// Appends a check of `principal` under `limit` with cost 1.
    #[must_use]
    pub fn check(self, limit: &Limit, principal: Principal) -> Self {
        self.check_cost(limit, principal, 1)
    }

    /// Appends a check of `principal` under `limit` with the given cost.
    #[must_use]
    pub fn check_cost(mut self, limit: &Limit, principal: Principal, cost: u64) -> Self {
        self.push(Check::new(limit.key(principal), cost));
        self
    }

    /// Makes room for `n` more checks (up to two need none: they are kept inline).
    #[inline]
    pub fn reserve(&mut self, n: usize) {
        if self.checks.len() + n > self.checks.inline_size() {
            self.checks.reserve_exact(n);
        }
    }

    /// Appends a check.
    #[inline]
    pub fn push(&mut self, check: Check) {
        self.checks.push(check);
    }

    /// The checks, in order.
    pub fn checks(&self) -> &[Check] {
        &self.checks
    }

    /// The mode.
    pub fn chain_mode(&self) -> ChainMode {
        self.mode
    }

    /// The number of checks.
    pub fn len(&self) -> usize {
        self.checks.len()
    }

    /// Whether the chain has no checks (a store allows an empty chain).
    pub fn is_empty(&self) -> bool {
        self.checks.is_empty()
    }
}
