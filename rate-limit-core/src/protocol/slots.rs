//! In-flight slots as a store holds them ([`Slots`]).

use std::future::Future;
use std::time::Duration;

use super::StoreError;
use crate::limit::SlotKey;

/// What a store answered when asked for a slot.
///
/// Built only by a store of your own; a limiter's caller gets a `Slot` or a `SlotAnswer`
/// instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Taken {
    /// Whether the slot was taken.
    pub taken: bool,
    /// Slots in use after the call (counting this one when taken).
    pub in_use: u32,
    /// When refused: until the earliest held slot's lease runs out, an upper bound on the
    /// wait if its holder dies, and an estimate otherwise (holders usually finish sooner).
    pub retry_after: Duration,
}

/// A store that holds in-flight slots: the memory store, the Redis store (standalone,
/// Sentinel, Cluster), [`AnyStore`](crate::AnyStore) over either, and a store of your own
/// boxed with [`BoxStore::with_shared`](crate::store::BoxStore::with_shared).
///
/// Every method has a default answering [`StoreErrorKind::Unsupported`](super::StoreErrorKind::Unsupported):
/// a store that holds no slots says so with an empty `impl Slots for MyStore {}`.
pub trait Slots: Send + Sync + 'static {
    /// Takes a slot `id` if fewer than the limit's `max` are held (leases that ran out do
    /// not count), leased for the limit's TTL.
    fn take_slot(
        &self,
        key: &SlotKey,
        id: u64,
    ) -> impl Future<Output = Result<Taken, StoreError>> + Send {
        let _ = (key, id);
        no_slots()
    }
    /// Extends slot `id`'s lease by the TTL; `false` if it is gone (ran out, or released).
    fn renew_slot(
        &self,
        key: &SlotKey,
        id: u64,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send {
        let _ = (key, id);
        no_slots()
    }
    /// Releases slot `id` (removing nothing if it is gone).
    fn release_slot(
        &self,
        key: &SlotKey,
        id: u64,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        let _ = (key, id);
        no_slots()
    }
}

/// What a store that holds no slots answers.
fn no_slots<T>() -> std::future::Ready<Result<T, StoreError>> {
    std::future::ready(Err(StoreError::unsupported(
        "this store holds no in-flight slots",
    )))
}
