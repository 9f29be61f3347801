//! The Redis store's deny cache (see the module docs of `store::redis` for what it
//! promises): one entry per refused key, holding the chain's decisions up to and including
//! the refusal, the cost refused, the limit's version and the key's parameters; bounded,
//! in shards.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError, RwLock};
use std::time::Instant;

use smallvec::SmallVec;

use crate::chain::{Chain, ChainMode};
use crate::limit::Params;
use crate::protocol::{ChainDecision, Decision, Outcome};

const SHARDS: usize = 8;
/// The longest a ban's refusal is answered from the cache (µs): a ban lasts hours, and one
/// lifted through another process must end here soon, not when it would have ended.
const BAN_HELD_US: u64 = 1_000_000;

/// One refused key.
struct Denial {
    /// Local time (µs) the refusal lapses at.
    until: u64,
    /// Local time (µs) the command was sent.
    at: u64,
    cost: u64,
    version: u64,
    params: Params,
    /// The keys checked before this one, in order.
    before: SmallVec<[[u64; 2]; 3]>,
    /// The chain's decisions, ending with this key's refusal.
    decisions: SmallVec<[Decision; 4]>,
}

type DenyShard = HashMap<[u64; 2], Denial>;

pub(crate) struct DenyCache {
    shards: Box<[Mutex<DenyShard>]>,
    per_shard: usize,
    /// Live entries over all shards: zero skips every lookup (allowed traffic pays nothing).
    len: AtomicUsize,
    hits: AtomicU64,
    anchor: Instant,
    /// Limits this process has seen in an in-order chain split across Cluster slot groups.
    /// Other requests' refunds can give their keys room back, so a refusal of theirs is
    /// not the kind that only time undoes: never cached.
    refundable: RwLock<HashSet<Box<str>>>,
    any_refundable: AtomicBool,
}

fn lock(m: &Mutex<DenyShard>) -> MutexGuard<'_, DenyShard> {
    // Every write to a shard is a whole insert or remove: a poisoned one is consistent.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl DenyCache {
    /// A cache of at most `capacity` keys.
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            shards: (0..SHARDS).map(|_| Mutex::new(DenyShard::new())).collect(),
            per_shard: capacity.div_ceil(SHARDS).max(1),
            len: AtomicUsize::new(0),
            hits: AtomicU64::new(0),
            anchor: Instant::now(),
            refundable: RwLock::new(HashSet::new()),
            any_refundable: AtomicBool::new(false),
        }
    }

    /// Local monotonic time, µs.
    pub(crate) fn now(&self) -> u64 {
        u64::try_from(self.anchor.elapsed().as_micros()).unwrap_or(u64::MAX)
    }

    fn shard(&self, digest: &[u64; 2]) -> &Mutex<DenyShard> {
        // The low bits of the second word: the table hashes on both.
        &self.shards[usize::try_from(digest[1] % SHARDS as u64).unwrap_or(0)]
    }

    /// Notes that `chain`'s limits take part in a chain split across slot groups, whose
    /// refunds can give their keys room back: their refusals are not cached from now on.
    pub(crate) fn mark_refundable(&self, chain: &Chain) {
        let names = || chain.checks().iter().map(|c| c.key().limit().name());
        {
            let set = self
                .refundable
                .read()
                .unwrap_or_else(PoisonError::into_inner);
            if names().all(|n| set.contains(n)) {
                return;
            }
        }
        let mut set = self
            .refundable
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        set.extend(names().map(Box::from));
        self.any_refundable.store(true, Ordering::Release);
    }

    fn is_refundable(&self, limit: &str) -> bool {
        self.any_refundable.load(Ordering::Acquire)
            && self
                .refundable
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .contains(limit)
    }

    /// How many checks were answered here instead of by Redis.
    pub(crate) fn hits(&self) -> u64 {
        self.hits.load(Ordering::Relaxed)
    }

    /// The refusal Redis would give this chain now, if one is cached.
    pub(crate) fn lookup(&self, chain: &Chain) -> Option<ChainDecision> {
        if self.len.load(Ordering::Relaxed) == 0 || chain.chain_mode() != ChainMode::InOrder {
            return None;
        }
        let checks = chain.checks();
        let now = self.now();
        for (j, check) in checks.iter().enumerate() {
            if check.cost() == 0 {
                continue;
            }
            let key = check.key();
            let digest = key.digest();
            let mut shard = lock(self.shard(&digest));
            let Some(e) = shard.get(&digest) else {
                continue;
            };
            if now >= e.until
                || e.version != key.limit().version()
                || e.params != key.params()
                || self.is_refundable(key.limit().name())
            {
                shard.remove(&digest);
                self.len.fetch_sub(1, Ordering::Relaxed);
                continue;
            }
            let same_prefix = e.before.len() == j
                && checks[..j]
                    .iter()
                    .zip(&e.before)
                    .all(|(c, d)| c.key().digest() == *d);
            // Another cost would get another answer (a later retry-after, or never fits).
            if check.cost() != e.cost || !same_prefix {
                continue;
            }
            // Saturating: `now` was read before this shard's lock, and a refusal recorded
            // meanwhile by another task can carry a later send time (it panicked under
            // load in debug builds, and would have aged the answer by ~2⁶⁴ µs in release).
            let elapsed = now.saturating_sub(e.at);
            let decisions = e.decisions.iter().map(|d| d.aged(elapsed)).collect();
            self.hits.fetch_add(1, Ordering::Relaxed);
            return Some(ChainDecision::from_decisions(decisions));
        }
        None
    }

    /// Records the refusal in Redis's answer to `chain` (a command sent at local time `sent`).
    pub(crate) fn record(&self, chain: &Chain, decisions: &[Decision], sent: u64) {
        if chain.chain_mode() != ChainMode::InOrder {
            return;
        }
        let Some(j) = decisions.iter().position(|d| !d.is_allowed()) else {
            return;
        };
        let refused = &decisions[j];
        let (Outcome::Denied, Some(retry), Some(check)) = (
            refused.outcome(),
            refused.retry_after(),
            chain.checks().get(j),
        ) else {
            return;
        };
        let key = check.key();
        // A leased key's units come back to Redis when slices end, here or in another
        // process: more than time can undo its refusal. A refusal that a ban before it
        // counts must reach Redis every time to be counted (a ban's own refusal is cached:
        // it counts nothing).
        if self.is_refundable(key.limit().name())
            || key.limit().lease().is_some()
            || decisions[..j].iter().any(Decision::is_ban)
        {
            return;
        }
        let digest = key.digest();
        let mut held = u64::try_from(retry.as_micros()).unwrap_or(u64::MAX);
        if refused.is_ban() {
            held = held.min(BAN_HELD_US);
        }
        let entry = Denial {
            until: sent.saturating_add(held),
            at: sent,
            cost: check.cost(),
            version: key.limit().version(),
            params: key.params(),
            before: chain.checks()[..j]
                .iter()
                .map(|c| c.key().digest())
                .collect(),
            decisions: decisions[..=j].iter().copied().collect(),
        };
        let mut shard = lock(self.shard(&digest));
        if shard.len() >= self.per_shard && !shard.contains_key(&digest) {
            let now = self.now();
            let before = shard.len();
            shard.retain(|_, e| e.until > now);
            self.len.fetch_sub(before - shard.len(), Ordering::Relaxed);
            if shard.len() >= self.per_shard {
                return;
            }
        }
        if shard.insert(digest, entry).is_none() {
            self.len.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Forgets a key (it was reset through this store).
    pub(crate) fn forget(&self, digest: &[u64; 2]) {
        if lock(self.shard(digest)).remove(digest).is_some() {
            self.len.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::DenyCache;
    use crate::chain::Chain;
    use crate::limit::Limit;
    use crate::principal::Principal;
    use crate::protocol::{Decision, Outcome};

    /// A refusal recorded by another task with a send time later than the lookup's clock
    /// (read before the shard's lock): answered, aged by nothing, never an overflow.
    #[test]
    fn a_refusal_sent_after_the_lookups_clock_is_aged_by_nothing() {
        let cache = DenyCache::new(64);
        let limit = Limit::fixed_window("deny-race", 1, Duration::from_secs(60)).unwrap();
        let chain = Chain::new().check(&limit, Principal::user("u"));
        let minute = 60_000_000;
        let refused = Decision::from_parts(Outcome::Denied, 1, 0, minute, minute, minute);
        cache.record(&chain, &[refused], cache.now() + 5_000_000);
        let answer = cache.lookup(&chain).expect("answered from the cache");
        let (_, d) = answer.denied_by().unwrap();
        assert_eq!(d.retry_after(), Some(Duration::from_secs(60)));
    }
}
