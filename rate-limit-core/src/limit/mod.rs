//! Limits: a name, an algorithm and its parameters, validated at construction.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::error::{ConfigError, ConfigErrorKind};
use crate::name::validate_name;

mod aimd;
#[cfg(feature = "calendar")]
pub(crate) mod calendar;
mod delay;
mod in_flight;
mod live;
mod params;
mod validate;

pub use aimd::Aimd;
pub use delay::{Delay, Growth};
pub use in_flight::{InFlight, SlotKey};

use live::LimitInner;
pub use params::AlgorithmKind;
pub(crate) use params::Params;
use validate::{micros, quota, window_params};

/// The longest window or refill span a limit may have: ten years of 366 days, in µs.
///
/// It keeps every timestamp the algorithms compute below 2⁶⁰ µs, and far below 2⁵³ for
/// the next decades, so Lua's doubles stay exact.
pub(crate) const MAX_SPAN: Duration = Duration::from_secs(10 * 366 * 86_400);
pub(crate) const MAX_SPAN_US: u64 = 10 * 366 * 86_400 * 1_000_000;
/// The largest `quota × window (µs)` of an approximate sliding window: its weighted sums
/// stay exact in every store, Lua's doubles included (2⁵²).
pub(crate) const MAX_SLIDING_PRODUCT: u64 = 1 << 52;
/// The shortest window or refill period: one millisecond.
pub(crate) const MIN_WINDOW: Duration = Duration::from_millis(1);
/// The longest a leased slice of a limit's quota lives (see [`Limit::leased`]): it bounds
/// how far a token bucket's or sliding window's units can move in time.
pub(crate) const MAX_LEASE_LIFETIME: Duration = Duration::from_millis(100);
/// Window limits admit at most this many units per microsecond (10⁹ per second).
const MAX_UNITS_PER_US: u64 = 1_000;

/// The most refusals a ban may wait for ([`Limit::ban`]): its state keeps one timestamp
/// per refusal counted.
pub(crate) const MAX_BAN_AFTER: u64 = 1_000;

/// A named limit: an algorithm with its quota and window. Cheap to clone.
///
/// Build one with [`fixed_window`](Limit::fixed_window), [`sliding_window`](Limit::sliding_window),
/// [`sliding_log`](Limit::sliding_log) or [`token_bucket`](Limit::token_bucket); each
/// validates its input and returns a [`ConfigError`] with a stable code.
///
/// ```
/// use ratekeeper_core::Limit;
/// use std::time::Duration;
///
/// let poll = Limit::sliding_window("poll", 20, Duration::from_secs(60))?;
/// let host = Limit::token_bucket("host", 10, 2, Duration::from_secs(1))?;
/// assert_eq!(poll.quota(), 20);
/// assert_eq!(host.window(), Duration::from_secs(5)); // 10 tokens at 2 per second
/// # Ok::<(), ratekeeper_core::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct Limit {
    inner: Arc<LimitInner>,
}

impl fmt::Debug for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Limit")
            .field("name", &self.inner.name)
            .field("params", &self.inner.load())
            .finish()
    }
}

/// Two limits are equal when they were made alike: the same name, algorithm and
/// parameters as made, the same lease and delay. What changes while a limit runs (a quota
/// set by [`Limit::set_quota`], per-principal overrides, the heavy hitters seen) is not
/// compared: a limit equals what was written for it, and stays equal to it while it runs.
/// Whether two handles are clones of one limit (one live state) is `Limit::same`.
impl PartialEq for Limit {
    fn eq(&self, other: &Self) -> bool {
        self.made_alike(other)
    }
}

impl Eq for Limit {}

impl Limit {
    /// The longest window, interval or ban: ten years (366-day years).
    pub const MAX_SPAN: Duration = MAX_SPAN;
    /// The largest quota × window (µs) of a sliding window: its weighted count stays exact
    /// in a double.
    pub const MAX_SLIDING_PRODUCT: u64 = MAX_SLIDING_PRODUCT;
    /// The shortest window: one millisecond.
    pub const MIN_WINDOW: Duration = MIN_WINDOW;
    /// The longest lifetime of a leased slice ([`Limit::leased`]).
    pub const MAX_LEASE_LIFETIME: Duration = MAX_LEASE_LIFETIME;
    /// The most refusals a ban may wait for ([`Limit::ban`]).
    pub const MAX_BAN_AFTER: u64 = MAX_BAN_AFTER;
    /// The longest name of a limit, in bytes (letters, digits, `-`, `_`, `.`).
    pub const MAX_NAME_LEN: usize = crate::name::MAX_NAME_LEN;

    /// Whether `self` and `other` are clones of one limit: one live state (run-time
    /// quota, overrides, heavy hitters), shared.
    pub fn same(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    fn build(name: &str, params: Params) -> Self {
        Self {
            inner: Arc::new(LimitInner::new(name, params)),
        }
    }

    /// A fixed window: at most `quota` units per epoch-aligned `window` (a day is the UTC
    /// day, an hour starts on the hour). A burst across a boundary may see up to twice the
    /// quota in a short time.
    pub fn fixed_window(name: &str, quota: u64, window: Duration) -> Result<Self, ConfigError> {
        let (quota, window) = window_params(name, quota, window)?;
        Ok(Self::build(name, Params::Fixed { quota, window }))
    }

    /// The approximate sliding window: the count of the current epoch-aligned window plus
    /// the previous window's count weighted by how much of it still overlaps the last
    /// `window`. Never more than `quota` per aligned window; see the crate docs for the bound
    /// over a rolling interval.
    ///
    /// `quota × window` in microseconds must not exceed [`Limit::MAX_SLIDING_PRODUCT`] (2⁵²):
    /// about 75 million per minute, 1.25 million per hour, 52 thousand per day. Larger
    /// quotas fit a fixed window or a token bucket (`limit.overflow` otherwise).
    pub fn sliding_window(name: &str, quota: u64, window: Duration) -> Result<Self, ConfigError> {
        let (quota, window) = window_params(name, quota, window)?;
        if quota.saturating_mul(window) > MAX_SLIDING_PRODUCT {
            return Err(ConfigError::new(
                ConfigErrorKind::Overflow,
                "quota",
                format!(
                    "a sliding window allows at most {} per {window} µs; use a fixed window or a token bucket",
                    MAX_SLIDING_PRODUCT / window
                ),
            ));
        }
        Ok(Self::build(name, Params::Sliding { quota, window }))
    }

    /// The exact sliding window: a log of timestamps; never more than `quota` units in any
    /// interval of length `window`. Each key keeps up to `quota` entries, so keep the
    /// quota small (sign-in attempts, password resets).
    pub fn sliding_log(name: &str, quota: u64, window: Duration) -> Result<Self, ConfigError> {
        let (quota, window) = window_params(name, quota, window)?;
        Ok(Self::build(name, Params::Log { quota, window }))
    }

    /// A token bucket holding up to `capacity` tokens, refilled with `refill` tokens every
    /// `period` (continuously: one token every `period / refill`, rounded up to the
    /// microsecond, so the rate is never above the one configured).
    pub fn token_bucket(
        name: &str,
        capacity: u64,
        refill: u64,
        period: Duration,
    ) -> Result<Self, ConfigError> {
        validate_name(name)?;
        let capacity = quota("capacity", capacity)?;
        let refill = quota("refill", refill)?;
        let period = micros("period", period)?;
        if refill > period {
            return Err(ConfigError::new(
                ConfigErrorKind::RateTooHigh,
                "refill",
                "a token bucket refills at most one token per microsecond",
            ));
        }
        let interval = period.div_ceil(refill);
        match interval.checked_mul(capacity) {
            Some(span) if span <= MAX_SPAN_US => {}
            _ => {
                return Err(ConfigError::new(
                    ConfigErrorKind::Overflow,
                    "capacity",
                    "refilling the whole bucket would take longer than MAX_SPAN",
                ));
            }
        }
        Ok(Self::build(name, Params::Bucket { capacity, interval }))
    }

    /// A ban (fail2ban for HTTP): when the checks after it in a chain refuse its principal
    /// `after` times within `within`, the principal is banned for `duration`. A banned
    /// principal is refused by the ban itself, at once, with the ban's remaining time as
    /// the retry-after, and nothing else in the chain is read or counted.
    ///
    /// - **What counts**: a refusal of the chain by a check *after* the ban, of the *same
    ///   principal* (a client IP refused by a per-IP limit), counted by the store in the
    ///   same atomic call that refused — one round trip, on every instance alike. A chain
    ///   refused before the ban, or by another principal's limit, counts nothing. To ban on
    ///   an outcome (failed sign-ins), count the outcome with a limit
    ///   (`Rule::count_when` in `ratekeeper-tower`) and put the ban before it: the limit
    ///   refuses once the failures are over its quota, and each refusal counts towards the
    ///   ban. [`Store::charge`](crate::Store::charge) on a ban's key counts its cost in
    ///   events directly.
    /// - **Exact**: the last `after` refusals are kept with their times, so any `within`
    ///   holding `after` refusals bans; the state is a timestamp per refusal counted (at
    ///   most [`Limit::MAX_BAN_AFTER`]), and expires with the ban or the window.
    /// - **Only principals the requester controls**: a client IP or an API key. A ban of
    ///   an account anyone can name (a user name on a sign-in form) would let anyone lock
    ///   its owner out ([`PrincipalKind::may_be_banned`](crate::PrincipalKind::may_be_banned),
    ///   [`Chain::unowned_ban`](crate::Chain::unowned_ban)); the Tower layer and the axum
    ///   crate's in-handler limiter answer such a chain with a 500.
    ///
    /// `limit.quota_zero` for `after` of 0, `limit.overflow` above [`Limit::MAX_BAN_AFTER`];
    /// `within` and `duration` are windows (`limit.window_invalid`, `limit.overflow`).
    ///
    /// ```
    /// use ratekeeper_core::{Chain, Limit, MemoryStore, Principal, Store};
    /// use std::time::Duration;
    ///
    /// # tokio::runtime::Builder::new_current_thread().build()?.block_on(async {
    /// let s = Duration::from_secs;
    /// // Refused 3 times within 10 minutes by the per-IP limit: banned for an hour.
    /// let ban = Limit::ban("ip-ban", 3, s(600), s(3_600))?;
    /// let per_ip = Limit::fixed_window("per-ip", 1, s(60))?;
    /// let ip = Principal::ip("203.0.113.9".parse()?);
    /// let chain = Chain::new().check(&ban, ip.clone()).check(&per_ip, ip);
    /// let store = MemoryStore::new();
    /// assert!(store.check(&chain).await?.is_allowed());
    /// for _ in 0..3 {
    ///     let refused = store.check(&chain).await?;
    ///     assert_eq!(refused.denied_by().unwrap().0, 1); // the per-IP limit refused
    /// }
    /// let banned = store.check(&chain).await?;
    /// let (by, decision) = banned.denied_by().unwrap();
    /// assert!(by == 0 && decision.is_ban());
    /// assert!(decision.retry_after().unwrap() > s(3_599));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn ban(
        name: &str,
        after: u64,
        within: Duration,
        duration: Duration,
    ) -> Result<Self, ConfigError> {
        validate_name(name)?;
        let after = quota("after", after)?;
        if after > MAX_BAN_AFTER {
            return Err(ConfigError::new(
                ConfigErrorKind::Overflow,
                "after",
                format!("a ban counts at most {MAX_BAN_AFTER} refusals, got {after}"),
            ));
        }
        let within = micros("within", within)?;
        let ban = micros("duration", duration)?;
        Ok(Self::build(name, Params::Ban { after, within, ban }))
    }

    /// For a ban ([`Limit::ban`]), how long it bans.
    pub fn ban_duration(&self) -> Option<Duration> {
        match self.params() {
            Params::Ban { ban, .. } => Some(Duration::from_micros(ban)),
            _ => None,
        }
    }

    /// The limit's name; keys are namespaced by it.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// A 16-bit class of the name (the same for every limit of that name): the memory
    /// store keeps each class's keys apart, so traffic on one limit never evicts
    /// another's state.
    pub(crate) fn class(&self) -> u16 {
        self.inner.class
    }

    /// The keyed hasher of this limit's keys, its name already written.
    #[inline]
    pub(crate) fn key_seed(&self) -> [u64; 2] {
        self.inner.key_seed
    }

    pub(crate) fn principal_hasher(&self) -> siphasher::sip128::SipHasher13 {
        self.inner.principal_hasher
    }

    /// The algorithm.
    pub fn kind(&self) -> AlgorithmKind {
        self.inner.kind
    }

    /// Whether this limit may count `principal`: any limit any principal, but a ban only
    /// one the requester controls ([`PrincipalKind::may_be_banned`](crate::PrincipalKind::may_be_banned)).
    pub fn may_name(&self, principal: &crate::principal::Principal) -> bool {
        self.kind() != AlgorithmKind::Ban || principal.kind().may_be_banned()
    }

    /// The quota per window, or the bucket's capacity.
    pub fn quota(&self) -> u64 {
        match self.params() {
            Params::Fixed { quota, .. }
            | Params::Sliding { quota, .. }
            | Params::Log { quota, .. } => quota,
            Params::Bucket { capacity, .. } => capacity,
            Params::Ban { after, .. } => after,
            Params::Calendar { quota, .. } => quota,
            #[cfg(feature = "calendar")]
            Params::Period { quota, .. } => quota,
        }
    }

    /// The window; for a token bucket, the time an empty bucket takes to refill.
    pub fn window(&self) -> Duration {
        Duration::from_micros(self.window_micros())
    }

    pub(crate) fn window_micros(&self) -> u64 {
        match self.params() {
            Params::Fixed { window, .. }
            | Params::Sliding { window, .. }
            | Params::Log { window, .. } => window,
            Params::Bucket { capacity, interval } => capacity * interval,
            Params::Ban { within, .. } => within,
            Params::Calendar { length, .. } => length,
            #[cfg(feature = "calendar")]
            Params::Period { start, end, .. } => end.saturating_sub(start),
        }
    }

    pub(crate) fn params(&self) -> Params {
        self.inner.load()
    }

    /// Lets a store that shares this limit among processes (the Redis store) hand out
    /// **leases**: a process takes a slice of up to `max_slice` units of a key's quota in
    /// one atomic call and spends it locally, without a round trip, for at most `lifetime`
    /// (1 ms to [`Limit::MAX_LEASE_LIFETIME`], 100 ms). Meant for hot keys — a global budget, a big
    /// tenant, a shared IP — that every request touches. The in-memory store is local
    /// already and ignores it.
    ///
    /// What a lease changes, by algorithm (the Redis store's docs, `store::redis`,
    /// have the details and the measured figures):
    /// - **Fixed window**: a slice ends with its window at the latest, so what every process
    ///   admits together never exceeds the quota.
    /// - **Token bucket, sliding window**: a unit taken at *t* and spent at *t + Δ* moves
    ///   that request in time by Δ ≤ `lifetime`, so a burst may exceed the limit by at most
    ///   the rate × `lifetime` (100 per second with a 50 ms lifetime: 5 more).
    /// - Slices shrink as a key's quota runs low (a process takes at most a quarter of what
    ///   is left), down to plain checking when little is left; what a slice did not use goes
    ///   back when it ends.
    /// - Slices follow the key's heat: a key earns one by being checked 4 times within one
    ///   `lifetime`; the first is 2 units, doubling each time a slice runs under half within its
    ///   lifetime (it is topped up then, in the background, before it runs dry) and halving
    ///   when one ends unused, up to `max_slice`. Leasing a limit with many quiet keys (a
    ///   per-tenant limit with a few big tenants) costs the quiet keys nothing. A good
    ///   `max_slice` is what one process admits on the key in 10–20 ms at its peak
    ///   (50 000 requests per second: 500–1 000).
    ///
    /// `max_slice` must be between 1 and the quota (1: no lease, every check goes to the
    /// store), and the limit must not be a sliding log (exact by design):
    /// `limit.lease_invalid` otherwise.
    ///
    /// The Redis store's deny cache never holds a leased key's refusal (units given back
    /// can undo it before its retry-after), so a flood of refusals on a leased key costs a
    /// call per batch of them rather than one per retry-after period.
    ///
    /// ```
    /// use ratekeeper_core::Limit;
    /// use std::time::Duration;
    ///
    /// let everyone = Limit::fixed_window("everyone", 100_000, Duration::from_secs(1))?
    ///     .leased(100, Duration::from_millis(50))?;
    /// assert_eq!(everyone.lease(), Some((100, Duration::from_millis(50))));
    /// # Ok::<(), ratekeeper_core::ConfigError>(())
    /// ```
    pub fn leased(self, max_slice: u64, lifetime: Duration) -> Result<Self, ConfigError> {
        let invalid = |field, detail: String| {
            Err(ConfigError::new(
                ConfigErrorKind::LeaseInvalid,
                field,
                detail,
            ))
        };
        if matches!(
            self.kind(),
            AlgorithmKind::SlidingLog | AlgorithmKind::Ban | AlgorithmKind::Calendar
        ) {
            return invalid(
                "lease",
                "a sliding log, a ban or a calendar quota is exact by design and cannot be leased"
                    .into(),
            );
        }
        if self.delay().is_some() {
            return invalid(
                "lease",
                "a delayed limit reads the exact count and cannot be leased".into(),
            );
        }
        if max_slice == 0 || max_slice > self.quota() {
            return invalid(
                "lease.max_slice",
                format!(
                    "must be between 1 and the quota ({}), got {max_slice}",
                    self.quota()
                ),
            );
        }
        if lifetime < MIN_WINDOW || lifetime > MAX_LEASE_LIFETIME {
            return invalid(
                "lease.lifetime",
                format!("must be between 1 ms and {MAX_LEASE_LIFETIME:?}, got {lifetime:?}"),
            );
        }
        let us = u64::try_from(lifetime.as_micros()).unwrap_or(u64::MAX);
        // A slice of one unit is a plain check: no lease.
        let max_slice = if max_slice == 1 { 0 } else { max_slice };
        self.inner.lease_slice.store(max_slice, Ordering::Relaxed);
        self.inner.lease_us.store(us, Ordering::Relaxed);
        Ok(self)
    }

    /// Holds requests over `delay.after()` units of a window instead of refusing them
    /// (see [`Delay`]); the quota stays the hard ceiling, past which requests are refused.
    /// The decisions of this limit then carry [`Decision::delay`](crate::Decision::delay),
    /// set by the [`Limiter`](crate::Limiter) from the store's one answer (no extra call),
    /// and the layer and the in-handler limiter hold the request for it
    /// ([`Holding`](crate::limiter::Holding)).
    ///
    /// `limit.delay_invalid` when `after` is not under the quota, or the limit is leased (a
    /// delay reads the exact count; a slice's is approximate).
    ///
    /// ```
    /// use ratekeeper_core::{Delay, Limit};
    /// use std::time::Duration;
    ///
    /// let s = Duration::from_secs;
    /// // Failed sign-ins per account: 5 at once, then held 1 s, 2 s, 4 s, then 8 s each.
    /// let account = Limit::sliding_log("sign-in-account", 1_000, s(900))?
    ///     .delayed(Delay::doubling(5, s(1), s(8))?)?;
    /// assert_eq!(account.delay().unwrap().after(), 5);
    /// # Ok::<(), ratekeeper_core::ConfigError>(())
    /// ```
    pub fn delayed(self, delay: Delay) -> Result<Self, ConfigError> {
        if delay.after() >= self.quota()
            || self.lease().is_some()
            || matches!(self.kind(), AlgorithmKind::Ban | AlgorithmKind::Calendar)
        {
            return Err(ConfigError::new(
                ConfigErrorKind::DelayInvalid,
                "delay.after",
                format!(
                    "the threshold must be under the quota ({}), the limit not leased, a ban or a calendar quota, got {}",
                    self.quota(),
                    delay.after()
                ),
            ));
        }
        for (slot, word) in self.inner.delay.iter().zip(delay.pack()) {
            slot.store(word, Ordering::Relaxed);
        }
        Ok(self)
    }

    /// The delay set by [`delayed`](Self::delayed).
    pub fn delay(&self) -> Option<Delay> {
        let tail = self.inner.delay[2].load(Ordering::Relaxed);
        if tail == 0 {
            return None;
        }
        Delay::unpack([
            self.inner.delay[0].load(Ordering::Relaxed),
            self.inner.delay[1].load(Ordering::Relaxed),
            tail,
        ])
    }

    /// The lease set by [`leased`](Self::leased): the largest slice and its lifetime.
    pub fn lease(&self) -> Option<(u64, Duration)> {
        let slice = self.inner.lease_slice.load(Ordering::Relaxed);
        (slice > 0).then(|| {
            (
                slice,
                Duration::from_micros(self.inner.lease_us.load(Ordering::Relaxed)),
            )
        })
    }
}

#[cfg(test)]
mod tests;
