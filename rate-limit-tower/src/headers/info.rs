//! The answer's types a user names at the crate's root: which header styles a layer sends,
//! each limit's status and the request's rate-limit information.

use super::*;

/// Every header this crate may send, for `Access-Control-Expose-Headers`.
///
/// With tower-http's `CorsLayer` outside the limiter (it replaces that header), pass these
/// to `CorsLayer::expose_headers`:
///
/// ```
/// let exposed = ratekeeper_tower::EXPOSED_HEADERS;
/// assert!(exposed.iter().any(|h| h == "retry-after"));
/// ```
pub const EXPOSED_HEADERS: [HeaderName; 6] = [
    RETRY_AFTER,
    RATELIMIT_LIMIT,
    RATELIMIT_REMAINING,
    RATELIMIT_RESET,
    RATELIMIT_POLICY,
    RATELIMIT,
];

/// Which header styles a layer sends.
///
/// You need it (`Answering::headers`) only when your clients expect one style, or no
/// headers at all.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HeaderStyle {
    /// `RateLimit-Policy` and `RateLimit` only (the current IETF draft).
    Ietf,
    /// `RateLimit-Limit`, `RateLimit-Remaining`, `RateLimit-Reset` only (widely deployed).
    Trio,
    /// Both (the default).
    #[default]
    Both,
    /// No rate-limit headers (`Retry-After` is still sent on refusals).
    None,
}

impl HeaderStyle {
    /// Whether it sends (the trio, the IETF pair).
    pub(crate) fn fields(self) -> (bool, bool) {
        (
            matches!(self, Self::Trio | Self::Both),
            matches!(self, Self::Ietf | Self::Both),
        )
    }
}

/// One limit's state as the headers describe it.
///
/// You read it from a `RateLimitInfo` (an admitted request's extension, or a refusal), to
/// render headers or a body of your own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitStatus {
    pub(super) name: Arc<str>,
    pub(super) outcome: Outcome,
    pub(super) quota: u64,
    pub(super) window: u64,
    pub(super) remaining: u64,
    pub(super) reset: u64,
    pub(super) retry_after: Option<u64>,
    /// An in-flight limit: `quota` requests at once (`qu="concurrent-requests"`).
    pub(super) concurrent: bool,
}

impl LimitStatus {
    /// An in-flight limit's status: `max` at once, `remaining` free; refused, with the
    /// retry-after estimate, when `retry_after` is given.
    pub(crate) fn concurrent(
        name: Arc<str>,
        max: u64,
        remaining: u64,
        retry_after: Option<Duration>,
    ) -> Self {
        let retry_after = retry_after.map(|r| ceil_secs(r).max(1));
        Self {
            name,
            outcome: if retry_after.is_some() {
                Outcome::Denied
            } else {
                Outcome::Allowed
            },
            quota: max,
            window: 0,
            remaining,
            reset: retry_after.unwrap_or(0),
            retry_after,
            concurrent: true,
        }
    }

    /// The same refusal, told to retry after `secs` (jitter: never below the true value).
    pub(crate) fn with_retry_after(mut self, secs: u64) -> Self {
        self.retry_after = Some(secs);
        self
    }

    /// Whether this is an in-flight limit (its quota is requests at once, no window).
    pub fn is_concurrent(&self) -> bool {
        self.concurrent
    }

    pub(crate) fn new(name: Arc<str>, d: &Decision) -> Self {
        let retry_after = d.retry_after().map(|r| ceil_secs(r).max(1));
        let (window, reset) = window_and_reset(d, retry_after);
        Self {
            name,
            outcome: d.outcome(),
            quota: d.limit(),
            window,
            remaining: d.remaining(),
            reset,
            retry_after,
            concurrent: false,
        }
    }

    /// The limit's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What happened.
    pub fn outcome(&self) -> Outcome {
        self.outcome
    }

    /// The quota (or capacity).
    pub fn quota(&self) -> u64 {
        self.quota
    }

    /// The window in whole seconds.
    pub fn window_secs(&self) -> u64 {
        self.window
    }

    /// Units left.
    pub fn remaining(&self) -> u64 {
        self.remaining
    }

    /// Seconds until the limit is whole again (`t`); on a refusal, the retry-after.
    pub fn reset_secs(&self) -> u64 {
        self.reset
    }

    /// Whole seconds to wait, for a refusal (at least 1).
    pub fn retry_after_secs(&self) -> Option<u64> {
        self.retry_after
    }

    fn tighter_than(&self, other: &Self) -> bool {
        (self.remaining, std::cmp::Reverse(self.reset))
            < (other.remaining, std::cmp::Reverse(other.reset))
    }
}

/// What the rate limiter decided for a request; put in the response's extensions.
///
/// When two layers apply (a global guard outside a route's rules), the outer one merges
/// its view with the inner one's, so the response describes the more restrictive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateLimitInfo {
    pub(super) allowed: bool,
    pub(super) shadowed: bool,
    pub(super) headline: usize,
    // One or two limits per layer is the common case: inline, no allocation.
    pub(super) limits: SmallVec<[LimitStatus; 2]>,
    /// How long the request was held (a delayed limit), zero if not.
    pub(super) held: std::time::Duration,
}

impl RateLimitInfo {
    pub(crate) fn from_chain(names: &[Arc<str>], d: &ChainDecision) -> Option<Self> {
        // A ban that let the request through is no quota: not shown.
        let shown = |x: &&Decision| !(x.is_ban() && x.is_allowed());
        let limits: SmallVec<[LimitStatus; 2]> = d
            .decisions()
            .iter()
            .zip(names)
            .filter(|(x, _)| shown(x))
            .map(|(d, n)| LimitStatus::new(Arc::clone(n), d))
            .collect();
        let at = d.headline_index()?;
        let headline = d.decisions()[..at].iter().filter(shown).count();
        Some(Self {
            allowed: d.is_allowed(),
            shadowed: false,
            headline,
            limits,
            held: d.delay(),
        })
    }

    /// How long the request was held before it was answered (a limit made with
    /// [`Limit::delayed`](crate::core::Limit::delayed)); zero if it was not. Sent as
    /// `Server-Timing: rate-limit-hold;dur=<ms>`.
    pub fn held(&self) -> std::time::Duration {
        self.held
    }

    /// The refusal of an in-flight limit: every slot held.
    pub(crate) fn refused_in_flight(name: Arc<str>, max: u64, retry_after: Duration) -> Self {
        Self {
            allowed: false,
            shadowed: false,
            headline: 0,
            limits: smallvec::smallvec![LimitStatus::concurrent(name, max, 0, Some(retry_after))],
            held: Duration::ZERO,
        }
    }

    /// Adds an in-flight limit's status (never the headline of an admitted request).
    pub(crate) fn push_in_flight(&mut self, status: LimitStatus) {
        self.limits.push(status);
    }

    /// An admitted request's view when only in-flight limits applied.
    pub(crate) fn in_flight_only(status: LimitStatus) -> Self {
        Self {
            allowed: true,
            shadowed: false,
            headline: 0,
            limits: smallvec::smallvec![status],
            held: Duration::ZERO,
        }
    }

    pub(crate) fn shadow(mut self) -> Self {
        self.shadowed = !self.allowed;
        self.allowed = true;
        self
    }

    /// Whether the request was allowed (shadow mode: always).
    pub fn is_allowed(&self) -> bool {
        self.allowed
    }

    /// In shadow mode, whether the request would have been refused.
    pub fn would_have_been_limited(&self) -> bool {
        self.shadowed
    }

    /// The limit the single-valued headers describe.
    pub fn headline(&self) -> &LimitStatus {
        &self.limits[self.headline]
    }

    /// Every limit evaluated, in order.
    pub fn limits(&self) -> &[LimitStatus] {
        &self.limits
    }

    /// The refusing limit, if any.
    pub fn denied_by(&self) -> Option<&LimitStatus> {
        self.limits.iter().find(|l| l.outcome != Outcome::Allowed)
    }

    /// Merges the view of another layer (`inner`) into this one.
    pub(crate) fn merge(mut self, inner: RateLimitInfo) -> Self {
        let offset = self.limits.len();
        let (mine, theirs) = (self.headline().clone(), inner.headline().clone());
        let denied_here = !self.allowed && !self.shadowed;
        let denied_there = !inner.allowed && !inner.shadowed;
        let take_theirs = match (denied_here, denied_there) {
            (false, true) => true,
            (true, _) => false,
            (false, false) => theirs.tighter_than(&mine),
        };
        if take_theirs {
            self.headline = offset + inner.headline;
        }
        self.allowed &= inner.allowed;
        self.shadowed |= inner.shadowed;
        self.held = self.held.max(inner.held);
        self.limits.extend(inner.limits);
        self
    }

    /// Writes the headers of `style`, replacing any already there (an inner layer's).
    pub(crate) fn write(&self, style: HeaderStyle, headers: &mut HeaderMap) {
        self.write_with(style, headers, None);
    }

    /// Writes the headers of `style` onto a response none of ours has touched yet: nothing
    /// to remove, and `RateLimit-Policy` from `policy` when its limits are the ones it
    /// rendered last.
    pub(crate) fn write_fresh(
        &self,
        style: HeaderStyle,
        headers: &mut HeaderMap,
        policy: &PolicyCache,
    ) {
        self.write_with(style, headers, Some(policy));
    }

    /// No value allocates but the `RateLimit` field's (one allocation), and the policy's
    /// when it is not the cached one; the trio's numbers under 1 000 are static.
    fn write_with(&self, style: HeaderStyle, headers: &mut HeaderMap, fresh: Option<&PolicyCache>) {
        let (trio, ietf) = style.fields();
        // Our headers, plus one: axum's router adds `content-length` after every layer. A
        // handler's map usually holds one header in 8 slots (room for 6): with all five it
        // has to grow once either way, and growing here, before these are inserted, rehashes
        // one entry instead of six when `content-length` would overflow it; with the IETF
        // pair alone it need not grow at all.
        headers.reserve(3 * usize::from(trio) + 2 * usize::from(ietf) + 1);
        let cached = fresh.and_then(|cache| cache.terms(&self.limits));
        if trio {
            let h = self.headline();
            let quota = cached
                .and_then(|(terms, _)| terms.get(self.headline))
                .map_or_else(|| int_value(h.quota), |t| t.quota_value.clone());
            headers.insert(RATELIMIT_LIMIT, quota);
            headers.insert(RATELIMIT_REMAINING, int_value(h.remaining));
            headers.insert(RATELIMIT_RESET, int_value(h.reset));
        } else if fresh.is_none() {
            for name in [&RATELIMIT_LIMIT, &RATELIMIT_REMAINING, &RATELIMIT_RESET] {
                headers.remove(name);
            }
        }
        if ietf {
            let (policy, now) = match cached {
                Some((terms, policy)) => (
                    Some(policy.clone()),
                    now_from_terms(terms, self.limits.iter().map(|l| (l.remaining, l.reset))),
                ),
                None => (policy_value(&self.limits), now_value(&self.limits)),
            };
            put(headers, RATELIMIT_POLICY, policy);
            put(headers, RATELIMIT, now);
        } else if fresh.is_none() {
            headers.remove(&RATELIMIT_POLICY);
            headers.remove(&RATELIMIT);
        }
        if !self.held.is_zero() {
            write_held(headers, self.held);
        }
    }
}
