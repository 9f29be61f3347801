//! Rules: a limit, who it counts, what a request costs, and what a store failure means.

use std::fmt;
use std::sync::Arc;

use rate_limit_core::{FailurePolicy, Limit};

use crate::extract::KeyExtractor;

/// One limit of a layer: the limit, the extractor naming the principal, a cost, and the
/// failure policy — written together, where the rule is written.
///
/// ```
/// use rate_limit_core::{FailurePolicy, Limit, PrincipalKind};
/// use rate_limit_tower::Rule;
/// use rate_limit_tower::extract::{ClientIp, HeaderKey};
/// use std::time::Duration;
///
/// let per_player = Rule::new(
///     Limit::sliding_window("poll", 20, Duration::from_secs(60))?,
///     HeaderKey::new("x-participant-id".parse().unwrap(), PrincipalKind::Participant),
/// )
/// .on_store_error(FailurePolicy::Open); // a poll is cheap: keep the quiz running
///
/// let guard = Rule::new(
///     Limit::sliding_window("global-ip", 1_200, Duration::from_secs(60))?,
///     ClientIp::new(),
/// )
/// .on_store_error(FailurePolicy::Memory);
/// # let _ = (per_player, guard);
/// # Ok::<(), rate_limit_core::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct Rule {
    pub(crate) limit: Limit,
    pub(crate) key: Arc<dyn KeyExtractor>,
    pub(crate) cost: u64,
    pub(crate) policy: FailurePolicy,
    pub(crate) name: Arc<str>,
}

impl fmt::Debug for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rule")
            .field("limit", &self.limit)
            .field("cost", &self.cost)
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl Rule {
    /// A rule counting `key`'s principal under `limit`, at cost 1, failing closed.
    pub fn new(limit: Limit, key: impl KeyExtractor) -> Self {
        let name = Arc::from(limit.name());
        Self {
            limit,
            key: Arc::new(key),
            cost: 1,
            policy: FailurePolicy::Closed,
            name,
        }
    }

    /// The cost of one request (default 1).
    #[must_use]
    pub fn cost(mut self, cost: u64) -> Self {
        self.cost = cost;
        self
    }

    /// What a store failure means for this rule (default [`FailurePolicy::Closed`]).
    #[must_use]
    pub fn on_store_error(mut self, policy: FailurePolicy) -> Self {
        self.policy = policy;
        self
    }

    /// The limit.
    pub fn limit(&self) -> &Limit {
        &self.limit
    }

    /// The failure policy.
    pub fn policy(&self) -> FailurePolicy {
        self.policy
    }
}
