//! [`MemoryStoreBuilder`]: the key cap, the shards, the sweep and the clock.

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::seen::Seen;
use super::shard::Shard;
use super::{MemoryInner, MemoryStore};
use crate::clock::{Clock, SystemClock};
use crate::error::{ConfigError, ConfigErrorKind};

/// Builds a [`MemoryStore`].
///
/// You need it (`MemoryStore::builder`) to cap the keys a memory store holds, to give it a
/// clock (in tests), or to change its shards or how often it sweeps expired keys.
#[derive(Debug)]
#[must_use]
pub struct MemoryStoreBuilder {
    pub(super) clock: Option<Arc<dyn Clock>>,
    pub(super) max_keys: usize,
    pub(super) shards: usize,
    pub(super) sweep_interval: Duration,
}

impl MemoryStoreBuilder {
    /// The clock (default: [`SystemClock`]). Tests pass a [`FakeClock`](crate::clock::FakeClock)
    /// or a [`TokioClock`](crate::clock::TokioClock).
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Some(Arc::new(clock));
        self
    }

    /// The most keys the store holds for each limit (default [`DEFAULT_MAX_KEYS`](super::DEFAULT_MAX_KEYS)). Each
    /// shard holds `max_keys / shards` of a limit, so no limit exceeds it; the store holds
    /// at most that times the number of limits in use. Eviction keeps refusing keys against
    /// a flood only among the keys of one shard: keep `max_keys / shards` well above the
    /// refusing keys a shard must hold (a shard's room of one key gives it to each new key).
    pub fn max_keys(mut self, max_keys: usize) -> Self {
        self.max_keys = max_keys;
        self
    }

    /// The number of shards (default 64; at most `max_keys`).
    pub fn shards(mut self, shards: usize) -> Self {
        self.shards = shards;
        self
    }

    /// How often a shard drops its expired keys when it is written to (default 60 s).
    pub fn sweep_interval(mut self, every: Duration) -> Self {
        self.sweep_interval = every;
        self
    }

    /// Builds the store; `store.invalid` for a key cap or shard count of zero.
    pub fn build(self) -> Result<MemoryStore, ConfigError> {
        if self.max_keys == 0 {
            return Err(ConfigError::new(
                ConfigErrorKind::StoreInvalid,
                "max_keys",
                "the key cap must be at least 1",
            ));
        }
        if self.shards == 0 {
            return Err(ConfigError::new(
                ConfigErrorKind::StoreInvalid,
                "shards",
                "a store needs at least one shard",
            ));
        }
        let shards = self.shards.min(self.max_keys);
        let clock = self.clock.unwrap_or_else(|| Arc::new(SystemClock::new()));
        let anchor = clock.now_micros();
        let sweep_every = u32::try_from(self.sweep_interval.as_secs().max(1)).unwrap_or(u32::MAX);
        Ok(MemoryStore {
            inner: Arc::new(MemoryInner {
                shards: (0..shards).map(|_| Mutex::new(Shard::default())).collect(),
                clock,
                anchor,
                shard_cap: self.max_keys / shards,
                max_keys: self.max_keys,
                sweep_every,
                evictions: AtomicU64::new(0),
                dedupe: Mutex::new(Seen::new(self.max_keys)),
                slots: Mutex::new(HashMap::new()),
                bans: Mutex::new(HashMap::new()),
                pacers: Mutex::new(HashMap::new()),
                fleet: Mutex::default(),
            }),
        })
    }
}
