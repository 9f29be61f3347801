//! Who may call: bearer tokens compared as SHA-256 digests in constant time, the page's
//! sessions (a cookie for a token), CSRF tokens, the `Origin` check, and the audit log.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::http::request::Parts;
use axum::http::uri::Authority;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::Admin;

/// What a token may do.
///
/// You give each token one, so a dashboard's token can read and only an operator's can
/// change.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Read: limits, peeks, bans, lists, heavy hitters.
    ReadOnly,
    /// Read, and change: quotas, overrides, resets, bans lifted, lists.
    ReadWrite,
}

pub(crate) struct Token {
    pub(crate) name: String,
    digest: [u8; 32],
    role: Role,
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Token")
            .field("name", &self.name)
            .field("role", &self.role)
            .finish_non_exhaustive()
    }
}

fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

impl Token {
    pub(crate) fn new(name: String, secret: &[u8], role: Role) -> Self {
        Self {
            name,
            digest: sha256(secret),
            role,
        }
    }
}

/// Who called, by their token's name.
#[derive(Debug, Clone)]
pub(crate) struct Caller {
    pub(crate) name: String,
    pub(crate) role: Role,
}

/// A JSON error with a stable code.
pub(crate) fn error(status: StatusCode, code: &str, message: &str) -> Response {
    let body = serde_json::json!({ "error": message, "code": code }).to_string();
    let mut r = (status, [(header::CONTENT_TYPE, "application/json")], body).into_response();
    if status == StatusCode::UNAUTHORIZED {
        r.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            header::HeaderValue::from_static("Bearer realm=\"rate-limit admin\""),
        );
    }
    r
}

impl Admin {
    /// The token whose secret is `secret`: every token compared, in constant time.
    pub(crate) fn token_for(&self, secret: &[u8]) -> Option<Caller> {
        let digest = sha256(secret);
        let mut found = None;
        for t in &self.inner.tokens {
            if bool::from(t.digest.ct_eq(&digest)) {
                found = Some(Caller {
                    name: t.name.clone(),
                    role: t.role,
                });
            }
        }
        found
    }

    /// The caller a bearer token names; 401 `admin.unauthorized` otherwise.
    pub(crate) fn bearer(&self, headers: &HeaderMap) -> Result<Caller, Response> {
        headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .and_then(|t| self.token_for(t.trim().as_bytes()))
            .ok_or_else(|| {
                error(
                    StatusCode::UNAUTHORIZED,
                    "admin.unauthorized",
                    "A valid bearer token is required.",
                )
            })
    }

    /// The caller, who must be allowed to write; 401 or 403 `admin.read_only` otherwise.
    pub(crate) fn writer(&self, headers: &HeaderMap) -> Result<Caller, Response> {
        let c = self.bearer(headers)?;
        if c.role == Role::ReadOnly {
            return Err(read_only());
        }
        Ok(c)
    }
}

pub(crate) fn read_only() -> Response {
    error(
        StatusCode::FORBIDDEN,
        "admin.read_only",
        "This token may read, not change.",
    )
}

/// Logs a change: `rate_limit.admin_change`, with what, on what, by whom, when.
pub(crate) fn audit(caller: &Caller, action: &str, limit: &str, principal: &str, value: &str) {
    let at = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    tracing::info!(
        name: "rate_limit.admin_change",
        target: "rate_limit.admin_change",
        action,
        limit,
        principal,
        value,
        token = caller.name.as_str(),
        at_unix = at,
        "admin change"
    );
}

/// 32 random bytes, hex.
fn random_hex() -> Option<String> {
    let mut b = [0u8; 32];
    getrandom::fill(&mut b).ok()?;
    Some(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// How long a session lasts.
pub(crate) const SESSION: Duration = Duration::from_secs(3_600);
/// The most sessions kept: beyond, the oldest goes.
const MAX_SESSIONS: usize = 1_024;

#[derive(Debug, Clone)]
pub(crate) struct Session {
    pub(crate) caller: Caller,
    pub(crate) csrf: String,
    expires: Instant,
}

/// The page's sessions, by the SHA-256 of their cookie (a stolen memory dump shows no
/// usable cookie).
#[derive(Debug, Default)]
pub(crate) struct Sessions(Mutex<HashMap<[u8; 32], Session>>);

impl Sessions {
    /// A new session for `caller`: its cookie value.
    pub(crate) fn open(&self, caller: Caller) -> Option<String> {
        let (id, csrf) = (random_hex()?, random_hex()?);
        let now = Instant::now();
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        map.retain(|_, s| s.expires > now);
        if map.len() >= MAX_SESSIONS
            && let Some(oldest) = map.iter().min_by_key(|(_, s)| s.expires).map(|(k, _)| *k)
        {
            map.remove(&oldest);
        }
        let session = Session {
            caller,
            csrf,
            expires: now + SESSION,
        };
        map.insert(sha256(id.as_bytes()), session);
        Some(id)
    }

    /// The live session of the cookie `id`.
    pub(crate) fn get(&self, id: &str) -> Option<Session> {
        let map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        map.get(&sha256(id.as_bytes()))
            .filter(|s| s.expires > Instant::now())
            .cloned()
    }

    pub(crate) fn close(&self, id: &str) {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        map.remove(&sha256(id.as_bytes()));
    }
}

/// The session cookie's name.
pub(crate) const COOKIE: &str = "rl_admin";

/// The session cookie a request carries.
pub(crate) fn cookie(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == COOKIE)
        .map(|(_, v)| v)
}

/// Whether `a` equals `b`, in time that does not depend on where they differ.
pub(crate) fn same(a: &str, b: &str) -> bool {
    bool::from(sha256(a.as_bytes()).ct_eq(&sha256(b.as_bytes())))
}

/// The client a request came from, as the gate saw it (its IP principal): for handlers
/// that authenticate from the body (the sign-in form).
#[derive(Debug, Clone)]
pub(crate) struct Client(pub(crate) ratekeeper_axum::core::Principal);

/// Whether a form post comes from this host's own page: its `Origin` must name the host
/// the request was sent to: the `Host` header over HTTP/1.1, the `:authority` (the URI's
/// authority) over HTTP/2. A missing `Origin` is refused; every browser sends it on a
/// form POST.
pub(crate) fn same_origin(parts: &Parts) -> bool {
    let host = parts
        .headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .or_else(|| parts.uri.authority().map(Authority::as_str));
    let origin = parts
        .headers
        .get(header::ORIGIN)
        .and_then(|v| v.to_str().ok());
    match (host, origin) {
        (Some(host), Some(origin)) => origin.split_once("://").is_some_and(|(scheme, rest)| {
            matches!(scheme, "http" | "https") && rest.eq_ignore_ascii_case(host)
        }),
        _ => false,
    }
}

/// Whether the client's address was locked out when its request reached the gate, and for
/// how long yet (for the sign-in form, whose token is in its body).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Locked(pub(crate) Option<Duration>);

pub(crate) fn locked_out(wait: Duration) -> Response {
    let mut r = error(
        StatusCode::TOO_MANY_REQUESTS,
        "admin.locked_out",
        "Too many failed sign-ins from this address; try again later.",
    );
    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    if let Ok(v) = HeaderValue::from_str(&secs.to_string()) {
        r.headers_mut().insert(header::RETRY_AFTER, v);
    }
    r
}
