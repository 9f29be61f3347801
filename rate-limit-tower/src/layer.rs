//! `RateLimitLayer`: the configuration, and `impl Layer`.

use std::fmt;
use std::sync::Arc;

use ratekeeper_core::limiter::Holding;
use ratekeeper_core::{AnyStore, ChainMode, FailurePolicy, Limiter, MemoryStore};
use tower_layer::Layer;

use crate::answer::Answering;
use crate::meters::{DEFAULT_NEAR_LIMIT, Meters};
use crate::rule::{InFlightRule, Rule};
use crate::service::RateLimit;
use crate::shared::Shared;

/// Applies an ordered chain of [`Rule`]s to every request, in one store call.
///
/// Cheap to clone; every clone, and every service it makes, shares the same counters.
///
/// ```
/// use ratekeeper_tower::core::{FailurePolicy, Limit};
/// use ratekeeper_tower::{Answering, RateLimitLayer, Rule};
/// use ratekeeper_tower::extract::ClientIp;
/// use std::time::Duration;
///
/// let guard = RateLimitLayer::in_memory()
///     .rule(
///         Rule::new(Limit::sliding_window("global", 1_200, Duration::from_secs(60))?, ClientIp::new())
///             .on_store_error(FailurePolicy::Memory),
///     )
///     .exempt("/healthz")
///     .answering(Answering::new().redirect_browsers("/too-many-requests")?);
/// # let _ = guard;
/// # Ok::<(), ratekeeper_tower::core::ConfigError>(())
/// ```
#[derive(Clone)]
#[must_use]
pub struct RateLimitLayer {
    pub(crate) shared: Arc<Shared>,
}

impl fmt::Debug for RateLimitLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.shared;
        f.debug_struct("RateLimitLayer")
            .field("limiter", &s.limiter)
            .field("rules", &s.rules)
            .field("mode", &s.mode)
            .field("exempt", &s.exact)
            .field("exempt_prefixes", &s.prefixes)
            .field("answering", &s.answering)
            .finish_non_exhaustive()
    }
}

impl RateLimitLayer {
    /// A layer counting through `limiter`, with no rules yet.
    ///
    /// Layers (and handlers, and jobs) given clones of one [`Limiter`] share it: one
    /// cool-down, one fallback, one log line per outage. [`Limiter::new`] takes any store
    /// (a [`MemoryStore`], a Redis store, a store of your own); [`Limiter::builder`] sets
    /// the time budget and the cool-down.
    ///
    /// ```
    /// use ratekeeper_tower::{Limiter, MemoryStore, RateLimitLayer};
    /// use std::time::Duration;
    ///
    /// let limiter = Limiter::new(MemoryStore::new());
    /// let guard = RateLimitLayer::new(limiter.clone());
    /// let route = RateLimitLayer::new(limiter); // the same limiter: one cool-down
    /// let slow = Limiter::builder(MemoryStore::new())
    ///     .timeout(Duration::from_millis(200))
    ///     .build()?;
    /// let other = RateLimitLayer::new(slow);
    /// # let _ = (guard, route, other);
    /// # Ok::<(), ratekeeper_tower::ConfigError>(())
    /// ```
    pub fn new(limiter: Limiter) -> Self {
        Self {
            shared: Arc::new(Shared {
                limiter,
                rules: Vec::new(),
                same_key: Vec::new(),
                names: Vec::new(),
                policy: FailurePolicy::Open,
                mode: ChainMode::InOrder,
                exact: Vec::new(),
                prefixes: Vec::new(),
                limit_preflights: false,
                answering: Answering::default(),
                counted: false,
                holding: Holding::default(),
                in_flight: Vec::new(),
                access: None,
                info_extension: false,
                meters: Arc::new(Meters::empty()),
                near_limit: DEFAULT_NEAR_LIMIT,
            }),
        }
    }

    /// A layer counting in process memory (a fresh [`MemoryStore`]).
    pub fn in_memory() -> Self {
        Self::new(Limiter::new(MemoryStore::new()))
    }

    fn edit(mut self, f: impl FnOnce(&mut Shared)) -> Self {
        let s = Arc::make_mut(&mut self.shared);
        f(s);
        // The series' keys, built once per configuration (never per request).
        let in_flight: Vec<Arc<str>> = s.in_flight.iter().map(|r| Arc::clone(&r.name)).collect();
        s.meters = Arc::new(Meters::new(
            &s.names,
            &in_flight,
            s.limiter.store(),
            s.near_limit,
        ));
        self
    }

    /// The share of a quota left at or under which an admitted request counts in
    /// `rate_limit_near_limit_total` (default 0.2: a fifth or less left). Clamped to
    /// 0..=1; with feature `metrics` off it has no effect.
    pub fn near_limit(self, share: f64) -> Self {
        self.edit(|s| {
            s.near_limit = if share.is_nan() {
                DEFAULT_NEAR_LIMIT
            } else {
                share.clamp(0.0, 1.0)
            }
        })
    }

    /// Appends a rule. Rules are checked in the order added, as one chain.
    pub fn rule(self, rule: Rule) -> Self {
        self.edit(|s| {
            s.names.push(Arc::clone(&rule.name));
            s.policy = if s.rules.is_empty() {
                rule.policy
            } else {
                s.policy.strictest(rule.policy)
            };
            s.counted |= rule.count.is_some();
            let same = s
                .rules
                .iter()
                .position(|r| r.key.same_key_as(&*rule.key) || rule.key.same_key_as(&*r.key));
            s.same_key.push(same);
            s.rules.push(rule);
        })
    }

    /// Adds an in-flight limit: at most `rule.limit().max()` requests of its principal at
    /// once (Stripe's concurrent-request limiter, nginx's `limit_conn`). Slots are taken
    /// before the rate rules are checked, in the order added, and released when the
    /// response body has been sent to the end or dropped. A request finding every slot
    /// held is answered 429 with a `Retry-After` estimate (until the earliest slot's lease
    /// runs out) and `RateLimit-Policy: "name";q=2;qu="concurrent-requests"`; an admitted
    /// one carries the limit in `RateLimit-Policy` and `RateLimit` too. On Redis a slot is
    /// a lease renewed every third of its TTL while the request runs, so a process that
    /// dies frees its slots within the TTL; each in-flight rule costs a command to take its
    /// slot and one to release it.
    pub fn in_flight(self, rule: InFlightRule) -> Self {
        self.edit(|s| s.in_flight.push(rule))
    }

    /// Allow and deny lists ([`Access`](crate::access::Access)), checked before anything
    /// else: a denied request is answered 403 before any store call; an allowed one skips
    /// every limit of this layer. Replaceable at run time through any clone of `access`.
    pub fn access(self, access: crate::access::Access) -> Self {
        self.edit(|s| s.access = Some(access))
    }

    /// How the chain charges (default [`ChainMode::InOrder`]).
    pub fn chain_mode(self, mode: ChainMode) -> Self {
        self.edit(|s| s.mode = mode)
    }

    /// A path that passes untouched (exact match), e.g. `/healthz`.
    pub fn exempt(self, path: impl Into<String>) -> Self {
        self.edit(|s| s.exact.push(path.into()))
    }

    /// Paths under `prefix` pass untouched, e.g. `/static/`.
    pub fn exempt_prefix(self, prefix: impl Into<String>) -> Self {
        self.edit(|s| s.prefixes.push(prefix.into()))
    }

    /// How refusals and headers are written: header style, the 429 body, shadow mode,
    /// the page browsers are sent to (default [`Answering::new`]). The page is exempt from
    /// this layer, so a refused browser can never loop.
    pub fn answering(self, answering: Answering) -> Self {
        self.edit(|s| s.answering = answering)
    }

    /// At most `n` requests held at once by this layer, all principals together (default
    /// [`default_max_held`](crate::core::limiter::default_max_held): a quarter of the process's
    /// open-file limit, 256 under the common 1 024): requests over a delayed limit's threshold
    /// ([`Limit::delayed`](crate::core::Limit::delayed)) wait for their delay, one at a
    /// time per principal, with a `Server-Timing: rate-limit-hold;dur=<ms>` header; over
    /// this cap, or from a source already waiting in a full line of its principal, they
    /// are answered 429 at once and their units given back. See [`Holding`].
    pub fn max_held(self, n: u64) -> Self {
        let n = usize::try_from(n).unwrap_or(usize::MAX);
        self.edit(|s| s.holding = Holding::new(n))
    }

    /// Whether CORS preflights (`OPTIONS` with `Access-Control-Request-Method`) are limited
    /// too (default: they pass untouched).
    pub fn limit_preflights(self, on: bool) -> Self {
        self.edit(|s| s.limit_preflights = on)
    }

    /// Whether every admitted response carries the decision as [`RateLimitInfo`] in its
    /// extensions, for a middleware of your own outside this layer to read (default: no).
    ///
    /// Refusals always carry it, and so does an admitted response on its way out through
    /// another `RateLimitLayer` (which merges it into its headers: see the crate docs);
    /// otherwise it is left out, as it costs three allocations per request.
    ///
    /// [`RateLimitInfo`]: crate::RateLimitInfo
    pub fn info_extension(self, on: bool) -> Self {
        self.edit(|s| s.info_extension = on)
    }

    /// The limiter (store, timeout, fallback) this layer counts with.
    pub fn limiter(&self) -> &Limiter<AnyStore> {
        &self.shared.limiter
    }

    /// The rules' limits, in order (clones share their live parameters: a quota changed
    /// on one is changed for the layer).
    pub fn limits(&self) -> Vec<ratekeeper_core::Limit> {
        self.shared.rules.iter().map(|r| r.limit.clone()).collect()
    }

    /// The access lists, if the layer has them.
    pub fn access_lists(&self) -> Option<&crate::access::Access> {
        self.shared.access.as_ref()
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimit<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RateLimit::new(inner, Arc::clone(&self.shared))
    }
}

impl<S> RateLimit<S> {
    /// A layer counting through `limiter` (see [`RateLimitLayer::new`]), as tower-http's
    /// services offer.
    pub fn layer(limiter: Limiter) -> RateLimitLayer {
        RateLimitLayer::new(limiter)
    }
}
