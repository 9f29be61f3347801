//! Stores: where counters live. One call answers a whole [`Chain`](crate::Chain).
//!
//! [`MemoryStore`] is the embedded default, and
//! `RedisStore` the shared one (feature `redis`). A store chosen at
//! run time (from configuration) is an [`AnyStore`]; a store of your own
//! goes in a [`BoxStore`]. This module holds what a store's builder, an admin or a store of
//! your own needs.

pub(crate) mod any;
mod boxed;
mod env;
pub(crate) mod memory;
#[cfg(feature = "redis")]
pub(crate) mod redis;

#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub use self::redis::{KEY_VERSION, RedisStoreBuilder, ServerVersion, Verified, VerifyError};
pub use crate::protocol::{Banned, Dedupe, Domains, KeyState, Slots, StoreErrorKind, Taken};
pub use boxed::BoxStore;
pub use env::StoreEnv;
pub use memory::{DEFAULT_MAX_KEYS, MemoryStoreBuilder};

// Inside the crate: the stores by their module (their public path is the crate root).
#[cfg(feature = "redis")]
pub(crate) use self::redis::RedisStore;
pub(crate) use any::AnyStore;
pub(crate) use memory::MemoryStore;
