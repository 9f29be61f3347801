//! In-flight (concurrency) limits: at most `max` requests of one principal at once
//! (Stripe's concurrent-request limiter, nginx's `limit_conn`).
//!
//! A request takes a *slot* before its work and gives it back when the work is done. In a
//! shared store a slot is a lease with a TTL that its holder renews while the work runs
//! (every third of the TTL), so the slots of a process that dies come back within the
//! TTL; a slot is released once (releasing is removing one id: a second release, or one
//! after the lease ran out, removes nothing).

use std::fmt;
use std::future::Future;
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Waker};
use std::time::Duration;

use crate::error::{ConfigError, ConfigErrorKind};
use crate::limiter::{FailurePolicy, FailureReason, Limiter};
use crate::name::validate_name;
use crate::principal::Principal;
use crate::store::{AnyStore, StoreError};

/// The shortest slot TTL: 100 ms (renewed every third of it).
pub const MIN_SLOT_TTL: Duration = Duration::from_millis(100);
/// The longest slot TTL: ten minutes (how long a dead process's slots can stay taken).
pub const MAX_SLOT_TTL: Duration = Duration::from_secs(600);

/// An in-flight limit: at most `max` requests of one principal at once.
///
/// ```
/// use rate_limit_core::InFlight;
/// use std::time::Duration;
///
/// // Two report exports per account at once; a dead process's slots return within 30 s.
/// let exports = InFlight::new("exports", 2, Duration::from_secs(30))?;
/// assert_eq!(exports.max(), 2);
/// assert_eq!(InFlight::new("exports", 0, Duration::from_secs(30)).unwrap_err().code(), "limit.in_flight_invalid");
/// # Ok::<(), rate_limit_core::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct InFlight {
    inner: Arc<Def>,
}

struct Def {
    name: Box<str>,
    max: u32,
    ttl: Duration,
}

impl fmt::Debug for InFlight {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InFlight")
            .field("name", &self.name())
            .field("max", &self.max())
            .field("ttl", &self.ttl())
            .finish()
    }
}

impl InFlight {
    /// At most `max` (1 to 1 000 000) in flight per principal; slots leased for `ttl`
    /// ([`MIN_SLOT_TTL`] to [`MAX_SLOT_TTL`]) and renewed while held.
    ///
    /// `limit.name_invalid` for a bad name; `limit.in_flight_invalid` otherwise.
    pub fn new(name: &str, max: u32, ttl: Duration) -> Result<Self, ConfigError> {
        validate_name(name)?;
        let invalid = |field, detail: String| {
            Err(ConfigError::new(
                ConfigErrorKind::InFlightInvalid,
                field,
                detail,
            ))
        };
        if max == 0 || max > 1_000_000 {
            return invalid("max", format!("at most 1 to 1000000 in flight, got {max}"));
        }
        if !(MIN_SLOT_TTL..=MAX_SLOT_TTL).contains(&ttl) {
            return invalid(
                "ttl",
                format!("a slot TTL of {MIN_SLOT_TTL:?} to {MAX_SLOT_TTL:?}, got {ttl:?}"),
            );
        }
        Ok(Self {
            inner: Arc::new(Def {
                name: name.into(),
                max,
                ttl,
            }),
        })
    }

    /// The name (in headers, metrics and the store's key).
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The most requests of one principal in flight at once.
    pub fn max(&self) -> u32 {
        self.inner.max
    }

    /// How long a slot lives without renewal.
    pub fn ttl(&self) -> Duration {
        self.inner.ttl
    }

    /// The slots of `principal`.
    pub fn slots(&self, principal: Principal) -> SlotKey {
        SlotKey {
            in_flight: self.clone(),
            principal,
        }
    }
}

/// The slots of one principal under one [`InFlight`] limit.
#[derive(Debug, Clone)]
pub struct SlotKey {
    in_flight: InFlight,
    principal: Principal,
}

impl SlotKey {
    /// The limit.
    pub fn in_flight(&self) -> &InFlight {
        &self.in_flight
    }

    /// The principal.
    pub fn principal(&self) -> &Principal {
        &self.principal
    }

    /// A name for maps: the principal's rendering and the limit's name (which holds no `/`).
    pub(crate) fn local_name(&self) -> String {
        format!("{}/{}", self.principal.as_str(), self.in_flight.name())
    }
}

/// What a store answered when asked for a slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Taken {
    /// Whether the slot was taken.
    pub taken: bool,
    /// Slots in use after the call (counting this one when taken).
    pub in_use: u32,
    /// When refused: until the earliest held slot's lease runs out, an upper bound on the
    /// wait if its holder dies, and an estimate otherwise (holders usually finish sooner).
    pub retry_after: Duration,
}

/// A store that holds in-flight slots: the memory store, the Redis store (standalone,
/// Sentinel, Cluster), and [`AnyStore`] over either.
pub trait Slots: Send + Sync + 'static {
    /// Takes a slot `id` if fewer than the limit's `max` are held (leases that ran out do
    /// not count), leased for the limit's TTL.
    fn take_slot(
        &self,
        key: &SlotKey,
        id: u64,
    ) -> impl Future<Output = Result<Taken, StoreError>> + Send;
    /// Extends slot `id`'s lease by the TTL; `false` if it is gone (ran out, or released).
    fn renew_slot(
        &self,
        key: &SlotKey,
        id: u64,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;
    /// Releases slot `id` (removing nothing if it is gone).
    fn release_slot(
        &self,
        key: &SlotKey,
        id: u64,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;
}

/// A unique slot id: a random 32-bit process tag and a counter.
fn next_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    static TAG: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    let tag = *TAG.get_or_init(|| {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u32(std::process::id());
        h.finish() << 32
    });
    tag | (NEXT.fetch_add(1, Ordering::Relaxed) & 0xffff_ffff)
}

/// A held slot: renewed in the background while it lives, released when dropped.
#[must_use = "a slot is released when dropped"]
pub struct Slot {
    store: AnyStore,
    key: SlotKey,
    id: u64,
    in_use: u32,
    renewer: Option<tokio::task::JoinHandle<()>>,
}

impl fmt::Debug for Slot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Slot")
            .field("limit", &self.key.in_flight.name())
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl Slot {
    fn new(store: AnyStore, key: SlotKey, id: u64, in_use: u32) -> Self {
        let renewer = tokio::runtime::Handle::try_current().ok().map(|rt| {
            let (store, key) = (store.clone(), key.clone());
            rt.spawn(async move {
                let every = key.in_flight.ttl() / 3;
                loop {
                    tokio::time::sleep(every).await;
                    // Gone (ran out while the store was unreachable): stop; an error: try
                    // again next time, while the lease may still live.
                    if let Ok(false) = store.renew_slot(&key, id).await {
                        return;
                    }
                }
            })
        });
        Self {
            store,
            key,
            id,
            in_use,
            renewer,
        }
    }

    /// The slot's key.
    pub fn key(&self) -> &SlotKey {
        &self.key
    }

    /// Slots of the key in use when this one was taken, this one included.
    pub fn in_use(&self) -> u32 {
        self.in_use
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(r) = self.renewer.take() {
            r.abort();
        }
        let (store, key, id) = (self.store.clone(), self.key.clone(), self.id);
        let mut release = Box::pin(async move {
            // A failed release leaves the slot until its lease runs out.
            let _ = store.release_slot(&key, id).await;
        });
        // The memory store answers at once; a remote store's release goes to the runtime.
        if release
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()))
            .is_pending()
            && let Ok(rt) = tokio::runtime::Handle::try_current()
        {
            rt.spawn(release);
        }
    }
}

/// What [`Limiter::take_slot`] answered.
#[derive(Debug)]
#[non_exhaustive]
pub enum SlotAnswer {
    /// A slot: hold it while the work runs.
    Taken(Slot),
    /// Every slot is held: refuse (429).
    Full {
        /// The most in flight.
        max: u32,
        /// An estimate of when one is free (see [`Taken::retry_after`]).
        retry_after: Duration,
    },
    /// The store failed and the policy lets the request through without a slot.
    Open(FailureReason),
    /// The store failed and the policy refuses (503).
    Closed(FailureReason),
}

impl<S: crate::store::Store> Limiter<S> {
    /// Takes a slot of `key` within the limiter's time budget; when the store cannot
    /// answer, `policy` decides ([`FailurePolicy::Memory`]: a slot in the fallback memory
    /// store). Slot calls keep no health state: one node's failure is that call's alone.
    pub async fn take_slot(&self, key: &SlotKey, policy: FailurePolicy) -> SlotAnswer
    where
        S: Clone + Into<AnyStore>,
    {
        let store: AnyStore = self.store().clone().into();
        let id = next_id();
        let failure = match tokio::time::timeout(self.timeout(), store.take_slot(key, id)).await {
            Ok(Ok(t)) => return answer(t, store, key, id),
            Ok(Err(e)) => FailureReason::of(e.kind()),
            Err(_) => FailureReason::TimedOut,
        };
        match policy {
            FailurePolicy::Open => SlotAnswer::Open(failure),
            FailurePolicy::Memory => {
                let fallback = AnyStore::Memory(self.fallback().clone());
                match fallback.take_slot(key, id).await {
                    Ok(t) => answer(t, fallback, key, id),
                    Err(_) => SlotAnswer::Closed(failure),
                }
            }
            _ => SlotAnswer::Closed(failure),
        }
    }
}

fn answer(t: Taken, store: AnyStore, key: &SlotKey, id: u64) -> SlotAnswer {
    if t.taken {
        SlotAnswer::Taken(Slot::new(store, key.clone(), id, t.in_use))
    } else {
        SlotAnswer::Full {
            max: key.in_flight.max(),
            retry_after: t.retry_after,
        }
    }
}
