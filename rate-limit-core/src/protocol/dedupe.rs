//! Webhook de-duplication: a delivery id is processed once within its time to live.

use std::future::Future;
use std::time::Duration;

use super::StoreError;

/// Remembers delivery ids, so a webhook delivered twice is processed once.
///
/// - **Redis**: one `SET NX PX` per id; the id lives its whole TTL (mind `maxmemory`).
/// - **Memory store**: at most [`max_keys`](crate::store::memory::MemoryStoreBuilder::max_keys)
///   ids (default 1 000 000: a day of a site receiving 11 deliveries a second on average).
///   Expired ids leave first; at the cap the oldest live id is forgotten, in amortized
///   constant time at any size. A redelivery of a forgotten id is processed again: size the
///   cap for the TTL times your peak delivery rate if that must not happen.
///
/// ```
/// use ratekeeper_core::MemoryStore;
/// use ratekeeper_core::store::Dedupe;
/// use std::time::Duration;
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let store = MemoryStore::new();
/// let day = Duration::from_secs(86_400);
/// assert!(store.first_seen("delivery-1", day).await?);   // process it
/// assert!(!store.first_seen("delivery-1", day).await?);  // a duplicate
/// store.release("delivery-1").await?;                     // processing failed:
/// assert!(store.first_seen("delivery-1", day).await?);   // the retry is processed
/// # Ok::<(), ratekeeper_core::StoreError>(())
/// # }).unwrap();
/// ```
///
/// Both methods have defaults answering [`StoreErrorKind::Unsupported`](super::StoreErrorKind::Unsupported):
/// a store that does not de-duplicate says so with an empty `impl Dedupe for MyStore {}`.
pub trait Dedupe: Send + Sync {
    /// Marks `id` as seen for `ttl`: `true` the first time, `false` while it is remembered.
    fn first_seen(
        &self,
        id: &str,
        ttl: Duration,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send {
        let _ = (id, ttl);
        no_dedupe()
    }

    /// Forgets `id` (its processing failed), so the sender's retry is processed.
    fn release(&self, id: &str) -> impl Future<Output = Result<(), StoreError>> + Send {
        let _ = id;
        no_dedupe()
    }
}

/// What a store that does not de-duplicate answers.
fn no_dedupe<T>() -> std::future::Ready<Result<T, StoreError>> {
    std::future::ready(Err(StoreError::unsupported(
        "this store does not de-duplicate",
    )))
}
