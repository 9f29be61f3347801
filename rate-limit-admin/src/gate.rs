//! The gate in front of every admin route. What a request's head decides is decided here,
//! before any body is read: a client locked out for failed sign-ins gets 429, an API call
//! without a valid bearer token 401, a form without this host's `Origin` 403, a form
//! without a live session 401. Bodies that pass are read up to a size that fits the
//! route (413 past it).
//!
//! Failed authentications (a wrong bearer token, a wrong token on the sign-in form) are
//! counted per client IP in a memory store of the admin's own, with this crate's limits:
//! [`FAILURES_PER_MINUTE`] a minute, then the address is locked out for [`LOCKOUT`]. A
//! lockout refuses *failures* (429 `admin.locked_out`, uncounted), never the right token
//! or a live session: a whole pub behind one address, where any player can lock the
//! address out, never locks the host out. Guessing stays hopeless: the admin takes only
//! tokens of 32 bytes or more, so even at the full request rate a guess is worth nothing.
//! Another address (the operator's) is never affected.

use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::request::Parts;
use axum::http::{Method, header};
use axum::middleware::Next;
use axum::response::Response;
use ratekeeper_axum::core::{Chain, ConfigError, Limit, MemoryStore, Principal, Store};
use ratekeeper_axum::tower::extract::ClientIp;

use crate::Admin;
use crate::auth::{Client, Locked, cookie, locked_out, same_origin};
use crate::page;

/// Failed authentications one client IP may make in a minute.
pub const FAILURES_PER_MINUTE: u64 = 10;
/// How long a client IP that failed more often is refused, without a token compare.
pub const LOCKOUT: Duration = Duration::from_secs(15 * 60);

/// The largest body of a form (sign-in, quota, ban lift, sign-out): a few hundred bytes
/// are enough.
pub(crate) const FORM_BODY: usize = 4 * 1024;
/// The largest body of an API call but the access lists: a quota or an override.
pub(crate) const API_BODY: usize = 4 * 1024;
/// The largest access lists (`PUT …/api/access`): some thousands of networks.
pub(crate) const ACCESS_BODY: usize = 256 * 1024;

/// Failed authentications per client IP, and the lockout after too many.
#[derive(Debug)]
pub(crate) struct Guard {
    store: MemoryStore,
    ban: Limit,
    failures: Limit,
    client_ip: ClientIp,
    lockout: Duration,
}

impl Guard {
    pub(crate) fn new(
        client_ip: ClientIp,
        (per_minute, lockout): (u64, Duration),
    ) -> Result<Self, ConfigError> {
        let minute = Duration::from_secs(60);
        Ok(Self {
            store: MemoryStore::new(),
            // Refused once by the failure window (one failure past the minute's): banned.
            ban: Limit::ban("admin-auth-lockout", 1, minute, lockout)?,
            failures: Limit::sliding_window("admin-auth-failures", per_minute, minute)?,
            client_ip,
            lockout,
        })
    }

    /// The client the failures are counted for: its IP (behind the trusted proxies the
    /// admin was given), or one shared principal when the server gives no peer address
    /// (serve with `into_make_service_with_connect_info`).
    fn who(&self, parts: &Parts) -> Principal {
        self.client_ip
            .resolve(parts)
            .map_or_else(|_| Principal::global(), Principal::ip)
    }

    /// How long `who` is still locked out, if it is.
    async fn locked_out(&self, who: &Principal) -> Option<Duration> {
        let chain = Chain::new().check(&self.ban, who.clone());
        let d = self.store.check(&chain).await.ok()?;
        d.denied_by()
            .map(|(_, d)| d.retry_after().unwrap_or(self.lockout))
    }

    /// Counts a failed authentication of `who`; the one that locks it out is logged (once
    /// an episode: a locked-out client is refused before it can fail again).
    pub(crate) async fn failed(&self, who: &Principal) {
        #[cfg(feature = "metrics")]
        metrics::counter!("rate_limit_admin_auth_failures_total").increment(1);
        let chain = Chain::new()
            .check(&self.ban, who.clone())
            .check(&self.failures, who.clone());
        if let Ok(d) = self.store.check(&chain).await
            && d.denied_by().is_some_and(|(by, _)| by == 1)
        {
            #[cfg(feature = "metrics")]
            metrics::counter!("rate_limit_admin_lockouts_total").increment(1);
            tracing::warn!(
                name: "rate_limit.admin_lockout",
                target: "rate_limit.admin_lockout",
                client = who.value(),
                failures_per_minute = self.failures.quota(),
                lockout_secs = self.lockout.as_secs(),
                "admin: too many failed authentications; the client is locked out"
            );
        }
    }
}

/// What a route of the admin is, from its path and method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    /// `{mount}/api/…`: a bearer token.
    Api,
    /// `POST {mount}/login`: this host's `Origin`; the token is in the body.
    Login,
    /// `POST {mount}/logout`: this host's `Origin` and a session cookie.
    Logout,
    /// `POST {mount}/forms/…`: this host's `Origin` and a live session.
    Form,
    /// `GET {mount}`: a session or a bearer token (the page decides which).
    Page,
}

fn route(a: &Admin, parts: &Parts) -> Route {
    let rest = parts
        .uri
        .path()
        .strip_prefix(a.inner.mount.as_str())
        .unwrap_or_default();
    match rest {
        _ if rest.starts_with("/api/") => Route::Api,
        "/login" => Route::Login,
        "/logout" => Route::Logout,
        _ if parts.method == Method::POST => Route::Form,
        _ => Route::Page,
    }
}

/// The gate (an axum middleware over the admin's routes).
pub(crate) async fn gate(State(a): State<Admin>, req: Request, next: Next) -> Response {
    let (mut parts, body) = req.into_parts();
    let guard = &a.inner.guard;
    let who = guard.who(&parts);
    let lock = guard.locked_out(&who).await;
    let h = &parts.headers;
    let route = route(&a, &parts);
    // During a lockout, what presents a wrong token is refused uncounted; the right token,
    // a live session, and pages that carry no token (the sign-in page, signing out) pass.
    // The sign-in form's token is in its body: its handler answers a failure with 429.
    if let Some(wait) = lock {
        let guess = match route {
            Route::Api => a.bearer(h).is_err(),
            Route::Page => h.contains_key(header::AUTHORIZATION) && a.bearer(h).is_err(),
            Route::Login | Route::Logout | Route::Form => false,
        };
        if guess {
            return locked_out(wait);
        }
    }
    parts.extensions.insert(Locked(lock));
    match route {
        Route::Api => {
            if let Err(unauthorized) = a.bearer(h) {
                // A wrong token is a guess; no token at all is none, and never counts.
                if h.contains_key(header::AUTHORIZATION) {
                    guard.failed(&who).await;
                }
                return unauthorized;
            }
        }
        // A wrong token counts, whether or not a session shows the page anyway.
        Route::Page if h.contains_key(header::AUTHORIZATION) && a.bearer(h).is_err() => {
            guard.failed(&who).await;
        }
        Route::Login | Route::Logout | Route::Form if !same_origin(&parts) => {
            return page::forbidden("This form must be sent from this site's own page.");
        }
        Route::Logout if cookie(h).is_none() => return page::signed_out(&a),
        // A session that ended (a stale cookie is never counted as a guess).
        Route::Form if a.session(h).is_none() => return page::sign_in_again(&a),
        _ => {}
    }
    parts.extensions.insert(Client(who));
    next.run(Request::from_parts(parts, body)).await
}
