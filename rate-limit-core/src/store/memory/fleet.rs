//! [`SharedState`] in process memory: the fleet's state with its log and its readers'
//! notices (immediate), heavy-hitter reports, and the pacers and bans the store keeps
//! beside its counters (`side.rs`). Clones of a store share it, as they share counters.

use std::collections::{HashMap, VecDeque};
use std::sync::{MutexGuard, PoisonError};
use std::time::Duration;

use super::MemoryStore;
use crate::limit::Limit;
use crate::protocol::fleet::{
    FleetChange, FleetEntries, FleetMark, FleetNotices, FleetNotifier, FleetRead, FleetState,
};
use crate::protocol::pace::{PaceCall, PaceReply};
use crate::protocol::{Banned, SharedState, StoreError};

/// How many changes the log keeps: a reader further behind reads the whole state.
const LOG_KEPT: usize = 1_024;

/// A log position (the log holds at most [`LOG_KEPT`] lines).
fn index(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

/// What the instances on one memory store share.
#[derive(Default)]
pub(super) struct Fleetwide {
    mark: FleetMark,
    entries: FleetEntries,
    /// The latest changes, oldest first, with their versions and tips.
    log: VecDeque<(u64, u64, FleetChange)>,
    readers: Vec<FleetNotifier>,
    /// By limit, by instance: the report and when it lapses (µs).
    hitters: HashMap<String, HashMap<String, (String, u64)>>,
}

impl MemoryStore {
    fn fleetwide(&self) -> MutexGuard<'_, Fleetwide> {
        self.inner
            .fleet
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl SharedState for MemoryStore {
    async fn fleet_mark(&self) -> Result<FleetMark, StoreError> {
        Ok(self.fleetwide().mark)
    }

    async fn fleet_read(&self, after: FleetMark) -> Result<FleetRead, StoreError> {
        let f = self.fleetwide();
        let mark = f.mark;
        if mark == after {
            return Ok(FleetRead::Since {
                mark,
                changes: Vec::new(),
            });
        }
        // The log holds versions `first..=mark.version`, one line each, in order.
        let first = f.log.front().map_or(u64::MAX, |(v, _, _)| *v);
        let same = mark.epoch == after.epoch || after.is_empty();
        // The reader's own change must be the one the log holds at its version.
        let on_it = after.is_empty()
            || (first <= after.version
                && f.log.get(index(after.version - first)).map(|e| e.1) == Some(after.tip));
        if same && after.version < mark.version && first <= after.version + 1 && on_it {
            let changes = f.log.iter().skip(index(after.version + 1 - first));
            return Ok(FleetRead::Since {
                mark,
                changes: changes.map(|(_, _, c)| c.clone()).collect(),
            });
        }
        Ok(FleetRead::Whole(f.entries.to_state(mark)))
    }

    async fn fleet_change(
        &self,
        change: &FleetChange,
        held: FleetMark,
        fresh: u64,
    ) -> Result<Option<FleetMark>, StoreError> {
        let mut f = self.fleetwide();
        if f.mark.is_empty() {
            if !held.is_empty() {
                return Ok(None);
            }
            f.log.clear();
            f.mark.epoch = fresh;
        }
        f.entries.apply(change);
        f.mark.version += 1;
        f.mark.tip = fresh;
        let mark = f.mark;
        f.log.push_back((mark.version, fresh, change.clone()));
        if f.log.len() > LOG_KEPT {
            f.log.pop_front();
        }
        f.readers.retain(|r| r.notify(mark.version));
        Ok(Some(mark))
    }

    async fn fleet_restore(&self, state: &FleetState) -> Result<FleetMark, StoreError> {
        let mut f = self.fleetwide();
        if f.mark.is_empty() {
            f.mark = state.mark;
            f.entries = FleetEntries::new(state.entries.iter().cloned());
            f.log.clear();
            let v = state.mark.version;
            f.readers.retain(|r| r.notify(v));
        }
        Ok(f.mark)
    }

    async fn fleet_notices(&self, timeout: Duration) -> Result<FleetNotices, StoreError> {
        let _ = timeout;
        let (tx, rx) = FleetNotices::channel();
        let mut f = self.fleetwide();
        f.readers.retain(|r| !r.is_closed());
        f.readers.push(tx);
        Ok(rx)
    }

    async fn hitters_put(
        &self,
        limit: &str,
        instance: &str,
        report: &str,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        let now = self.inner.clock.now_micros();
        let until = now.saturating_add(u64::try_from(ttl.as_micros()).unwrap_or(u64::MAX));
        let mut f = self.fleetwide();
        let reports = f.hitters.entry(limit.to_owned()).or_default();
        reports.retain(|_, (_, lapses)| *lapses > now);
        reports.insert(instance.to_owned(), (report.to_owned(), until));
        Ok(())
    }

    async fn hitters_read(&self, limit: &str) -> Result<Vec<(String, String)>, StoreError> {
        let now = self.inner.clock.now_micros();
        let f = self.fleetwide();
        let mut out: Vec<(String, String)> = f
            .hitters
            .get(limit)
            .into_iter()
            .flatten()
            .filter(|(_, (_, lapses))| *lapses > now)
            .map(|(i, (r, _))| (i.clone(), r.clone()))
            .collect();
        out.sort();
        Ok(out)
    }

    async fn pace(&self, call: &PaceCall<'_>) -> Result<PaceReply, StoreError> {
        Ok(self.pace_now(call))
    }

    async fn bans(&self, ban: &Limit) -> Result<Vec<Banned>, StoreError> {
        Ok(MemoryStore::bans(self, ban))
    }
}
