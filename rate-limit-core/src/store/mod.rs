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
pub use crate::protocol::{
    Banned, Dedupe, Domains, KeyState, SharedState, Slots, StoreErrorKind, Taken,
};
pub use boxed::BoxStore;
pub use env::StoreEnv;
pub use memory::{DEFAULT_MAX_KEYS, MemoryStoreBuilder};

/// What a store of your own needs to carry what instances share ([`SharedState`]): the
/// fleet's changes, marks and notices with their text form ([`codec`](shared::codec)), and
/// the shared pacer's messages with the step every store runs ([`pace_step`](shared::pace_step)).
pub mod shared {
    pub use crate::algorithm::pace::{PacerState, step as pace_step};
    pub use crate::protocol::fleet::{
        FleetChange, FleetEntries, FleetMark, FleetNotices, FleetNotifier, FleetRead, FleetState,
        codec,
    };
    pub use crate::protocol::pace::{PaceCall, PaceOp, PaceReply};
}

// Inside the crate: the stores by their module (their public path is the crate root).
#[cfg(feature = "redis")]
pub(crate) use self::redis::RedisStore;
pub(crate) use any::AnyStore;
pub(crate) use memory::MemoryStore;
