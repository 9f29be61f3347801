//! The in-flight slot guard: a [`Slot`] is renewed while it lives and released when
//! dropped; [`Limiter::take_slot`] takes one within the limiter's time budget.

use std::fmt;
use std::future::Future;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Waker};
use std::time::Duration;

use super::{FailurePolicy, FailureReason, Limiter};
use crate::limit::SlotKey;
use crate::protocol::{Slots, Store, Taken};
use crate::store::AnyStore;

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
///
/// You get one from `Limiter::take_slot` (or a handler's `take_slot`) for work that must
/// not run more than so many at once: keep it for as long as the work runs.
#[must_use = "a slot is released when dropped"]
pub struct Slot {
    store: AnyStore,
    key: SlotKey,
    id: u64,
    in_use: u32,
    renewer: Option<tokio::task::JoinHandle<()>>,
    on_release: Option<Box<dyn FnOnce() + Send + Sync>>,
}

impl fmt::Debug for Slot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Slot")
            .field("limit", &self.key.in_flight().name())
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl Slot {
    fn new(store: AnyStore, key: SlotKey, id: u64, in_use: u32) -> Self {
        let renewer = tokio::runtime::Handle::try_current().ok().map(|rt| {
            let (store, key) = (store.clone(), key.clone());
            rt.spawn(async move {
                let every = key.in_flight().ttl() / 3;
                loop {
                    tokio::time::sleep(every).await;
                    // An error: try again next time. Gone (the lease ran out while the store
                    // could not be reached, a frozen server): the request still runs, so
                    // it takes its slot again under the same id. When the limit is full by
                    // then, it tries again each period: until a slot frees, this request
                    // is not counted (the limit is over by at most the requests whose
                    // leases ran out, and only while they run).
                    // Aborted in the middle of that take (the slot dropped), the guard
                    // releases the id once the take has landed.
                    if let Ok(false) = store.renew_slot(&key, id).await {
                        let pending = PendingTake::new(&store, &key, id);
                        let _ = store.take_slot(&key, id).await;
                        pending.settled();
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
            on_release: None,
        }
    }

    /// Runs `f` when the slot is released (as it drops, before the store is told): for a
    /// gauge of the slots a process holds.
    pub fn on_release(mut self, f: impl FnOnce() + Send + Sync + 'static) -> Self {
        self.on_release = Some(Box::new(f));
        self
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
        if let Some(f) = self.on_release.take() {
            f();
        }
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
///
/// You match on it when you take in-flight slots yourself, outside a layer (which does it
/// for you): hold the `Slot`, or answer 429 with the wait.
#[derive(Debug)]
#[non_exhaustive]
pub enum SlotAnswer {
    /// A slot: hold it while the work runs.
    Taken(Slot),
    /// Every slot is held: refuse (429).
    Full {
        /// The most in flight.
        max: u64,
        /// An estimate of when one is free (see [`Taken::retry_after`]).
        retry_after: Duration,
    },
    /// The store failed and the policy lets the request through without a slot.
    Open(FailureReason),
    /// The store failed and the policy refuses (503).
    Closed(FailureReason),
}

impl<S: Store> Limiter<S> {
    /// Takes a slot of `key` within the limiter's time budget; when the store cannot
    /// answer, `policy` decides ([`FailurePolicy::Memory`]: a slot in the fallback memory
    /// store). Slot calls keep no health state: one node's failure is that call's alone.
    pub async fn take_slot(&self, key: &SlotKey, policy: FailurePolicy) -> SlotAnswer
    where
        S: Clone + Into<AnyStore>,
    {
        let store: AnyStore = self.store().clone().into();
        let id = next_id();
        // Armed while the take is out: a caller that goes away before the answer is read
        // (a cancelled request, a reset stream) leaves a take that may land; the guard
        // releases its id once the store answers, as after a timeout.
        let pending = PendingTake::new(&store, key, id);
        let taken = tokio::time::timeout(self.timeout(), store.take_slot(key, id)).await;
        // Settled: answered, or refused before it was sent (no connection: nothing to
        // release). Otherwise sent with no answer read: the guard releases the id.
        match &taken {
            Ok(Ok(_)) => pending.settled(),
            Ok(Err(e)) if e.kind().is_retryable() => pending.settled(),
            _ => drop(pending),
        }
        let failure = match taken {
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

/// A take sent and not yet answered: dropped armed (its caller gone, no answer read, a
/// time-out, a lost connection), it releases the id by [`release_ghost`].
struct PendingTake<'a> {
    ghost: Option<(&'a AnyStore, &'a SlotKey, u64)>,
}

impl<'a> PendingTake<'a> {
    /// Borrows: nothing is cloned unless the take is abandoned.
    fn new(store: &'a AnyStore, key: &'a SlotKey, id: u64) -> Self {
        Self {
            ghost: Some((store, key, id)),
        }
    }

    /// The take's answer was read (a slot, a refusal, or a call never sent).
    fn settled(mut self) {
        self.ghost = None;
    }
}

impl Drop for PendingTake<'_> {
    fn drop(&mut self) {
        if let Some((store, key, id)) = self.ghost.take() {
            release_ghost(store.clone(), key.clone(), id);
        }
    }
}

/// After a take that may have run though nobody got its answer (no answer in time, a
/// connection lost after sending): releases the id once the store answers, so that no
/// slot stays held by nobody until its lease ends. A frozen server runs the take when it
/// resumes; the release, sent on the same connection, runs after it. Releasing an id never
/// added removes nothing. Once released, once more a moment later (a take that reached the
/// server by another connection after the first release). Gives up when the lease would
/// have ended anyway.
fn release_ghost(store: AnyStore, key: SlotKey, id: u64) {
    let Ok(rt) = tokio::runtime::Handle::try_current() else {
        return;
    };
    rt.spawn(async move {
        let ttl = key.in_flight().ttl();
        let until = tokio::time::Instant::now() + ttl;
        let mut wait = Duration::from_millis(50);
        while tokio::time::Instant::now() < until {
            if store.release_slot(&key, id).await.is_ok() {
                tokio::time::sleep((ttl / 3).min(Duration::from_secs(1))).await;
                let _ = store.release_slot(&key, id).await;
                return;
            }
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(Duration::from_secs(1));
        }
    });
}

fn answer(t: Taken, store: AnyStore, key: &SlotKey, id: u64) -> SlotAnswer {
    if t.taken {
        SlotAnswer::Taken(Slot::new(store, key.clone(), id, t.in_use))
    } else {
        SlotAnswer::Full {
            max: key.in_flight().max(),
            retry_after: t.retry_after,
        }
    }
}
