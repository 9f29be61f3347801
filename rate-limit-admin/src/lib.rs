//! An admin API and an operator's page for [`ratekeeper_axum`]'s limits: an axum `Router`
//! over the same limits, store and access lists as the layers and handlers that use them.
//!
//! A crate of its own, so that the limiter's crates carry no HTML, sessions or CSRF, and
//! the admin's changes never move their versions. [`guide`] walks through it: heavy
//! hitters, the API, the page, a fleet, and what an attacker can and cannot do.
//!
//! ```no_run
//! use ratekeeper_admin::{Admin, Role};
//! use ratekeeper_axum::{Limit, RateLimitLayer, Rule};
//! use ratekeeper_axum::tower::extract::ClientIp;
//! use axum::{Router, routing::get};
//! use std::time::Duration;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let layer = RateLimitLayer::in_memory()
//!     .rule(Rule::new(Limit::fixed_window("api", 100, Duration::from_secs(60))?, ClientIp::new()));
//! let admin = Admin::builder()
//!     .token("ops", std::env::var("ADMIN_TOKEN")?, Role::ReadWrite)
//!     .layer(&layer)
//!     .build()?;
//! let app: Router = Router::new()
//!     .route("/", get(|| async { "hello" }))
//!     .layer(layer)
//!     .merge(admin.router()); // `/admin` and `/admin/api/…`, outside the limits
//! # let _ = app;
//! # Ok(())
//! # }
//! ```
//!
//! **JSON under `{mount}/api/`** (the mount is `/admin` unless [`AdminBuilder::mount`]
//! says otherwise), every route behind `Authorization: Bearer <token>`:
//!
//! | method and path | does |
//! |---|---|
//! | `GET api/limits` | every limit: algorithm, quota, window, overrides, whether heavy hitters are tracked; with a fleet, `"fleet"`: the version this instance applied, when, the last error, whether notices arrive |
//! | `PUT api/limits/{limit}/quota` `{"quota": n}` | changes the quota (every instance with a fleet, else this one) |
//! | `PUT api/limits/{limit}/overrides/{principal}` `{"quota": n}` | a principal's own quota (the same) |
//! | `DELETE api/limits/{limit}/overrides/{principal}` | removes it |
//! | `GET api/limits/{limit}/principals/{principal}` | peeks: remaining, reset, banned (no unit spent) |
//! | `DELETE api/limits/{limit}/principals/{principal}` | resets the principal's count (or lifts its ban) in the store |
//! | `GET api/limits/{limit}/top?n=10` | the heavy hitters, by use and by refusals ([`ratekeeper_axum::core::top`]); with a fleet merged over every instance (`"scope": "fleet"`, `"instances"`) |
//! | `GET api/bans` | every ban in force, by ban limit, with the time left |
//! | `DELETE api/bans/{limit}/{principal}` | lifts a ban |
//! | `GET api/access` / `PUT api/access` | the allow and deny lists: `{"allow": {"addresses": […], "principals": […]}, "deny": {…}}` |
//!
//! A principal is written as it renders ([`Principal::as_str`](ratekeeper_axum::core::Principal::as_str)):
//! `ip:203.0.113.7`, `p:alice`, and a secret kind by its hash (`k:~3f…`, as the bans and
//! heavy hitters show it). **With a fleet** ([`AdminBuilder::fleet`]) changes to quotas,
//! overrides and lists are made for every instance that shares the store, within a second
//! (see [`ratekeeper_axum::core::fleet`]); without one they hold in this instance (the
//! parameters travel with each check). Resets and lifted bans act in the store, for every
//! instance, either way. Each change is logged as the audit event
//! `rate_limit.admin_change`: what, on what, by which token's name, when.
//!
//! **Secure by default**: building without a token is an error (`admin.invalid`); tokens
//! are compared as SHA-256 digests in constant time; a token can be read-only (a write is
//! then 403 `admin.read_only`); a request without a valid token is 401
//! `admin.unauthorized` and reaches no store. **The page**, `GET {mount}` with
//! `Accept: text/html`, is rendered on the server (no script, no external asset); a
//! browser cannot send a bearer token, so a login form exchanges it for an `HttpOnly;
//! SameSite=Strict; Secure` session cookie (an hour), and every form carries a CSRF token
//! and must come with an `Origin` naming this host.
//!
//! **Decided from the head, before any body is read**: every route passes a gate first.
//! A client IP that failed to authenticate [`FAILURES_PER_MINUTE`] times in a minute (a
//! wrong bearer token, a wrong token on the sign-in form) is refused for [`LOCKOUT`] with
//! 429 `admin.locked_out` and `Retry-After`, before any token compare; the failure that
//! locks it out is logged once as `rate_limit.admin_lockout` (with the address, never
//! the token) and, with feature `metrics`, each failure counts in
//! `rate_limit_admin_auth_failures_total` and each lockout in
//! `rate_limit_admin_lockouts_total`. Failures are counted in a memory store of the
//! admin's own (no store call; per instance), per client IP as
//! [`AdminBuilder::client_ip`] resolves it (the peer address by default: serve with
//! `into_make_service_with_connect_info`; without one, every client shares one count).
//! An API call without a valid token is 401 with its body unread; a form from another
//! origin is 403 and one without a live session 401, unread. Bodies are read up to 4 KiB
//! (256 KiB for the access lists) and refused with 413 past that.
//!
//! **Tokens** carry the whole of the admin's security: make each one 32 random bytes or
//! more (`openssl rand -hex 32`: 256 bits). Building refuses a token shorter than
//! [`MIN_TOKEN_BYTES`] or made of fewer than 8 distinct bytes (`admin.invalid`): a floor
//! that catches a placeholder, not a measure of randomness. At [`FAILURES_PER_MINUTE`]
//! guesses a minute per address, a 128-bit token outlasts any botnet.

// Handlers answer early with a response (`Result<_, Response>`): an admin's call, not a
// request's hot path, where the size of an error is no cost worth boxing for.
#![allow(clippy::result_large_err)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod api;
mod auth;
mod gate;
mod html;
mod page;
mod shared;
mod views;

#[doc = include_str!("../docs/guide.md")]
pub mod guide {}

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{delete, get, post, put};
use ratekeeper_axum::core::{AnyStore, ConfigError, ConfigErrorKind, Limit, Limiter};
use ratekeeper_axum::tower::RateLimitLayer;
use ratekeeper_axum::tower::access::Access;
use ratekeeper_axum::tower::extract::ClientIp;

pub use auth::Role;
pub use gate::{FAILURES_PER_MINUTE, LOCKOUT};

/// The shortest token [`AdminBuilder::build`] accepts, in bytes.
pub const MIN_TOKEN_BYTES: usize = 32;

use auth::{Sessions, Token};

/// The admin API and page; [`router`](Self::router) serves them. Cheap to clone.
///
/// You need it to let operators see and change limits while the service runs, over an API
/// and a page: build it with `Admin::builder`.
#[derive(Clone, Debug)]
pub struct Admin {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    mount: String,
    tokens: Vec<Token>,
    limits: Vec<Limit>,
    store: AnyStore,
    access: Option<Access>,
    /// Quotas and overrides changed for every instance (when given).
    fleet: Option<ratekeeper_axum::core::fleet::Fleet>,
    sessions: Sessions,
    secure_cookie: bool,
    guard: gate::Guard,
}

/// Builds an [`Admin`].
///
/// You need it to build an `Admin`: its tokens and their roles, the limits (or the layers)
/// it shows, the limiter, and the fleet whose changes it makes.
#[derive(Debug, Default)]
#[must_use]
pub struct AdminBuilder {
    mount: Option<String>,
    tokens: Vec<(String, Vec<u8>, Role)>,
    limits: Vec<Limit>,
    store: Option<AnyStore>,
    access: Option<Access>,
    fleet: Option<ratekeeper_axum::core::fleet::Fleet>,
    insecure_cookie: bool,
    client_ip: Option<ClientIp>,
    auth_failures: Option<(u64, std::time::Duration)>,
}

impl Admin {
    /// An admin with no token yet: [`AdminBuilder::build`] needs at least one.
    pub fn builder() -> AdminBuilder {
        AdminBuilder::default()
    }

    /// The routes: `{mount}` (the page), `{mount}/login`, `{mount}/logout`,
    /// `{mount}/forms/…` and `{mount}/api/…`. Merge it into the application's router,
    /// outside the rate-limit layers (or exempt its prefix).
    pub fn router<S: Clone + Send + Sync + 'static>(&self) -> Router<S> {
        let m = &self.inner.mount;
        let api = |p: &str| format!("{m}/api{p}");
        let access = get(api::access)
            .put(api::set_access)
            .layer(DefaultBodyLimit::max(gate::ACCESS_BODY));
        Router::new()
            .route(m, get(page::show))
            .route(&format!("{m}/login"), post(page::login))
            .route(&format!("{m}/logout"), post(page::logout))
            .route(&format!("{m}/forms/quota"), post(page::set_quota))
            .route(&format!("{m}/forms/lift"), post(page::lift))
            .route(&api("/limits"), get(api::limits))
            .route(&api("/limits/{limit}/quota"), put(api::set_quota))
            .route(
                &api("/limits/{limit}/overrides/{principal}"),
                put(api::set_override).delete(api::clear_override),
            )
            .route(
                &api("/limits/{limit}/principals/{principal}"),
                get(api::peek).delete(api::reset),
            )
            .route(&api("/limits/{limit}/top"), get(api::top))
            .route(&api("/bans"), get(api::bans))
            .route(&api("/bans/{limit}/{principal}"), delete(api::lift))
            .route(&api("/access"), access)
            .layer(DefaultBodyLimit::max(gate::FORM_BODY.max(gate::API_BODY)))
            .route_layer(axum::middleware::from_fn_with_state(
                self.clone(),
                gate::gate,
            ))
            .with_state(self.clone())
    }

    fn limit(&self, name: &str) -> Option<&Limit> {
        self.inner.limits.iter().find(|l| l.name() == name)
    }
}

impl AdminBuilder {
    /// A bearer token: `name` shows in the audit log (never the secret), `secret` is what
    /// the client sends (at least [`MIN_TOKEN_BYTES`] random bytes; keep it in a secret
    /// store), `role` what it may do.
    pub fn token(mut self, name: &str, secret: impl AsRef<[u8]>, role: Role) -> Self {
        self.tokens
            .push((name.to_owned(), secret.as_ref().to_vec(), role));
        self
    }

    /// Changes go through `fleet`, for every instance sharing its store (run
    /// [`Fleet::run`](ratekeeper_axum::core::fleet::Fleet::run) on each): quotas, overrides and
    /// the access lists are written to the store, versioned, and applied by every instance;
    /// resets and lifted bans reach every instance's cache at once; the heavy hitters are
    /// merged over every instance. A change the store cannot take is 503
    /// `admin.store_unavailable` and applied nowhere. Without one, quotas, overrides and
    /// lists change this instance only. `GET /limits` and the page show the version this
    /// instance applied, when, and whether notices arrive; with feature `metrics` so do
    /// the gauges of [`watch_fleet`](ratekeeper_axum::tower::metrics::watch_fleet).
    pub fn fleet(mut self, fleet: ratekeeper_axum::core::fleet::Fleet) -> Self {
        self.fleet = Some(fleet);
        self
    }

    /// A layer's limits, its store and its access lists.
    pub fn layer(mut self, layer: &RateLimitLayer) -> Self {
        self.store
            .get_or_insert_with(|| layer.limiter().store().clone());
        for l in layer.limits() {
            self = self.limit(l);
        }
        if let Some(a) = layer.access_lists() {
            self.access.get_or_insert_with(|| a.clone());
        }
        self
    }

    /// The store to peek, reset and list bans in (the first layer's, unless set here).
    pub fn limiter(mut self, limiter: &Limiter) -> Self {
        self.store = Some(limiter.store().clone());
        self
    }

    /// A limit used elsewhere (a handler's); a limit already added under its name is kept.
    pub fn limit(mut self, limit: Limit) -> Self {
        if !self.limits.iter().any(|l| l.name() == limit.name()) {
            self.limits.push(limit);
        }
        self
    }

    /// The access lists to read and replace.
    pub fn access(mut self, access: Access) -> Self {
        self.access = Some(access);
        self
    }

    /// How the client IP of a failed authentication is found (default
    /// [`ClientIp::new`]: the peer address). Behind a proxy, give the one the layers use
    /// (its trusted proxies), or every failure counts against the proxy's address.
    pub fn client_ip(mut self, client_ip: ClientIp) -> Self {
        self.client_ip = Some(client_ip);
        self
    }

    /// How many failed authentications a client IP may make in a minute, and how long it
    /// is then locked out (default [`FAILURES_PER_MINUTE`] and [`LOCKOUT`]).
    pub fn auth_failures(mut self, per_minute: u64, lockout: std::time::Duration) -> Self {
        self.auth_failures = Some((per_minute, lockout));
        self
    }

    /// Where the routes live (default `/admin`): `/` then letters, digits, `-`, `_`, `/`.
    pub fn mount(mut self, path: &str) -> Self {
        self.mount = Some(path.trim_end_matches('/').to_owned());
        self
    }

    /// Drops `Secure` from the session cookie, for a page served over plain HTTP on a
    /// private network (browsers keep `Secure` cookies only over HTTPS and on localhost).
    pub fn insecure_cookie(mut self) -> Self {
        self.insecure_cookie = true;
        self
    }

    /// The admin; `admin.invalid` without a token, with a token under
    /// [`MIN_TOKEN_BYTES`] or of fewer than 8 distinct bytes, a token name twice, no store (add a layer or a limiter), or a bad mount path.
    pub fn build(self) -> Result<Admin, ConfigError> {
        let invalid = |what: &str, why: &str| {
            ConfigError::new(
                ConfigErrorKind::AdminInvalid,
                what.to_owned(),
                why.to_owned(),
            )
        };
        if self.tokens.is_empty() {
            return Err(invalid(
                "admin.token",
                "an admin API needs at least one token",
            ));
        }
        let mut tokens = Vec::new();
        for (name, secret, role) in self.tokens {
            if secret.len() < MIN_TOKEN_BYTES || distinct(&secret) < 8 {
                return Err(invalid(
                    "admin.token",
                    "a token must be at least 32 random bytes (openssl rand -hex 32)",
                ));
            }
            if name.is_empty() || tokens.iter().any(|t: &Token| t.name == name) {
                return Err(invalid("admin.token", "each token needs a name of its own"));
            }
            tokens.push(Token::new(name, &secret, role));
        }
        let store = self
            .store
            .ok_or_else(|| invalid("admin.store", "add a layer or a limiter"))?;
        let mount = self.mount.unwrap_or_else(|| "/admin".to_owned());
        let ok = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'/');
        if !mount.starts_with('/') || mount.len() < 2 || !mount.bytes().all(ok) {
            return Err(invalid(
                "admin.mount",
                "a path: `/` then letters, digits, - _ /",
            ));
        }
        if let (Some(f), Some(a)) = (&self.fleet, &self.access) {
            shared::follow_access(f, a);
        }
        #[cfg(feature = "metrics")]
        if let Some(f) = &self.fleet {
            ratekeeper_axum::tower::metrics::watch_fleet(f);
        }
        Ok(Admin {
            inner: Arc::new(Inner {
                mount,
                tokens,
                limits: self.limits,
                store,
                access: self.access,
                fleet: self.fleet,
                sessions: Sessions::default(),
                secure_cookie: !self.insecure_cookie,
                guard: gate::Guard::new(
                    self.client_ip.unwrap_or_default(),
                    self.auth_failures.unwrap_or((FAILURES_PER_MINUTE, LOCKOUT)),
                )?,
            }),
        })
    }
}

/// How many different byte values `b` holds.
fn distinct(b: &[u8]) -> usize {
    let mut seen = [false; 256];
    b.iter().for_each(|&x| seen[usize::from(x)] = true);
    seen.iter().filter(|&&s| s).count()
}
