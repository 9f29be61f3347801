//! One AIMD pacer shared by every worker: the rate of each scope lives in the store.
//!
//! The local [`Adaptive`] paces one process. A harvester is many workers calling one
//! remote site; each pacing itself at the learned rate would call the site at that rate
//! times the number of workers. A [`SharedPacer`] keeps each scope's rate, its next free
//! slot and its pause in the store (memory, Redis, Cluster): every worker takes its calls
//! from the same token bucket, and increases and decreases act on the one rate atomically,
//! at most one decrease per period however many workers see the site's 429 at once.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::adaptive::{Adaptive, Pace, Turn};
use crate::error::ConfigError;
use crate::limit::Aimd;
use crate::name::validate_name;
use crate::principal::{Principal, PrincipalKind};
use crate::protocol::pace::{PaceCall, PaceOp, PaceReply};
use crate::protocol::{SharedState, StoreError};
use crate::store::AnyStore;

/// How long a worker stays counted after its last call (default).
const REGISTRATION: Duration = Duration::from_secs(60);
/// How long a scope's learned rate outlives its last call (default): hours, so a
/// harvester that pauses or restarts resumes at what it learned.
const REMEMBER: Duration = Duration::from_secs(6 * 3_600);
/// After a store failure, how long the local fallback paces before the store is asked again.
const COOLDOWN: Duration = Duration::from_secs(1);

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// What a worker knows of one scope.
#[derive(Debug)]
struct Known {
    rate: f64,
    workers: u32,
    /// Successes not yet reported (sent with the next call).
    pending: u64,
    /// While the store is failing: a local pacer at this worker's share of the last rate,
    /// and when to ask the store again.
    local: Option<(Adaptive, Instant)>,
}

/// An AIMD pacer per scope (an account, a site), shared by every worker through a store.
/// Cheap to clone; clones are one worker.
///
/// - **One bucket**: each scope's rate and next free slot live in the store; every
///   worker's [`acquire`](Self::acquire) takes from it in one atomic call, so three workers
///   together call the site at the learned rate, not three times it, and a fourth joining
///   takes a share of the same rate.
/// - **AIMD on the shared rate**: a period of successes (all workers' together) adds one
///   step; a rejection multiplies the rate by the decrease factor, at most once per period
///   however many workers report it, and pauses every worker for the site's `Retry-After`
///   (at most an hour).
///   Successes are reported with the worker's next call (no extra round trip); a rejection
///   is sent at once.
/// - **Hours**: the period may be hours long, and a scope's state outlives its last call
///   by [`remember`](Self::remember) (6 h by default), so a harvester that restarts
///   resumes at the rate it learned.
/// - **Fail-open**: when the store fails, each worker paces on its own at its share of the
///   last known rate — the rate divided by the workers the store last counted (each call
///   registers its worker for [`registration`](Self::registration), 60 s by default) —
///   and asks the store again after a second.
///
/// ```
/// use ratekeeper_core::{AnyStore, MemoryStore};
/// use ratekeeper_core::pace::{Aimd, Pace, SharedPacer};
/// use std::time::Duration;
///
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// let store = AnyStore::Memory(MemoryStore::new());
/// let aimd = Aimd { initial: 5.0, period: Duration::from_secs(3_600), ..Aimd::default() };
/// let worker = SharedPacer::new(store.clone(), "harvest", aimd)?;
/// let other = SharedPacer::new(store, "harvest", aimd)?; // another worker, same store
/// assert_eq!(worker.acquire("example.org").await, Pace::Go);
/// // The other worker waits for the same bucket's next slot (5 calls a second).
/// assert!(matches!(other.acquire("example.org").await, Pace::Wait(_)));
/// worker.rejected("example.org", Some(Duration::from_secs(30))).await;
/// assert_eq!(other.rate("example.org"), 5.0); // what it knew at its last call
/// assert!(matches!(other.acquire("example.org").await, Pace::Wait(d) if d > Duration::from_secs(29)));
/// assert_eq!(other.rate("example.org"), 2.5);
/// # Ok::<(), ratekeeper_core::ConfigError>(())
/// # }).unwrap();
/// ```
///
/// Generic over the store (any [`SharedState`] store), with [`AnyStore`] as the default:
/// [`SharedPacer::new`] takes any store as an `AnyStore`, [`SharedPacer::with_store`] a
/// store of your own, unboxed.
#[derive(Debug)]
pub struct SharedPacer<S = AnyStore> {
    inner: Arc<PacerInner<S>>,
}

impl<S> Clone for SharedPacer<S> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

#[derive(Debug)]
struct PacerInner<S> {
    store: S,
    name: Box<str>,
    config: Aimd,
    worker: u64,
    registration: Duration,
    remember: Duration,
    known: Mutex<HashMap<String, Known>>,
}

impl SharedPacer<AnyStore> {
    /// A worker of the pacer `name` (a key name: `limit.name_invalid` otherwise) in
    /// `store`, with these settings (validated as [`Adaptive::new`] does). Workers share a
    /// scope's rate when they share the store and the name; give them the same settings.
    pub fn new(store: impl Into<AnyStore>, name: &str, config: Aimd) -> Result<Self, ConfigError> {
        Self::with_store(store.into(), name, config)
    }
}

impl<S: SharedState + Clone> SharedPacer<S> {
    /// [`new`](SharedPacer::new) over a store of a static type (a store of your own that
    /// implements [`SharedState`]).
    pub fn with_store(store: S, name: &str, config: Aimd) -> Result<Self, ConfigError> {
        validate_name(name)?;
        Adaptive::new(config)?;
        static WORKERS: AtomicU64 = AtomicU64::new(0);
        // Unique among processes and machines (containers all run as pid 1): a count
        // hashed under std's randomly seeded hasher.
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(WORKERS.fetch_add(1, Ordering::Relaxed));
        h.write_u32(std::process::id());
        let worker = h.finish() >> 11; // below 2^53: exact as a Lua number
        Ok(Self {
            inner: Arc::new(PacerInner {
                store,
                name: name.into(),
                config,
                worker,
                registration: REGISTRATION,
                remember: REMEMBER,
                known: Mutex::new(HashMap::new()),
            }),
        })
    }

    /// A worker like this one with its settings changed by `f` (the same id: what it
    /// knows is a cache, and starts empty).
    fn with(&self, f: impl FnOnce(&mut PacerInner<S>)) -> Self {
        let i = &self.inner;
        let mut inner = PacerInner {
            store: i.store.clone(),
            name: i.name.clone(),
            config: i.config,
            worker: i.worker,
            registration: i.registration,
            remember: i.remember,
            known: Mutex::new(HashMap::new()),
        };
        f(&mut inner);
        Self {
            inner: Arc::new(inner),
        }
    }

    /// How long this worker stays counted after its last call (default 60 s; at least
    /// 1 ms): the share it falls back to when the store fails is the last rate divided by
    /// the workers counted.
    #[must_use]
    pub fn registration(self, ttl: Duration) -> Self {
        self.with(|i| i.registration = ttl.max(Duration::from_millis(1)))
    }

    /// How long a scope's state outlives its last call (default 6 h; at least 1 ms).
    #[must_use]
    pub fn remember(self, ttl: Duration) -> Self {
        self.with(|i| i.remember = ttl.max(Duration::from_millis(1)))
    }

    fn known(&self) -> MutexGuard<'_, HashMap<String, Known>> {
        self.inner
            .known
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes a slot for one call in `scope`, or says how long to wait (and reports the
    /// successes since this worker's last call). One store call. Callers that wait and ask
    /// again race for the next slot; [`reserve`](Self::reserve) serves them in order.
    pub async fn acquire(&self, scope: &str) -> Pace {
        self.reserve(scope, Duration::ZERO).await.pace()
    }

    /// Takes the next free slot of `scope` when it is at most `within` away (now, or
    /// reserved for the caller, who calls then without asking again), else says how far it
    /// is and takes nothing; reports the successes since this worker's last call. One store
    /// call. Callers of every worker are served in the order the store saw them (a slot
    /// reserved and then not used is lost to the pace, not given to another). A reservation
    /// reaches an hour ahead at most.
    pub async fn reserve(&self, scope: &str, within: Duration) -> Turn {
        if let Some(slot) = self.local(scope, |p| p.reserve(scope, within)) {
            return slot;
        }
        let op = PaceOp::Acquire {
            within: micros(within),
        };
        match self.call(scope, op).await {
            Some(r) => Turn::of(r.go, Duration::from_micros(r.wait_us)),
            None => self
                .local(scope, |p| p.reserve(scope, within))
                .unwrap_or(Turn::Now),
        }
    }

    /// The remote side accepted a call: reported with this worker's next call.
    pub fn success(&self, scope: &str) {
        let mut known = self.known();
        let k = self.scope(&mut known, scope);
        k.pending = k.pending.saturating_add(1);
        if let Some((p, _)) = &k.local {
            p.success(scope);
        }
    }

    /// The remote side refused a call (429, 503): the shared rate drops by the decrease
    /// factor (once per period, whoever reports it) and every worker waits out
    /// `retry_after`. One store call, at once.
    pub async fn rejected(&self, scope: &str, retry_after: Option<Duration>) {
        if self
            .local(scope, |p| p.rejected(scope, retry_after))
            .is_some()
        {
            return;
        }
        let retry = retry_after.map_or(0, micros);
        if self.call(scope, PaceOp::Rejected(retry)).await.is_none() {
            self.local(scope, |p| p.rejected(scope, retry_after));
        }
    }

    /// The remote side said what it allows without refusing (a `RateLimit-Policy`, a
    /// remaining count of 0 until a reset): every worker holds `scope` to `ceiling` calls a
    /// second (going straight to it unless a rejection came within the period; AIMD then
    /// climbs no higher), and waits out `pause`, with no decrease. One store call, at
    /// once. While the store fails this worker's local share ignores it (a rejection still
    /// slows it).
    pub async fn told(&self, scope: &str, pause: Option<Duration>, ceiling: Option<f64>) {
        if self.local(scope, |_| ()).is_some() {
            return;
        }
        let op = PaceOp::Told {
            pause: pause.map_or(0, micros),
            ceiling: ceiling.filter(|c| c.is_finite() && *c > 0.0).unwrap_or(0.0),
        };
        let _ = self.call(scope, op).await;
    }

    /// The scope's rate (calls per second) as this worker last saw it: the store's, or
    /// while the store fails, this worker's local share.
    pub fn rate(&self, scope: &str) -> f64 {
        let known = self.known();
        match known.get(scope) {
            Some(Known {
                local: Some((p, _)),
                ..
            }) => p.rate(scope),
            Some(k) => k.rate,
            None => self.inner.config.initial,
        }
    }

    /// The workers the store counted on this scope at this worker's last call.
    pub fn workers(&self, scope: &str) -> u32 {
        self.known().get(scope).map_or(1, |k| k.workers)
    }

    /// Whether this worker paces `scope` on its own now (the store failed lately).
    pub fn is_local(&self, scope: &str) -> bool {
        self.known().get(scope).is_some_and(|k| k.local.is_some())
    }

    /// What this worker knows of `scope`, made on first use (no allocation after it).
    fn scope<'a>(&self, known: &'a mut HashMap<String, Known>, scope: &str) -> &'a mut Known {
        if !known.contains_key(scope) {
            known.insert(scope.to_owned(), self.fresh());
        }
        known
            .get_mut(scope)
            .unwrap_or_else(|| unreachable!("inserted above"))
    }

    fn fresh(&self) -> Known {
        Known {
            rate: self.inner.config.initial,
            workers: 1,
            pending: 0,
            local: None,
        }
    }

    /// Runs `f` on the scope's local pacer while the store is cooling down; `None` when
    /// the store is to be asked.
    fn local<T>(&self, scope: &str, f: impl FnOnce(&Adaptive) -> T) -> Option<T> {
        let mut known = self.known();
        let k = known.get_mut(scope)?;
        let (p, until) = k.local.as_ref()?;
        if Instant::now() >= *until {
            return None;
        }
        Some(f(p))
    }

    /// One store call; `None` when the store failed (the scope then paces locally).
    async fn call(&self, scope: &str, op: PaceOp) -> Option<PaceReply> {
        let successes = {
            let mut known = self.known();
            let k = self.scope(&mut known, scope);
            std::mem::take(&mut k.pending)
        };
        let principal = Principal::new(
            PrincipalKind::custom("pacer").unwrap_or(PrincipalKind::Global),
            scope,
        );
        let call = PaceCall {
            name: &self.inner.name,
            scope: &principal,
            op,
            successes,
            worker: self.inner.worker,
            registration: self.inner.registration,
            remember: self.inner.remember,
            config: self.inner.config,
        };
        let answer = self.inner.store.pace(&call).await;
        let mut known = self.known();
        let k = self.scope(&mut known, scope);
        match answer {
            Ok(r) => {
                k.rate = r.rate;
                k.workers = r.workers.max(1);
                k.local = None;
                Some(r)
            }
            Err(e) => {
                self.fail(k, successes, &e);
                None
            }
        }
    }

    /// The store failed: pace this scope locally at this worker's share of the last rate.
    fn fail(&self, k: &mut Known, successes: u64, e: &StoreError) {
        k.pending = k.pending.saturating_add(successes);
        let until = Instant::now() + COOLDOWN;
        if let Some((_, at)) = &mut k.local {
            *at = until;
            return;
        }
        let c = self.inner.config;
        let share = f64::from(k.workers.max(1));
        let local = Aimd {
            initial: (k.rate / share).clamp(c.min, c.max),
            max: (c.max / share).max(c.min),
            ..c
        };
        tracing::warn!(
            name: "rate_limit.pacer_local",
            target: "rate_limit.pacer_local",
            pacer = %self.inner.name,
            error = %e,
            rate = local.initial,
            workers = k.workers,
            "the store failed: pacing locally at this worker's share of the last known rate"
        );
        // The settings were validated; a share keeps min ≤ initial ≤ max.
        if let Ok(p) = Adaptive::new(local) {
            k.local = Some((p, until));
        }
    }
}
