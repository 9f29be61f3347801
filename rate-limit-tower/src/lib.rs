//! Rate limiting for Tower services.
//!
//! [`RateLimitLayer`] applies an ordered chain of [`Rule`]s — each a limit, a key
//! extractor naming *who* is counted, a cost, and a failure policy — to every request, in
//! one store call. It answers honestly:
//!
//! - **Allowed**: the inner service runs; the response carries the IETF `RateLimit-Policy`
//!   / `RateLimit` fields listing every limit of the chain, and the `RateLimit-*` trio of
//!   the one with the fewest units left.
//! - **Refused**: `429` with `Retry-After` in whole seconds (never 0) and the same headers,
//!   JSON `{"error": ..., "code": ...}` by default; or `303` to a friendly page for a
//!   browser ([`Answering::redirect_browsers`]), a page the layer exempts.
//! - **Store down**: each rule's [`FailurePolicy`]
//!   decides — `503` with `Retry-After` (closed, the default), counting in process memory,
//!   or letting the request through (open). When one chain mixes policies, the strictest
//!   wins: closed, then memory, then open.
//! - **No principal**: the extractor decides — `400`, `401` with `WWW-Authenticate`, or a
//!   fallback extractor — never a shared empty key.
//!
//! Every answer the layer makes itself is decided once, into a [`Refusal`] (what happened,
//! the status, the stable code, the wait), and made into a response by one [`Responder`]:
//! JSON by default, [`ProblemResponder`] for RFC 9457 problem details on every status,
//! [`GrpcResponder`] for a gRPC call, [`RedirectResponder`] for a browser.
//!
//! A refusal carries the decision in the response's extensions as [`RateLimitInfo`]; an
//! admitted response carries it when asked ([`RateLimitLayer::info_extension`]). With two
//! layers (a global guard with `Router::layer` outside a route's rules) the inner one leaves
//! it for the outer one, which merges both views, so the headers describe the more
//! restrictive limit whichever layer ran last.
//!
//! Exempt paths, CORS preflights, shadow mode and header styles: see
//! [`RateLimitLayer`]. With tower-http's `CorsLayer` outside the limiter, pass
//! [`EXPOSED_HEADERS`] to its `expose_headers`; without one, a request with `Origin` gets
//! `Access-Control-Expose-Headers` and `Vary: Origin` from this layer.
//!
//! ```
//! use ratekeeper_tower::core::{FailurePolicy, Limit, PrincipalKind};
//! use ratekeeper_tower::{RateLimitLayer, Rule};
//! use ratekeeper_tower::extract::{ClientIp, HeaderKey, KeyExtractorExt};
//! use std::time::Duration;
//!
//! # fn main() -> Result<(), ratekeeper_tower::core::ConfigError> {
//! let answers = RateLimitLayer::in_memory()
//!     .rule(
//!         Rule::new(
//!             Limit::sliding_window("answers", 30, Duration::from_secs(60))?,
//!             HeaderKey::new("x-participant-id".parse().unwrap(), PrincipalKind::Participant),
//!         )
//!         .on_store_error(FailurePolicy::Open),
//!     )
//!     .rule(
//!         Rule::new(Limit::sliding_window("answers-ip", 600, Duration::from_secs(60))?, ClientIp::new())
//!             .on_store_error(FailurePolicy::Open),
//!     );
//! # let _ = answers;
//! # Ok(()) }
//! ```

//!
//! # Guides
//!
//! - [`guide::keys`]: who is counted: the client IP behind proxies, IPv6, API keys and hashing.
//! - [`guide::costs`]: a weight or a size per request, counting only some outcomes.
//! - [`guide::failure`]: what each rule does when the store cannot answer.
//! - [`guide::answers`]: headers, browsers, problem details, gRPC.
//! - [`guide::controls`]: delays, in-flight limits, bans, allow and deny lists.
//! - [`guide::metrics`]: the series, the decision's span, the logs.
//!
//! Limits, stores and operating are in `ratekeeper_core::guide`; getting started and the
//! admin in `ratekeeper_axum::guide`.
//!
//! # Feature flags
//!
//! None is on by default. The store features turn on the same feature of
//! `ratekeeper-core`, so one dependency line is enough.
//!
//! | feature | what it adds |
//! |---|---|
//! | `metrics` | the layer's decisions, store latency and errors through the `metrics` facade ([`metrics`]) |
//! | `axum` | [`ClientIp`](extract::ClientIp) also reads axum's `ConnectInfo<SocketAddr>` (on with `ratekeeper-axum`) |
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
//! Every instance counts in one store: give the layer a limiter over it.
//!
//! ```
//! # #[cfg(feature = "redis")]
//! # fn layer() -> Result<(), ratekeeper_tower::core::ConfigError> {
//! use ratekeeper_tower::core::{AnyStore, Limit, Limiter, RedisStore};
//! use ratekeeper_tower::{RateLimitLayer, Rule, extract::ClientIp};
//! use std::time::Duration;
//!
//! // Nothing connects here: a server starts while Redis is down (see `RedisStore::verify`).
//! let store = RedisStore::builder("redis://127.0.0.1:6379/").build()?;
//! let layer = RateLimitLayer::new(Limiter::new(AnyStore::Redis(store))).rule(Rule::new(
//!     Limit::sliding_window("per-ip", 600, Duration::from_secs(60))?,
//!     ClientIp::new(),
//! ));
//! # let _ = layer; Ok(()) }
//! ```

#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod access;
mod answer;
mod body;
pub mod client;
pub mod cost;
mod count;
pub mod extract;
mod future;
mod grpc;
pub mod guide;
pub mod headers;
mod layer;
mod meters;
pub mod metrics;
mod nesting;
mod refusal;
mod response;
mod rule;
mod service;
mod shared;
mod trace;

pub use answer::{Answering, Verdict, accepts_html};
pub use body::{LimitBody, ResponseBody};
pub use count::CountWhen;
pub use future::ResponseFuture;
pub use grpc::GrpcResponder;
pub use headers::info::{EXPOSED_HEADERS, HeaderStyle, LimitStatus, RateLimitInfo};
pub use layer::RateLimitLayer;
pub use refusal::{Refusal, RefusalKind};
pub use response::{
    JsonResponder, PROBLEM_TYPES, ProblemResponder, QUOTA_EXCEEDED, RedirectResponder, Responder,
    TEMPORARY_REDUCED_CAPACITY, rejection_response,
};
pub use rule::{BanAnswer, InFlightRule, Rule, check_bans};
pub use service::RateLimit;

#[doc(no_inline)]
pub use ratekeeper_core as core;
/// What a first layer needs from `ratekeeper-core`, so that it imports from one crate.
#[doc(no_inline)]
pub use ratekeeper_core::{ConfigError, FailurePolicy, Limit, Limiter, MemoryStore, PrincipalKind};
