//! What the layer answers itself: 429, 303 for browsers, 503, and extractor rejections.

use std::fmt;

use bytes::Bytes;
use http::header::{CONTENT_TYPE, LOCATION, RETRY_AFTER, WWW_AUTHENTICATE};
use http::{HeaderValue, Response, StatusCode};

use crate::extract::Rejection;
use crate::headers::{LimitStatus, retry_after};

/// Writes the body of a 429. The layer adds `Retry-After` and the rate-limit headers.
pub trait Responder: Send + Sync + 'static {
    /// The response for a refused request; `denied` is the limit that refused.
    fn limited(&self, denied: &LimitStatus) -> Response<Bytes>;
}

/// The default responder: `429` with `{"error": "...", "limit": "...", "retry_after": N}`.
#[derive(Debug, Clone, Copy, Default)]
pub struct JsonResponder;

impl Responder for JsonResponder {
    fn limited(&self, denied: &LimitStatus) -> Response<Bytes> {
        let body = match denied.retry_after_secs() {
            Some(secs) => format!(
                "{{\"error\":\"Too many requests. Please slow down.\",\"limit\":{},\"retry_after\":{secs}}}",
                json_string(denied.name())
            ),
            None => format!(
                "{{\"error\":\"This request costs more than the limit allows.\",\"limit\":{}}}",
                json_string(denied.name())
            ),
        };
        json(StatusCode::TOO_MANY_REQUESTS, body)
    }
}

/// The problem type of a refused request, from the IETF RateLimit header fields draft
/// (draft-ietf-httpapi-ratelimit-headers, "Problem Types").
pub const QUOTA_EXCEEDED: &str = "https://iana.org/assignments/http-problem-types#quota-exceeded";

/// Answers refusals as RFC 9457 problem details (`application/problem+json`), with the
/// IETF draft's `quota-exceeded` type and its `violated-policies` member:
///
/// ```json
/// {"type":"https://iana.org/assignments/http-problem-types#quota-exceeded",
///  "title":"Request cannot be satisfied as assigned quota has been exceeded",
///  "status":429,"detail":"Too many requests for \"poll\": retry after 12 s.",
///  "retry-after":12,"violated-policies":["poll"]}
/// ```
///
/// Opt-in ([`Answering::with_responder`](crate::Answering::with_responder)):
/// [`JsonResponder`] stays the default, as clients written against its
/// `{"error": ..}` body keep working; problem details are for APIs that answer every
/// error that way. A request whose cost can never fit has no `retry-after` member.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProblemResponder;

impl Responder for ProblemResponder {
    fn limited(&self, denied: &LimitStatus) -> Response<Bytes> {
        let name = json_string(denied.name());
        let (detail, retry) = match denied.retry_after_secs() {
            Some(secs) => (
                format!("Too many requests for {name}: retry after {secs} s."),
                format!(",\"retry-after\":{secs}"),
            ),
            None => (
                format!("This request costs more than {name} ever allows."),
                String::new(),
            ),
        };
        let body = format!(
            "{{\"type\":\"{QUOTA_EXCEEDED}\",\"title\":\"Request cannot be satisfied as assigned quota has been exceeded\",\"status\":429,\"detail\":{}{retry},\"violated-policies\":[{name}]}}",
            json_string(&detail)
        );
        let mut r = json(StatusCode::TOO_MANY_REQUESTS, body);
        r.headers_mut().insert(
            CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        r
    }
}

impl fmt::Debug for dyn Responder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Responder")
    }
}

/// A JSON string literal.
pub(crate) fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

pub(crate) fn json(status: StatusCode, body: String) -> Response<Bytes> {
    let mut r = Response::new(Bytes::from(body));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

/// 403 for a request on a deny list.
pub(crate) fn forbidden() -> Response<Bytes> {
    json(
        StatusCode::FORBIDDEN,
        "{\"error\":\"Forbidden.\",\"code\":\"access.denied\"}".to_owned(),
    )
}

/// 403 for a principal banned by a rule answering [`BanAnswer::Forbidden`](crate::BanAnswer::Forbidden).
pub(crate) fn banned() -> Response<Bytes> {
    json(
        StatusCode::FORBIDDEN,
        "{\"error\":\"Banned.\",\"code\":\"ban.active\"}".to_owned(),
    )
}

/// 503 when the store is down and the rule fails closed.
pub(crate) fn unavailable(retry_secs: u64) -> Response<Bytes> {
    let mut r = json(
        StatusCode::SERVICE_UNAVAILABLE,
        "{\"error\":\"Rate limiting is unavailable; try again shortly.\"}".to_owned(),
    );
    r.headers_mut().insert(RETRY_AFTER, retry_after(retry_secs));
    r
}

/// 303 to the friendly page, for a browser.
pub(crate) fn redirect(location: &HeaderValue) -> Response<Bytes> {
    let mut r = Response::new(Bytes::new());
    *r.status_mut() = StatusCode::SEE_OTHER;
    r.headers_mut().insert(LOCATION, location.clone());
    r
}

/// An extractor's rejection as a response: its status, JSON `{"error": ..., "code": ...}`,
/// and `WWW-Authenticate` for a 401. The layer answers rejections with it.
pub fn rejection_response(r: &Rejection) -> Response<Bytes> {
    let body = format!(
        "{{\"error\":{},\"code\":{}}}",
        json_string(r.message()),
        json_string(r.code())
    );
    let mut resp = json(r.status(), body);
    if let Some(c) = r.challenge() {
        resp.headers_mut().insert(WWW_AUTHENTICATE, c.clone());
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_strings_escape() {
        assert_eq!(json_string("a\"b\\c\n"), "\"a\\\"b\\\\c\\u000a\"");
    }
}
