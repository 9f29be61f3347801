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

mod fields;
pub(crate) mod info;
mod record;

pub(crate) use fields::{PolicyCache, expose, retry_after};
use fields::{int_value, now_from_terms, now_value, policy_value, put, write_held};
pub(crate) use info::{EXPOSED_HEADERS, HeaderStyle, LimitStatus, RateLimitInfo};
pub(crate) use record::Record;

#[cfg(test)]
mod tests;
