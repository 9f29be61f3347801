//! Space-Saving (Metwally, Agrawal, El Abbadi, 2005): `capacity` counters, each a
//! principal, its count and the most by which that count may exceed the truth. A counted
//! principal adds to its counter; another takes the smallest counter's place, inheriting
//! its count as its error. Every count is an upper bound; count − error a lower bound; the
//! error is at most total ÷ capacity; and any principal counted more than that is held.
//!
//! The counters sit in a min-heap by count (an index per counter), found by the key's
//! digest in a hash table of counter indices: a count is O(log capacity), with no
//! allocation once the sketch is full.

use hashbrown::HashTable;

use crate::principal::Principal;

#[derive(Debug, Clone)]
pub(super) struct Counter {
    pub(super) digest: u64,
    pub(super) principal: Principal,
    pub(super) count: u64,
    pub(super) error: u64,
    /// The counter's place in the heap.
    at: u32,
}

#[derive(Debug)]
pub(super) struct Sketch {
    capacity: usize,
    /// What was counted, in all.
    pub(super) total: u64,
    counters: Vec<Counter>,
    /// Counter indices, a min-heap by count.
    heap: Vec<u32>,
    index: HashTable<u32>,
}

impl Sketch {
    pub(super) fn new(capacity: usize) -> Self {
        Self {
            capacity,
            total: 0,
            counters: Vec::with_capacity(capacity),
            heap: Vec::with_capacity(capacity),
            index: HashTable::with_capacity(capacity),
        }
    }

    /// Forgets every counter, keeping the memory.
    pub(super) fn clear(&mut self) {
        self.total = 0;
        self.counters.clear();
        self.heap.clear();
        self.index.clear();
    }

    /// The most a principal not held may have been counted: the smallest count once every
    /// counter is taken, else nothing.
    pub(super) fn floor(&self) -> u64 {
        if self.counters.len() < self.capacity {
            0
        } else {
            self.heap
                .first()
                .map_or(0, |&i| self.counters[i as usize].count)
        }
    }

    pub(super) fn counters(&self) -> &[Counter] {
        &self.counters
    }

    pub(super) fn get(&self, digest: u64) -> Option<&Counter> {
        let counters = &self.counters;
        self.index
            .find(digest, |&i| counters[i as usize].digest == digest)
            .map(|&i| &counters[i as usize])
    }

    /// Counts `n` for the principal whose key's digest is `digest`.
    pub(super) fn add(&mut self, digest: u64, principal: &Principal, n: u64) {
        if self.capacity == 0 || n == 0 {
            return;
        }
        self.total = self.total.saturating_add(n);
        let counters = &self.counters;
        if let Some(&i) = self
            .index
            .find(digest, |&i| counters[i as usize].digest == digest)
        {
            let c = &mut self.counters[i as usize];
            c.count = c.count.saturating_add(n);
            let at = c.at as usize;
            self.sift_down(at);
            return;
        }
        if self.counters.len() < self.capacity {
            #[allow(clippy::cast_possible_truncation)]
            let i = self.counters.len() as u32;
            self.counters.push(Counter {
                digest,
                principal: principal.clone(),
                count: n,
                error: 0,
                at: i,
            });
            self.heap.push(i);
            self.insert(i);
            self.sift_up(i as usize);
            return;
        }
        // The smallest counter goes to the newcomer, its count becoming the error.
        let i = self.heap[0];
        let old = self.counters[i as usize].digest;
        let counters = &self.counters;
        if let Ok(e) = self
            .index
            .find_entry(old, |&j| counters[j as usize].digest == old)
        {
            e.remove();
        }
        let c = &mut self.counters[i as usize];
        c.error = c.count;
        c.count = c.count.saturating_add(n);
        c.digest = digest;
        c.principal.clone_from(principal);
        self.insert(i);
        self.sift_down(0);
    }

    fn insert(&mut self, i: u32) {
        let counters = &self.counters;
        let digest = counters[i as usize].digest;
        self.index
            .insert_unique(digest, i, |&j| counters[j as usize].digest);
    }

    fn count_at(&self, h: usize) -> u64 {
        self.counters[self.heap[h] as usize].count
    }

    fn swap(&mut self, a: usize, b: usize) {
        self.heap.swap(a, b);
        #[allow(clippy::cast_possible_truncation)]
        {
            self.counters[self.heap[a] as usize].at = a as u32;
            self.counters[self.heap[b] as usize].at = b as u32;
        }
    }

    fn sift_up(&mut self, mut h: usize) {
        while h > 0 {
            let parent = (h - 1) / 2;
            if self.count_at(parent) <= self.count_at(h) {
                break;
            }
            self.swap(parent, h);
            h = parent;
        }
    }

    fn sift_down(&mut self, mut h: usize) {
        loop {
            let (l, r) = (2 * h + 1, 2 * h + 2);
            let mut least = h;
            if l < self.heap.len() && self.count_at(l) < self.count_at(least) {
                least = l;
            }
            if r < self.heap.len() && self.count_at(r) < self.count_at(least) {
                least = r;
            }
            if least == h {
                return;
            }
            self.swap(h, least);
            h = least;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(i: u64) -> Principal {
        Principal::participant(i.to_string())
    }

    #[test]
    fn counts_exactly_below_capacity_and_bounds_the_error_above() {
        let mut s = Sketch::new(4);
        for (i, n) in [(1, 10), (2, 5), (3, 1), (1, 2)] {
            s.add(i, &p(i), n);
        }
        assert_eq!(s.get(1).map(|c| (c.count, c.error)), Some((12, 0)));
        assert_eq!(s.floor(), 0, "a counter is free");
        s.add(4, &p(4), 1);
        s.add(5, &p(5), 1);
        // 5 took the smallest counter (3's or 4's, count 1): count 2, error 1.
        let c = s.get(5).unwrap();
        assert_eq!((c.count, c.error), (2, 1));
        assert_eq!(s.counters().len(), 4);
        assert_eq!(s.total, 20);
        assert!(s.counters().iter().all(|c| c.error <= s.total / 4));
        // The heap holds: the floor is the smallest count.
        let least = s.counters().iter().map(|c| c.count).min().unwrap();
        assert_eq!(s.floor(), least);
        s.clear();
        assert!(s.get(1).is_none() && s.total == 0);
    }
}
