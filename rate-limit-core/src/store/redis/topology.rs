//! Which Cluster node owns which slots: the failure domains of a Redis Cluster store.
//!
//! Read with `CLUSTER SLOTS` in the background (never on a request's path): at the first
//! check, at most every few seconds after, and at once after a failure (a failover or a
//! resharding moves slots). Each node address gets its own domain, 1 to 63, in the order
//! this process first sees it, and keeps it: two masters never share one (a shared number
//! would make one node's failure cool down the other's keys too), and a replica promoted in
//! a dead master's place is a new, healthy domain. Numbers are reused only after all 63
//! have been handed out, and then only those no node of the current map holds.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Instant;

use redis::Value;

use super::Refresh;
use super::keys::crc16;
use crate::protocol::Domains;

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
        // Its domain is given when the map is installed (`Topology::set`, `patch`).
        self.nodes.push((Arc::from(addr), 0));
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

/// A node's domain by its address, 1 to 63 (0 is the whole store): the fallback when more
/// than 63 nodes are in one map, and those beyond share numbers.
fn hashed_domain(addr: &str) -> u32 {
    1 + u32::from(crc16(addr.as_bytes())) % (Domains::COUNT - 1)
}

/// The domain numbers handed out: one per node address, kept.
#[derive(Debug, Default)]
struct NodeRegistry {
    by_addr: HashMap<Arc<str>, u32>,
    /// Bit `d` set: number `d` has been handed out at some time.
    used: u64,
}

impl NodeRegistry {
    /// The domain of `addr`, giving it one if it has none; `live`: the nodes of the map
    /// being installed, whose numbers must not be taken.
    fn assign(&mut self, addr: &Arc<str>, live: &[(Arc<str>, u32)]) -> u32 {
        if let Some(&d) = self.by_addr.get(addr) {
            return d;
        }
        let held = |d: u32| {
            live.iter()
                .any(|(a, _)| a != addr && self.by_addr.get(a) == Some(&d))
        };
        let fresh = (1..Domains::COUNT).find(|d| self.used & (1 << d) == 0);
        let free = || (1..Domains::COUNT).find(|&d| !held(d));
        let d = match fresh.or_else(free) {
            Some(d) => d,
            None => return hashed_domain(addr),
        };
        self.by_addr.retain(|_, v| *v != d);
        self.by_addr.insert(addr.clone(), d);
        self.used |= 1 << d;
        d
    }

    fn number(&mut self, map: &mut Map) {
        let live = map.nodes.clone();
        for (addr, d) in &mut map.nodes {
            *d = self.assign(addr, &live);
        }
    }
}

/// The slot map, and when it was last asked for.
#[derive(Debug)]
pub(super) struct Topology {
    map: RwLock<Option<Map>>,
    registry: Mutex<NodeRegistry>,
    asked: AtomicU64,
    refreshing: AtomicBool,
    anchor: Instant,
}

impl Topology {
    pub(super) fn new() -> Self {
        Self {
            map: RwLock::new(None),
            registry: Mutex::new(NodeRegistry::default()),
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

    pub(super) fn set(&self, mut map: Map) {
        self.registry
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .number(&mut map);
        *self.map.write().unwrap_or_else(PoisonError::into_inner) = Some(map);
    }

    /// `MOVED slot addr`: patched at once, before the whole map is read again.
    pub(super) fn patch(&self, slot: u16, addr: &str) {
        let mut guard = self.map.write().unwrap_or_else(PoisonError::into_inner);
        let map = guard.get_or_insert_with(Map::empty);
        map.patch(slot, addr);
        self.registry
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .number(map);
    }

    /// Whether to read the map again now (sooner when urgent); claims the refresh.
    pub(super) fn claim(&self, refresh: Refresh) -> bool {
        let urgent = refresh == Refresh::Urgent;
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
        let t = Topology::new();
        t.set(Map::parse(&v).unwrap());
        let d = |slot| t.domains(std::iter::once(slot)).iter().next().unwrap();
        // In the order first seen: 7002, 7000, 7001.
        assert_eq!((d(16_383), d(0), d(5_461)), (1, 2, 3));
        assert_eq!(t.name(3).as_deref(), Some("127.0.0.1:7001"));
        t.with(|map| {
            assert_eq!(map.owner(5_461).map(|a| &**a), Some("127.0.0.1:7001"));
            assert_eq!(map.masters().len(), 3);
        });
        assert!(Map::parse(&Value::Nil).is_none());
    }

    /// Two masters never share a domain, whatever their addresses; a node keeps its number
    /// across reads of the map; a promoted replica gets a new one.
    #[test]
    fn every_master_has_a_domain_of_its_own() {
        let t = Topology::new();
        // 63 masters of 260 slots each (the last takes the rest), on ports that collide
        // under any hash of 63 values.
        let masters = |ports: &[i64]| {
            let n = ports.len() as i64;
            Value::Array(
                ports
                    .iter()
                    .enumerate()
                    .map(|(i, &p)| {
                        let i = i as i64;
                        let end = if i == n - 1 {
                            16_383
                        } else {
                            (i + 1) * 260 - 1
                        };
                        node(i * 260, end, p)
                    })
                    .collect(),
            )
        };
        let ports: Vec<i64> = (7000..7063).collect();
        t.set(Map::parse(&masters(&ports)).unwrap());
        let all = t.domains((0..16_384).map(|s| s as u16));
        assert_eq!(all.iter().count(), 63, "63 masters, 63 domains");
        assert!(!all.iter().any(|d| d == 0));
        let before = t.domains(std::iter::once(0));
        t.set(Map::parse(&masters(&ports)).unwrap());
        assert_eq!(t.domains(std::iter::once(0)), before, "kept across reads");
        // 7000 dies; a replica on 8000 takes its slots: it gets the one number no live
        // node holds (all 63 were handed out), never another live master's.
        let mut promoted = ports.clone();
        promoted[0] = 8000;
        t.set(Map::parse(&masters(&promoted)).unwrap());
        let all = t.domains((0..16_384).map(|s| s as u16));
        assert_eq!(all.iter().count(), 63);
        assert_eq!(
            t.name(before.iter().next().unwrap()).as_deref(),
            Some("127.0.0.1:8000")
        );
        // With fewer masters, a promoted replica gets a number never used before.
        let t = Topology::new();
        t.set(Map::parse(&masters(&[7000, 7001, 7002])).unwrap());
        t.set(Map::parse(&masters(&[8000, 7001, 7002])).unwrap());
        assert_eq!(t.domains(std::iter::once(0)).iter().next(), Some(4));
        // MOVED to a node not yet in the map: it is numbered at once.
        t.patch(0, "127.0.0.1:9000");
        assert_eq!(t.domains(std::iter::once(0)).iter().next(), Some(5));
    }
}
