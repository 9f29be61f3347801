//! Responders: a [`Refusal`] into a response. JSON (the default) and problem+json here;
//! gRPC in [`GrpcResponder`](crate::GrpcResponder); the browser redirect in [`RedirectResponder`].

use std::fmt;

use bytes::Bytes;
use http::header::{CONTENT_TYPE, LOCATION};
use http::{HeaderValue, Response, StatusCode};

use crate::extract::Rejection;
use crate::refusal::{Refusal, RefusalKind};

/// Turns a [`Refusal`] into a response: its status, body and any header of its own.
///
/// Called for every answer the layer (or the in-handler limiter) makes itself: 429, 403,
/// 400, 401, 503. The layer then adds what every refusal carries whatever the body:
/// `Retry-After`, the rate-limit headers, `WWW-Authenticate` for a 401, CORS exposure. A
/// gRPC call is answered by [`GrpcResponder`](crate::GrpcResponder) and a refused
/// browser sent to the friendly page by [`RedirectResponder`] (when
/// [`Answering::redirect_browsers`](crate::Answering::redirect_browsers) is set) before this
/// responder is asked: a gRPC client cannot read an HTTP body, and a page load wants a page.
///
/// A responder of your own sees every other refusal and can hand any of them to a built-in:
///
/// ```
/// use bytes::Bytes;
/// use http::Response;
/// use ratekeeper_tower::{JsonResponder, Refusal, RefusalKind, Responder};
///
/// /// Plain text for limits, the default JSON for everything else.
/// struct Terse;
///
/// impl Responder for Terse {
///     fn respond(&self, refusal: &Refusal) -> Response<Bytes> {
///         match refusal.kind() {
///             RefusalKind::Limited => {
///                 let mut r = Response::new(Bytes::from_static(b"slow down"));
///                 *r.status_mut() = refusal.status();
///                 r
///             }
///             _ => JsonResponder.respond(refusal),
///         }
///     }
/// }
/// # let _ = ratekeeper_tower::Answering::new().with_responder(Terse);
/// ```
pub trait Responder: Send + Sync + 'static {
    /// The response for `refusal`; the status should be [`Refusal::status`].
    fn respond(&self, refusal: &Refusal) -> Response<Bytes>;
}

/// A closure is a responder (tower_governor's `error_handler`, with the refusal typed):
///
/// ```
/// use bytes::Bytes;
/// use http::Response;
/// use ratekeeper_tower::{Answering, Refusal};
///
/// let answering = Answering::new().with_responder(|refusal: &Refusal| {
///     let mut r = Response::new(Bytes::from_static(b"slow down"));
///     *r.status_mut() = refusal.status();
///     r
/// });
/// # let _ = answering;
/// ```
impl<F> Responder for F
where
    F: Fn(&Refusal) -> Response<Bytes> + Send + Sync + 'static,
{
    fn respond(&self, refusal: &Refusal) -> Response<Bytes> {
        self(refusal)
    }
}

/// The default responder: JSON `{"error": "...", "code": "...", "limit": "...",
/// "retry_after": N}`, `limit` when a limit refused and `retry_after` when waiting helps.
#[derive(Debug, Clone, Copy, Default)]
pub struct JsonResponder;

impl Responder for JsonResponder {
    fn respond(&self, r: &Refusal) -> Response<Bytes> {
        let mut body = String::with_capacity(128);
        body.push_str("{\"error\":");
        push_json_string(&mut body, r.message());
        body.push_str(",\"code\":");
        push_json_string(&mut body, r.code());
        if let Some(limit) = r.limit() {
            body.push_str(",\"limit\":");
            push_json_string(&mut body, limit.name());
        }
        if let Some(secs) = r.retry_after_secs() {
            body.push_str(",\"retry_after\":");
            body.push_str(itoa::Buffer::new().format(secs));
        }
        body.push('}');
        json(r.status(), body)
    }
}

/// The problem type of a refused request, from the IETF RateLimit header fields draft
/// (draft-ietf-httpapi-ratelimit-headers, "Problem Types").
pub const QUOTA_EXCEEDED: &str = "https://iana.org/assignments/http-problem-types#quota-exceeded";

/// The problem type of a 503 from the same draft: the service cannot serve now.
pub const TEMPORARY_REDUCED_CAPACITY: &str =
    "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity";

/// Where the problem types of our own live: the documentation of each
/// [`RefusalKind`] variant (`…#variant.Denied`, `…#variant.NoPrincipal`, `…#variant.Banned`).
pub const PROBLEM_TYPES: &str =
    "https://docs.rs/ratekeeper-tower/latest/ratekeeper_tower/enum.RefusalKind.html#variant.";

/// Answers every refusal as RFC 9457 problem details (`application/problem+json`):
///
/// | status | `type` | members beyond `type`, `title`, `status`, `detail` |
/// |---|---|---|
/// | 429 | [`QUOTA_EXCEEDED`] | `violated-policies`, `retry-after` when waiting helps, `code` unless a plain limit |
/// | 503 | [`TEMPORARY_REDUCED_CAPACITY`] | `retry-after`, `code` |
/// | 400, 401, 403, 500 | [`PROBLEM_TYPES`] + the kind (`NoPrincipal`, `Denied`, `Banned`) | `code` |
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
/// error that way. A refusal by a limit (`limit.exceeded`, `limit.cost_too_high`) has no
/// `code` member: the draft's type and `violated-policies` say it all.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProblemResponder;

impl Responder for ProblemResponder {
    fn respond(&self, r: &Refusal) -> Response<Bytes> {
        let plain_limit = matches!(r.kind(), RefusalKind::Limited | RefusalKind::TooCostly);
        let (ty, suffix, title) = match r.status().as_u16() {
            429 => (
                QUOTA_EXCEEDED,
                "",
                "Request cannot be satisfied as assigned quota has been exceeded",
            ),
            503 => (
                TEMPORARY_REDUCED_CAPACITY,
                "",
                "Service Unavailable Due to Temporary Reduced Capacity",
            ),
            _ => {
                let (name, title) = kind_type(r.kind());
                (PROBLEM_TYPES, name, title)
            }
        };
        let mut body = String::with_capacity(256);
        body.push_str("{\"type\":\"");
        body.push_str(ty);
        body.push_str(suffix);
        body.push_str("\",\"title\":");
        push_json_string(&mut body, title);
        body.push_str(",\"status\":");
        body.push_str(itoa::Buffer::new().format(r.status().as_u16()));
        body.push_str(",\"detail\":");
        push_json_string(&mut body, &detail(r));
        if !plain_limit {
            body.push_str(",\"code\":");
            push_json_string(&mut body, r.code());
        }
        if let Some(secs) = r.retry_after_secs() {
            body.push_str(",\"retry-after\":");
            body.push_str(itoa::Buffer::new().format(secs));
        }
        if let Some(limit) = r.limit() {
            body.push_str(",\"violated-policies\":[");
            push_json_string(&mut body, limit.name());
            body.push(']');
        }
        body.push('}');
        let mut resp = json(r.status(), body);
        resp.headers_mut().insert(
            CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        resp
    }
}

/// The `detail` of a problem: the refusing limit and the wait where a limit refused; a
/// wait of an hour or more (a calendar quota's, to its period's end) also as the instant
/// it ends, in UTC.
fn detail(r: &Refusal) -> String {
    match (r.limit(), r.retry_after_secs()) {
        (Some(limit), Some(secs)) if r.kind() == RefusalKind::Limited && secs >= 3_600 => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            format!(
                "Too many requests for {}: retry after {secs} s (at {}).",
                json_string(limit.name()),
                rfc3339(now.saturating_add(secs))
            )
        }
        (Some(limit), Some(secs)) if r.kind() == RefusalKind::Limited => format!(
            "Too many requests for {}: retry after {secs} s.",
            json_string(limit.name())
        ),
        (Some(limit), None) => format!(
            "This request costs more than {} ever allows.",
            json_string(limit.name())
        ),
        _ => r.message().to_owned(),
    }
}

/// `secs` since the Unix epoch as an RFC 3339 instant in UTC (`2026-12-20T08:00:00Z`):
/// the civil date from the day number (H. Hinnant's `civil_from_days`).
pub(crate) fn rfc3339(secs: u64) -> String {
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Days from 0000-03-01: eras of 400 years (146 097 days) from March, so leap days end
    // a year.
    let z = i64::try_from(days).unwrap_or(i64::MAX - 719_468) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3_600,
        rem / 60 % 60,
        rem % 60
    )
}

/// A kind's problem type (after [`PROBLEM_TYPES`]) and title, for the kinds whose status
/// has no type of the IETF draft's.
fn kind_type(kind: RefusalKind) -> (&'static str, &'static str) {
    match kind {
        RefusalKind::Denied => ("Denied", "Forbidden by an access list"),
        RefusalKind::Banned => ("Banned", "Banned"),
        RefusalKind::NoPrincipal => ("NoPrincipal", "The request does not say who it is from"),
        _ => ("Limited", "Refused"),
    }
}

/// Sends a refused browser to the friendly page with `303 See Other` (see
/// [`Answering::redirect_browsers`](crate::Answering::redirect_browsers), which asks it for a
/// 429 with a wait when the request's `Accept` has `text/html`). A location holding
/// `{retry_after}` gets the wait in whole seconds there (`/slow-down?wait={retry_after}` →
/// `/slow-down?wait=45`), so the page can say the real wait.
#[derive(Debug, Clone)]
pub struct RedirectResponder {
    location: HeaderValue,
    /// The location split around `{retry_after}`, when it holds one.
    template: Option<(Box<str>, Box<str>)>,
}

/// Where a redirect's location takes the wait.
pub(crate) const WAIT_PLACEHOLDER: &str = "{retry_after}";

impl RedirectResponder {
    /// A redirect to `location` (a valid `Location` value).
    pub fn new(location: HeaderValue) -> Self {
        let template = location
            .to_str()
            .ok()
            .and_then(|l| l.split_once(WAIT_PLACEHOLDER))
            .map(|(a, b)| (a.into(), b.into()));
        Self { location, template }
    }
}

impl Responder for RedirectResponder {
    fn respond(&self, refusal: &Refusal) -> Response<Bytes> {
        let mut r = Response::new(Bytes::new());
        *r.status_mut() = StatusCode::SEE_OTHER;
        let location = match (&self.template, refusal.retry_after_secs()) {
            (Some((before, after)), Some(secs)) => {
                let at = format!("{before}{secs}{after}");
                HeaderValue::from_str(&at).unwrap_or_else(|_| self.location.clone())
            }
            _ => self.location.clone(),
        };
        r.headers_mut().insert(LOCATION, location);
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
    push_json_string(&mut out, s);
    out
}

/// Appends `s` as a JSON string literal.
pub(crate) fn push_json_string(out: &mut String, s: &str) {
    out.push('"');
    // The common case, nothing to escape: one copy.
    if !s.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\') {
        out.push_str(s);
        out.push('"');
        return;
    }
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                out.push_str("\\u00");
                out.push(char::from(b"0123456789abcdef"[(c as usize) >> 4]));
                out.push(char::from(b"0123456789abcdef"[(c as usize) & 15]));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

pub(crate) fn json(status: StatusCode, body: String) -> Response<Bytes> {
    let mut r = Response::new(Bytes::from(body));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

/// An extractor's rejection as a response: its status, JSON `{"error": ..., "code": ...}`,
/// and `WWW-Authenticate` for a 401 (what the layer answers for it by default).
pub fn rejection_response(r: &Rejection) -> Response<Bytes> {
    let mut resp = JsonResponder.respond(&Refusal::from(r));
    if let Some(c) = r.challenge() {
        resp.headers_mut()
            .insert(http::header::WWW_AUTHENTICATE, c.clone());
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_are_rfc3339_in_utc() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_796_597_990), "2026-12-06T22:59:50Z");
        assert_eq!(rfc3339(1_803_859_200), "2027-03-01T00:00:00Z");
        assert_eq!(rfc3339(4_107_542_399), "2100-02-28T23:59:59Z");
    }

    #[test]
    fn json_strings_escape() {
        assert_eq!(json_string("a\"b\\c\n"), "\"a\\\"b\\\\c\\u000a\"");
    }
}
