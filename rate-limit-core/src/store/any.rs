//! [`AnyStore`]: the store picked when the program starts.

use std::time::Duration;

use super::BoxStore;
#[cfg(feature = "redis")]
use super::RedisStore;
use super::memory::MemoryStore;
use crate::chain::{Chain, Check};
use crate::key::Key;
use crate::limit::{Limit, SlotKey};
use crate::protocol::fleet::{FleetChange, FleetMark, FleetNotices, FleetRead, FleetState};
use crate::protocol::pace::{PaceCall, PaceReply};
use crate::protocol::{
    Banned, ChainDecision, Decision, Dedupe, Domains, KeyState, Reservation, SharedState, Slots,
    Store, StoreError, Taken,
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
    /// [`Banned`](crate::protocol::Banned)): [`SharedState::bans`], kept here so that a
    /// caller need not import the trait. The memory store lists its record of its bans;
    /// Redis `SCAN`s every master; a boxed store answers what it implements.
    /// [`Store::reset`] of a ban's key lifts it.
    pub async fn bans(
        &self,
        ban: &crate::Limit,
    ) -> Result<Vec<crate::protocol::Banned>, StoreError> {
        SharedState::bans(self, ban).await
    }

    /// Where this store counts, for logs and start-up lines: `memory`, `redis host:port`,
    /// `redis-cluster host:port,…` (never a password), or `store` for a boxed store.
    pub fn describe(&self) -> String {
        self.identity().1
    }
}

/// Runs `$e` on the store inside, whichever it is.
macro_rules! each {
    ($self:ident, $s:ident => $e:expr) => {
        match $self {
            Self::Memory($s) => $e,
            #[cfg(feature = "redis")]
            Self::Redis($s) => $e,
            Self::Boxed($s) => $e,
        }
    };
}

impl Store for AnyStore {
    async fn check(&self, chain: &Chain) -> Result<ChainDecision, StoreError> {
        each!(self, s => s.check(chain).await)
    }
    async fn charge(&self, check: &Check) -> Result<Decision, StoreError> {
        each!(self, s => s.charge(check).await)
    }
    async fn peek(&self, key: &Key) -> Result<KeyState, StoreError> {
        each!(self, s => s.peek(key).await)
    }
    async fn give_back(&self, reservation: &Reservation) -> Result<(), StoreError> {
        each!(self, s => s.give_back(reservation).await)
    }
    async fn reset(&self, key: &Key) -> Result<(), StoreError> {
        each!(self, s => s.reset(key).await)
    }
    fn try_check(&self, chain: &Chain) -> Option<ChainDecision> {
        each!(self, s => s.try_check(chain))
    }
    fn failure_domains(&self, chain: &Chain) -> Domains {
        each!(self, s => s.failure_domains(chain))
    }
    fn domain_name(&self, domain: u32) -> Option<String> {
        each!(self, s => s.domain_name(domain))
    }
}

impl Dedupe for AnyStore {
    async fn first_seen(&self, id: &str, ttl: Duration) -> Result<bool, StoreError> {
        each!(self, s => s.first_seen(id, ttl).await)
    }
    async fn release(&self, id: &str) -> Result<(), StoreError> {
        each!(self, s => s.release(id).await)
    }
}

impl Slots for AnyStore {
    async fn take_slot(&self, key: &SlotKey, id: u64) -> Result<Taken, StoreError> {
        each!(self, s => s.take_slot(key, id).await)
    }
    async fn renew_slot(&self, key: &SlotKey, id: u64) -> Result<bool, StoreError> {
        each!(self, s => s.renew_slot(key, id).await)
    }
    async fn release_slot(&self, key: &SlotKey, id: u64) -> Result<(), StoreError> {
        each!(self, s => s.release_slot(key, id).await)
    }
}

impl SharedState for AnyStore {
    async fn fleet_mark(&self) -> Result<FleetMark, StoreError> {
        each!(self, s => s.fleet_mark().await)
    }
    async fn fleet_read(&self, after: FleetMark) -> Result<FleetRead, StoreError> {
        each!(self, s => s.fleet_read(after).await)
    }
    async fn fleet_change(
        &self,
        change: &FleetChange,
        held: FleetMark,
        fresh: u64,
    ) -> Result<Option<FleetMark>, StoreError> {
        each!(self, s => s.fleet_change(change, held, fresh).await)
    }
    async fn fleet_restore(&self, state: &FleetState) -> Result<FleetMark, StoreError> {
        each!(self, s => s.fleet_restore(state).await)
    }
    async fn fleet_notices(&self, timeout: Duration) -> Result<FleetNotices, StoreError> {
        each!(self, s => s.fleet_notices(timeout).await)
    }
    async fn hitters_put(
        &self,
        limit: &str,
        instance: &str,
        report: &str,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        each!(self, s => s.hitters_put(limit, instance, report, ttl).await)
    }
    async fn hitters_read(&self, limit: &str) -> Result<Vec<(String, String)>, StoreError> {
        each!(self, s => s.hitters_read(limit).await)
    }
    async fn pace(&self, call: &PaceCall<'_>) -> Result<PaceReply, StoreError> {
        each!(self, s => SharedState::pace(s, call).await)
    }
    async fn bans(&self, ban: &Limit) -> Result<Vec<Banned>, StoreError> {
        each!(self, s => SharedState::bans(s, ban).await)
    }
    fn forget_cached(&self, key: &Key) {
        each!(self, s => SharedState::forget_cached(s, key));
    }
}
