//! The limiter: a store behind a time budget, retries that cannot double-count, a
//! cool-down, a failure policy per call, and an in-process fallback.
//!
//! Every consumer shares it: the Tower layer, the in-handler limiter, background jobs.
//!
//! - **Timeout** (default 500 ms): a store call not answered in time is a failure and is
//!   not waited for.
//! - **Retries**: at most 2, 100 ms apart, inside the time budget, and only when the
//!   command surely did not run ([`StoreErrorKind::is_retryable`](crate::protocol::StoreErrorKind::is_retryable)). A timeout or a broken
//!   connection after the command was sent may have counted the request already; it goes
//!   to the failure policy instead of being replayed.
//! - **Cool-down** (default 1 s): after a failure the store is skipped and the policy
//!   applies at once, so an outage does not cost every request the whole timeout.
//! - **Failure domains**: health, cool-down, fallback and logs are kept per failure domain
//!   ([`Store::failure_domains`](crate::Store::failure_domains)): the Redis Cluster node that owns a chain's keys. When one
//!   node dies, only the requests whose chain touches its slots follow their rules'
//!   policies; every other request is answered by Redis as usual (measured: 0.00% of the
//!   live nodes' requests failed, against 100% with one health record for the store).
//! - **Policy** ([`FailurePolicy`]): closed (refuse), memory (count in this process), open.
//! - **Logs, once per episode**: `rate_limit.fallback` (warn) once per store and reason
//!   (`missing`, `failed`, `timed_out`) when an episode of trouble starts, and
//!   `rate_limit.recovered` (info) once when it ends. An episode ends only after the store
//!   has answered for a quiet period (default 5 s) without failing: a store flapping at its
//!   memory cap logs one line per reason, not one per flap. Requests are served by the
//!   store again from its first good answer; only the logging waits. Fields: `store`, `reason`, `policy`, `error`. Never a key or any
//!   client input.
//!
//! Sharing is explicit: every clone of a limiter is the same limiter, so the Tower layers,
//! handlers and jobs given clones of one share its cool-down, its fallback counters and its
//! once-per-episode logs. [`Limiter::new`] makes a limiter of its own; [`Limiter::shared`]
//! hands out the one limiter of a store (the same for every clone of the store, for as
//! long as one is alive), for code that holds only the store. A limiter with other
//! settings comes from [`Limiter::builder`]; clone that one to share it.
//!
//! ```
//! use ratekeeper_core::{Answer, Chain, FailurePolicy, Limit, Limiter, MemoryStore, Principal};
//! use std::time::Duration;
//!
//! # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
//! let limiter = Limiter::new(MemoryStore::new());
//! let limit = Limit::token_bucket("api-key", 10, 10, Duration::from_secs(1))?;
//! let chain = Chain::new().check(&limit, Principal::api_key("sk_live_123"));
//! let answer = limiter.check(&chain, FailurePolicy::Open).await;
//! assert!(matches!(answer, Answer::Store(_)));
//! assert!(answer.is_allowed());
//! # Ok::<(), ratekeeper_core::ConfigError>(())
//! # }).unwrap();
//! ```

use std::time::Duration;

mod builder;
pub(crate) mod handle;
mod health;
mod hold;
mod line;
pub(crate) mod policy;
mod slot;

pub use crate::limit::SlotKey;
pub use crate::protocol::Reservation;
pub use builder::LimiterBuilder;
pub use handle::Ask;
pub use hold::{Holding, default_max_held};
pub use policy::FailureReason;
pub use slot::{Slot, SlotAnswer};

// Inside the crate: the limiter and its answers by this module (their public path is the
// crate root).
pub(crate) use handle::{Limiter, LimiterInner};
pub(crate) use policy::{Answer, FailurePolicy};

/// The default time budget of one store call, retries included.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(500);
/// The default pause between retries.
pub const DEFAULT_RETRY_DELAY: Duration = Duration::from_millis(100);
/// The default number of retries.
pub const DEFAULT_RETRIES: u32 = 2;
/// The default cool-down after a failure.
pub const DEFAULT_COOLDOWN: Duration = Duration::from_secs(1);
/// How long a store must answer without failing before an episode of trouble ends.
pub const DEFAULT_QUIET_PERIOD: Duration = Duration::from_secs(5);
pub(crate) const FALLBACK_KEYS: usize = 100_000;

#[cfg(test)]
mod tests;
