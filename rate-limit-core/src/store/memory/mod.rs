//! The in-memory store; its documentation is [`MemoryStore`]'s.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use crate::algorithm::{self, Charge, State};
use crate::chain::{Chain, ChainMode, Check};
use crate::clock::Clock;
use crate::key::Key;
use crate::limit::Params;
use crate::protocol::{ChainDecision, Decision};
use crate::protocol::{KeyState, Reservation};

use crate::protocol::{Store, StoreError};
use std::collections::HashMap;

mod builder;
mod chain;
mod fleet;
mod seen;
mod shard;
mod side;

pub use builder::MemoryStoreBuilder;
use seen::Seen;
use shard::Shard;
use side::Pacer;

/// The default key cap: one million keys per limit (about 50 MB for each limit at most).
pub const DEFAULT_MAX_KEYS: usize = 1_000_000;
const DEFAULT_SHARDS: usize = 64;
const DEFAULT_SWEEP: Duration = Duration::from_secs(60);

/// The in-memory store. Cheap to clone; clones share counters.
///
/// The in-memory store: the embedded default, with nothing to set up.
///
/// - **Sharded**: keys spread over independent mutex-guarded shards; no global lock.
/// - **Atomic chains**: a chain locks the shards of its keys in ascending order (so two
///   chains can never deadlock), decides, writes, and unlocks; no other check on those
///   keys runs in between, so concurrent chains can neither both pass nor half-apply.
/// - **Exact**: every check is a read-modify-write under the shard's lock.
/// - **Bounded, per limit**: a hard cap on keys *for each limit*
///   ([`MemoryStoreBuilder::max_keys`]; limits are told apart by name), so a flood of fresh
///   keys on one limit never evicts another limit's state. A limit at its cap in a shard
///   first drops expired keys, then a sixteenth of its own keys there: first those that
///   cost nothing to forget (a full bucket, an empty count or log), then those that refuse
///   nobody, least recently used first, and only then keys that refuse or slow someone
///   (refused, at quota, past a delay's threshold, a ban) — so a flood of fresh keys on a
///   limit cannot reset a counter that is refusing someone unless every key of that limit
///   refuses (a limit that one request exhausts). It never refuses a request for lack of
///   room. [`MemoryStore::evictions`] counts keys dropped while still live. Expired keys
///   are also swept on a timer ([`MemoryStoreBuilder::sweep_interval`]) and by
///   [`MemoryStore::sweep`]. Memory is bounded by the number of limits in use × `max_keys`
///   × about 50 bytes.
/// - **Compact**: 40 bytes per key in a dense slab plus 5 bytes per table slot (about
///   50 bytes per key at 1M keys); exact logs keep their timestamps beside it.
/// - **De-duplication** ([`Dedupe`](crate::protocol::Dedupe)): delivery ids are remembered until their TTL, at most
///   `max_keys` of them (about 100 bytes each, measured at 1M). At the cap the oldest id
///   is forgotten in amortized constant time, and a redelivery of a forgotten id is
///   processed again: the default holds a day of 11 deliveries a second on average; a
///   busier site raises the cap or de-duplicates in Redis.
///
///
/// ```
/// use ratekeeper_core::{Chain, Limit, MemoryStore, Principal, Store};
/// use std::time::Duration;
///
/// # tokio_test_block_on(async {
/// let store = MemoryStore::new();
/// let limit = Limit::fixed_window("api", 2, Duration::from_secs(60))?;
/// let chain = Chain::new().check(&limit, Principal::user("ann"));
/// assert!(store.check(&chain).await?.is_allowed());
/// assert!(store.check(&chain).await?.is_allowed());
/// assert!(!store.check(&chain).await?.is_allowed());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// # fn tokio_test_block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
/// # }
/// ```
#[derive(Clone)]
pub struct MemoryStore {
    inner: Arc<MemoryInner>,
}

struct MemoryInner {
    shards: Box<[Mutex<Shard>]>,
    clock: Arc<dyn Clock>,
    anchor: u64,
    shard_cap: usize,
    max_keys: usize,
    sweep_every: u32,
    evictions: AtomicU64,
    /// Delivery ids for [`Dedupe`].
    dedupe: Mutex<Seen>,
    /// In-flight slots: (id, lease end in µs) by principal and limit.
    slots: Mutex<HashMap<String, Vec<(u64, u64)>>>,
    /// Bans in force, by key digest: the key (to name its principal) and the ban's end
    /// (µs). The counters keep only digests; bans are few.
    bans: Mutex<HashMap<[u64; 2], (Key, u64)>>,
    /// Shared pacers: by pacer and scope, the state, the workers (id, lapses at, µs) and
    /// when the state lapses (µs).
    pacers: Mutex<HashMap<String, Pacer>>,
    /// The fleet's state, its log, its readers and the heavy-hitter reports.
    fleet: Mutex<fleet::Fleetwide>,
}

impl fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryStore")
            .field("shards", &self.inner.shards.len())
            .field("max_keys", &self.inner.max_keys)
            .field("clock", &self.inner.clock)
            .finish_non_exhaustive()
    }
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryStore {
    /// The address of the state clones share.
    pub(crate) fn identity(&self) -> usize {
        Arc::as_ptr(&self.inner) as usize
    }
}

impl MemoryStore {
    /// A store with the default settings and the system clock.
    pub fn new() -> Self {
        Self::builder()
            .build()
            .unwrap_or_else(|_| unreachable!("the default settings are valid"))
    }

    /// A builder.
    pub fn builder() -> MemoryStoreBuilder {
        MemoryStoreBuilder {
            clock: None,
            max_keys: DEFAULT_MAX_KEYS,
            shards: DEFAULT_SHARDS,
            sweep_interval: DEFAULT_SWEEP,
        }
    }

    /// The number of keys held now.
    pub fn len(&self) -> usize {
        self.inner.shards.iter().map(|s| lock(s).len()).sum()
    }

    /// Whether no key is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Keys dropped to make room while their state was still live.
    pub fn evictions(&self) -> u64 {
        self.inner.evictions.load(Ordering::Relaxed)
    }

    /// Drops every expired key now; returns how many.
    pub fn sweep(&self) -> usize {
        let now = self.now_sec(self.inner.clock.now_micros());
        self.inner
            .shards
            .iter()
            .map(|s| {
                let mut s = lock(s);
                s.next_sweep = now.saturating_add(self.inner.sweep_every);
                s.sweep(now)
            })
            .sum()
    }

    /// Bytes the store's tables have allocated (exact-log contents not included).
    pub fn allocated_bytes(&self) -> usize {
        self.inner
            .shards
            .iter()
            .map(|s| lock(s).allocated_bytes())
            .sum()
    }

    /// The store's clock.
    pub fn clock(&self) -> &dyn Clock {
        &*self.inner.clock
    }

    /// [`Store::check`] without the future: the memory store never waits.
    pub fn check_now(&self, chain: &Chain) -> ChainDecision {
        let charge = match chain.chain_mode() {
            ChainMode::InOrder => Charge::IfFits,
            ChainMode::ChargeAll | ChainMode::CountAttempts => Charge::Always,
        };
        match chain.checks() {
            [] => ChainDecision::new(Vec::new()),
            [one] => {
                let (decision, at) = self.single(one.key(), one.cost(), charge);
                ChainDecision::one(decision).charged_at(at)
            }
            checks => self.chain(checks, chain.chain_mode(), charge),
        }
    }

    /// The shard of `key`: chosen by its principal alone, so a chain of one principal's
    /// limits (the usual chain of a layer's rules) locks one shard, not one per limit.
    fn shard_of(&self, key: &Key) -> usize {
        let n = self.inner.shards.len() as u64;
        // Multiply-shift over the principal's second word (the table hashes on the key's
        // first).
        usize::try_from(((key.principal_digest()[1] >> 32) * n) >> 32).unwrap_or(0)
    }

    fn now_sec(&self, now: u64) -> u32 {
        u32::try_from(now.saturating_sub(self.inner.anchor) / 1_000_000).unwrap_or(u32::MAX)
    }

    fn expires_sec(&self, at: u64) -> u32 {
        let rel = at.saturating_sub(self.inner.anchor);
        u32::try_from(rel.div_ceil(1_000_000)).unwrap_or(u32::MAX)
    }

    /// One check; the decision and the store's time.
    fn single(&self, key: &Key, cost: u64, charge: Charge) -> (Decision, u64) {
        let digest = key.digest();
        let mut shard = lock(&self.inner.shards[self.shard_of(key)]);
        let now = self.inner.clock.now_micros();
        let params = key.params_at(now);
        self.sweep_if_due(&mut shard, now);
        // One lookup: the index stays valid until this shard changes shape.
        let found = shard.find(&digest);
        let state = match found {
            Some(i) => shard.get_at(i),
            None => State::fresh(params),
        };
        let step = algorithm::step(params, &state, now, cost, charge);
        if let Some(next) = step.next {
            self.note_ban(key, &next, now);
            let expires = self.expires_sec(next.expires_at(params));
            let hot = hot(key, &step.decision, &next, now);
            match found {
                Some(i) => shard.set_at(i, next, expires, Some(hot)),
                None => self.insert(&mut shard, &digest, next, expires, now, hot),
            }
        }
        (step.decision, now)
    }

    /// Remembers a ban that `next` puts in force, for [`bans`](Self::bans).
    #[inline]
    fn note_ban(&self, key: &Key, next: &State, now: u64) {
        if let State::Ban { until, events } = next
            && *until > now
            && events.is_empty()
        {
            let mut bans = self.ban_record();
            bans.retain(|_, (_, end)| *end > now);
            bans.insert(key.digest(), (key.clone(), *until));
        }
    }

    fn sweep_if_due(&self, shard: &mut Shard, now: u64) {
        let now_sec = self.now_sec(now);
        if now_sec >= shard.next_sweep {
            shard.next_sweep = now_sec.saturating_add(self.inner.sweep_every);
            shard.sweep(now_sec);
        }
    }

    fn write(
        &self,
        shard: &mut Shard,
        digest: &[u64; 2],
        next: State,
        params: Params,
        now: u64,
        hot: bool,
    ) {
        let expires = self.expires_sec(next.expires_at(params));
        self.insert(shard, digest, next, expires, now, hot);
    }

    /// Writes a key's state, making room in its limit's class first if the key is new and
    /// the class is full in its shard. `hot`: the state refuses or slows someone.
    fn insert(
        &self,
        shard: &mut Shard,
        digest: &[u64; 2],
        next: State,
        expires: u32,
        now: u64,
        hot: bool,
    ) {
        let cap = self.inner.shard_cap;
        if let Err(next) = shard.put(digest, next, expires, cap, hot) {
            let want = (cap / 16).max(1);
            let class = shard::class(digest);
            let evicted = shard.make_room(self.now_sec(now), now, class, cap, want);
            self.inner
                .evictions
                .fetch_add(evicted as u64, Ordering::Relaxed);
            // Room was made (the cap is at least 1), so this write lands.
            let _ = shard.put(digest, next, expires, cap, hot);
        }
    }

    /// [`Store::charge`] without the future.
    pub(crate) fn charge_now(&self, check: &Check) -> Decision {
        self.single(check.key(), check.cost(), Charge::Overdraw).0
    }

    /// [`Store::give_back`] without the future.
    pub(crate) fn give_back_now(&self, reservation: &Reservation) {
        for (check, at) in reservation.charges() {
            let key = check.key();
            // The parameters of the charge's time: a calendar quota's period then.
            let (digest, params) = (key.digest(), key.params_at(at));
            let mut shard = lock(&self.inner.shards[self.shard_of(key)]);
            let Some(i) = shard.find(&digest) else {
                continue; // forgotten: its window has passed
            };
            let state = shard.get_at(i);
            if let Some(next) = algorithm::refund(params, &state, at, check.cost()) {
                let expires = self.expires_sec(next.expires_at(params));
                shard.set_at(i, next, expires, None);
            }
        }
    }

    fn reset_now(&self, key: &Key) {
        let digest = key.digest();
        lock(&self.inner.shards[self.shard_of(key)]).remove(&digest);
        if matches!(key.params(), Params::Ban { .. }) {
            let mut bans = self.ban_record();
            bans.remove(&digest);
        }
    }
}

/// Whether `key`, whose check decided `d` and left `next`, refuses or slows somebody:
/// refused, at its quota (the next request is refused), at or past a delay's threshold
/// (the next request is held: the limiter sets the delay from this count), or a ban in
/// force or counting.
fn hot(key: &Key, d: &Decision, next: &State, now: u64) -> bool {
    !d.is_allowed()
        || d.remaining() == 0
        || key
            .limit()
            .delay()
            .is_some_and(|delay| d.limit().saturating_sub(d.remaining()) >= delay.after())
        || matches!(next, State::Ban { until, events } if *until > now || !events.is_empty())
}

fn lock(m: &Mutex<Shard>) -> MutexGuard<'_, Shard> {
    // A panic while holding a shard cannot leave it half-written (every write is a plain
    // field store), so a poisoned lock is safe to keep using.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Store for MemoryStore {
    async fn check(&self, chain: &Chain) -> Result<ChainDecision, StoreError> {
        Ok(self.check_now(chain))
    }

    async fn charge(&self, check: &Check) -> Result<Decision, StoreError> {
        Ok(self.charge_now(check))
    }

    async fn peek(&self, key: &Key) -> Result<KeyState, StoreError> {
        Ok(KeyState::from_free_check(
            self.single(key, 0, Charge::IfFits).0,
        ))
    }

    async fn give_back(&self, reservation: &Reservation) -> Result<(), StoreError> {
        self.give_back_now(reservation);
        Ok(())
    }
    async fn reset(&self, key: &Key) -> Result<(), StoreError> {
        self.reset_now(key);
        Ok(())
    }

    fn try_check(&self, chain: &Chain) -> Option<ChainDecision> {
        Some(self.check_now(chain))
    }
}

#[cfg(all(test, feature = "calendar"))]
mod calendar_tests;
