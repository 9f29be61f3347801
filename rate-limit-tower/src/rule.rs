//! Rules: a limit, who it counts, what a request costs, and what a store failure means.

use std::fmt;
use std::sync::Arc;

use ratekeeper_core::{Chain, FailurePolicy, InFlight, Limit, Principal};

use crate::count::CountWhen;
use crate::extract::{KeyExtractor, Rejection};

/// One limit of a layer: the limit, the extractor naming the principal, a cost, and the
/// failure policy — written together, where the rule is written.
///
/// ```
/// use ratekeeper_tower::core::{FailurePolicy, Limit, PrincipalKind};
/// use ratekeeper_tower::Rule;
/// use ratekeeper_tower::extract::{ClientIp, HeaderKey};
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
/// # Ok::<(), ratekeeper_tower::core::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct Rule {
    pub(crate) limit: Limit,
    pub(crate) key: Arc<dyn KeyExtractor>,
    pub(crate) cost: u64,
    /// A cost computed from the request's head, in place of `cost`.
    pub(crate) cost_from: Option<crate::cost::CostFn>,
    pub(crate) policy: FailurePolicy,
    pub(crate) name: Arc<str>,
    pub(crate) count: Option<CountWhen>,
    pub(crate) ban: BanAnswer,
    /// A calendar quota's anchor per principal ([`Rule::anchor_from`]).
    #[cfg(feature = "calendar")]
    pub(crate) anchor_from: Option<AnchorFn>,
}

/// Each principal's anchor of a calendar quota, from the request's head.
#[cfg(feature = "calendar")]
type AnchorFn = Arc<
    dyn Fn(
            &ratekeeper_core::Principal,
            &http::request::Parts,
        ) -> Option<ratekeeper_core::calendar::Anchor>
        + Send
        + Sync,
>;

/// How a layer answers a principal its ban rule bans ([`Rule::ban_answer`]).
///
/// You need it only to make bans look final (403) rather than the default 429.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum BanAnswer {
    /// 429 with `Retry-After` = the ban's remaining time and the responder's body: the
    /// default, since a ban ends by itself and well-behaved clients wait it out.
    #[default]
    TooManyRequests,
    /// 403 `{"error":"Banned.","code":"ban.active"}`, no `Retry-After`: for bans meant to
    /// look final to the client (scanners, credential stuffing).
    Forbidden,
}

impl fmt::Debug for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rule")
            .field("limit", &self.limit)
            .field("cost", &self.cost)
            .field("cost_from", &self.cost_from.is_some())
            .field("policy", &self.policy)
            .field("count", &self.count)
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
            cost_from: None,
            policy: FailurePolicy::Closed,
            name,
            count: None,
            ban: BanAnswer::default(),
            #[cfg(feature = "calendar")]
            anchor_from: None,
        }
    }

    /// For a ban rule ([`Limit::ban`]): how a banned principal is answered (default
    /// [`BanAnswer::TooManyRequests`]). Ignored for other limits.
    ///
    /// A ban rule is a rule like the others, placed **before** the rules whose refusals it
    /// counts: each refusal of the chain by a later rule of the same principal counts, in
    /// the same store call; a banned principal is answered at once, nothing counted. Its
    /// extractor must name a principal the requester controls, a client IP or an API key:
    /// any other kind (an account anyone can type in) would let anyone lock its owner
    /// out, and is answered with 500 `ban.principal_not_owned`, logged.
    ///
    /// ```
    /// use ratekeeper_tower::core::Limit;
    /// use ratekeeper_tower::{BanAnswer, RateLimitLayer, Rule};
    /// use ratekeeper_tower::extract::ClientIp;
    /// use std::time::Duration;
    ///
    /// let s = Duration::from_secs;
    /// let layer = RateLimitLayer::in_memory()
    ///     // 5 refusals within 10 minutes ban the IP for an hour, answered 403.
    ///     .rule(
    ///         Rule::new(Limit::ban("ip-ban", 5, s(600), s(3_600))?, ClientIp::new())
    ///             .ban_answer(BanAnswer::Forbidden),
    ///     )
    ///     .rule(Rule::new(Limit::sliding_window("per-ip", 100, s(60))?, ClientIp::new()));
    /// # let _ = layer;
    /// # Ok::<(), ratekeeper_tower::core::ConfigError>(())
    /// ```
    #[must_use]
    pub fn ban_answer(mut self, answer: BanAnswer) -> Self {
        self.ban = answer;
        self
    }

    /// The cost of one request (default 1). A cost of 0 only looks: the request is refused
    /// when the limit is exhausted, and nothing is counted.
    #[must_use]
    pub fn cost(mut self, cost: u64) -> Self {
        self.cost = cost;
        self.cost_from = None;
        self
    }

    /// The cost of each request, computed from its head (method, URI, headers) before the
    /// body is read and before the inner service runs: kilobytes from `content-length`
    /// ([`cost::body_kib`](crate::cost::body_kib)), a weight per method or route. A refused
    /// request's body is never read. See [`cost`](crate::cost) for what a client controls.
    ///
    /// **A computed cost of 0 is charged as 1**: every request that passes counts, so an
    /// empty body or a method weighted 0 is never free, however many are sent (a fixed
    /// [`cost(0)`](Self::cost) remains a look without a charge). A cost over the limit's
    /// quota is refused at once, 429 `limit.cost_too_high` with no `Retry-After` (waiting
    /// cannot help).
    ///
    /// ```
    /// use http::Method;
    /// use ratekeeper_tower::core::Limit;
    /// use ratekeeper_tower::{RateLimitLayer, Rule};
    /// use ratekeeper_tower::extract::ClientIp;
    /// use std::time::Duration;
    ///
    /// // Writes cost five reads.
    /// let api = RateLimitLayer::in_memory().rule(
    ///     Rule::new(Limit::token_bucket("api", 100, 10, Duration::from_secs(1))?, ClientIp::new())
    ///         .cost_from(|head| if head.method == Method::GET { 1 } else { 5 }),
    /// );
    /// # let _ = api;
    /// # Ok::<(), ratekeeper_tower::core::ConfigError>(())
    /// ```
    #[must_use]
    pub fn cost_from(
        mut self,
        cost: impl Fn(&http::request::Parts) -> u64 + Send + Sync + 'static,
    ) -> Self {
        self.cost_from = Some(Arc::new(cost));
        self
    }

    /// For a calendar quota ([`Limit::calendar`]): each principal's own anchor, such as
    /// the day its customer pays on, from the request's head and the principal the rule's
    /// extractor named: a claim an authentication layer put in the request's extensions,
    /// or a lookup of yours (a map of plans loaded at start and kept fresh). `None` counts
    /// from the limit's calendar's own anchor. Called once per request, on its path: keep
    /// it to a lookup in memory. Ignored for other limits.
    ///
    /// What a client controls: the principal, and whatever of the head the function
    /// reads. Take the anchor from what the client cannot choose (the account's record,
    /// a verified token), never from a header it sends: a client free to pick its anchor
    /// picks a new period whenever its count runs out.
    ///
    /// ```
    /// use std::collections::HashMap;
    /// use std::sync::Arc;
    /// use ratekeeper_tower::core::calendar::{Anchor, Calendar, Period};
    /// use ratekeeper_tower::core::{Limit, PrincipalKind};
    /// use ratekeeper_tower::extract::HeaderKey;
    /// use ratekeeper_tower::{RateLimitLayer, Rule};
    ///
    /// // Each customer's billing day, from your accounts (rendered principals as keys).
    /// let billing: Arc<HashMap<String, Anchor>> = Arc::new(HashMap::new());
    /// let plan = Limit::calendar("plan", 10_000, Calendar::new(Period::Month, "UTC")?)?;
    /// let layer = RateLimitLayer::in_memory().rule(
    ///     Rule::new(plan, HeaderKey::new("x-api-key".parse()?, PrincipalKind::ApiKey))
    ///         .anchor_from(move |principal, _head| billing.get(principal.as_str()).copied()),
    /// );
    /// # let _ = layer;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[cfg(feature = "calendar")]
    #[cfg_attr(docsrs, doc(cfg(feature = "calendar")))]
    #[must_use]
    pub fn anchor_from(
        mut self,
        anchor: impl Fn(
            &ratekeeper_core::Principal,
            &http::request::Parts,
        ) -> Option<ratekeeper_core::calendar::Anchor>
        + Send
        + Sync
        + 'static,
    ) -> Self {
        self.anchor_from = Some(Arc::new(anchor));
        self
    }

    /// `key`, anchored where the rule gives its principal an anchor of its own.
    #[inline]
    pub(crate) fn keyed(
        &self,
        key: ratekeeper_core::Key,
        head: &http::request::Parts,
    ) -> ratekeeper_core::Key {
        #[cfg(feature = "calendar")]
        if let Some(f) = &self.anchor_from
            && let Some(anchor) = f(key.principal(), head)
        {
            return key.anchored(anchor);
        }
        let _ = head;
        key
    }

    /// This rule's cost for a request with this head.
    #[inline]
    pub(crate) fn cost_of(&self, head: &http::request::Parts) -> u64 {
        match &self.cost_from {
            None => self.cost,
            Some(f) => f(head).max(1),
        }
    }

    /// What a store failure means for this rule (default [`FailurePolicy::Closed`]).
    #[must_use]
    pub fn on_store_error(mut self, policy: FailurePolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Counts only the responses `when` matches (default: every request counts), e.g.
    /// only failed sign-ins ([`CountWhen::failed`]).
    ///
    /// The unit is reserved before the inner service runs and given back once the response
    /// is known not to count (one more store call, only for those requests): race-free, so
    /// 64 concurrent failed attempts at a limit of 5 admit exactly 5. While requests are in
    /// flight their reserved units count, so concurrent successes are capped at the quota
    /// too. A unit stays counted when the inner service fails (no response), when the
    /// request is dropped after the inner service started (the client left; one dropped
    /// while still held for a delay gives its units back), when the store cannot
    /// take it back, and when this process dies before the response: at most the reserved
    /// unit, until its window ends. The headers report the state with the unit reserved.
    ///
    /// ```
    /// use ratekeeper_tower::core::{Limit, PrincipalKind};
    /// use ratekeeper_tower::{CountWhen, RateLimitLayer, Rule};
    /// use ratekeeper_tower::extract::HeaderKey;
    /// use std::time::Duration;
    ///
    /// // Five failed exports per account per hour; successful ones are free.
    /// let exports = RateLimitLayer::in_memory().rule(
    ///     Rule::new(
    ///         Limit::sliding_log("export-failures", 5, Duration::from_secs(3_600))?,
    ///         HeaderKey::new("x-account".parse().unwrap(), PrincipalKind::User),
    ///     )
    ///     .count_when(CountWhen::failed()),
    /// );
    /// # let _ = exports;
    /// # Ok::<(), ratekeeper_tower::core::ConfigError>(())
    /// ```
    #[must_use]
    pub fn count_when(mut self, when: CountWhen) -> Self {
        self.count = Some(when);
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

/// An in-flight limit of a layer ([`RateLimitLayer::in_flight`](crate::RateLimitLayer::in_flight)):
/// at most [`InFlight::max`] requests of one principal at once. The slot is taken before
/// the inner service runs and released when the response body has been sent to the end
/// or dropped (the client left), not when the headers leave.
///
/// ```
/// use ratekeeper_tower::core::{InFlight, PrincipalKind};
/// use ratekeeper_tower::{InFlightRule, RateLimitLayer};
/// use ratekeeper_tower::extract::HeaderKey;
/// use std::time::Duration;
///
/// let exports = RateLimitLayer::in_memory().in_flight(InFlightRule::new(
///     InFlight::new("exports", 2, Duration::from_secs(30))?,
///     HeaderKey::new("x-account".parse().unwrap(), PrincipalKind::User),
/// ));
/// # let _ = exports;
/// # Ok::<(), ratekeeper_tower::core::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct InFlightRule {
    pub(crate) limit: InFlight,
    pub(crate) key: Arc<dyn KeyExtractor>,
    pub(crate) policy: FailurePolicy,
    pub(crate) name: Arc<str>,
}

impl fmt::Debug for InFlightRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InFlightRule")
            .field("limit", &self.limit)
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl InFlightRule {
    /// At most `limit.max()` requests of `key`'s principal at once, failing closed.
    pub fn new(limit: InFlight, key: impl KeyExtractor) -> Self {
        let name = Arc::from(limit.name());
        Self {
            limit,
            key: Arc::new(key),
            policy: FailurePolicy::Closed,
            name,
        }
    }

    /// What a store failure means (default [`FailurePolicy::Closed`]: 503;
    /// [`FailurePolicy::Memory`]: a slot in the fallback memory store;
    /// [`FailurePolicy::Open`]: no slot).
    #[must_use]
    pub fn on_store_error(mut self, policy: FailurePolicy) -> Self {
        self.policy = policy;
        self
    }

    /// The limit.
    pub fn limit(&self) -> &InFlight {
        &self.limit
    }
}

/// The operator's error for a ban that names another kind: 500, logged.
pub(crate) fn not_owned(ban: &str, p: &Principal) -> Rejection {
    tracing::error!(
        name: "rate_limit.ban_principal_not_owned",
        target: "rate_limit.ban_principal_not_owned",
        ban,
        kind = ?p.kind(),
        "a ban must name a client IP or an API key; this request was refused"
    );
    Rejection::misconfigured(
        "ban.principal_not_owned",
        "A ban applies only to a client IP or an API key.",
    )
}

/// Refuses a chain with a ban ([`Limit::ban`]) of a principal the requester does not
/// control (core's rule: [`Chain::unowned_ban`]): the layer's own check, for chains a
/// handler builds itself (the axum crate's `HandlerLimiter` runs it). `Err` is the
/// operator's 500 `ban.principal_not_owned`, logged.
pub fn check_bans(chain: &Chain) -> Result<(), Rejection> {
    match chain.unowned_ban() {
        Some(c) => Err(not_owned(c.key().limit().name(), c.key().principal())),
        None => Ok(()),
    }
}
