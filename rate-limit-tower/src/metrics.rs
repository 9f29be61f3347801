//! Counters and a latency histogram through the `metrics` facade (feature `metrics`).
//!
//! | name | kind | labels |
//! |---|---|---|
//! | `rate_limit_allowed_total` | counter | `limit` |
//! | `rate_limit_limited_total` | counter | `limit` (the one that refused) |
//! | `rate_limit_shadow_limited_total` | counter | `limit` |
//! | `rate_limit_store_error_total` | counter | `limit`, `reason` |
//! | `rate_limit_fallback_total` | counter | `limit`, `policy` |
//! | `rate_limit_given_back_total` | counter | `limit` (a unit its rule did not count) |
//! | `rate_limit_store_seconds` | histogram | none |

#[cfg(feature = "metrics")]
use std::time::Duration;

#[cfg(feature = "metrics")]
mod on {
    use super::Duration;

    pub(crate) fn count(name: &'static str, limit: &str) {
        metrics::counter!(name, "limit" => limit.to_owned()).increment(1);
    }

    /// [`count`] with the limit's shared name: no copy of it (the allowed path's counter).
    pub(crate) fn count_shared(name: &'static str, limit: &std::sync::Arc<str>) {
        metrics::counter!(name, "limit" => std::sync::Arc::clone(limit)).increment(1);
    }

    pub(crate) fn count2(name: &'static str, limit: &str, key: &'static str, value: &'static str) {
        metrics::counter!(name, "limit" => limit.to_owned(), key => value).increment(1);
    }

    pub(crate) fn latency(d: Duration) {
        metrics::histogram!("rate_limit_store_seconds").record(d.as_secs_f64());
    }
}

#[cfg(not(feature = "metrics"))]
mod on {

    pub(crate) fn count(_: &'static str, _: &str) {}
    pub(crate) fn count_shared(_: &'static str, _: &std::sync::Arc<str>) {}
    pub(crate) fn count2(_: &'static str, _: &str, _: &'static str, _: &'static str) {}
}

#[cfg(feature = "metrics")]
pub(crate) use on::latency;
pub(crate) use on::{count, count_shared, count2};
