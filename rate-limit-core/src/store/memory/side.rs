//! What the memory store keeps beside its counters: bans listed, shared pacers, in-flight
//! slots and de-duplicated delivery ids.

use std::collections::HashMap;
use std::sync::{MutexGuard, PoisonError};
use std::time::Duration;

use super::{MemoryStore, lock};
use crate::algorithm::State;
use crate::algorithm::pace::{PacerState, step};
use crate::digest::local_digest;
use crate::key::Key;
use crate::limit::SlotKey;
use crate::protocol::Banned;
use crate::protocol::pace::{PaceCall, PaceReply};
use crate::protocol::{Dedupe, StoreError};
use crate::protocol::{Slots, Taken};

/// A shared pacer's scope: the state, the workers (id, lapses at, µs) and when the state
/// lapses (µs).
pub(super) struct Pacer {
    pub(super) state: PacerState,
    pub(super) workers: Vec<(u64, u64)>,
    pub(super) lapses: u64,
}

impl MemoryStore {
    /// The principals `ban` bans now, with the time left (an admin call; see [`Banned`]).
    pub fn bans(&self, ban: &crate::Limit) -> Vec<Banned> {
        let now = self.inner.clock.now_micros();
        // The record first, released before any shard is locked (checks lock a shard, then
        // the record: never the other way round).
        let candidates: Vec<(Key, u64)> = {
            let mut bans = self.ban_record();
            bans.retain(|_, (_, end)| *end > now);
            bans.values()
                .filter(|(key, _)| key.limit().name() == ban.name())
                .cloned()
                .collect()
        };
        // A ban evicted for room is not in force: only the store's state says.
        let held = |key: &Key, end: u64| {
            let digest = key.digest();
            let state = lock(&self.inner.shards[self.shard_of(key)]).get(&digest);
            matches!(state, Some(State::Ban { until, .. }) if until == end)
        };
        let mut out: Vec<Banned> = candidates
            .into_iter()
            .filter(|(key, end)| held(key, *end))
            .map(|(key, end)| Banned {
                key,
                remaining: Duration::from_micros(end - now),
            })
            .collect();
        out.sort_by(|a, b| a.principal().as_str().cmp(b.principal().as_str()));
        out
    }

    /// One call of a shared pacer (see [`SharedPacer`](crate::pacer::SharedPacer)).
    pub(crate) fn pace_now(&self, call: &PaceCall<'_>) -> PaceReply {
        let now = self.inner.clock.now_micros();
        let us = |d: Duration| u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        let mut pacers = self
            .inner
            .pacers
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if pacers.len() > 1_024 {
            pacers.retain(|_, p| p.lapses > now);
        }
        let name = format!("{}/{}", call.scope.as_str(), call.name);
        let p = pacers.entry(name).or_insert(Pacer {
            state: PacerState {
                rate: 0.0,
                next: 0,
                paused: 0,
                last_decrease: 0,
                cap: 0.0,
            },
            workers: Vec::new(),
            lapses: 0,
        });
        let stored = (p.lapses > now && p.state.rate > 0.0).then_some(p.state);
        let (state, go, wait_us) = step(stored, call, now);
        p.state = state;
        p.lapses = now.saturating_add(us(call.remember));
        p.workers
            .retain(|&(id, until)| until > now && id != call.worker);
        p.workers
            .push((call.worker, now.saturating_add(us(call.registration))));
        PaceReply {
            go,
            wait_us,
            rate: state.rate,
            workers: u32::try_from(p.workers.len()).unwrap_or(u32::MAX),
        }
    }
}

impl MemoryStore {
    /// Now, and when a slot of `key` leased now ends (µs, the store's clock).
    fn lease_end(&self, key: &SlotKey) -> (u64, u64) {
        let now = self.inner.clock.now_micros();
        let ttl = u64::try_from(key.in_flight().ttl().as_micros()).unwrap_or(u64::MAX);
        (now, now.saturating_add(ttl))
    }

    pub(super) fn ban_record(&self) -> MutexGuard<'_, HashMap<[u64; 2], (Key, u64)>> {
        self.inner
            .bans
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn slots(&self) -> MutexGuard<'_, HashMap<String, Vec<(u64, u64)>>> {
        self.inner
            .slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl Slots for MemoryStore {
    async fn take_slot(&self, key: &SlotKey, id: u64) -> Result<Taken, StoreError> {
        let (now, end) = self.lease_end(key);
        let mut slots = self.slots();
        let held = slots.entry(key.local_name()).or_default();
        held.retain(|&(_, end)| end > now);
        let max = usize::try_from(key.in_flight().max()).unwrap_or(usize::MAX);
        if held.len() < max {
            held.push((id, end));
            let in_use = u32::try_from(held.len()).unwrap_or(u32::MAX);
            return Ok(Taken {
                taken: true,
                in_use,
                retry_after: Duration::ZERO,
            });
        }
        let first = held.iter().map(|&(_, end)| end).min().unwrap_or(now);
        Ok(Taken {
            taken: false,
            in_use: u32::try_from(held.len()).unwrap_or(u32::MAX),
            retry_after: Duration::from_micros(first.saturating_sub(now)),
        })
    }

    async fn renew_slot(&self, key: &SlotKey, id: u64) -> Result<bool, StoreError> {
        let (now, end) = self.lease_end(key);
        let mut slots = self.slots();
        let slot = slots
            .get_mut(&key.local_name())
            .and_then(|held| held.iter_mut().find(|(i, e)| *i == id && *e > now));
        Ok(slot.map(|s| s.1 = end).is_some())
    }

    async fn release_slot(&self, key: &SlotKey, id: u64) -> Result<(), StoreError> {
        let mut slots = self.slots();
        let name = key.local_name();
        if let Some(held) = slots.get_mut(&name) {
            held.retain(|&(i, _)| i != id);
            if held.is_empty() {
                slots.remove(&name);
            }
        }
        Ok(())
    }
}

impl Dedupe for MemoryStore {
    async fn first_seen(&self, id: &str, ttl: Duration) -> Result<bool, StoreError> {
        let now = self.inner.clock.now_micros();
        let until = now.saturating_add(u64::try_from(ttl.as_micros()).unwrap_or(u64::MAX));
        let d = local_digest(b"dedupe", id.as_bytes());
        // Bounded like the counters: expired ids go first, then the oldest; O(1) amortized.
        Ok(self
            .inner
            .dedupe
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .first_seen(d, now, until))
    }

    async fn release(&self, id: &str) -> Result<(), StoreError> {
        let d = local_digest(b"dedupe", id.as_bytes());
        self.inner
            .dedupe
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .release(&d);
        Ok(())
    }
}
