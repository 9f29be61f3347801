//! What a [`BoxStore`] forwards beyond checks: [`SharedState`], [`Slots`] and [`Dedupe`],
//! for a store boxed with [`BoxStore::with_shared`]; one boxed with [`BoxStore::new`]
//! answers each trait's default ([`StoreErrorKind::Unsupported`](crate::store::StoreErrorKind::Unsupported)).

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use super::BoxStore;
use crate::key::Key;
use crate::limit::{Limit, SlotKey};
use crate::protocol::fleet::{FleetChange, FleetMark, FleetNotices, FleetRead, FleetState};
use crate::protocol::pace::{PaceCall, PaceReply};
use crate::protocol::{Banned, Dedupe, SharedState, Slots, Store, StoreError, Taken};

type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

pub(super) trait DynShared: Send + Sync + 'static {
    fn mark(&self) -> BoxFuture<'_, FleetMark>;
    fn read(&self, after: FleetMark) -> BoxFuture<'_, FleetRead>;
    fn change<'a>(
        &'a self,
        c: &'a FleetChange,
        held: FleetMark,
        fresh: u64,
    ) -> BoxFuture<'a, Option<FleetMark>>;
    fn restore<'a>(&'a self, state: &'a FleetState) -> BoxFuture<'a, FleetMark>;
    fn notices(&self, timeout: Duration) -> BoxFuture<'_, FleetNotices>;
    fn put<'a>(&'a self, l: &'a str, i: &'a str, r: &'a str, ttl: Duration) -> BoxFuture<'a, ()>;
    fn reports<'a>(&'a self, limit: &'a str) -> BoxFuture<'a, Vec<(String, String)>>;
    fn pace<'a>(&'a self, call: &'a PaceCall<'a>) -> BoxFuture<'a, PaceReply>;
    fn bans<'a>(&'a self, ban: &'a Limit) -> BoxFuture<'a, Vec<Banned>>;
    fn forget(&self, key: &Key);
    fn take<'a>(&'a self, key: &'a SlotKey, id: u64) -> BoxFuture<'a, Taken>;
    fn renew<'a>(&'a self, key: &'a SlotKey, id: u64) -> BoxFuture<'a, bool>;
    fn give<'a>(&'a self, key: &'a SlotKey, id: u64) -> BoxFuture<'a, ()>;
    fn seen<'a>(&'a self, id: &'a str, ttl: Duration) -> BoxFuture<'a, bool>;
    fn unsee<'a>(&'a self, id: &'a str) -> BoxFuture<'a, ()>;
}

impl<S: Store + SharedState + Slots + Dedupe> DynShared for S {
    fn mark(&self) -> BoxFuture<'_, FleetMark> {
        Box::pin(self.fleet_mark())
    }
    fn read(&self, after: FleetMark) -> BoxFuture<'_, FleetRead> {
        Box::pin(self.fleet_read(after))
    }
    fn change<'a>(
        &'a self,
        c: &'a FleetChange,
        held: FleetMark,
        fresh: u64,
    ) -> BoxFuture<'a, Option<FleetMark>> {
        Box::pin(self.fleet_change(c, held, fresh))
    }
    fn restore<'a>(&'a self, state: &'a FleetState) -> BoxFuture<'a, FleetMark> {
        Box::pin(self.fleet_restore(state))
    }
    fn notices(&self, timeout: Duration) -> BoxFuture<'_, FleetNotices> {
        Box::pin(self.fleet_notices(timeout))
    }
    fn put<'a>(&'a self, l: &'a str, i: &'a str, r: &'a str, ttl: Duration) -> BoxFuture<'a, ()> {
        Box::pin(self.hitters_put(l, i, r, ttl))
    }
    fn reports<'a>(&'a self, limit: &'a str) -> BoxFuture<'a, Vec<(String, String)>> {
        Box::pin(self.hitters_read(limit))
    }
    fn pace<'a>(&'a self, call: &'a PaceCall<'a>) -> BoxFuture<'a, PaceReply> {
        Box::pin(SharedState::pace(self, call))
    }
    fn bans<'a>(&'a self, ban: &'a Limit) -> BoxFuture<'a, Vec<Banned>> {
        Box::pin(SharedState::bans(self, ban))
    }
    fn forget(&self, key: &Key) {
        self.forget_cached(key);
    }
    fn take<'a>(&'a self, key: &'a SlotKey, id: u64) -> BoxFuture<'a, Taken> {
        Box::pin(self.take_slot(key, id))
    }
    fn renew<'a>(&'a self, key: &'a SlotKey, id: u64) -> BoxFuture<'a, bool> {
        Box::pin(self.renew_slot(key, id))
    }
    fn give<'a>(&'a self, key: &'a SlotKey, id: u64) -> BoxFuture<'a, ()> {
        Box::pin(self.release_slot(key, id))
    }
    fn seen<'a>(&'a self, id: &'a str, ttl: Duration) -> BoxFuture<'a, bool> {
        Box::pin(self.first_seen(id, ttl))
    }
    fn unsee<'a>(&'a self, id: &'a str) -> BoxFuture<'a, ()> {
        Box::pin(self.release(id))
    }
}

/// Forwards to the boxed store's implementation, or answers the trait's default.
macro_rules! forward {
    ($self:ident, $dyn:ident($($arg:expr),*), $default:expr) => {
        match &$self.extra.shared {
            Some(s) => s.$dyn($($arg),*).await,
            None => $default.await,
        }
    };
}

/// The defaults, for a store boxed with [`BoxStore::new`].
struct Checks;
impl SharedState for Checks {}
impl Slots for Checks {}
impl Dedupe for Checks {}

impl SharedState for BoxStore {
    async fn fleet_mark(&self) -> Result<FleetMark, StoreError> {
        forward!(self, mark(), Checks.fleet_mark())
    }
    async fn fleet_read(&self, after: FleetMark) -> Result<FleetRead, StoreError> {
        forward!(self, read(after), Checks.fleet_read(after))
    }
    async fn fleet_change(
        &self,
        c: &FleetChange,
        held: FleetMark,
        fresh: u64,
    ) -> Result<Option<FleetMark>, StoreError> {
        forward!(
            self,
            change(c, held, fresh),
            Checks.fleet_change(c, held, fresh)
        )
    }
    async fn fleet_restore(&self, state: &FleetState) -> Result<FleetMark, StoreError> {
        forward!(self, restore(state), Checks.fleet_restore(state))
    }
    async fn fleet_notices(&self, timeout: Duration) -> Result<FleetNotices, StoreError> {
        forward!(self, notices(timeout), Checks.fleet_notices(timeout))
    }
    async fn hitters_put(
        &self,
        l: &str,
        i: &str,
        r: &str,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        forward!(self, put(l, i, r, ttl), Checks.hitters_put(l, i, r, ttl))
    }
    async fn hitters_read(&self, limit: &str) -> Result<Vec<(String, String)>, StoreError> {
        forward!(self, reports(limit), Checks.hitters_read(limit))
    }
    async fn pace(&self, call: &PaceCall<'_>) -> Result<PaceReply, StoreError> {
        forward!(self, pace(call), Checks.pace(call))
    }
    async fn bans(&self, ban: &Limit) -> Result<Vec<Banned>, StoreError> {
        forward!(self, bans(ban), Checks.bans(ban))
    }
    fn forget_cached(&self, key: &Key) {
        if let Some(s) = &self.extra.shared {
            s.forget(key);
        }
    }
}

impl Slots for BoxStore {
    async fn take_slot(&self, key: &SlotKey, id: u64) -> Result<Taken, StoreError> {
        forward!(self, take(key, id), Checks.take_slot(key, id))
    }
    async fn renew_slot(&self, key: &SlotKey, id: u64) -> Result<bool, StoreError> {
        forward!(self, renew(key, id), Checks.renew_slot(key, id))
    }
    async fn release_slot(&self, key: &SlotKey, id: u64) -> Result<(), StoreError> {
        forward!(self, give(key, id), Checks.release_slot(key, id))
    }
}

impl Dedupe for BoxStore {
    async fn first_seen(&self, id: &str, ttl: Duration) -> Result<bool, StoreError> {
        forward!(self, seen(id, ttl), Checks.first_seen(id, ttl))
    }
    async fn release(&self, id: &str) -> Result<(), StoreError> {
        forward!(self, unsee(id), Checks.release(id))
    }
}
