//! Delivery ids for [`Dedupe`](crate::protocol::Dedupe): a map for lookups and a queue in insertion
//! order for eviction, so that remembering a new id costs amortized O(1) at any size —
//! expired ids leave from the front, and at the cap the oldest live id goes.

use std::collections::VecDeque;
use std::hash::{BuildHasherDefault, Hasher};

use hashbrown::HashMap;

/// Ids arrive as keyed 128-bit digests, already uniform: the map hashes them by mixing
/// their words, not by hashing them again.
#[derive(Debug, Default, Clone, Copy)]
struct DigestHasher(u64);

impl Hasher for DigestHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = self.0.rotate_left(29) ^ n;
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
}

type Digests<V> = HashMap<[u64; 2], V, BuildHasherDefault<DigestHasher>>;

/// The ids one memory store remembers, at most `cap` of them.
#[derive(Debug)]
pub(super) struct Seen {
    /// Id digest → (the time, µs, it is forgotten; the stamp of its queue entry).
    map: Digests<(u64, u64)>,
    /// (digest, stamp) in insertion order; an entry whose stamp no longer matches the map
    /// (released, or remembered again) is stale and skipped.
    order: VecDeque<([u64; 2], u64)>,
    next_stamp: u64,
    cap: usize,
}

impl Seen {
    pub(super) fn new(cap: usize) -> Self {
        Self {
            map: Digests::default(),
            order: VecDeque::new(),
            next_stamp: 0,
            cap: cap.max(1),
        }
    }

    fn live(&self, d: &[u64; 2], stamp: u64) -> Option<u64> {
        self.map
            .get(d)
            .filter(|(_, s)| *s == stamp)
            .map(|(until, _)| *until)
    }

    /// `true` (and remembered until `until`) the first time; `false` while remembered.
    pub(super) fn first_seen(&mut self, d: [u64; 2], now: u64, until: u64) -> bool {
        if self.map.get(&d).is_some_and(|&(exp, _)| exp > now) {
            return false;
        }
        // Expired or stale entries at the front leave first: each entry is popped once.
        while let Some(&(front, stamp)) = self.order.front() {
            match self.live(&front, stamp) {
                Some(exp) if exp > now => break,
                Some(_) => {
                    self.map.remove(&front);
                }
                None => {}
            }
            self.order.pop_front();
        }
        // At the cap, the oldest live id is forgotten (a redelivery of it is processed again).
        while self.map.len() >= self.cap && !self.map.contains_key(&d) {
            let Some((front, stamp)) = self.order.pop_front() else {
                break;
            };
            if self.live(&front, stamp).is_some() {
                self.map.remove(&front);
            }
        }
        let stamp = self.next_stamp;
        self.next_stamp += 1;
        self.map.insert(d, (until, stamp));
        self.order.push_back((d, stamp));
        // Stale entries deep in the queue (ids released and seen again) stay bounded: once
        // they outnumber the live ones, one pass drops them (amortized over `cap` inserts).
        if self.order.len() > 2 * self.cap {
            let map = &self.map;
            self.order
                .retain(|(k, stamp)| map.get(k).is_some_and(|(_, s)| s == stamp));
        }
        true
    }

    /// Forgets an id.
    pub(super) fn release(&mut self, d: &[u64; 2]) {
        self.map.remove(d);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(i: u64) -> [u64; 2] {
        [i, i.rotate_left(17)]
    }

    #[test]
    fn remembers_until_expiry_then_forgets() {
        let mut s = Seen::new(10);
        assert!(s.first_seen(id(1), 0, 100));
        assert!(!s.first_seen(id(1), 99, 199));
        assert!(s.first_seen(id(1), 100, 200), "expired");
        s.release(&id(1));
        assert!(s.first_seen(id(1), 101, 201), "released");
    }

    #[test]
    fn at_the_cap_the_oldest_goes_and_memory_stays_bounded() {
        let mut s = Seen::new(1_000);
        for i in 0..100_000 {
            assert!(s.first_seen(id(i), i, u64::MAX));
            assert!(s.map.len() <= 1_000);
        }
        // The newest 1 000 are remembered, the older ones were evicted in order.
        assert!(!s.first_seen(id(99_999), 100_000, u64::MAX));
        assert!(!s.first_seen(id(99_000), 100_000, u64::MAX));
        assert!(s.first_seen(id(98_999), 100_000, u64::MAX));
        // Release-and-see-again churn leaves no unbounded queue.
        for _ in 0..10_000 {
            s.release(&id(99_500));
            assert!(s.first_seen(id(99_500), 100_000, u64::MAX));
        }
        assert!(s.order.len() <= 2 * 1_000 + 1, "{}", s.order.len());
    }

    #[test]
    fn expired_ids_leave_before_live_ones_are_evicted() {
        let mut s = Seen::new(3);
        assert!(s.first_seen(id(1), 0, 10));
        assert!(s.first_seen(id(2), 0, 1_000));
        assert!(s.first_seen(id(3), 0, 1_000));
        // id 1 expired: it makes the room, ids 2 and 3 stay.
        assert!(s.first_seen(id(4), 20, 1_000));
        assert!(!s.first_seen(id(2), 21, 1_000));
        assert!(!s.first_seen(id(3), 21, 1_000));
    }
}
