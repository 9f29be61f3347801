//! One shard of the memory store: a SwissTable of `u32` indices into a dense entry slab.
//!
//! An entry is 40 bytes: the key's 128-bit digest (its low 16 bits the limit's class),
//! two state words, an expiry (seconds since the store's anchor) and a last-use stamp (a
//! per-shard operation counter, for LRU). The algorithm's tag sits in bits 60–62 of the
//! first word, and bit 63 marks a key that refused or slowed someone at its last write.
//! Exact logs live in a side slab, since their size varies.
//!
//! Room is per class: a class at its cap makes room among its own keys only — first
//! what costs nothing to forget (a full bucket, an empty log or count), then keys that
//! refuse nobody, least recently used first, and keys that refuse or slow someone last.

use std::collections::VecDeque;

use hashbrown::HashTable;

use crate::algorithm::State;

const TAG_SHIFT: u32 = 60;
const PAYLOAD: u64 = (1 << TAG_SHIFT) - 1;
const TAG_MASK: u64 = 0b111;
/// Refused or slowed someone at its last write (kept while it has not expired).
const HOT: u64 = 1 << 63;
const TAG_FIXED: u64 = 1;
const TAG_SLIDING: u64 = 2;
const TAG_BUCKET: u64 = 3;
const TAG_LOG: u64 = 4;
/// A ban: its refusals in the log slab, its end in the second word.
const TAG_BAN: u64 = 5;

/// Whether a first word's state keeps entries in the log slab.
fn has_log(a: u64) -> bool {
    matches!(tag(a), TAG_LOG | TAG_BAN)
}

fn tag(a: u64) -> u64 {
    (a >> TAG_SHIFT) & TAG_MASK
}

/// The limit class a key's digest carries.
pub(super) fn class(key: &[u64; 2]) -> u16 {
    #[allow(clippy::cast_possible_truncation)]
    let c = key[1] as u16;
    c
}

#[derive(Debug, Clone, Copy)]
struct KeyEntry {
    key: [u64; 2],
    a: u64,
    b: u64,
    expires: u32,
    used: u32,
}

#[derive(Debug, Default)]
pub(super) struct Shard {
    table: HashTable<u32>,
    entries: Vec<KeyEntry>,
    logs: Vec<VecDeque<(u64, u64)>>,
    free_logs: Vec<u32>,
    tick: u32,
    pub(super) next_sweep: u32,
    /// Keys per limit class (a handful of classes: a scan beats a hash).
    classes: Vec<(u16, u32)>,
}

fn hash(key: &[u64; 2]) -> u64 {
    // The digest is already a keyed PRF output: its first word is a fine bucket hash.
    key[0]
}

fn pack(tag: u64, payload: u64) -> u64 {
    (tag << TAG_SHIFT) | payload.min(PAYLOAD)
}

fn sat32(v: u64) -> u64 {
    v.min(u64::from(u32::MAX))
}

impl Shard {
    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    pub(super) fn find(&self, key: &[u64; 2]) -> Option<usize> {
        let entries = &self.entries;
        self.table
            .find(hash(key), |&i| entries[i as usize].key == *key)
            .map(|&i| i as usize)
    }

    /// The state stored for `key` (a copy), and marks the key as used.
    pub(super) fn get(&mut self, key: &[u64; 2]) -> Option<State> {
        let i = self.find(key)?;
        Some(self.get_at(i))
    }

    /// The state at slab index `i` (from [`find`](Self::find)), marked as used.
    pub(super) fn get_at(&mut self, i: usize) -> State {
        self.tick = self.tick.wrapping_add(1);
        self.entries[i].used = self.tick;
        self.decode(i)
    }

    /// Overwrites the state at slab index `i` (from [`find`](Self::find), with no
    /// insertion or removal since); whether it refuses somebody is `hot`, or stays as it
    /// was.
    pub(super) fn set_at(&mut self, i: usize, state: State, expires: u32, hot: Option<bool>) {
        let old = self.entries[i].a;
        let (a, b) = self.encode(state, Some(old));
        let hot = hot.map_or(old & HOT, |h| if h { HOT } else { 0 });
        let e = &mut self.entries[i];
        (e.a, e.b, e.expires) = (a | hot, b, expires);
    }

    /// How many keys of `class` this shard holds.
    pub(super) fn class_len(&self, class: u16) -> usize {
        self.classes
            .iter()
            .find(|&&(c, _)| c == class)
            .map_or(0, |&(_, n)| n as usize)
    }

    fn decode(&self, i: usize) -> State {
        let e = &self.entries[i];
        let payload = e.a & PAYLOAD;
        match tag(e.a) {
            TAG_FIXED => State::Fixed {
                window: payload,
                count: e.b,
            },
            TAG_SLIDING => State::Sliding {
                window: payload,
                curr: e.b >> 32,
                prev: e.b & u64::from(u32::MAX),
            },
            TAG_BUCKET => State::Bucket { tat: payload },
            TAG_LOG => State::Log(self.log_at(payload)),
            TAG_BAN => State::Ban {
                until: e.b,
                events: self.log_at(payload),
            },
            // Unknown tags cannot be written; read them as "nothing stored".
            _ => State::Fixed {
                window: 0,
                count: 0,
            },
        }
    }

    fn log_at(&self, slot: u64) -> VecDeque<(u64, u64)> {
        self.logs
            .get(usize::try_from(slot).unwrap_or(usize::MAX))
            .cloned()
            .unwrap_or_default()
    }

    fn encode(&mut self, state: State, old_a: Option<u64>) -> (u64, u64) {
        let old_log = old_a
            .filter(|&a| has_log(a))
            .and_then(|a| u32::try_from(a & PAYLOAD).ok());
        match state {
            State::Fixed { window, count } => {
                self.release_log(old_log);
                (pack(TAG_FIXED, window), count)
            }
            State::Sliding { window, curr, prev } => {
                self.release_log(old_log);
                (pack(TAG_SLIDING, window), (sat32(curr) << 32) | sat32(prev))
            }
            State::Bucket { tat } => {
                self.release_log(old_log);
                (pack(TAG_BUCKET, tat), 0)
            }
            State::Log(log) => {
                let slot = match old_log {
                    Some(slot) => slot,
                    None => self.alloc_log(),
                };
                self.logs[slot as usize] = log;
                (pack(TAG_LOG, u64::from(slot)), 0)
            }
            State::Ban { until, events } => {
                let slot = match old_log {
                    Some(slot) => slot,
                    None => self.alloc_log(),
                };
                self.logs[slot as usize] = events;
                (pack(TAG_BAN, u64::from(slot)), until)
            }
        }
    }

    fn alloc_log(&mut self) -> u32 {
        if let Some(slot) = self.free_logs.pop() {
            return slot;
        }
        self.logs.push(VecDeque::new());
        // A shard holds at most u32::MAX entries (capped far below by the store).
        u32::try_from(self.logs.len() - 1).unwrap_or(u32::MAX)
    }

    fn release_log(&mut self, slot: Option<u32>) {
        if let Some(slot) = slot
            && let Some(log) = self.logs.get_mut(slot as usize)
        {
            *log = VecDeque::new();
            self.free_logs.push(slot);
        }
    }

    /// Writes `state` for `key`, `hot` if it refuses or slows someone. Gives the state back
    /// when the key is new and its class holds `cap` keys here already (the caller makes
    /// room and calls again).
    pub(super) fn put(
        &mut self,
        key: &[u64; 2],
        state: State,
        expires: u32,
        cap: usize,
        hot: bool,
    ) -> Result<(), State> {
        self.tick = self.tick.wrapping_add(1);
        let hot = if hot { HOT } else { 0 };
        if let Some(i) = self.find(key) {
            let (a, b) = self.encode(state, Some(self.entries[i].a));
            let e = &mut self.entries[i];
            (e.a, e.b, e.expires, e.used) = (a | hot, b, expires, self.tick);
            return Ok(());
        }
        if self.class_len(class(key)) >= cap {
            return Err(state);
        }
        match self.classes.iter_mut().find(|(c, _)| *c == class(key)) {
            Some((_, n)) => *n += 1,
            None => self.classes.push((class(key), 1)),
        }
        let (a, b) = self.encode(state, None);
        let a = a | hot;
        if self.entries.len() == self.entries.capacity() {
            // Grow by a quarter, not double: memory stays within 25% of what is used.
            let extra = (self.entries.len() / 4).max(16);
            self.entries.reserve_exact(extra);
        }
        let i = u32::try_from(self.entries.len()).unwrap_or(u32::MAX);
        self.entries.push(KeyEntry {
            key: *key,
            a,
            b,
            expires,
            used: self.tick,
        });
        let entries = &self.entries;
        self.table
            .insert_unique(hash(key), i, |&j| hash(&entries[j as usize].key));
        Ok(())
    }

    /// Forgets `key`.
    pub(super) fn remove(&mut self, key: &[u64; 2]) -> bool {
        let Some(i) = self.find(key) else {
            return false;
        };
        self.retain_where(|idx, _| idx != i);
        true
    }

    /// Drops every entry whose state has expired at `now` (seconds since the anchor).
    pub(super) fn sweep(&mut self, now: u32) -> usize {
        self.retain_where(|_, e| e.expires > now)
    }

    /// Makes room in `class` for at least `want` new keys (of at most `cap`): expired keys
    /// of every class first, then keys of `class` alone, in the order of [`rank`]. `now` is
    /// in seconds since the anchor, `now_us` the store's time. Returns how many live keys
    /// were evicted.
    pub(super) fn make_room(
        &mut self,
        now: u32,
        now_us: u64,
        class: u16,
        cap: usize,
        want: usize,
    ) -> usize {
        self.sweep(now);
        let have = self.class_len(class);
        let k = (have + want).saturating_sub(cap).min(have);
        if k == 0 {
            return 0;
        }
        let tick = self.tick;
        let mut ranked: Vec<(u64, u32)> = self
            .entries
            .iter()
            .enumerate()
            .filter(|(_, e)| self::class(&e.key) == class)
            .map(|(i, e)| {
                (
                    self.rank(e, tick, now_us),
                    u32::try_from(i).unwrap_or(u32::MAX),
                )
            })
            .collect();
        if k < ranked.len() {
            ranked.select_nth_unstable(k - 1);
        }
        let mut gone = vec![false; self.entries.len()];
        for &(_, i) in &ranked[..k] {
            gone[i as usize] = true;
        }
        self.retain_where(|i, _| !gone[i])
    }

    /// Which keys go first when a class needs room (the lowest rank): what costs nothing to
    /// forget (its state is a fresh one's), then keys that refuse nobody, then keys that
    /// refused or slowed someone; in each tier the least recently used first.
    fn rank(&self, e: &KeyEntry, tick: u32, now_us: u64) -> u64 {
        let payload = e.a & PAYLOAD;
        let free = match tag(e.a) {
            TAG_BUCKET => payload <= now_us,
            TAG_FIXED => e.b == 0,
            TAG_SLIDING => e.b == 0,
            TAG_LOG => self
                .logs
                .get(payload as usize)
                .is_none_or(VecDeque::is_empty),
            _ => false,
        };
        let tier: u64 = if free {
            0
        } else if e.a & HOT == 0 {
            1
        } else {
            2
        };
        let age = tick.wrapping_sub(e.used);
        (tier << 32) | u64::from(u32::MAX - age)
    }

    /// Keeps the entries for which `keep(index, entry)` holds; rebuilds the index table.
    /// Returns how many were dropped.
    fn retain_where(&mut self, mut keep: impl FnMut(usize, &KeyEntry) -> bool) -> usize {
        let before = self.entries.len();
        let mut idx = 0;
        let mut dropped_logs = Vec::new();
        let classes = &mut self.classes;
        self.entries.retain(|e| {
            let k = keep(idx, e);
            idx += 1;
            if !k {
                if has_log(e.a) {
                    dropped_logs.push(u32::try_from(e.a & PAYLOAD).ok());
                }
                if let Some((_, n)) = classes.iter_mut().find(|(c, _)| *c == class(&e.key)) {
                    *n -= 1;
                }
            }
            k
        });
        self.classes.retain(|&(_, n)| n > 0);
        for slot in dropped_logs {
            self.release_log(slot);
        }
        let dropped = before - self.entries.len();
        if dropped > 0 {
            self.table.clear();
            let entries = &self.entries;
            for (i, e) in entries.iter().enumerate() {
                let i = u32::try_from(i).unwrap_or(u32::MAX);
                self.table
                    .insert_unique(hash(&e.key), i, |&j| hash(&entries[j as usize].key));
            }
            // Give back memory after a large drop (a flood that has passed).
            if self.entries.capacity() > 64 && self.entries.len() < self.entries.capacity() / 4 {
                self.entries.shrink_to(self.entries.len() * 2);
                let entries = &self.entries;
                self.table
                    .shrink_to(entries.len(), |&j| hash(&entries[j as usize].key));
            }
        }
        dropped
    }

    /// Bytes allocated by this shard's tables (not counting exact-log contents).
    pub(super) fn allocated_bytes(&self) -> usize {
        self.table.allocation_size()
            + self.entries.capacity() * std::mem::size_of::<KeyEntry>()
            + self.logs.capacity() * std::mem::size_of::<VecDeque<(u64, u64)>>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_is_40_bytes() {
        assert_eq!(std::mem::size_of::<KeyEntry>(), 40);
    }

    #[test]
    fn round_trips_every_state() {
        let mut s = Shard::default();
        let states = [
            State::Fixed {
                window: 7,
                count: 1 << 40,
            },
            State::Sliding {
                window: 9,
                curr: 3,
                prev: 5,
            },
            State::Bucket {
                tat: 1_800_000_000_000_000,
            },
            State::Log(VecDeque::from([(1, 1), (2, 3)])),
            State::Ban {
                until: 1_800_000_000_000_000,
                events: VecDeque::from([(4, 1)]),
            },
        ];
        for (n, st) in states.iter().enumerate() {
            let key = [n as u64, 1];
            assert!(s.put(&key, st.clone(), 10, 100, false).is_ok());
            assert_eq!(s.get(&key).as_ref(), Some(st));
        }
        // A log replaced by a counter frees its slot.
        assert!(
            s.put(&[3, 1], State::Bucket { tat: 5 }, 10, 100, false)
                .is_ok()
        );
        assert_eq!(s.free_logs.len(), 1);
        assert!(s.remove(&[0, 1]));
        assert_eq!(s.get(&[0, 1]), None);
        assert_eq!(s.get(&[1, 1]), Some(states[1].clone()));
    }

    #[test]
    fn full_shard_evicts_expired_then_oldest() {
        let mut s = Shard::default();
        for n in 0..10u64 {
            let exp = if n < 2 { 5 } else { 50 };
            assert!(
                s.put(&[n, 0], State::Bucket { tat: n }, exp, 10, false)
                    .is_ok()
            );
        }
        assert!(
            s.put(&[99, 0], State::Bucket { tat: 1 }, 50, 10, false)
                .is_err()
        );
        s.get(&[2, 0]); // key 2 is in use now
        // Keys 0 and 1 expired at 5 s; two more go, the least recently used.
        assert_eq!(s.make_room(6, 0, 0, 10, 4), 2);
        assert!(s.get(&[2, 0]).is_some());
        assert!(s.get(&[3, 0]).is_none() && s.get(&[4, 0]).is_none());
        assert!(s.get(&[5, 0]).is_some());
        assert_eq!(s.len(), 6);
    }
}
