//! Leases: slices of a shared limit's quota that this process took from Redis in one
//! atomic call and spends locally (see the module docs of the store, "Leases").
//!
//! A key's slice is made of the grants not yet spent (its *parts*), oldest first; each part
//! ends at the lease's lifetime after its call was sent (a fixed window's also with its
//! window), so no unit outlives its lifetime however often the slice is topped up. A slice
//! whose limit changed (`set_quota`, an override) ends at the next check. What an ended
//! part did not use is handed back, to be returned to Redis.
//!
//! Sizing: a key earns a slice by being checked 4 times within one lifetime; its first
//! slice is small, doubles each time the slice runs under half while it lasts (the
//! key is hot: it is topped up then, before it runs dry), and halves each time a part ends
//! with units left (the key cooled), up to the lease's largest slice. While a refill is in
//! flight, the checks that find no units check plainly.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::key::Key;
use crate::limit::{MAX_LEASE_LIFETIME, Params};
use crate::protocol::Decision;
use crate::protocol::lease::LeasedUnits;

const SHARDS: usize = 16;
/// A refill that has not ended in this long (its caller vanished without a trace) no
/// longer holds the others back.
const STALE_REFILL: Duration = Duration::from_secs(2);
/// The first slice a key gets.
const FIRST_SLICE: u64 = 2;
/// A key earns a slice with this many checks sent to Redis within one lifetime: a slice is
/// then likely to be spent before it ends (a key checked less often is checked plainly,
/// as a slice's unused units would cost a call to give back).
const HOT_HITS: u32 = 4;
/// A key's record without a slice is forgotten once it has not been checked for this long.
const FORGET_AFTER: Duration = MAX_LEASE_LIFETIME;

/// Units of an ended part, to give back to Redis.
#[derive(Debug)]
pub(super) struct Leftover {
    pub(super) name: String,
    pub(super) params: Params,
    /// The server time of the call that granted them.
    pub(super) at: u64,
    pub(super) units: u64,
}

/// Puts reserved units back into `e`'s slice: the part they came from, or one like it if
/// that part was spent meanwhile. `Err`: the part has ended (or the limit changed), with
/// the units to return to Redis when the slice is still there to name the key.
fn put_back(e: &mut SliceEntry, r: &LeasedUnits, now: Instant) -> Result<(), Option<Leftover>> {
    let Some(s) = e.slice.as_mut() else {
        return Err(None);
    };
    if let Some(p) = s.parts.iter_mut().find(|p| p.id == r.part) {
        p.units = p.units.saturating_add(r.units);
        return Ok(());
    }
    if now < r.ends && s.params == r.params {
        s.parts.push_front(Part {
            units: r.units,
            ends: r.ends,
            at: r.at,
            id: r.part,
        });
        return Ok(());
    }
    Err(Some(Leftover {
        name: s.name.clone(),
        params: r.params,
        at: r.at,
        units: r.units,
    }))
}

/// A refill begun: the caller ends it (installed or not) with [`Leases::end_refill`].
#[derive(Debug, Clone, Copy)]
pub(super) struct Refill {
    digest: [u64; 2],
    id: u64,
}

/// What a check gets from the table.
#[derive(Debug)]
pub(super) enum Take {
    /// Spent from this process's slice.
    Local(Decision, LeasedUnits),
    /// Ask Redis for the cost plus this many units more (this check refills the slice,
    /// and ends the refill it began).
    Refill(u64, Refill),
    /// Ask Redis for the cost alone.
    Plain,
}

/// One grant's units.
struct Part {
    units: u64,
    ends: Instant,
    /// The server time of its call (a refund finds its window by it).
    at: u64,
    id: u64,
}

struct Slice {
    params: Params,
    name: String,
    parts: VecDeque<Part>,
    /// Redis's decision for the latest grant (remaining: after it) and when its call was
    /// sent, for local answers.
    taken: Instant,
    limit: u64,
    remaining: u64,
    reset_us: u64,
    window_us: u64,
}

impl Slice {
    /// Units in parts that have not ended by `now`.
    fn live(&self, now: Instant) -> u64 {
        self.parts
            .iter()
            .filter(|p| now < p.ends)
            .map(|p| p.units)
            .sum()
    }

    fn leftover(&self, p: &Part) -> Option<Leftover> {
        (p.units > 0).then(|| Leftover {
            name: self.name.clone(),
            params: self.params,
            at: p.at,
            units: p.units,
        })
    }
}

struct SliceEntry {
    /// The key's slice: its name and parameters, and its parts (none: no units).
    slice: Option<Slice>,
    /// Reservations neither committed nor released.
    pending: u32,
    /// A refill in flight, since when.
    refilling: Option<(Instant, u64)>,
    /// When this process last checked the key.
    seen: Instant,
    /// Checks that went to Redis since `since` (at most a lifetime ago).
    since: Instant,
    hits: u32,
    /// The slice to ask for next.
    size: u64,
}

impl SliceEntry {
    fn new(now: Instant) -> Self {
        Self {
            slice: None,
            pending: 0,
            refilling: None,
            seen: now,
            since: now,
            hits: 1,
            size: FIRST_SLICE,
        }
    }

    /// Removes the parts that ended by `now` (every part with [`Parts::All`]) into `out`; a
    /// part that ends with units left halves the next slice.
    fn end_parts(&mut self, now: Instant, parts: Parts, out: &mut Vec<Leftover>) {
        let all = parts == Parts::All;
        let Some(s) = &mut self.slice else { return };
        let before = out.len();
        let mut kept = VecDeque::with_capacity(s.parts.len());
        for p in std::mem::take(&mut s.parts) {
            if all || now >= p.ends {
                out.extend(s.leftover(&p));
            } else {
                kept.push_back(p);
            }
        }
        s.parts = kept;
        if out.len() > before {
            self.size = (self.size / 2).max(FIRST_SLICE);
        }
    }

    fn refill_due(&self, now: Instant) -> bool {
        !matches!(self.refilling, Some((since, _)) if now.duration_since(since) < STALE_REFILL)
    }
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

type LeaseShard = HashMap<[u64; 2], SliceEntry>;

/// The slices this process holds, by key.
pub(super) struct Leases {
    shards: Box<[Mutex<LeaseShard>]>,
    ids: AtomicU64,
    /// A task that returns ended parts' units is running.
    pub(super) sweeping: AtomicBool,
}

/// Which parts of a slice end now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Parts {
    /// Those whose lifetime is over.
    Ended,
    /// Every part: the limit changed.
    All,
}

impl Parts {
    fn if_changed(changed: bool) -> Self {
        if changed { Self::All } else { Self::Ended }
    }
}

/// What a take may change besides the units it takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Taking {
    /// Answering from memory, no call to follow: nothing changes unless the units are there.
    LocalOnly,
    /// A call to Redis may follow: ended parts end, hits count, and a refill may begin.
    MayRefill,
}

/// Whether a local take is spent at once or waits for the rest of its chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Units {
    /// Spent: the chain has no other check.
    Final,
    /// Held until the chain is admitted ([`Leases::commit`]) or not ([`Leases::release`]).
    Reserved,
}

impl Leases {
    pub(super) fn new() -> Self {
        Self {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            ids: AtomicU64::new(1),
            sweeping: AtomicBool::new(false),
        }
    }

    fn shard(&self, digest: [u64; 2]) -> MutexGuard<'_, LeaseShard> {
        // The digest is a keyed PRF: its low bits are uniform.
        self.shards[(digest[0] as usize) % SHARDS]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes `cost` units of `key`'s slice, or says how to ask Redis. With
    /// [`Taking::LocalOnly`] nothing changes unless the units are there (the answer is then
    /// `Plain`); with [`Taking::MayRefill`], ended parts' unused units come back in
    /// `leftovers`.
    ///
    /// When a local take leaves the slice under half its size and no refill is in flight,
    /// `top_up` is set to the units to ask for ahead of need (the caller sends that request,
    /// or ends the refill it began).
    ///
    /// A [`Units::Reserved`] local take must be [`commit`](Self::commit)ted or
    /// [`release`](Self::release)d; a [`Units::Final`] one is spent.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn take(
        &self,
        key: &Key,
        cost: u64,
        now: Instant,
        taking: Taking,
        units: Units,
        leftovers: &mut Vec<Leftover>,
        top_up: &mut Option<(u64, Refill)>,
    ) -> Take {
        let Some((max_slice, lifetime)) = key.limit().lease() else {
            return Take::Plain;
        };
        let refill = taking == Taking::MayRefill;
        let digest = key.digest();
        let params = key.params();
        let mut shard = self.shard(digest);
        let entry = match shard.get_mut(&digest) {
            Some(e) => e,
            None if refill => {
                // First seen (or not for a while): checked plainly.
                shard.insert(digest, SliceEntry::new(now));
                return Take::Plain;
            }
            None => return Take::Plain,
        };
        if refill {
            entry.seen = now;
            let changed = entry.slice.as_ref().is_some_and(|s| s.params != params);
            entry.end_parts(now, Parts::if_changed(changed), leftovers);
        }
        if let Some(s) = &mut entry.slice
            && s.params == params
            && cost > 0
            && let Some(p) = s.parts.iter_mut().find(|p| now < p.ends && p.units >= cost)
        {
            p.units -= cost;
            let r = LeasedUnits {
                digest,
                part: p.id,
                units: cost,
                ends: p.ends,
                at: p.at,
                params,
            };
            entry.pending += u32::from(units == Units::Reserved);
            let live = s.live(now);
            let elapsed =
                u64::try_from(now.duration_since(s.taken).as_micros()).unwrap_or(u64::MAX);
            let d = Decision::allowed(
                s.limit,
                s.remaining.saturating_add(live).min(s.limit),
                s.reset_us.saturating_sub(elapsed),
                s.window_us,
            );
            entry.seen = now;
            // Under half its size while it lasts: hot. A bigger slice, asked for before
            // this one runs dry.
            if live <= entry.size / 2 && entry.refill_due(now) {
                entry.size = entry.size.saturating_mul(2).min(max_slice);
                if entry.size > live {
                    let id = self.ids.fetch_add(1, Ordering::Relaxed);
                    entry.refilling = Some((now, id));
                    *top_up = Some((entry.size - live, Refill { digest, id }));
                }
            }
            return Take::Local(d, r);
        }
        if !refill {
            return Take::Plain;
        }
        if now.duration_since(entry.since) >= lifetime {
            (entry.since, entry.hits) = (now, 0);
        }
        entry.hits = entry.hits.saturating_add(1);
        let size = entry.size.min(max_slice);
        let hot = entry.hits >= HOT_HITS;
        if !hot || cost == 0 || size <= cost || !entry.refill_due(now) {
            return Take::Plain;
        }
        let id = self.ids.fetch_add(1, Ordering::Relaxed);
        entry.refilling = Some((now, id));
        Take::Refill(size - cost, Refill { digest, id })
    }

    /// A reserved take is final (its chain was admitted).
    pub(super) fn commit(&self, r: LeasedUnits) {
        if let Some(e) = self.shard(r.digest).get_mut(&r.digest) {
            e.pending = e.pending.saturating_sub(1);
        }
    }

    /// Puts back units reserved for a chain that was refused (or failed, or was dropped):
    /// into the part they came from, or one like it if that part was spent meanwhile; if
    /// it has ended (or the limit changed), they come back to be returned to Redis.
    pub(super) fn release(&self, r: LeasedUnits, now: Instant) -> Option<Leftover> {
        let mut shard = self.shard(r.digest);
        let e = shard.get_mut(&r.digest)?;
        e.pending = e.pending.saturating_sub(1);
        put_back(e, &r, now).err().flatten()
    }

    /// Puts back units an admitted chain spent and its caller gives back (the outcome does
    /// not count): as [`release`](Self::release) does, but for a take already final.
    /// `false`: the slice has ended, the units must go back to Redis (at `r`'s time).
    pub(super) fn restore(&self, r: &LeasedUnits, now: Instant) -> bool {
        let mut shard = self.shard(r.digest);
        shard
            .get_mut(&r.digest)
            .is_some_and(|e| put_back(e, r, now).is_ok())
    }

    /// The refill of `key` ended (installed or not).
    pub(super) fn end_refill(&self, r: Refill) {
        if let Some(e) = self.shard(r.digest).get_mut(&r.digest)
            && e.refilling.is_some_and(|(_, id)| id == r.id)
        {
            // Only its own: a later refill (after a stale one) keeps its flag.
            e.refilling = None;
        }
    }

    /// Installs a granted part: it joins the key's slice (one of other parameters is
    /// replaced, its units coming back).
    pub(super) fn install(&self, g: &Grant<'_>) -> Vec<Leftover> {
        let mut out = Vec::new();
        let Some((_, lifetime)) = g.key.limit().lease() else {
            return out;
        };
        let params = g.key.params();
        let reset_us = u64::try_from(g.decision.reset_after().as_micros()).unwrap_or(u64::MAX);
        // A fixed window's units count in their window only: the part ends with it.
        let life = match params {
            Params::Fixed { .. } => lifetime.min(Duration::from_micros(reset_us)),
            _ => lifetime,
        };
        let part = Part {
            units: g.units,
            ends: g.sent + life,
            at: g.at,
            id: self.ids.fetch_add(1, Ordering::Relaxed),
        };
        let digest = g.key.digest();
        let mut shard = self.shard(digest);
        let entry = shard
            .entry(digest)
            .or_insert_with(|| SliceEntry::new(g.sent));
        let changed = entry.slice.as_ref().is_some_and(|s| s.params != params);
        entry.end_parts(g.sent, Parts::if_changed(changed), &mut out);
        if let Some(s) = &mut entry.slice {
            // Spent parts go (a reservation put back later brings its part back).
            s.parts.retain(|p| p.units > 0);
            s.params = params;
        }
        let slice = entry.slice.get_or_insert_with(|| Slice {
            params,
            name: g.name.to_owned(),
            parts: VecDeque::new(),
            taken: g.sent,
            limit: 0,
            remaining: 0,
            reset_us: 0,
            window_us: 0,
        });
        slice.parts.push_back(part);
        slice.taken = g.sent;
        slice.limit = g.decision.limit();
        slice.remaining = g.decision.remaining();
        slice.reset_us = reset_us;
        slice.window_us = u64::try_from(g.decision.window().as_micros()).unwrap_or(u64::MAX);
        out
    }

    /// Drops `key`'s slice without giving its units back (the key was deleted).
    pub(super) fn forget(&self, digest: [u64; 2]) {
        self.shard(digest).remove(&digest);
    }

    /// Removes the parts that ended by `now` (their unused units come back in `out`) and the
    /// records of keys gone quiet. Returns whether any record is left.
    pub(super) fn sweep(&self, now: Instant, out: &mut Vec<Leftover>) -> bool {
        let mut left = false;
        for shard in &*self.shards {
            let mut shard = shard.lock().unwrap_or_else(PoisonError::into_inner);
            shard.retain(|_, e| {
                e.end_parts(now, Parts::Ended, out);
                e.slice.as_ref().is_some_and(|s| !s.parts.is_empty())
                    || e.pending > 0
                    || e.refilling.is_some()
                    || now.duration_since(e.seen) < FORGET_AFTER
            });
            left |= !shard.is_empty();
        }
        left
    }

    /// How many units this process holds for `key` in parts that have not ended.
    pub(super) fn held(&self, key: &Key) -> u64 {
        let digest = key.digest();
        self.shard(digest)
            .get(&digest)
            .and_then(|e| e.slice.as_ref())
            .map_or(0, |s| s.live(Instant::now()))
    }
}
