//! Stores: where counters live. One call answers a whole [`Chain`].
//!
//! [`MemoryStore`] is the embedded default. A store chosen at run time (from
//! configuration) is an [`AnyStore`]; a store of your own goes in a [`BoxStore`].

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::chain::{Chain, Check};
use crate::decision::{ChainDecision, Decision};
use crate::key::Key;
use crate::reservation::Reservation;

mod dedupe;
mod domains;
mod error;
pub mod memory;
#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub mod redis;

#[cfg(feature = "redis")]
pub use self::redis::RedisStore;
pub use dedupe::Dedupe;
pub use domains::Domains;
pub use error::{StoreError, StoreErrorKind};
pub use memory::MemoryStore;

/// A counter store. Every method is one atomic operation on the store (one round trip for
/// a remote store), whatever the chain's length.
///
/// Implementations must give every store the same semantics; the crate's conformance tests
/// run one suite against each.
pub trait Store: Send + Sync + 'static {
    /// Checks and charges a chain atomically, in its [`ChainMode`](crate::ChainMode).
    fn check(
        &self,
        chain: &Chain,
    ) -> impl Future<Output = Result<ChainDecision, StoreError>> + Send;

    /// Charges a cost known only after the work (LLM tokens, bytes sent): always applied,
    /// overdrawing if need be, so later checks are refused until the debt is repaid.
    /// The decision says whether the charge fit.
    fn charge(&self, check: &Check) -> impl Future<Output = Result<Decision, StoreError>> + Send;

    /// Gives back what an admitted chain reserved ([`Reservation`]): each check's cost,
    /// where its window still holds it (a fixed window's only in the window it was charged
    /// in). One atomic operation per key.
    ///
    /// The default answers an error ([`StoreErrorKind::Rejected`]): a store that cannot give
    /// units back keeps them counted, which errs towards refusing.
    fn give_back(
        &self,
        reservation: &Reservation,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        let _ = reservation;
        std::future::ready(Err(StoreError::new(
            StoreErrorKind::Rejected,
            "this store cannot give units back",
        )))
    }

    /// Reports a key's state without changing it (an admin read; same as a cost-0 check).
    fn peek(&self, key: &Key) -> impl Future<Output = Result<Decision, StoreError>> + Send;

    /// Forgets a key's state: its next check starts afresh.
    fn reset(&self, key: &Key) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Checks a chain at once, without I/O, when this store can: the memory store always
    /// does; a remote store may, from a local cache (the Redis store's deny cache). The
    /// answer, when there is one, is what [`check`](Store::check) would have answered, and
    /// charges the same. `None` (the default): nothing was charged; call `check`.
    ///
    /// The layer calls this first, so that a store answering from memory costs no future.
    fn try_check(&self, chain: &Chain) -> Option<ChainDecision> {
        let _ = chain;
        None
    }

    /// The failure domains `chain` depends on: the nodes of a Redis Cluster that own its
    /// keys. The [`Limiter`](crate::Limiter) keeps health, cool-down and logs per domain, so
    /// that one node's failure is not every key's. Default: the whole store, one domain.
    fn failure_domains(&self, chain: &Chain) -> Domains {
        let _ = chain;
        Domains::WHOLE
    }

    /// A domain's name for logs (a node's `host:port`), never a key or a password.
    fn domain_name(&self, domain: u32) -> Option<String> {
        let _ = domain;
        None
    }
}

impl<S: Store> Store for Arc<S> {
    fn check(
        &self,
        chain: &Chain,
    ) -> impl Future<Output = Result<ChainDecision, StoreError>> + Send {
        (**self).check(chain)
    }
    fn charge(&self, check: &Check) -> impl Future<Output = Result<Decision, StoreError>> + Send {
        (**self).charge(check)
    }
    fn peek(&self, key: &Key) -> impl Future<Output = Result<Decision, StoreError>> + Send {
        (**self).peek(key)
    }
    fn give_back(
        &self,
        reservation: &Reservation,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        (**self).give_back(reservation)
    }
    fn reset(&self, key: &Key) -> impl Future<Output = Result<(), StoreError>> + Send {
        (**self).reset(key)
    }
    fn try_check(&self, chain: &Chain) -> Option<ChainDecision> {
        (**self).try_check(chain)
    }
    fn failure_domains(&self, chain: &Chain) -> Domains {
        (**self).failure_domains(chain)
    }
    fn domain_name(&self, domain: u32) -> Option<String> {
        (**self).domain_name(domain)
    }
}

type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

trait DynStore: Send + Sync + 'static {
    fn check_dyn<'a>(
        &'a self,
        chain: &'a Chain,
    ) -> BoxFuture<'a, Result<ChainDecision, StoreError>>;
    fn charge_dyn<'a>(&'a self, check: &'a Check) -> BoxFuture<'a, Result<Decision, StoreError>>;
    fn peek_dyn<'a>(&'a self, key: &'a Key) -> BoxFuture<'a, Result<Decision, StoreError>>;
    fn give_back_dyn<'a>(&'a self, r: &'a Reservation) -> BoxFuture<'a, Result<(), StoreError>>;
    fn reset_dyn<'a>(&'a self, key: &'a Key) -> BoxFuture<'a, Result<(), StoreError>>;
    fn try_check_dyn(&self, chain: &Chain) -> Option<ChainDecision>;
    fn failure_domains_dyn(&self, chain: &Chain) -> Domains;
    fn domain_name_dyn(&self, domain: u32) -> Option<String>;
}

impl<S: Store> DynStore for S {
    fn check_dyn<'a>(
        &'a self,
        chain: &'a Chain,
    ) -> BoxFuture<'a, Result<ChainDecision, StoreError>> {
        Box::pin(self.check(chain))
    }
    fn charge_dyn<'a>(&'a self, check: &'a Check) -> BoxFuture<'a, Result<Decision, StoreError>> {
        Box::pin(self.charge(check))
    }
    fn peek_dyn<'a>(&'a self, key: &'a Key) -> BoxFuture<'a, Result<Decision, StoreError>> {
        Box::pin(self.peek(key))
    }
    fn give_back_dyn<'a>(&'a self, r: &'a Reservation) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(self.give_back(r))
    }
    fn reset_dyn<'a>(&'a self, key: &'a Key) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(self.reset(key))
    }
    fn try_check_dyn(&self, chain: &Chain) -> Option<ChainDecision> {
        self.try_check(chain)
    }
    fn failure_domains_dyn(&self, chain: &Chain) -> Domains {
        self.failure_domains(chain)
    }
    fn domain_name_dyn(&self, domain: u32) -> Option<String> {
        self.domain_name(domain)
    }
}

/// Any [`Store`] behind a cheap, cloneable handle (one allocation per call).
#[derive(Clone)]
pub struct BoxStore {
    inner: Arc<dyn DynStore>,
    name: &'static str,
}

impl BoxStore {
    /// Wraps a store.
    pub fn new<S: Store>(store: S) -> Self {
        Self {
            inner: Arc::new(store),
            name: std::any::type_name::<S>(),
        }
    }
}

impl fmt::Debug for BoxStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("BoxStore").field(&self.name).finish()
    }
}

impl Store for BoxStore {
    // `async fn` here (not a forwarded future): the boxed future borrows `self` and the
    // argument under one lifetime, which an opaque return type cannot name.
    async fn check(&self, chain: &Chain) -> Result<ChainDecision, StoreError> {
        self.inner.check_dyn(chain).await
    }
    async fn charge(&self, check: &Check) -> Result<Decision, StoreError> {
        self.inner.charge_dyn(check).await
    }
    async fn peek(&self, key: &Key) -> Result<Decision, StoreError> {
        self.inner.peek_dyn(key).await
    }
    async fn give_back(&self, reservation: &Reservation) -> Result<(), StoreError> {
        self.inner.give_back_dyn(reservation).await
    }
    async fn reset(&self, key: &Key) -> Result<(), StoreError> {
        self.inner.reset_dyn(key).await
    }
    fn try_check(&self, chain: &Chain) -> Option<ChainDecision> {
        self.inner.try_check_dyn(chain)
    }
    fn failure_domains(&self, chain: &Chain) -> Domains {
        self.inner.failure_domains_dyn(chain)
    }
    fn domain_name(&self, domain: u32) -> Option<String> {
        self.inner.domain_name_dyn(domain)
    }
}

/// A store picked when the program starts (from configuration): the in-memory store, or
/// any other store boxed. Cheap to clone; clones share counters.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum AnyStore {
    /// The in-memory store.
    Memory(MemoryStore),
    /// The Redis store (feature `redis`).
    #[cfg(feature = "redis")]
    #[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
    Redis(RedisStore),
    /// Any other store.
    Boxed(BoxStore),
}

impl Default for AnyStore {
    fn default() -> Self {
        Self::Memory(MemoryStore::new())
    }
}

impl From<MemoryStore> for AnyStore {
    fn from(s: MemoryStore) -> Self {
        Self::Memory(s)
    }
}

#[cfg(feature = "redis")]
impl From<RedisStore> for AnyStore {
    fn from(s: RedisStore) -> Self {
        Self::Redis(s)
    }
}

impl From<BoxStore> for AnyStore {
    fn from(s: BoxStore) -> Self {
        Self::Boxed(s)
    }
}

impl AnyStore {
    /// The identity of the shared state behind this handle (clones agree), and a name for
    /// logs: what [`Limiter`](crate::Limiter)s made from clones of one store share.
    pub(crate) fn identity(&self) -> (usize, String) {
        match self {
            Self::Memory(s) => (s.identity(), "memory".to_owned()),
            #[cfg(feature = "redis")]
            Self::Redis(s) => (s.identity(), s.endpoint().to_owned()),
            Self::Boxed(s) => (
                Arc::as_ptr(&s.inner).cast::<()>() as usize,
                "store".to_owned(),
            ),
        }
    }

    /// The principals `ban` bans now, with the time left (an admin call; see
    /// [`Banned`](crate::Banned)): from the memory store's record of its bans, or from
    /// Redis with `SCAN` over every master. [`Store::reset`] of a ban's key lifts it. A
    /// boxed store answers [`StoreErrorKind::Rejected`].
    pub async fn bans(&self, ban: &crate::Limit) -> Result<Vec<crate::Banned>, StoreError> {
        match self {
            Self::Memory(s) => Ok(s.bans(ban)),
            #[cfg(feature = "redis")]
            Self::Redis(s) => s.bans(ban).await,
            Self::Boxed(_) => Err(StoreError::new(
                StoreErrorKind::Rejected,
                "this store cannot list bans",
            )),
        }
    }

    /// One call of a [`SharedPacer`](crate::SharedPacer) on its scope's state. A boxed
    /// store answers [`StoreErrorKind::Rejected`] (its workers pace locally).
    pub(crate) async fn pace(
        &self,
        call: &crate::pacer::PaceCall<'_>,
    ) -> Result<crate::pacer::PaceReply, StoreError> {
        match self {
            Self::Memory(s) => Ok(s.pace_now(call)),
            #[cfg(feature = "redis")]
            Self::Redis(s) => s.pace(call).await,
            Self::Boxed(_) => Err(StoreError::new(
                StoreErrorKind::Rejected,
                "this store keeps no pacers",
            )),
        }
    }

    /// Where this store counts, for logs and start-up lines: `memory`, `redis host:port`,
    /// `redis-cluster host:port,…` (never a password), or `store` for a boxed store.
    pub fn describe(&self) -> String {
        self.identity().1
    }
}

impl crate::inflight::Slots for AnyStore {
    async fn take_slot(
        &self,
        key: &crate::SlotKey,
        id: u64,
    ) -> Result<crate::inflight::Taken, StoreError> {
        match self {
            Self::Memory(s) => s.take_slot(key, id).await,
            #[cfg(feature = "redis")]
            Self::Redis(s) => s.take_slot(key, id).await,
            Self::Boxed(_) => Err(no_slots()),
        }
    }
    async fn renew_slot(&self, key: &crate::SlotKey, id: u64) -> Result<bool, StoreError> {
        match self {
            Self::Memory(s) => s.renew_slot(key, id).await,
            #[cfg(feature = "redis")]
            Self::Redis(s) => s.renew_slot(key, id).await,
            Self::Boxed(_) => Err(no_slots()),
        }
    }
    async fn release_slot(&self, key: &crate::SlotKey, id: u64) -> Result<(), StoreError> {
        match self {
            Self::Memory(s) => s.release_slot(key, id).await,
            #[cfg(feature = "redis")]
            Self::Redis(s) => s.release_slot(key, id).await,
            Self::Boxed(_) => Err(no_slots()),
        }
    }
}

/// A boxed store holds no slots (in-flight limits need the memory or the Redis store).
fn no_slots() -> StoreError {
    StoreError::new(
        StoreErrorKind::Rejected,
        "this store holds no in-flight slots",
    )
}

impl Store for AnyStore {
    async fn check(&self, chain: &Chain) -> Result<ChainDecision, StoreError> {
        match self {
            Self::Memory(s) => s.check(chain).await,
            #[cfg(feature = "redis")]
            Self::Redis(s) => s.check(chain).await,
            Self::Boxed(s) => s.check(chain).await,
        }
    }
    async fn charge(&self, check: &Check) -> Result<Decision, StoreError> {
        match self {
            Self::Memory(s) => s.charge(check).await,
            #[cfg(feature = "redis")]
            Self::Redis(s) => s.charge(check).await,
            Self::Boxed(s) => s.charge(check).await,
        }
    }
    async fn peek(&self, key: &Key) -> Result<Decision, StoreError> {
        match self {
            Self::Memory(s) => s.peek(key).await,
            #[cfg(feature = "redis")]
            Self::Redis(s) => s.peek(key).await,
            Self::Boxed(s) => s.peek(key).await,
        }
    }
    async fn give_back(&self, reservation: &Reservation) -> Result<(), StoreError> {
        match self {
            Self::Memory(s) => s.give_back(reservation).await,
            #[cfg(feature = "redis")]
            Self::Redis(s) => s.give_back(reservation).await,
            Self::Boxed(s) => s.give_back(reservation).await,
        }
    }
    async fn reset(&self, key: &Key) -> Result<(), StoreError> {
        match self {
            Self::Memory(s) => s.reset(key).await,
            #[cfg(feature = "redis")]
            Self::Redis(s) => s.reset(key).await,
            Self::Boxed(s) => s.reset(key).await,
        }
    }
    fn try_check(&self, chain: &Chain) -> Option<ChainDecision> {
        match self {
            Self::Memory(s) => s.try_check(chain),
            #[cfg(feature = "redis")]
            Self::Redis(s) => s.try_check(chain),
            Self::Boxed(s) => s.try_check(chain),
        }
    }
    fn failure_domains(&self, chain: &Chain) -> Domains {
        match self {
            Self::Memory(_) => Domains::WHOLE,
            #[cfg(feature = "redis")]
            Self::Redis(s) => s.failure_domains(chain),
            Self::Boxed(s) => s.failure_domains(chain),
        }
    }
    fn domain_name(&self, domain: u32) -> Option<String> {
        match self {
            Self::Memory(_) => None,
            #[cfg(feature = "redis")]
            Self::Redis(s) => s.domain_name(domain),
            Self::Boxed(s) => s.domain_name(domain),
        }
    }
}
