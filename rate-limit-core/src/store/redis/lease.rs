//! Leases: slices of a shared limit's quota that this process took from Redis in one
//! atomic call and spends locally (see the module docs of the store, "Leases").
//!
//! A slice belongs to one key. It ends at the lease's lifetime at the latest (a fixed
//! window's slice also with its window); a slice whose limit changed (`set_quota`, an
//! override) ends at the next check. What an ended slice did not use is handed back to be
//! returned to Redis. While one check refills a key's slice, the others check plainly.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::decision::Decision;
use crate::key::Key;
use crate::limit::Params;

const SHARDS: usize = 16;
/// A refill that has not ended in this long (its caller vanished without a trace) no
/// longer holds the others back.
const STALE_REFILL: Duration = Duration::from_secs(2);

/// Units of an ended slice, to give back to Redis.
#[derive(Debug)]
pub(super) struct Leftover {
    pub(super) name: String,
    pub(super) params: Params,
    /// The server time of the call that granted them.
    pub(super) at: u64,
    pub(super) units: u64,
}

/// Units taken from a slice for a chain that may still be refused.
#[derive(Debug, Clone, Copy)]
pub(super) struct Reservation {
    digest: [u64; 2],
    generation: u64,
    units: u64,
}

/// What a check gets from the table.
#[derive(Debug)]
pub(super) enum Take {
    /// Spent from this process's slice.
    Local(Decision, Reservation),
    /// Ask Redis for the cost plus this many units more (this check refills the slice).
    Refill(u64),
    /// Ask Redis for the cost alone.
    Plain,
}

struct Slice {
    units: u64,
    params: Params,
    /// When the call that granted it was sent, and when it ends.
    taken: Instant,
    ends: Instant,
    /// Redis's decision for the grant (remaining: after it), for local answers.
    limit: u64,
    remaining: u64,
    reset_us: u64,
    window_us: u64,
    at: u64,
    name: String,
    generation: u64,
}

impl Slice {
    fn leftover(&mut self) -> Option<Leftover> {
        let units = std::mem::take(&mut self.units);
        (units > 0).then(|| Leftover {
            name: self.name.clone(),
            params: self.params,
            at: self.at,
            units,
        })
    }
}

#[derive(Default)]
struct Entry {
    slice: Option<Slice>,
    /// A refill in flight, since when.
    refilling: Option<Instant>,
}

/// A grant to install: what Redis answered for a leased check of an admitted chain.
pub(super) struct Grant<'a> {
    pub(super) key: &'a Key,
    pub(super) name: &'a str,
    pub(super) units: u64,
    /// Redis's decision for the check (remaining: after the grant) and its server time.
    pub(super) decision: &'a Decision,
    pub(super) at: u64,
    /// When the call was sent.
    pub(super) sent: Instant,
}

type Shard = HashMap<[u64; 2], Entry>;

/// The slices this process holds, by key.
pub(super) struct Leases {
    shards: Box<[Mutex<Shard>]>,
    generation: std::sync::atomic::AtomicU64,
    /// A task that returns ended slices' units is running.
    pub(super) sweeping: AtomicBool,
}

impl Leases {
    pub(super) fn new() -> Self {
        Self {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            generation: std::sync::atomic::AtomicU64::new(1),
            sweeping: AtomicBool::new(false),
        }
    }

    fn shard(&self, digest: [u64; 2]) -> std::sync::MutexGuard<'_, Shard> {
        // The digest is a keyed PRF: its low bits are uniform.
        self.shards[(digest[0] as usize) % SHARDS]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes `cost` units of `key`'s slice, or says how to ask Redis. With `refill` false
    /// nothing changes unless the units are there (the answer is then `Plain`). An ended
    /// slice's unused units come back in `leftover`.
    pub(super) fn take(
        &self,
        key: &Key,
        cost: u64,
        now: Instant,
        refill: bool,
        leftover: &mut Option<Leftover>,
    ) -> Take {
        let Some((max_slice, _)) = key.limit().lease() else {
            return Take::Plain;
        };
        let digest = key.digest();
        let params = key.params();
        let mut shard = self.shard(digest);
        let entry = match shard.get_mut(&digest) {
            Some(e) => e,
            None if refill => shard.entry(digest).or_default(),
            None => return Take::Plain,
        };
        if let Some(s) = &mut entry.slice {
            if now < s.ends && s.params == params {
                if s.units >= cost && cost > 0 {
                    s.units -= cost;
                    let elapsed =
                        u64::try_from(now.duration_since(s.taken).as_micros()).unwrap_or(u64::MAX);
                    let d = Decision::allowed(
                        s.limit,
                        s.remaining.saturating_add(s.units).min(s.limit),
                        s.reset_us.saturating_sub(elapsed),
                        s.window_us,
                    );
                    let r = Reservation {
                        digest,
                        generation: s.generation,
                        units: cost,
                    };
                    return Take::Local(d, r);
                }
            } else if refill {
                *leftover = s.leftover();
                entry.slice = None;
            }
        }
        if !refill || cost == 0 || max_slice <= cost {
            return Take::Plain;
        }
        match entry.refilling {
            Some(since) if now.duration_since(since) < STALE_REFILL => Take::Plain,
            _ => {
                entry.refilling = Some(now);
                Take::Refill(max_slice - cost)
            }
        }
    }

    /// Puts back units taken for a chain that was refused (or failed, or was dropped), if
    /// their slice is still the one they came from.
    pub(super) fn release(&self, r: Reservation) {
        let mut shard = self.shard(r.digest);
        if let Some(s) = shard.get_mut(&r.digest).and_then(|e| e.slice.as_mut())
            && s.generation == r.generation
        {
            s.units = s.units.saturating_add(r.units);
        }
    }

    /// The refill of `key` ended (installed or not).
    pub(super) fn end_refill(&self, digest: [u64; 2]) {
        let mut shard = self.shard(digest);
        if let Some(e) = shard.get_mut(&digest) {
            e.refilling = None;
            if e.slice.is_none() {
                shard.remove(&digest);
            }
        }
    }

    /// Installs a granted slice; the units of the slice it replaces come back.
    pub(super) fn install(&self, g: &Grant<'_>) -> Option<Leftover> {
        let (_, lifetime) = g.key.limit().lease()?;
        let params = g.key.params();
        let reset = Duration::from_micros(
            u64::try_from(g.decision.reset_after().as_micros()).unwrap_or(u64::MAX),
        );
        // A fixed window's units count in their window only: the slice ends with it.
        let life = match params {
            Params::Fixed { .. } => lifetime.min(reset),
            _ => lifetime,
        };
        let slice = Slice {
            units: g.units,
            params,
            taken: g.sent,
            ends: g.sent + life,
            limit: g.decision.limit(),
            remaining: g.decision.remaining(),
            reset_us: u64::try_from(g.decision.reset_after().as_micros()).unwrap_or(u64::MAX),
            window_us: u64::try_from(g.decision.window().as_micros()).unwrap_or(u64::MAX),
            at: g.at,
            name: g.name.to_owned(),
            generation: self.generation.fetch_add(1, Ordering::Relaxed),
        };
        let digest = g.key.digest();
        let mut shard = self.shard(digest);
        let entry = shard.entry(digest).or_default();
        let old = entry.slice.replace(slice);
        entry.refilling = None;
        old.and_then(|mut s| s.leftover())
    }

    /// Drops `key`'s slice without giving its units back (the key was deleted).
    pub(super) fn forget(&self, digest: [u64; 2]) {
        self.shard(digest).remove(&digest);
    }

    /// Removes the slices that ended by `now`; their unused units come back. Returns
    /// whether any slice or refill is left.
    pub(super) fn sweep(&self, now: Instant, out: &mut Vec<Leftover>) -> bool {
        let mut left = false;
        for shard in &*self.shards {
            let mut shard = shard.lock().unwrap_or_else(PoisonError::into_inner);
            shard.retain(|_, e| {
                if let Some(s) = &mut e.slice
                    && now >= s.ends
                {
                    out.extend(s.leftover());
                    e.slice = None;
                }
                e.slice.is_some() || e.refilling.is_some()
            });
            left |= !shard.is_empty();
        }
        left
    }

    /// How many units this process holds for `key` (tests and figures).
    pub(super) fn held(&self, key: &Key) -> u64 {
        let digest = key.digest();
        self.shard(digest)
            .get(&digest)
            .and_then(|e| e.slice.as_ref())
            .map_or(0, |s| s.units)
    }
}
