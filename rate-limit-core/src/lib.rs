//! Rate limiting without HTTP: limits, principals and keys, decisions, and the stores that
//! count. The Tower layer (`rate-limit-tower`) and axum integration (`rate-limit-axum`)
//! build on this crate; a background job uses it directly.
//!
//! ```
//! use rate_limit_core::{Chain, Limit, MemoryStore, Principal, Store};
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
#![doc = include_str!("../ALGORITHMS.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod adaptive;
mod algorithm;
mod budget;
mod chain;
mod clock;
#[cfg(feature = "config")]
#[cfg_attr(docsrs, doc(cfg(feature = "config")))]
pub mod config;
mod error;
mod key;
mod limit;
pub mod limiter;
mod name;
mod pacer;
mod principal;
mod protocol;
pub mod store;
#[cfg(any(test, feature = "test-util"))]
#[cfg_attr(docsrs, doc(cfg(feature = "test-util")))]
pub mod testing;

pub use adaptive::{Adaptive, Pace};
pub use budget::{Budget, Spender};
pub use chain::{Chain, ChainMode, Check};
pub use clock::{Clock, FakeClock, SystemClock, TokioClock};
pub use error::{ConfigError, ConfigErrorKind};
pub use key::Key;
pub use limit::{
    Aimd, AlgorithmKind, Delay, Growth, InFlight, Limit, MAX_BAN_AFTER, MAX_DELAY,
    MAX_LEASE_LIFETIME, MAX_SLIDING_PRODUCT, MAX_SLOT_TTL, MAX_SPAN, MIN_SLOT_TTL, MIN_WINDOW,
    SlotKey,
};
pub use limiter::{
    Answer, FailurePolicy, FailureReason, Holding, Limiter, LimiterBuilder, Slot, SlotAnswer,
    default_max_held,
};
pub use name::{MAX_NAME_LEN, validate_name};
pub use pacer::SharedPacer;
pub use principal::{
    HashKey, MAX_LITERAL_LEN, MAX_PRINCIPAL_LEN, MIN_HASH_KEY_LEN, Principal, PrincipalKind,
};
pub use protocol::{
    Banned, ChainDecision, Decision, Dedupe, MIN_RETRY_AFTER, Outcome, Reservation, Slots, Store,
    StoreError, StoreErrorKind, Taken,
};
#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub use store::RedisStore;
pub use store::{AnyStore, BoxStore, MemoryStore};
