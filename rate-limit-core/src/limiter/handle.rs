//! The [`Limiter`]: a store behind a time budget, retries, a cool-down, a failure policy
//! and a fallback (see the [module docs](crate::limiter)).

use std::borrow::Cow;
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use tokio::time::Instant;

use super::health::Health;
use super::policy::{Answer, FailurePolicy, FailureReason};
use super::{
    DEFAULT_COOLDOWN, DEFAULT_QUIET_PERIOD, DEFAULT_RETRIES, DEFAULT_RETRY_DELAY, DEFAULT_TIMEOUT,
    LimiterBuilder,
};
use crate::chain::{Chain, Check};
use crate::protocol::{Decision, Domains, Reservation, Store, StoreError};
use crate::store::{AnyStore, MemoryStore};

/// A store with a time budget, retries, a cool-down and a fallback. Cheap to clone;
/// clones share everything. See the [module docs](crate::limiter).
pub struct Limiter<S = AnyStore> {
    pub(super) inner: Arc<LimiterInner<S>>,
}

impl<S> Clone for Limiter<S> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

pub(crate) struct LimiterInner<S> {
    pub(super) store: S,
    pub(super) name: Cow<'static, str>,
    pub(super) timeout: Duration,
    pub(super) retries: u32,
    pub(super) retry_delay: Duration,
    pub(super) cooldown: Duration,
    pub(super) quiet: Duration,
    pub(super) fallback: MemoryStore,
    pub(super) anchor: Instant,
    /// One health record per failure domain ([`Domains`]): a Redis Cluster node's failure
    /// cools down, falls back and logs for the keys it owns, not for every key.
    pub(super) health: Box<[Health]>,
    /// Heavy hitters tracked per limit ([`LimiterBuilder::heavy_hitters`]), or not.
    /// Whether checks feed the limits' heavy hitters.
    pub(super) top: bool,
}

impl<S> fmt::Debug for Limiter<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Limiter")
            .field("store", &self.inner.name)
            .field("timeout", &self.inner.timeout)
            .field("retries", &self.inner.retries)
            .field("cooldown", &self.inner.cooldown)
            .finish_non_exhaustive()
    }
}

impl Limiter<AnyStore> {
    /// A limiter of its own over `store`, with the default settings: a [`MemoryStore`],
    /// a Redis store, an [`AnyStore`], or a store of your own in a `BoxStore`. Clones of
    /// the limiter share it (see the [module docs](crate::limiter)). Its logs name the store
    /// ([`AnyStore::describe`]: `memory`, `redis host:port`, …).
    pub fn new(store: impl Into<AnyStore>) -> Self {
        Self::builder(store)
            .build()
            .unwrap_or_else(|_| unreachable!("the default settings are valid"))
    }

    /// A builder of a limiter over `store`, for other settings; named after the store.
    pub fn builder(store: impl Into<AnyStore>) -> LimiterBuilder<AnyStore> {
        let store = store.into();
        let name = store.describe();
        Self::builder_with_store(store).name(name)
    }

    /// The limiter of this store with the default settings, named after the store
    /// ([`AnyStore::describe`]: `memory`, `redis host:port`, …): the same one for every clone of the store, for as
    /// long as one is alive. See the [module docs](crate::limiter).
    pub fn shared(store: impl Into<AnyStore>) -> Self {
        type SharedLimiters = Vec<(usize, Weak<LimiterInner<AnyStore>>)>;
        static REGISTRY: Mutex<SharedLimiters> = Mutex::new(Vec::new());
        let store = store.into();
        let (id, name) = store.identity();
        let mut reg = REGISTRY.lock().unwrap_or_else(PoisonError::into_inner);
        // A live entry holds the store, so its address cannot have been reused.
        if let Some(inner) = reg
            .iter()
            .find(|(i, _)| *i == id)
            .and_then(|(_, w)| w.upgrade())
        {
            return Self { inner };
        }
        reg.retain(|(_, w)| w.strong_count() > 0);
        let limiter = Self::builder_with_store(store)
            .name(name)
            .build()
            .unwrap_or_else(|_| unreachable!("the default settings are valid"));
        reg.push((id, Arc::downgrade(&limiter.inner)));
        limiter
    }
}

impl<S: Store> Limiter<S> {
    /// A limiter with the default settings over a store of a static type (a store of
    /// your own, unboxed). [`Limiter::new`] takes any store as an [`AnyStore`].
    pub fn with_store(store: S) -> Self {
        Self::builder_with_store(store)
            .build()
            .unwrap_or_else(|_| unreachable!("the default settings are valid"))
    }

    /// A builder over a store of a static type. [`Limiter::builder`] takes any store as an
    /// [`AnyStore`].
    pub fn builder_with_store(store: S) -> LimiterBuilder<S> {
        LimiterBuilder {
            store,
            name: Cow::Borrowed("store"),
            timeout: DEFAULT_TIMEOUT,
            retries: DEFAULT_RETRIES,
            retry_delay: DEFAULT_RETRY_DELAY,
            cooldown: DEFAULT_COOLDOWN,
            quiet: DEFAULT_QUIET_PERIOD,
            fallback: None,
            top: false,
        }
    }

    /// The store.
    pub fn store(&self) -> &S {
        &self.inner.store
    }

    /// The in-process fallback store.
    pub fn fallback(&self) -> &MemoryStore {
        &self.inner.fallback
    }

    /// The store's name in logs.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The time budget of one call.
    pub fn timeout(&self) -> Duration {
        self.inner.timeout
    }

    /// Checks a chain; when the store cannot answer, `policy` decides.
    ///
    /// What the store answers from memory comes first ([`Store::try_check`]): a key the
    /// Redis store's deny cache holds stays refused while Redis is down or cooling down,
    /// whatever `policy` says — that refusal is still the true answer.
    pub async fn check(&self, chain: &Chain, policy: FailurePolicy) -> Answer {
        // The chain's failure domains are computed once (on a Cluster: a slot per key).
        match self.answer_from_memory(chain, policy) {
            Ok(answer) => answer,
            Err(domains) => self.ask(chain, policy, Ask(domains)).await,
        }
    }

    /// [`try_check`](Self::try_check), or, when the store must be asked, what
    /// [`ask`](Self::ask) needs to ask it: a caller that tries first and then waits passes
    /// the memory front (the deny cache, leased slices, the cool-down) once, not twice.
    #[inline]
    pub fn try_check_or_ask(&self, chain: &Chain, policy: FailurePolicy) -> Result<Answer, Ask> {
        self.answer_from_memory(chain, policy).map_err(Ask)
    }

    /// Asks the store about a chain [`try_check_or_ask`](Self::try_check_or_ask) could not
    /// answer from memory; when the store cannot answer, `policy` decides.
    pub async fn ask(&self, chain: &Chain, policy: FailurePolicy, ask: Ask) -> Answer {
        let answer = match self.call(ask.0, || self.inner.store.check(chain)).await {
            Ok(decision) => Answer::Store(decision),
            Err(reason) => self.failed_answer(chain, policy, reason),
        };
        self.observe(chain, &answer);
        with_delays(answer, chain)
    }

    /// Checks a chain without waiting, when that needs no I/O: the store answers from
    /// memory ([`Store::try_check`]: the memory store always; the Redis store's deny cache),
    /// or the store is cooling down after a failure and `policy` answers. `None`: nothing
    /// was charged; call [`check`](Self::check).
    ///
    /// The same answer `check` would give, without a future: the layer's fast path.
    pub fn try_check(&self, chain: &Chain, policy: FailurePolicy) -> Option<Answer> {
        self.answer_from_memory(chain, policy).ok()
    }

    /// [`try_check`](Self::try_check), or the chain's failure domains when the store must
    /// be asked.
    #[inline]
    fn answer_from_memory(&self, chain: &Chain, policy: FailurePolicy) -> Result<Answer, Domains> {
        // An answer from memory says nothing of the store's health: no recovery is noted.
        if let Some(decision) = self.inner.store.try_check(chain) {
            let mut answer = Answer::Store(decision);
            self.observe(chain, &answer);
            set_delays(&mut answer, chain);
            return Ok(answer);
        }
        let domains = self.inner.store.failure_domains(chain);
        match self.cooling_down(domains) {
            Some(reason) => {
                let answer = self.failed_answer(chain, policy, reason);
                self.observe(chain, &answer);
                Ok(with_delays(answer, chain))
            }
            None => Err(domains),
        }
    }

    /// Feeds the heavy hitters, when tracked: each check of an admitted chain its cost
    /// used, the refusing check one refusal. A store that could not answer feeds nothing.
    #[inline]
    fn observe(&self, chain: &Chain, answer: &Answer) {
        let (true, Some(d)) = (self.inner.top, answer.decision()) else {
            return;
        };
        let now = Instant::now().into_std();
        let checks = chain.checks();
        match d.denied_by() {
            None => {
                for c in checks {
                    let k = c.key();
                    let who = (k.digest()[0], k.principal());
                    k.limit().observe(who, (c.cost(), 0), now);
                }
            }
            Some((i, _)) => {
                if let Some(c) = checks.get(i) {
                    let k = c.key();
                    k.limit()
                        .observe((k.digest()[0], k.principal()), (0, 1), now);
                }
            }
        }
    }

    fn failed_answer(
        &self,
        chain: &Chain,
        policy: FailurePolicy,
        failure: FailureReason,
    ) -> Answer {
        match policy {
            FailurePolicy::Closed => Answer::Closed {
                reason: failure,
                retry_after: self.closed_retry_after(),
            },
            FailurePolicy::Open => Answer::Open(failure),
            FailurePolicy::Memory => Answer::Memory {
                decision: self.inner.fallback.check_now(chain),
                reason: failure,
            },
        }
    }

    /// Charges a cost known only after the work (see [`Store::charge`]). With
    /// [`FailurePolicy::Memory`] a failed store's charge goes to the fallback; otherwise
    /// the failure is returned (an open policy may ignore it).
    pub async fn charge(
        &self,
        check: &Check,
        policy: FailurePolicy,
    ) -> Result<Decision, FailureReason> {
        let mut one = Chain::new();
        one.push(check.clone());
        let domains = self.inner.store.failure_domains(&one);
        let failure = match self.cooling_down(domains) {
            Some(reason) => reason,
            None => match self.call(domains, || self.inner.store.charge(check)).await {
                Ok(d) => return Ok(d),
                Err(reason) => reason,
            },
        };
        match policy {
            FailurePolicy::Memory => Ok(self.inner.fallback.charge_now(check)),
            _ => Err(failure),
        }
    }

    /// Gives back what an admitted chain reserved (see [`Answer::reservation`]): the
    /// request's outcome does not count. One more store call (the Redis store: one
    /// command per slot group; the memory store: none). Units charged in the fallback
    /// store go back there.
    ///
    /// A store that cannot be reached keeps the units counted until their window ends
    /// (the error says why): never more than was reserved, so a limit counting failures
    /// errs towards refusing, never towards letting guesses through.
    pub async fn give_back(&self, reservation: Reservation) -> Result<(), FailureReason> {
        if reservation.is_empty() {
            return Ok(());
        }
        if reservation.in_fallback() {
            self.inner.fallback.give_back_now(&reservation);
            return Ok(());
        }
        let domains = self.inner.store.failure_domains(&reservation.chain());
        if let Some(reason) = self.cooling_down(domains) {
            return Err(reason);
        }
        let r = &reservation;
        self.call(domains, || self.inner.store.give_back(r)).await
    }

    fn closed_retry_after(&self) -> Duration {
        let secs =
            self.inner.cooldown.as_secs() + u64::from(self.inner.cooldown.subsec_nanos() > 0);
        Duration::from_secs(secs.max(1))
    }

    /// One store call inside the time budget, with the retries the module docs allow.
    async fn call<T, F, Fut>(&self, domains: Domains, mut attempt: F) -> Result<T, FailureReason>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, StoreError>>,
    {
        let inner = &self.inner;
        // Read the clock only when a call has to wait (never, on the memory store).
        let mut deadline = None;
        let mut deadline = || *deadline.get_or_insert_with(|| Instant::now() + inner.timeout);
        let mut retries = 0;
        loop {
            // A store that answers at once (the memory store always does) needs no timer:
            // poll once, and arm the time budget only if it has to wait.
            let mut fut = std::pin::pin!(attempt());
            let first = fut
                .as_mut()
                .poll(&mut std::task::Context::from_waker(std::task::Waker::noop()));
            let outcome = match first {
                std::task::Poll::Ready(r) => Ok(r),
                std::task::Poll::Pending => tokio::time::timeout_at(deadline(), fut).await,
            };
            match outcome {
                Ok(Ok(v)) => {
                    self.recovered(domains);
                    return Ok(v);
                }
                Ok(Err(e)) => {
                    let time_left = Instant::now() + inner.retry_delay < deadline();
                    if e.kind().is_retryable() && retries < inner.retries && time_left {
                        retries += 1;
                        tokio::time::sleep(inner.retry_delay).await;
                        continue;
                    }
                    let reason = FailureReason::of(e.kind());
                    // The domain that failed, when the store knows it; else all the chain's.
                    let failed = e.domain().map_or(domains, Domains::of);
                    self.failed(failed, reason, Some(&e));
                    return Err(reason);
                }
                Err(_) => {
                    self.failed(domains, FailureReason::TimedOut, None);
                    return Err(FailureReason::TimedOut);
                }
            }
        }
    }
}

/// A chain the limiter could not answer from memory: what [`Limiter::ask`] needs to ask
/// the store (the chain's failure domains, computed once).
#[derive(Debug, Clone, Copy)]
pub struct Ask(Domains);

/// Sets the delays of an admitted answer's decisions from their limits' [`Delay`]s and
/// the counts the store answered: no extra call.
///
/// [`Delay`]: crate::Delay
fn with_delays(mut answer: Answer, chain: &Chain) -> Answer {
    set_delays(&mut answer, chain);
    answer
}

/// Sets the delays of an allowed answer's delayed limits, in place (the answer is not
/// moved: the layer's fast path passes here on every request).
#[inline]
fn set_delays(answer: &mut Answer, chain: &Chain) {
    let checks = chain.checks();
    if !answer.is_allowed() || checks.iter().all(|c| c.key().limit().delay().is_none()) {
        return;
    }
    let (Answer::Store(d) | Answer::Memory { decision: d, .. }) = answer else {
        return;
    };
    for (x, c) in d.decisions_mut().iter_mut().zip(checks) {
        if let Some(delay) = c.key().limit().delay() {
            let used = x.limit().saturating_sub(x.remaining());
            *x = x.with_delay(delay.for_count(used));
        }
    }
}
