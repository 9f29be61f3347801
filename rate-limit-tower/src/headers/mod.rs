//! Rate-limit response headers: the `RateLimit-Limit` trio, the IETF draft's
//! `RateLimit-Policy` and `RateLimit` fields, `Retry-After`, and CORS exposure.
//!
//! # How each algorithm maps onto draft-ietf-httpapi-ratelimit-headers-11
//!
//! Each limit of a layer is one *quota policy*, named by the limit's name (an sf-string).
//!
//! | | `q` (quota) | `w` (window, s) | `r` (available) | `t` (effective window, s) |
//! |---|---|---|---|---|
//! | fixed window | quota | window | quota − count | to the window's end |
//! | sliding window | quota | window | what fits now | until the estimate has drained |
//! | sliding log | quota | window | quota − entries in the window | until the newest entry leaves |
//! | token bucket | capacity | time to refill an empty bucket | tokens now | until the bucket is full |
//! | calendar quota | quota | the current period's own length (a day of 23 or 25 hours, a month of 28 to 31 days) | quota − count | to the period's end (the next boundary) |
//!
//! On a refusal, `r` is what is left (often 0) and `t` equals `Retry-After`, so
//! `Retry-After` never points before the end of the effective window (draft §6). Seconds are
//! rounded up. The single-valued trio (`RateLimit-Limit`, `-Remaining`, `-Reset`) describes
//! the limit with the fewest units remaining (ties: the later reset); on a refusal, the
//! limit that refused. No rate-limit header is sent when a store failure let the request
//! through unchecked: there is nothing true to say.
//!
//! # Why the rendering is written here
//!
//! The values are rendered by hand into a per-thread arena (no allocation of their own:
//! each value is a slice of a shared 4 KiB buffer), not through `sfv`'s serializer or the `headers` crate's typed headers: every
//! response carries them, and through `sfv` each value was serialized and allocated on its
//! own. Measured in process under callgrind (`cargo bench -p ratekeeper-benches --bench
//! layer`, BENCHMARKS.md): the rewrite was a part of taking the layer from 17 400 to
//! 10 781 instructions per allowed request over bare axum. The output is checked against
//! `sfv`'s parser in this module's tests (parse → render → parse), so the grammar is
//! `sfv`'s. `Authorization: Bearer` is parsed by hand for the same reason and because the
//! extractor bounds the token's length and alphabet before hashing it, which
//! `headers::Authorization<Bearer>` does not.

use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use http::header::{ACCESS_CONTROL_EXPOSE_HEADERS, RETRY_AFTER, VARY};
use http::{HeaderMap, HeaderName, HeaderValue};
use ratekeeper_core::{ChainDecision, Decision, Outcome};
use smallvec::SmallVec;

/// `RateLimit-Limit`: the headline limit's quota.
pub const RATELIMIT_LIMIT: HeaderName = HeaderName::from_static("ratelimit-limit");
/// `RateLimit-Remaining`: what the headline limit has left.
pub const RATELIMIT_REMAINING: HeaderName = HeaderName::from_static("ratelimit-remaining");
/// `RateLimit-Reset`: seconds until the headline limit is whole again.
pub const RATELIMIT_RESET: HeaderName = HeaderName::from_static("ratelimit-reset");
/// `RateLimit-Policy`: every limit's quota and window (IETF draft).
pub const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
/// `RateLimit`: every limit's current service limit (IETF draft).
pub const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");

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

/// Whole seconds, rounded up.
pub(crate) fn ceil_secs(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

/// A decision's window and reset in whole seconds, as the fields send them (`w` at least
/// 1; `t` the retry-after when there is one): one rule for the full view and the inline
/// record.
pub(crate) fn window_and_reset(d: &Decision, retry_after: Option<u64>) -> (u64, u64) {
    (
        ceil_secs(d.window()).max(1),
        retry_after.unwrap_or_else(|| ceil_secs(d.reset_after())),
    )
}

/// One limit's state as the headers describe it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitStatus {
    name: Arc<str>,
    outcome: Outcome,
    quota: u64,
    window: u64,
    remaining: u64,
    reset: u64,
    retry_after: Option<u64>,
    /// An in-flight limit: `quota` requests at once (`qu="concurrent-requests"`).
    concurrent: bool,
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
    allowed: bool,
    shadowed: bool,
    headline: usize,
    // One or two limits per layer is the common case: inline, no allocation.
    limits: SmallVec<[LimitStatus; 2]>,
    /// How long the request was held (a delayed limit), zero if not.
    held: std::time::Duration,
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

mod fields;
mod record;

pub(crate) use fields::{PolicyCache, expose, retry_after};
use fields::{int_value, now_from_terms, now_value, policy_value, put, write_held};
pub(crate) use record::Record;

#[cfg(test)]
mod tests;
