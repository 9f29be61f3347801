//! [`Refusal`]: every answer the layer makes itself (its docs say how).

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use http::{HeaderValue, StatusCode};

use crate::extract::Rejection;
use crate::headers::{self, LimitStatus, RateLimitInfo};

/// What happened, for a [`Refusal`].
///
/// You match on it in a responder of your own, to answer each kind of refusal in your
/// format (status, body, headers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RefusalKind {
    /// A limit refused: too many requests; retry after the wait.
    Limited,
    /// The request costs more than the limit ever admits: no wait helps.
    TooCostly,
    /// A ban rule bans the principal.
    Banned,
    /// Every slot of an in-flight limit is held.
    InFlight,
    /// The request fit a delayed limit, but the line of held requests was full.
    LineFull,
    /// An access list denies the request.
    Denied,
    /// No usable principal: the extractor's [`Rejection`] (400, 401; 500 when the server
    /// is set up wrong).
    NoPrincipal,
    /// The store cannot decide and the rule fails closed.
    Unavailable,
}

/// One refusal: every answer the layer makes itself, decided once, in one type.
///
/// The layer (and the axum crate's in-handler limiter) decides *what happened* into a
/// [`Refusal`]; a [`Responder`](crate::Responder) turns it into a response. Every refusal
/// has a [`RefusalKind`], an HTTP status, a stable [`code`](Refusal::code), a message for
/// people, and where it applies the wait and the refusing limit:
///
/// | kind | status | code | wait |
/// |---|---|---|---|
/// | [`Limited`](RefusalKind::Limited) | 429 | `limit.exceeded` | the limit's |
/// | [`TooCostly`](RefusalKind::TooCostly) | 429 | `limit.cost_too_high` | none: waiting cannot help |
/// | [`Banned`](RefusalKind::Banned) | 429 or 403 ([`BanAnswer`](crate::BanAnswer)) | `ban.active` | the ban's rest (429 only) |
/// | [`InFlight`](RefusalKind::InFlight) | 429 | `in_flight.full` | an estimate |
/// | [`LineFull`](RefusalKind::LineFull) | 429 | `delay.line_full` | the delay it could not wait |
/// | [`Denied`](RefusalKind::Denied) | 403 | `access.denied` | none |
/// | [`NoPrincipal`](RefusalKind::NoPrincipal) | 400, 401 (or 500) | the extractor's ([`Rejection::code`]) | none |
/// | [`Unavailable`](RefusalKind::Unavailable) | 503 | `store.unavailable` | the limiter's cool-down |
///
/// The layer then adds what every refusal of that kind carries whatever the responder:
/// `Retry-After` (the wait, jitter included), the rate-limit headers of the refusing chain,
/// `WWW-Authenticate` for a 401, CORS exposure, and [`RateLimitInfo`] in the extensions.
#[derive(Debug, Clone)]
pub struct Refusal {
    kind: RefusalKind,
    status: StatusCode,
    code: &'static str,
    message: Cow<'static, str>,
    retry_after: Option<u64>,
    limit: Option<LimitStatus>,
    info: Option<RateLimitInfo>,
    challenge: Option<HeaderValue>,
}

impl Refusal {
    fn new(
        kind: RefusalKind,
        status: StatusCode,
        code: &'static str,
        message: &'static str,
    ) -> Self {
        Self {
            kind,
            status,
            code,
            message: Cow::Borrowed(message),
            retry_after: None,
            limit: None,
            info: None,
            challenge: None,
        }
    }

    /// A 429 by the limit `denied` (its retry-after, jitter included, is the wait), with
    /// the chain's view for the headers.
    fn by_limit(
        (kind, code, message): (RefusalKind, &'static str, &'static str),
        denied: LimitStatus,
        info: RateLimitInfo,
    ) -> Self {
        let mut r = Self::new(kind, StatusCode::TOO_MANY_REQUESTS, code, message);
        r.retry_after = denied.retry_after_secs();
        r.limit = Some(denied);
        r.info = Some(info);
        r
    }

    /// A rate limit's refusal: a ban's, a held line's, a cost that never fits, or a limit's.
    pub(crate) fn limited(
        denied: LimitStatus,
        info: RateLimitInfo,
        ban: bool,
        line_full: bool,
    ) -> Self {
        let what = match (ban, line_full, denied.retry_after_secs()) {
            (true, _, _) => (RefusalKind::Banned, "ban.active", SLOW_DOWN),
            (_, true, _) => (RefusalKind::LineFull, "delay.line_full", LINE_FULL),
            (_, _, None) => (RefusalKind::TooCostly, "limit.cost_too_high", TOO_COSTLY),
            _ => (RefusalKind::Limited, "limit.exceeded", SLOW_DOWN),
        };
        Self::by_limit(what, denied, info)
    }

    /// A ban answered 403 (no wait told: it is meant to look final).
    pub(crate) fn banned_forbidden() -> Self {
        let status = StatusCode::FORBIDDEN;
        Self::new(RefusalKind::Banned, status, "ban.active", "Banned.")
    }

    /// Every slot of the in-flight limit `name` (of `max`) is held.
    pub fn in_flight(name: Arc<str>, max: u64, retry_after: Duration) -> Self {
        let info = RateLimitInfo::refused_in_flight(name, max, retry_after);
        let denied = info.headline().clone();
        let what = (RefusalKind::InFlight, "in_flight.full", IN_FLIGHT);
        Self::by_limit(what, denied, info)
    }

    /// A deny list's refusal.
    pub(crate) fn denied() -> Self {
        Self::new(
            RefusalKind::Denied,
            StatusCode::FORBIDDEN,
            "access.denied",
            "Forbidden.",
        )
    }

    /// The store cannot decide and the policy fails closed; retry after `retry_after`.
    pub fn unavailable(retry_after: Duration) -> Self {
        let mut r = Self::new(
            RefusalKind::Unavailable,
            StatusCode::SERVICE_UNAVAILABLE,
            "store.unavailable",
            UNAVAILABLE,
        );
        r.retry_after = Some(headers::ceil_secs(retry_after).max(1));
        r
    }

    /// What happened.
    pub fn kind(&self) -> RefusalKind {
        self.kind
    }

    /// The HTTP status of this refusal's kind (a gRPC call is answered with the status
    /// it maps to: see [`GrpcResponder`](crate::GrpcResponder)).
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The stable code (the table in [`Refusal`]'s docs).
    pub fn code(&self) -> &'static str {
        self.code
    }

    /// A sentence for people, in English.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The wait in whole seconds (at least 1), when waiting helps.
    pub fn retry_after_secs(&self) -> Option<u64> {
        self.retry_after
    }

    /// The limit that refused (a rate limit or an in-flight limit), if one did.
    pub fn limit(&self) -> Option<&LimitStatus> {
        self.limit.as_ref()
    }

    /// The chain's view, as the rate-limit headers describe it.
    pub fn info(&self) -> Option<&RateLimitInfo> {
        self.info.as_ref()
    }

    /// The `WWW-Authenticate` challenge of a 401.
    pub fn challenge(&self) -> Option<&HeaderValue> {
        self.challenge.as_ref()
    }

    /// Whether a browser may be sent to the friendly page instead: a 429 with a wait.
    pub(crate) fn redirects(&self) -> bool {
        self.status == StatusCode::TOO_MANY_REQUESTS && self.retry_after.is_some()
    }

    /// The view for the response's extensions, taken out.
    pub(crate) fn take_info(&mut self) -> Option<RateLimitInfo> {
        self.info.take()
    }
}

impl From<Rejection> for Refusal {
    fn from(r: Rejection) -> Self {
        Self::from(&r)
    }
}

impl From<&Rejection> for Refusal {
    fn from(r: &Rejection) -> Self {
        Self {
            kind: RefusalKind::NoPrincipal,
            status: r.status(),
            code: r.code(),
            message: r.message_cow().clone(),
            retry_after: None,
            limit: None,
            info: None,
            challenge: r.challenge().cloned(),
        }
    }
}

const SLOW_DOWN: &str = "Too many requests. Please slow down.";
const TOO_COSTLY: &str = "This request costs more than the limit allows.";
const LINE_FULL: &str = "Too many requests are waiting. Please slow down.";
const IN_FLIGHT: &str = "Too many requests at once. Please wait for one to finish.";
const UNAVAILABLE: &str = "Rate limiting is unavailable; try again shortly.";
