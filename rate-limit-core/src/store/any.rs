//! [`AnyStore`]: the store picked when the program starts.

use std::time::Duration;

use super::BoxStore;
#[cfg(feature = "redis")]
use super::RedisStore;
use super::memory::MemoryStore;
use crate::chain::{Chain, Check};
use crate::key::Key;
use crate::protocol::{
    ChainDecision, Decision, Dedupe, Domains, KeyState, Reservation, Store, StoreError,
    StoreErrorKind,
};

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
    /// What kind of store this is, for a metric's label: `memory`, `redis` (standalone,
    /// Cluster or Sentinel) or `other` (a boxed store).
    pub const fn kind(&self) -> &'static str {
        match self {
            Self::Memory(_) => "memory",
            #[cfg(feature = "redis")]
            Self::Redis(_) => "redis",
            Self::Boxed(_) => "other",
        }
    }

    pub(crate) fn identity(&self) -> (usize, String) {
        match self {
            Self::Memory(s) => (s.identity(), "memory".to_owned()),
            #[cfg(feature = "redis")]
            Self::Redis(s) => (s.identity(), s.endpoint().to_owned()),
            Self::Boxed(s) => (s.identity(), "store".to_owned()),
        }
    }

    /// The principals `ban` bans now, with the time left (an admin call; see
    /// [`Banned`](crate::protocol::Banned)): from the memory store's record of its bans, or from
    /// Redis with `SCAN` over every master. [`Store::reset`] of a ban's key lifts it. A
    /// boxed store answers [`StoreErrorKind::Rejected`].
    pub async fn bans(
        &self,
        ban: &crate::Limit,
    ) -> Result<Vec<crate::protocol::Banned>, StoreError> {
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

    /// One call of a [`SharedPacer`](crate::pacer::SharedPacer) on its scope's state. A boxed
    /// store answers [`StoreErrorKind::Rejected`] (its workers pace locally).
    pub(crate) async fn pace(
        &self,
        call: &crate::protocol::pace::PaceCall<'_>,
    ) -> Result<crate::protocol::pace::PaceReply, StoreError> {
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

    /// Makes one change to the fleet's runtime state; the new version (`None`: the store's
    /// state is older than `floor`, the version the caller applied). Only a shared store
    /// keeps one: the memory store and a boxed store answer [`StoreErrorKind::Rejected`] (a
    /// [`Fleet`](crate::fleet::Fleet) keeps their state in its own process).
    pub(crate) async fn fleet_change(
        &self,
        change: crate::protocol::fleet::FleetChange<'_>,
        floor: u64,
    ) -> Result<Option<u64>, StoreError> {
        #[cfg(not(feature = "redis"))]
        let _ = (change, floor);
        match self {
            #[cfg(feature = "redis")]
            Self::Redis(s) => s.fleet_change(change, floor).await,
            _ => Err(no_fleet_state()),
        }
    }

    /// Puts back the fleet state an instance applied, when the store's is older.
    pub(crate) async fn fleet_restore(
        &self,
        state: &crate::protocol::fleet::FleetState,
    ) -> Result<u64, StoreError> {
        #[cfg(not(feature = "redis"))]
        let _ = state;
        match self {
            #[cfg(feature = "redis")]
            Self::Redis(s) => s.fleet_restore(state).await,
            _ => Err(no_fleet_state()),
        }
    }

    /// Drops what this process cached of `key` (a refusal, a leased slice), without a
    /// store call: another instance reset it in the store.
    #[cfg(feature = "redis")]
    pub(crate) fn forget_cached(&self, key: &Key) {
        if let Self::Redis(s) = self {
            s.forget_cached(key);
        }
    }

    /// Publishes an instance's heavy hitters of `limit` for `ttl` (shared stores only).
    pub(crate) async fn top_put(
        &self,
        limit: &str,
        instance: &str,
        report: &str,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        #[cfg(not(feature = "redis"))]
        let _ = (limit, instance, report, ttl);
        match self {
            #[cfg(feature = "redis")]
            Self::Redis(s) => s.top_put(limit, instance, report, ttl).await,
            _ => Err(no_fleet_state()),
        }
    }

    /// Every instance's live heavy hitters of `limit`: instance and report.
    pub(crate) async fn top_read(&self, limit: &str) -> Result<Vec<(String, String)>, StoreError> {
        #[cfg(not(feature = "redis"))]
        let _ = limit;
        match self {
            #[cfg(feature = "redis")]
            Self::Redis(s) => s.top_read(limit).await,
            _ => Err(no_fleet_state()),
        }
    }

    /// The fleet state's version (see [`fleet_change`](Self::fleet_change)).
    pub(crate) async fn fleet_version(&self) -> Result<u64, StoreError> {
        match self {
            #[cfg(feature = "redis")]
            Self::Redis(s) => s.fleet_version().await,
            _ => Err(no_fleet_state()),
        }
    }

    /// The whole fleet state.
    pub(crate) async fn fleet_read(
        &self,
    ) -> Result<crate::protocol::fleet::FleetState, StoreError> {
        match self {
            #[cfg(feature = "redis")]
            Self::Redis(s) => s.fleet_read().await,
            _ => Err(no_fleet_state()),
        }
    }

    /// Where this store counts, for logs and start-up lines: `memory`, `redis host:port`,
    /// `redis-cluster host:port,…` (never a password), or `store` for a boxed store.
    pub fn describe(&self) -> String {
        self.identity().1
    }
}

impl crate::protocol::Slots for AnyStore {
    async fn take_slot(
        &self,
        key: &crate::limit::SlotKey,
        id: u64,
    ) -> Result<crate::protocol::Taken, StoreError> {
        match self {
            Self::Memory(s) => s.take_slot(key, id).await,
            #[cfg(feature = "redis")]
            Self::Redis(s) => s.take_slot(key, id).await,
            Self::Boxed(_) => Err(no_slots()),
        }
    }
    async fn renew_slot(&self, key: &crate::limit::SlotKey, id: u64) -> Result<bool, StoreError> {
        match self {
            Self::Memory(s) => s.renew_slot(key, id).await,
            #[cfg(feature = "redis")]
            Self::Redis(s) => s.renew_slot(key, id).await,
            Self::Boxed(_) => Err(no_slots()),
        }
    }
    async fn release_slot(&self, key: &crate::limit::SlotKey, id: u64) -> Result<(), StoreError> {
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
    async fn peek(&self, key: &Key) -> Result<KeyState, StoreError> {
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

/// What a store without a shared fleet state answers (a `Fleet` keeps its own then).
fn no_fleet_state() -> StoreError {
    StoreError::new(StoreErrorKind::Rejected, "this store keeps no fleet state")
}
