//! Webhook de-duplication: a delivery id is processed once within its time to live.

use std::future::Future;
use std::time::Duration;

use super::{AnyStore, StoreError, StoreErrorKind};

/// Remembers delivery ids, so a webhook delivered twice is processed once.
///
/// ```
/// use rate_limit_core::{Dedupe, MemoryStore};
/// use std::time::Duration;
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let store = MemoryStore::new();
/// let day = Duration::from_secs(86_400);
/// assert!(store.first_seen("delivery-1", day).await?);   // process it
/// assert!(!store.first_seen("delivery-1", day).await?);  // a duplicate
/// store.release("delivery-1").await?;                     // processing failed:
/// assert!(store.first_seen("delivery-1", day).await?);   // the retry is processed
/// # Ok::<(), rate_limit_core::StoreError>(())
/// # }).unwrap();
/// ```
pub trait Dedupe: Send + Sync {
    /// Marks `id` as seen for `ttl`: `true` the first time, `false` while it is remembered.
    fn first_seen(
        &self,
        id: &str,
        ttl: Duration,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// Forgets `id` (its processing failed), so the sender's retry is processed.
    fn release(&self, id: &str) -> impl Future<Output = Result<(), StoreError>> + Send;
}

impl Dedupe for AnyStore {
    async fn first_seen(&self, id: &str, ttl: Duration) -> Result<bool, StoreError> {
        match self {
            Self::Memory(s) => s.first_seen(id, ttl).await,
            #[cfg(feature = "redis")]
            Self::Redis(s) => s.first_seen(id, ttl).await,
            Self::Boxed(_) => Err(unsupported()),
        }
    }

    async fn release(&self, id: &str) -> Result<(), StoreError> {
        match self {
            Self::Memory(s) => s.release(id).await,
            #[cfg(feature = "redis")]
            Self::Redis(s) => s.release(id).await,
            Self::Boxed(_) => Err(unsupported()),
        }
    }
}

fn unsupported() -> StoreError {
    StoreError::new(StoreErrorKind::Rejected, "this store does not de-duplicate")
}
