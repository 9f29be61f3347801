//! What instances share beyond counting ([`SharedState`]): the fleet's runtime state and
//! its notices, heavy-hitter reports, the shared pacer's state, the bans a store lists,
//! and a cache to drop when another instance lifted a ban.

use std::future::Future;
use std::time::Duration;

use super::fleet::{FleetChange, FleetMark, FleetNotices, FleetRead, FleetState};
use super::pace::{PaceCall, PaceReply};
use super::{Banned, StoreError};
use crate::key::Key;
use crate::limit::Limit;

/// What every instance on one store shares beyond checks: the state behind
/// [`Fleet`](crate::fleet::Fleet) (quotas, overrides, settings, lifted bans, heavy-hitter
/// reports), [`SharedPacer`](crate::pace::SharedPacer)'s scopes, and the bans an admin
/// lists.
///
/// Every method has a default that answers [`StoreErrorKind::Unsupported`](super::StoreErrorKind::Unsupported):
/// a store of your own that implements only [`Store`](super::Store) opts in with an empty
/// `impl SharedState for MyStore {}`, compiles, and says what it lacks when asked (a
/// `Fleet` over it keeps the limits as written and says why in
/// [`Applied::error`](crate::fleet::Applied::error); a shared pacer paces each worker
/// locally). Box it with [`BoxStore::with_shared`](crate::store::BoxStore::with_shared) to
/// carry what it implements. The memory store keeps all of it in its process; the Redis
/// store (standalone, Cluster, Sentinel) in Redis.
///
/// The rules a store keeps (the shared-state conformance suite,
/// `ratekeeper_core::testing::shared_state`, checks them):
/// - **One history**: a change is one atomic step: the version goes up by one and the
///   entry changes together; the first change or restore on an empty store starts a new
///   epoch (the caller's `epoch`).
/// - **Readers catch up**: [`fleet_read`](Self::fleet_read) answers the changes after the
///   reader's mark when the store holds every one of them in the reader's epoch, after a
///   change whose tip is the reader's (a reader that holds nothing yet is at the start of
///   every epoch), else the whole state.
/// - **Restores only onto nothing**: [`fleet_restore`](Self::fleet_restore) writes only
///   when the store holds no state; otherwise the store's state stands.
pub trait SharedState: Send + Sync + 'static {
    /// Where the fleet's history stands ([`FleetMark::EMPTY`] before any change): a look,
    /// for an admin or a test. Instances poll with [`fleet_read`](Self::fleet_read) from
    /// their own mark, which answers no change in one small read.
    fn fleet_mark(&self) -> impl Future<Output = Result<FleetMark, StoreError>> + Send {
        unsupported_fleet()
    }

    /// What a reader at `after` needs: the changes since (none, cheaply, when `after` is
    /// the store's mark: every instance asks this on its period), or the whole state.
    fn fleet_read(
        &self,
        after: FleetMark,
    ) -> impl Future<Output = Result<FleetRead, StoreError>> + Send {
        let _ = after;
        unsupported_fleet()
    }

    /// Makes one change; the mark after it, whose tip is `fresh` (random, the caller's).
    /// On a store holding no state, the state starts with the epoch `fresh` too — unless
    /// `held` is not empty: the caller holds a state the store lost, and the answer is
    /// `None`, nothing changed (the caller restores, then changes).
    fn fleet_change(
        &self,
        change: &FleetChange,
        held: FleetMark,
        fresh: u64,
    ) -> impl Future<Output = Result<Option<FleetMark>, StoreError>> + Send {
        let _ = (change, held, fresh);
        unsupported_fleet()
    }

    /// Puts `state` back when the store holds none (a restart without persistence); the
    /// store's mark after (`state`'s when it was put back, the store's own otherwise).
    fn fleet_restore(
        &self,
        state: &FleetState,
    ) -> impl Future<Output = Result<FleetMark, StoreError>> + Send {
        let _ = state;
        unsupported_fleet()
    }

    /// Notices of changes, for as long as the store can send them (`timeout`: how long
    /// subscribing may take). A store without notices answers an error: its readers read
    /// on their period.
    fn fleet_notices(
        &self,
        timeout: Duration,
    ) -> impl Future<Output = Result<FleetNotices, StoreError>> + Send {
        let _ = timeout;
        std::future::ready(Err(StoreError::unsupported("this store sends no notices")))
    }

    /// Publishes `instance`'s heavy-hitter report of `limit` (opaque text), kept for `ttl`.
    fn hitters_put(
        &self,
        limit: &str,
        instance: &str,
        report: &str,
        ttl: Duration,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        let _ = (limit, instance, report, ttl);
        unsupported_fleet()
    }

    /// Every live report of `limit`: instance and report.
    fn hitters_read(
        &self,
        limit: &str,
    ) -> impl Future<Output = Result<Vec<(String, String)>, StoreError>> + Send {
        let _ = limit;
        unsupported_fleet()
    }

    /// One call of a shared pacer on its scope's state (see
    /// [`pace_step`](crate::store::shared::pace_step), the step every store runs).
    fn pace(
        &self,
        call: &PaceCall<'_>,
    ) -> impl Future<Output = Result<PaceReply, StoreError>> + Send {
        let _ = call;
        std::future::ready(Err(StoreError::unsupported("this store keeps no pacers")))
    }

    /// The principals `ban` bans now, with the time left (an admin call).
    /// [`Store::reset`](super::Store::reset) of a ban's key lifts it.
    fn bans(&self, ban: &Limit) -> impl Future<Output = Result<Vec<Banned>, StoreError>> + Send {
        let _ = ban;
        std::future::ready(Err(StoreError::unsupported("this store cannot list bans")))
    }

    /// Drops what this process cached of `key` (a refusal, a leased slice), without a
    /// store call: another instance reset it in the store. Default: nothing cached.
    fn forget_cached(&self, key: &Key) {
        let _ = key;
    }
}

fn unsupported_fleet<T>() -> std::future::Ready<Result<T, StoreError>> {
    std::future::ready(Err(StoreError::unsupported(
        "this store keeps no fleet state",
    )))
}
