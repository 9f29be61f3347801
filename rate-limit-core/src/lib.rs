//! Rate limiting without HTTP: limits, principals and keys, decisions, and the stores that
//! count. The Tower layer (`ratekeeper-tower`) and axum integration (`ratekeeper-axum`)
//! build on this crate; a background job uses it directly.
//!
//! ```
//! use ratekeeper_core::{Chain, Limit, MemoryStore, Principal, Store};
//! use std::time::Duration;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # tokio::runtime::Builder::new_current_thread().build()?.block_on(async {
//! let minute = Limit::sliding_window("ask-minute", 20, Duration::from_secs(60))?;
//! let day = Limit::fixed_window("ask-day", 500, Duration::from_secs(86_400))?;
//! let store = MemoryStore::new();
//!
//! let visitor = Principal::ip("2001:db8::1".parse()?);
//! let chain = Chain::new()
//!     .check(&minute, visitor.clone())
//!     .check(&day, visitor);
//! let decision = store.check(&chain).await?;
//! assert!(decision.is_allowed());
//! assert_eq!(decision.headline().unwrap().remaining(), 19);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # })
//! # }
//! ```
//!
//! # Feature flags
//!
//! None is on by default: the memory store needs nothing.
//!
//! | feature | what it adds |
//! |---|---|
//! | `redis` | the Redis store, standalone ([`RedisStore`]) |
//! | `cluster` | Redis Cluster for the Redis store (implies `redis`) |
//! | `sentinel` | Redis behind Sentinel: the primary asked of the Sentinels, failovers followed (implies `redis`) |
//! | `tls` | TLS to Redis (`rediss://`) with rustls and its *ring* provider, for all three (implies `redis`) |
//! | `config` | limits, policies and the store from a TOML file ([`config`]) |
//! | `calendar` | calendar periods, a day, a week or a month in a time zone ([`calendar`], with jiff) |
//! | `calendar-tzdb` | the time zone database built into the program, for images without one (implies `calendar`) |
//! | `test-util` | [`testing`]: a store that fails on demand and a log capture, for your own tests |
//!
//! # Redis
//!
//! One store for every instance, named by the environment (`REDIS_URL`, `REDIS_CLUSTER`,
//! `REDIS_SENTINEL`; process memory when none is set) and checked at start:
//!
//! ```no_run
//! # #[cfg(feature = "redis")]
//! # async fn start() -> Result<(), Box<dyn std::error::Error>> {
//! use ratekeeper_core::{AnyStore, Limiter};
//!
//! let store = AnyStore::from_env()?; // e.g. REDIS_URL=redis://127.0.0.1:6379/
//! if let AnyStore::Redis(redis) = &store {
//!     redis.verify().await?; // reachable, its version and ACL enough: a clear error if not
//! }
//! let limiter = Limiter::new(store);
//! # let _ = limiter; Ok(()) }
//! ```
//!
//! # Guides
//!
//! - [`guide::limits`]: the algorithms and their bounds, chains, costs, budgets, the shared pacer.
//! - [`guide::stores`]: memory, Redis, Cluster, Sentinel, TLS, ACL, the check at start.
//! - [`guide::operating`]: what a freeze, a failover, a full memory cost.
//! - [`guide::store_contract`]: the Redis store's keys, scripts, costs and failures.
//!
//! The layer's guides are in `ratekeeper_tower::guide`, getting started in
//! `ratekeeper_axum::guide`.
#![cfg_attr(docsrs, feature(doc_cfg))]

mod adaptive;
mod algorithm;
pub mod budget;
mod chain;
pub mod clock;
#[cfg(feature = "config")]
#[cfg_attr(docsrs, doc(cfg(feature = "config")))]
pub mod config;
mod digest;
mod error;
pub mod fleet;
pub mod guide;
mod key;
mod limit;
pub mod limiter;
mod name;
pub mod net;
mod pacer;
mod principal;
mod protocol;
pub mod store;
#[cfg(any(test, feature = "test-util"))]
#[cfg_attr(docsrs, doc(cfg(feature = "test-util")))]
pub mod testing;
pub mod top;

/// Pacing calls to someone else's limits: a local AIMD pacer ([`Adaptive`](pace::Adaptive))
/// and one shared by every worker through a store ([`SharedPacer`](pace::SharedPacer)).
pub mod pace {
    pub use crate::adaptive::{Adaptive, Pace, Turn};
    pub use crate::limit::Aimd;
    pub use crate::pacer::SharedPacer;
}

/// Calendar periods: a day, a week or a month in a time zone (UTC, an offset or an IANA
/// name), from an anchor such as a customer's billing day.
///
/// What each period does at its edges (each period ends where the next one starts, at
/// the anchor's time in the zone):
///
/// | period | starts | at its edges |
/// |---|---|---|
/// | `day` | the anchor's time (midnight) | 23 or 25 hours on the days the clocks change; a start time the change skips moves to the first moment after the gap, one it repeats is its first occurrence |
/// | `week` / `week:<day>` | the first day (Monday; Sunday with `week:sunday`) at the anchor's time | a week across the year's end is one week (no ISO week numbers) |
/// | `month` | the anchor's day (the 1st) at its time | an anchor on the 29th to 31st starts the period on the month's last day in shorter months (the 31st: Feb 28, or 29 in a leap year, then Mar 31, Apr 30) |
///
/// Each period is numbered by the local date it starts on (`yyyymmdd`), so a new period is
/// a new number with nothing to delete. Zones are resolved when the calendar is made: an
/// unknown one is `calendar.zone_unknown`, a bad period `calendar.period_invalid`, a bad
/// anchor `calendar.anchor_invalid`. IANA names come from the system's database
/// (`/usr/share/zoneinfo`), or, with `calendar-tzdb`, from a copy built into the program.
#[cfg(feature = "calendar")]
#[cfg_attr(docsrs, doc(cfg(feature = "calendar")))]
pub mod calendar {
    pub use crate::limit::calendar::{Anchor, Calendar, Period, PeriodSpan};
    pub use crate::protocol::usage::Usage;
    pub use jiff::Timestamp;
    pub use jiff::civil::Weekday;
}

// What a first program uses; everything else lives in its module (`store`, `limiter`,
// `pace`, `budget`, `clock`, `config`), each type at one path.
pub use chain::{Chain, ChainMode, Check};
pub use error::{ConfigError, ConfigErrorKind};
pub use key::Key;
pub use limit::{AlgorithmKind, Delay, Growth, InFlight, Limit};
pub use limiter::handle::Limiter;
pub use limiter::policy::{Answer, FailurePolicy};
pub use principal::{HashKey, Principal, PrincipalKind};
pub use protocol::{ChainDecision, Decision, Outcome, Store, StoreError};
pub use store::any::AnyStore;
pub use store::memory::MemoryStore;
#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub use store::redis::RedisStore;
