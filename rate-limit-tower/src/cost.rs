//! Costs taken from a request's head, before its body is read ([`Rule::cost_from`](crate::Rule::cost_from)).
//!
//! ```
//! use ratekeeper_tower::core::{Limit, PrincipalKind};
//! use ratekeeper_tower::{RateLimitLayer, Rule, cost};
//! use ratekeeper_tower::extract::HeaderKey;
//! use std::time::Duration;
//!
//! // 10 MiB of uploads per user per minute, charged by the KiB the request declares; a
//! // body of unknown length (chunked) is charged as the most the route accepts, 1 MiB.
//! let uploads = RateLimitLayer::in_memory().rule(
//!     Rule::new(
//!         Limit::sliding_window("upload-kib", 10 * 1_024, Duration::from_secs(60))?,
//!         HeaderKey::new("x-user".parse().unwrap(), PrincipalKind::User),
//!     )
//!     .cost_from(|head| cost::body_kib(head).unwrap_or(1_024)),
//! );
//! # let _ = uploads;
//! # Ok::<(), ratekeeper_tower::core::ConfigError>(())
//! ```
//!
//! What a client controls: every byte of the head, so a computed cost is only as honest as
//! the header it reads. `content-length` is honest where it matters: hyper reads no more
//! of a body than it declares, so a client that declares 1 KiB and sends 2 MiB has sent
//! 1 KiB and then a malformed next request. An HTTP/1.x request with neither
//! `content-length` nor `transfer-encoding` has no body (RFC 9112 §6.3; reqwest sends an
//! empty `POST` that way): 0, charged 1. A client that declares nothing (chunked encoding,
//! or HTTP/2 without `content-length`) gets the `None` branch: charge the most the route
//! accepts, and cap the body at that (axum's `DefaultBodyLimit`, tower-http's
//! `RequestBodyLimitLayer`). A refused request never reaches the inner service, so its body
//! is never read.

use std::sync::Arc;

use http::Version;
use http::header::{CONTENT_LENGTH, TRANSFER_ENCODING};
use http::request::Parts;

/// A cost computed from a request's head.
pub(crate) type CostFn = Arc<dyn Fn(&Parts) -> u64 + Send + Sync>;

/// The body's length as the head declares it (`content-length`) in KiB (1 024 bytes),
/// rounded up: 0 for an empty body, 1 for 1 to 1 024 bytes. An HTTP/1.x request with
/// neither `content-length` nor `transfer-encoding` has an empty body (RFC 9112 §6.3): 0.
/// `None` when the head does not say: a chunked body, an HTTP/2 or HTTP/3 request without
/// `content-length` (an empty one included: the frames say it, not the head), or a length
/// that is not a number. A layer counts a computed 0 as 1.
pub fn body_kib(head: &Parts) -> Option<u64> {
    body_units(head, 1_024)
}

/// The body's declared length in units of `unit` bytes (at least 1), rounded up; `0` and
/// `None` as for [`body_kib`].
pub fn body_units(head: &Parts, unit: u64) -> Option<u64> {
    let Some(len) = head.headers.get(CONTENT_LENGTH) else {
        let http1 = head.version <= Version::HTTP_11;
        return (http1 && !head.headers.contains_key(TRANSFER_ENCODING)).then_some(0);
    };
    let len: u64 = len.to_str().ok()?.trim().parse().ok()?;
    Some(len.div_ceil(unit.max(1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(len: Option<&str>) -> Parts {
        let mut b = http::Request::post("/");
        if let Some(len) = len {
            b = b.header(CONTENT_LENGTH, len);
        }
        b.body(()).unwrap().into_parts().0
    }

    #[test]
    fn the_declared_length_is_counted_in_whole_units_rounded_up() {
        assert_eq!(body_kib(&head(Some("0"))), Some(0));
        assert_eq!(body_kib(&head(Some("1"))), Some(1));
        assert_eq!(body_kib(&head(Some("1024"))), Some(1));
        assert_eq!(body_kib(&head(Some("1025"))), Some(2));
        assert_eq!(body_kib(&head(Some("2097152"))), Some(2_048));
        assert_eq!(body_units(&head(Some("10")), 0), Some(10));
        assert_eq!(
            body_kib(&head(None)),
            Some(0),
            "HTTP/1.1 with no length: empty"
        );
        let mut chunked = head(None);
        chunked
            .headers
            .insert(TRANSFER_ENCODING, "chunked".parse().unwrap());
        assert_eq!(body_kib(&chunked), None);
        let mut h2 = head(None);
        h2.version = Version::HTTP_2;
        assert_eq!(body_kib(&h2), None, "HTTP/2 says it in its frames");
        let mut h10 = head(None);
        h10.version = Version::HTTP_10;
        assert_eq!(body_units(&h10, 10), Some(0));
        assert_eq!(body_kib(&head(Some("-1"))), None);
        assert_eq!(body_kib(&head(Some("lots"))), None);
        assert_eq!(body_kib(&head(Some("99999999999999999999999"))), None);
    }
}
