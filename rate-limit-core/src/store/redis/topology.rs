//! Which Cluster node owns which slots: the failure domains of a Redis Cluster store.
//!
//! Read with `CLUSTER SLOTS` in the background (never on a request's path): at the first
//! check, at most every few seconds after, and at once after a failure (a failover or a
//! resharding moves slots). A node's domain is derived from its address, so every process
//! numbers it alike and a replica promoted in its place is a new, healthy domain.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Instant;

use redis::Value;

use super::keys::crc16;
use crate::store::Domains;

/// How often the slot map is read again while all is well, in µs.
const REFRESH_US: u64 = 5_000_000;
/// How often at most after failures (an outage must not become a stream of `CLUSTER
/// SLOTS`), in µs.
const URGENT_US: u64 = 500_000;

/// No node known for a slot.
const UNKNOWN: u16 = u16::MAX;
/// Redis Cluster's hash slots.
pub(super) const SLOTS: usize = 16_384;

/// Which master owns each slot: an index into `nodes` per slot.
#[derive(Debug)]
pub(super) struct Map {
    owner: Box<[u16]>,
    /// `host:port` and domain of every node named so far.
    nodes: Vec<(Arc<str>, u32)>,
}

impl Map {
    fn empty() -> Self {
        Self {
            owner: vec![UNKNOWN; SLOTS].into_boxed_slice(),
            nodes: Vec::new(),
        }
    }

    fn node(&mut self, addr: &str) -> u16 {
        if let Some(i) = self.nodes.iter().position(|(a, _)| &**a == addr) {
            return u16::try_from(i).unwrap_or(UNKNOWN);
        }
        self.nodes.push((Arc::from(addr), domain_of_node(addr)));
        u16::try_from(self.nodes.len() - 1).unwrap_or(UNKNOWN)
    }

    /// The master that owns `slot`.
    pub(super) fn owner(&self, slot: u16) -> Option<&Arc<str>> {
        let i = *self.owner.get(usize::from(slot))?;
        self.nodes.get(usize::from(i)).map(|(a, _)| a)
    }

    fn domain_of(&self, slot: u16) -> u32 {
        self.owner
            .get(usize::from(slot))
            .and_then(|&i| self.nodes.get(usize::from(i)))
            .map_or(0, |&(_, d)| d)
    }

    /// The masters that own at least one slot.
    pub(super) fn masters(&self) -> Vec<Arc<str>> {
        let mut owns = vec![false; self.nodes.len()];
        for &i in self.owner.iter() {
            if let Some(o) = owns.get_mut(usize::from(i)) {
                *o = true;
            }
        }
        self.nodes
            .iter()
            .zip(owns)
            .filter(|(_, o)| *o)
            .map(|((a, _), _)| a.clone())
            .collect()
    }

    /// `MOVED slot addr`: the slot has a new owner.
    fn patch(&mut self, slot: u16, addr: &str) {
        let i = self.node(addr);
        if let Some(o) = self.owner.get_mut(usize::from(slot)) {
            *o = i;
        }
    }

    /// From a `CLUSTER SLOTS` answer: `[[start, end, [host, port, id, ..], replicas..], ..]`.
    pub(super) fn parse(v: &Value) -> Option<Self> {
        let Value::Array(entries) = v else {
            return None;
        };
        let mut map = Self::empty();
        for e in entries {
            let Value::Array(parts) = e else { return None };
            let (Some(Value::Int(start)), Some(Value::Int(end)), Some(Value::Array(master))) =
                (parts.first(), parts.get(1), parts.get(2))
            else {
                return None;
            };
            let host = match master.first() {
                Some(Value::BulkString(b)) => String::from_utf8_lossy(b).into_owned(),
                Some(Value::SimpleString(s)) => s.clone(),
                _ => return None,
            };
            let Some(Value::Int(port)) = master.get(1) else {
                return None;
            };
            let i = map.node(&format!("{host}:{port}"));
            let (start, end) = (usize::try_from(*start).ok()?, usize::try_from(*end).ok()?);
            map.owner.get_mut(start..=end)?.fill(i);
        }
        Some(map)
    }
}

/// A node's domain, 1 to 63, from its address (0 is the whole store).
pub(super) fn domain_of_node(addr: &str) -> u32 {
    1 + u32::from(crc16(addr.as_bytes())) % (Domains::COUNT - 1)
}

/// The slot map, and when it was last asked for.
#[derive(Debug)]
pub(super) struct Topology {
    map: RwLock<Option<Map>>,
    asked: AtomicU64,
    refreshing: AtomicBool,
    anchor: Instant,
}

impl Topology {
    pub(super) fn new() -> Self {
        Self {
            map: RwLock::new(None),
            asked: AtomicU64::new(0),
            refreshing: AtomicBool::new(false),
            anchor: Instant::now(),
        }
    }

    fn now_us(&self) -> u64 {
        u64::try_from(self.anchor.elapsed().as_micros()).unwrap_or(u64::MAX)
    }

    /// Reads the map, if there is one.
    pub(super) fn with<R>(&self, f: impl FnOnce(&Map) -> R) -> Option<R> {
        self.map
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map(f)
    }

    pub(super) fn set(&self, map: Map) {
        *self.map.write().unwrap_or_else(PoisonError::into_inner) = Some(map);
    }

    /// `MOVED slot addr`: patched at once, before the whole map is read again.
    pub(super) fn patch(&self, slot: u16, addr: &str) {
        let mut map = self.map.write().unwrap_or_else(PoisonError::into_inner);
        map.get_or_insert_with(Map::empty).patch(slot, addr);
    }

    /// Whether to read the map again now (`urgent` after a failure); claims the refresh.
    pub(super) fn claim(&self, urgent: bool) -> bool {
        let now = self.now_us().saturating_add(1);
        let last = self.asked.load(Ordering::Relaxed);
        let since = now.saturating_sub(last);
        let due = last == 0 || since >= REFRESH_US || (urgent && since >= URGENT_US);
        if !due || self.refreshing.swap(true, Ordering::AcqRel) {
            return false;
        }
        self.asked.store(now, Ordering::Relaxed);
        true
    }

    pub(super) fn done(&self) {
        self.refreshing.store(false, Ordering::Release);
    }

    /// The domains of slots, as far as the map knows them (unknown: the whole store).
    pub(super) fn domains(&self, slots: impl Iterator<Item = u16>) -> Domains {
        self.with(|map| slots.fold(Domains::NONE, |acc, s| acc.with(map.domain_of(s))))
            .unwrap_or(Domains::WHOLE)
    }

    pub(super) fn name(&self, domain: u32) -> Option<String> {
        self.with(|map| {
            map.nodes
                .iter()
                .find(|(_, d)| *d == domain)
                .map(|(a, _)| a.to_string())
        })?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(start: i64, end: i64, port: i64) -> Value {
        Value::Array(vec![
            Value::Int(start),
            Value::Int(end),
            Value::Array(vec![
                Value::BulkString(b"127.0.0.1".to_vec()),
                Value::Int(port),
                Value::BulkString(b"id".to_vec()),
            ]),
        ])
    }

    #[test]
    fn slots_map_to_their_node_domain() {
        let v = Value::Array(vec![
            node(10_923, 16_383, 7002),
            node(0, 5_460, 7000),
            node(5_461, 10_922, 7001),
        ]);
        let map = Map::parse(&v).unwrap();
        let d = |p| domain_of_node(&format!("127.0.0.1:{p}"));
        assert_eq!(map.domain_of(0), d(7000));
        assert_eq!(map.domain_of(5_461), d(7001));
        assert_eq!(map.domain_of(16_383), d(7002));
        assert!((1..64).contains(&d(7000)));
        assert_eq!(map.owner(5_461).map(|a| &**a), Some("127.0.0.1:7001"));
        assert_eq!(map.masters().len(), 3);
        assert!(Map::parse(&Value::Nil).is_none());
    }
}
