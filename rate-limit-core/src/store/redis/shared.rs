//! [`SharedState`] on Redis: the fleet (`fleet.rs`), heavy hitters (`top.rs`), the shared
//! pacer (`pace.rs`), bans listed (`admin.rs`) and the caches a lifted ban drops.

use std::time::Duration;

use super::RedisStore;
use crate::key::Key;
use crate::limit::Limit;
use crate::protocol::fleet::{FleetChange, FleetMark, FleetNotices, FleetRead, FleetState};
use crate::protocol::pace::{PaceCall, PaceReply};
use crate::protocol::{Banned, SharedState, StoreError};

impl SharedState for RedisStore {
    async fn fleet_mark(&self) -> Result<FleetMark, StoreError> {
        Self::fleet_mark(self).await
    }
    async fn fleet_read(&self, after: FleetMark) -> Result<FleetRead, StoreError> {
        Self::fleet_read(self, after).await
    }
    async fn fleet_change(
        &self,
        change: &FleetChange,
        held: FleetMark,
        fresh: u64,
    ) -> Result<Option<FleetMark>, StoreError> {
        Self::fleet_change(self, change, held, fresh).await
    }
    async fn fleet_restore(&self, state: &FleetState) -> Result<FleetMark, StoreError> {
        Self::fleet_restore(self, state).await
    }
    async fn fleet_notices(&self, timeout: Duration) -> Result<FleetNotices, StoreError> {
        Self::fleet_notices(self, timeout).await
    }
    async fn hitters_put(
        &self,
        limit: &str,
        instance: &str,
        report: &str,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        self.top_put(limit, instance, report, ttl).await
    }
    async fn hitters_read(&self, limit: &str) -> Result<Vec<(String, String)>, StoreError> {
        self.top_read(limit).await
    }
    async fn pace(&self, call: &PaceCall<'_>) -> Result<PaceReply, StoreError> {
        Self::pace(self, call).await
    }
    async fn bans(&self, ban: &Limit) -> Result<Vec<Banned>, StoreError> {
        Self::bans(self, ban).await
    }
    fn forget_cached(&self, key: &Key) {
        Self::forget_cached(self, key);
    }
}
