//! edge-fallback (scenario 002 of docs/ARCHITECTURE.md): when the store cannot be asked, count in memory.
//!
//! A deployment whose store is missing (configured but unreachable), failing, or slow
//! does not fail requests for it: each one is counted in the process's own memory, the
//! store is not waited for beyond 500 ms (and skipped for a second after a failure), and
//! each store logs `rate_limit.fallback` once per reason — `missing`, `failed`,
//! `timed_out` — with its name and never a key.
//!
//! | route | principal | limit |
//! |---|---|---|
//! | `GET /api/items` | client IP | 120 / 60 s |
//! | `GET /api/me` | signed-in user (bearer) | 600 / 60 s |
//!
//! `EDGE_STORE` picks the store: `missing` (a Redis URL nobody listens on), `failing`
//! (a store that refuses every call), `slow` (one that never answers), or unset for
//! `REDIS_URL` / memory.

use std::time::Duration;

use axum::Router;
use axum::routing::get;
use ratekeeper_axum::client_ip;
use ratekeeper_core::store::{BoxStore, StoreErrorKind};
use ratekeeper_core::testing::{FaultyStore, Mode};
use ratekeeper_core::{
    AnyStore, ConfigError, FailurePolicy, Limit, Limiter, MemoryStore, RedisStore,
};
use ratekeeper_tower::extract::Bearer;
use ratekeeper_tower::{RateLimitLayer, Rule};

/// Which store the example runs on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EdgeStore {
    /// Configured, but nothing listens there.
    Missing(String),
    /// Refuses every call.
    Failing,
    /// Never answers.
    Slow,
    /// A real Redis.
    Redis(String),
    /// Process memory.
    Memory,
}

impl EdgeStore {
    /// From `EDGE_STORE` and `REDIS_URL`.
    pub fn from_env() -> Self {
        match std::env::var("EDGE_STORE").as_deref() {
            Ok("missing") => Self::Missing("redis://127.0.0.1:1/".to_owned()),
            Ok("failing") => Self::Failing,
            Ok("slow") => Self::Slow,
            _ => match std::env::var("REDIS_URL") {
                Ok(url) if !url.is_empty() => Self::Redis(url),
                _ => Self::Memory,
            },
        }
    }

    fn build(&self) -> Result<(AnyStore, &'static str), ConfigError> {
        Ok(match self {
            Self::Missing(url) | Self::Redis(url) => (
                AnyStore::Redis(RedisStore::builder(url.clone()).build()?),
                "redis",
            ),
            Self::Failing => {
                let s = FaultyStore::new();
                s.set(Mode::Fails(StoreErrorKind::Rejected));
                (AnyStore::Boxed(BoxStore::new(s)), "failing-store")
            }
            Self::Slow => {
                let s = FaultyStore::new();
                s.set(Mode::Hangs);
                (AnyStore::Boxed(BoxStore::new(s)), "slow-store")
            }
            Self::Memory => (AnyStore::Memory(MemoryStore::new()), "memory"),
        })
    }
}

/// The example's router.
pub fn app(store: &EdgeStore) -> Result<Router, ConfigError> {
    let (store, name) = store.build()?;
    crate::announce(&store);
    let limiter = Limiter::builder(store).name(name).build()?;
    let minute = Duration::from_secs(60);
    let per_address = RateLimitLayer::new(limiter.clone()).rule(
        Rule::new(Limit::fixed_window("address", 120, minute)?, client_ip())
            .on_store_error(FailurePolicy::Memory),
    );
    let per_user = RateLimitLayer::new(limiter).rule(
        Rule::new(
            Limit::fixed_window("signed-in", 600, minute)?,
            Bearer::new(),
        )
        .on_store_error(FailurePolicy::Memory),
    );
    Ok(Router::new()
        .route(
            "/api/items",
            get(|| async { "[]" }).route_layer(per_address),
        )
        .route("/api/me", get(|| async { "{}" }).route_layer(per_user)))
}

/// Serves `app` on `listener`.
pub async fn serve(listener: tokio::net::TcpListener, app: Router) -> std::io::Result<()> {
    crate::serve::serve(listener, app).await
}
