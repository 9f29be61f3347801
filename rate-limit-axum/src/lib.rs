//! Rate limiting for axum.
//!
//! Everything from [`ratekeeper_tower`] works with axum as it is; this crate adds keys that
//! speak axum ([`PathParam`], [`RouteTemplate`], [`client_ip`] from `ConnectInfo`), the
//! in-handler limiter ([`HandlerLimiter`]) for principals and costs known only inside a
//! handler, and `IntoResponse` for rejections.
//!
//! **New here?** [`guide::getting_started`] goes from one limited route to a service that
//! counts per player in Redis; [`guide`] lists every guide of the family (keys, limits,
//! costs, stores, failure policies, answers, delays and bans, metrics, the admin,
//! operating), each in the crate it belongs to.
//!
//! # Where a layer goes
//!
//! - `Router::layer`: a global guard; it sees every request, before routing, including
//!   those answered 404 or 405 (a bot guard should count those).
//! - `Router::route_layer`: the routes added so far; it runs after routing, so
//!   [`PathParam`] and [`RouteTemplate`] work there.
//! - `MethodRouter::route_layer`: one route's methods. **Use this for a route's limits, not
//!   `MethodRouter::layer`**: `layer` also wraps the route's 405 fallback, so requests
//!   with a wrong method (`GET` on a `POST` route) would spend the route's budget and then
//!   be answered 429 instead of 405.
//!
//! All three at once, with the route's rules inside the global guard:
//!
//! ```
//! use axum::{Router, routing::{get, post}};
//! use ratekeeper_axum::{PathParam, client_ip};
//! use ratekeeper_axum::core::{FailurePolicy, Limit, PrincipalKind};
//! use ratekeeper_axum::tower::{RateLimitLayer, Rule};
//! use ratekeeper_axum::tower::extract::HeaderKey;
//! use std::time::Duration;
//!
//! # fn main() -> Result<(), ratekeeper_axum::core::ConfigError> {
//! let minute = Duration::from_secs(60);
//! let guard = RateLimitLayer::in_memory().rule(
//!     Rule::new(Limit::sliding_window("global-ip", 1_200, minute)?, client_ip())
//!         .on_store_error(FailurePolicy::Memory),
//! );
//! let per_game = RateLimitLayer::in_memory().rule(Rule::new(
//!     Limit::fixed_window("per-game", 500, Duration::from_secs(86_400))?,
//!     PathParam::new("game", PrincipalKind::custom("game")?),
//! ));
//! let answers = RateLimitLayer::in_memory().rule(
//!     Rule::new(
//!         Limit::sliding_window("answers", 30, minute)?,
//!         HeaderKey::new("x-participant-id".parse().unwrap(), PrincipalKind::Participant),
//!     )
//!     .on_store_error(FailurePolicy::Open),
//! );
//! let app: Router = Router::new()
//!     .route("/api/games/{game}/answers", post(|| async { "ok" }).route_layer(answers))
//!     .route("/api/games/{game}/state", get(|| async { "{}" }))
//!     .route_layer(per_game)
//!     .route("/healthz", get(|| async { "ok" }))
//!     .layer(guard);
//! # let _ = serve(app); Ok(()) }
//!
//! // `client_ip()` reads the TCP peer from `ConnectInfo`: serve with connect info, or
//! // every limited request is answered 500 `ip.no_peer`.
//! async fn serve(app: Router) -> std::io::Result<()> {
//!     let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
//!     let app = app.into_make_service_with_connect_info::<std::net::SocketAddr>();
//!     axum::serve(listener, app).await
//! }
//! ```

//!
//! # Feature flags
//!
//! None is on by default. Each store feature turns on the same feature of the crates
//! below, so one dependency line is enough.
//!
//! | feature | what it adds |
//! |---|---|
//! | `ws` | limits inside a WebSocket ([`ws`]): each message checked, graded answers, connections per principal |
//! | `metrics` | the layer's series, through the `metrics` facade |
//! | `redis` | the Redis store (`core::RedisStore`) |
//! | `cluster` | Redis Cluster (implies `redis`) |
//! | `sentinel` | Redis behind Sentinel (implies `redis`) |
//! | `tls` | TLS to Redis, `rediss://` (implies `redis`) |
//! | `config` | limits and the store from a TOML file (`core::config`) |
//! | `test-util` | `core::testing`: a store that fails on demand, a log capture |
//! | `calendar` | `core::calendar`: a day, a week or a month in a time zone |
//! | `calendar-tzdb` | the time zone database built into the program (implies `calendar`) |
//!
//! # On Redis
//!
//! ```toml
//! ratekeeper-axum = { version = "0.1", features = ["redis"] }
//! ```
//!
//! ```
//! # #[cfg(feature = "redis")]
//! # fn store() -> Result<(), ratekeeper_axum::core::ConfigError> {
//! use ratekeeper_axum::{Limiter, RateLimitLayer};
//! use ratekeeper_axum::core::AnyStore;
//!
//! // REDIS_URL, REDIS_CLUSTER or REDIS_SENTINEL name the store; process memory otherwise.
//! let limiter = Limiter::new(AnyStore::from_env()?);
//! let layer = RateLimitLayer::new(limiter); // then `.rule(...)` as above
//! # let _ = layer; Ok(()) }
//! ```

#![cfg_attr(docsrs, feature(doc_cfg))]

mod extract;
pub mod guide;
mod handler;
#[cfg(feature = "ws")]
#[cfg_attr(docsrs, doc(cfg(feature = "ws")))]
pub mod ws;

pub use extract::{PathParam, RouteTemplate, client_ip, connect_info_peer};
pub use handler::{Admitted, HandlerLimiter, Refused, RejectionResponse, Reserved};

#[doc(no_inline)]
pub use ratekeeper_core as core;
/// What a first layer needs, so that an axum program imports from this crate alone.
#[doc(no_inline)]
pub use ratekeeper_core::{ConfigError, FailurePolicy, Limit, Limiter, MemoryStore, PrincipalKind};
#[doc(no_inline)]
pub use ratekeeper_tower as tower;
#[doc(no_inline)]
pub use ratekeeper_tower::{Answering, RateLimitLayer, Rule};
