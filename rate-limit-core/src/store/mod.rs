//! Stores: where counters live. One call answers a whole [`Chain`](crate::Chain).
//!
//! [`MemoryStore`] is the embedded default. A store chosen at run time (from
//! configuration) is an [`AnyStore`]; a store of your own goes in a [`BoxStore`].

mod any;
mod boxed;
pub mod memory;
#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub mod redis;

#[cfg(feature = "redis")]
pub use self::redis::RedisStore;
pub use crate::protocol::{Dedupe, Domains, Store, StoreError, StoreErrorKind};
pub use any::AnyStore;
pub use boxed::BoxStore;
pub use memory::MemoryStore;
