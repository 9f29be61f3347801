//! Rejections: what an extractor answers when it cannot name a principal.

use std::borrow::Cow;
use std::fmt;

use http::{HeaderValue, StatusCode};

/// Why an extractor could not name a principal.
///
/// You match on it in a responder or an extractor of your own, to answer a missing
/// principal (with a 401, say) apart from an invalid one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RejectionKind {
    /// The request does not carry the principal (no header, no signed-in user).
    Missing,
    /// The request carries it, but it is unusable (too long, not visible ASCII).
    Invalid,
    /// The server is set up wrong (for example no peer address where a client IP is
    /// needed). Answered with 500 and never falls back.
    Misconfigured,
}

/// A principal that could not be named: the client's 4xx (or the operator's 500).
///
/// The body is JSON: `{"error": "<message>", "code": "<code>"}`. Codes are stable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    kind: RejectionKind,
    status: StatusCode,
    code: &'static str,
    message: Cow<'static, str>,
    challenge: Option<HeaderValue>,
}

impl Rejection {
    /// A missing principal, answered with 400.
    pub fn missing(code: &'static str, message: impl Into<Cow<'static, str>>) -> Self {
        Self::new(
            RejectionKind::Missing,
            StatusCode::BAD_REQUEST,
            code,
            message,
        )
    }

    /// An unusable principal, answered with 400.
    pub fn invalid(code: &'static str, message: impl Into<Cow<'static, str>>) -> Self {
        Self::new(
            RejectionKind::Invalid,
            StatusCode::BAD_REQUEST,
            code,
            message,
        )
    }

    /// A server set up wrong, answered with 500.
    pub fn misconfigured(code: &'static str, message: impl Into<Cow<'static, str>>) -> Self {
        Self::new(
            RejectionKind::Misconfigured,
            StatusCode::INTERNAL_SERVER_ERROR,
            code,
            message,
        )
    }

    fn new(
        kind: RejectionKind,
        status: StatusCode,
        code: &'static str,
        message: impl Into<Cow<'static, str>>,
    ) -> Self {
        Self {
            kind,
            status,
            code,
            message: message.into(),
            challenge: None,
        }
    }

    /// Answers 401 with `WWW-Authenticate: <challenge>`, for a principal that is about
    /// authentication (a bearer token, a signed-in user).
    #[must_use]
    pub fn unauthorized(mut self, challenge: HeaderValue) -> Self {
        self.status = StatusCode::UNAUTHORIZED;
        self.challenge = Some(challenge);
        self
    }

    /// Why.
    pub fn kind(&self) -> RejectionKind {
        self.kind
    }

    /// The status code answered.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The stable code, e.g. `principal.missing`.
    pub fn code(&self) -> &'static str {
        self.code
    }

    /// The message, borrowed or owned as it was given.
    pub(crate) fn message_cow(&self) -> &Cow<'static, str> {
        &self.message
    }

    /// The message for the client.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The `WWW-Authenticate` challenge, for a 401.
    pub fn challenge(&self) -> Option<&HeaderValue> {
        self.challenge.as_ref()
    }
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({}): {}",
            self.status.as_u16(),
            self.code,
            self.message
        )
    }
}

impl std::error::Error for Rejection {}
