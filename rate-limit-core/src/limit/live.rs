//! A limit's live parameters: a sequence lock every clone reads, runtime changes, and
//! per-principal overrides.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering, fence};
use std::sync::{Mutex, PoisonError, RwLock};
use std::time::Duration;

use super::{AlgorithmKind, Limit, Params};
use crate::error::{ConfigError, ConfigErrorKind};
use crate::principal::Principal;

pub(super) struct LimitInner {
    pub(super) name: Box<str>,
    /// A 16-bit class from the name: the memory store gives each class its own room.
    pub(super) class: u16,
    pub(super) kind: AlgorithmKind,
    /// The parameters it was made with (what equality compares; run-time changes aside).
    pub(super) made: Params,
    /// A sequence lock over `a` and `b`: odd while a writer is between its stores.
    seq: AtomicU64,
    a: AtomicU64,
    b: AtomicU64,
    writer: Mutex<()>,
    /// Per-principal parameters (admin overrides); the flag spares the lock when empty.
    has_overrides: AtomicBool,
    overrides: RwLock<HashMap<Box<str>, Params>>,
    /// The lease (see [`Limit::leased`]): the largest slice and its lifetime in µs; 0: none.
    pub(super) lease_slice: AtomicU64,
    pub(super) lease_us: AtomicU64,
    /// The delay (see [`Limit::delayed`]), packed; all zero: none.
    pub(super) delay: [AtomicU64; 3],
    /// This limit's part of its keys' digests ([`crate::digest::limit_seed`]).
    pub(super) key_seed: [u64; 2],
    /// The principals' hasher ([`crate::digest::principal_hasher`]), kept here for speed.
    pub(super) principal_hasher: siphasher::sip128::SipHasher13,
    /// Its heavy hitters, once a limiter that tracks them has counted it.
    top: std::sync::OnceLock<crate::top::Top>,
    /// How its heavy hitters are tracked (read once, when `top` starts).
    top_settings: Mutex<crate::top::TopSettings>,
    /// A calendar quota's calendar (see `Limit::calendar`).
    #[cfg(feature = "calendar")]
    pub(super) calendar: Option<super::calendar::Calendar>,
    /// Whether counting it in memory was warned of (once a process).
    #[cfg(feature = "calendar")]
    in_memory_warned: AtomicBool,
}

impl LimitInner {
    pub(super) fn load(&self) -> Params {
        loop {
            let s1 = self.seq.load(Ordering::Acquire);
            let a = self.a.load(Ordering::Relaxed);
            let b = self.b.load(Ordering::Relaxed);
            fence(Ordering::Acquire);
            let s2 = self.seq.load(Ordering::Relaxed);
            if s1 == s2 && s1.is_multiple_of(2) {
                return Params::from_parts(self.kind, a, b);
            }
            std::hint::spin_loop();
        }
    }

    fn store(&self, p: Params) {
        let _one_writer = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        let (_, a, b) = p.parts();
        let s = self.seq.load(Ordering::Relaxed);
        self.seq.store(s + 1, Ordering::Relaxed);
        fence(Ordering::Release);
        self.a.store(a, Ordering::Relaxed);
        self.b.store(b, Ordering::Relaxed);
        self.seq.store(s + 2, Ordering::Release);
    }
}

impl LimitInner {
    pub(super) fn new(name: &str, params: Params) -> Self {
        let (kind, a, b) = params.parts();
        let mut h = std::hash::DefaultHasher::new();
        std::hash::Hasher::write(&mut h, name.as_bytes());
        #[allow(clippy::cast_possible_truncation)]
        let class = std::hash::Hasher::finish(&h) as u16;
        Self {
            name: name.into(),
            class,
            kind,
            made: params,
            seq: AtomicU64::new(0),
            a: AtomicU64::new(a),
            b: AtomicU64::new(b),
            writer: Mutex::new(()),
            has_overrides: AtomicBool::new(false),
            overrides: RwLock::new(HashMap::new()),
            lease_slice: AtomicU64::new(0),
            lease_us: AtomicU64::new(0),
            delay: [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)],
            key_seed: crate::digest::limit_seed(name),
            principal_hasher: crate::digest::principal_hasher(),
            top: std::sync::OnceLock::new(),
            top_settings: Mutex::new(crate::top::TopSettings::default()),
            #[cfg(feature = "calendar")]
            calendar: None,
            #[cfg(feature = "calendar")]
            in_memory_warned: AtomicBool::new(false),
        }
    }
}

impl Limit {
    /// The `n` principals that used this limit the most, and the `n` it refused the most,
    /// in this process over the recent window (see [`crate::top`]); `None` until a
    /// limiter that tracks them ([`LimiterBuilder::heavy_hitters`](crate::limiter::LimiterBuilder::heavy_hitters))
    /// has checked it.
    pub fn heavy_hitters(&self, n: usize) -> Option<crate::top::HeavyHitters> {
        let now = tokio::time::Instant::now().into_std();
        self.inner.top.get().map(|t| t.report(n, now))
    }

    /// How this limit's heavy hitters are tracked, when a limiter that tracks them
    /// ([`LimiterBuilder::heavy_hitters`](crate::limiter::LimiterBuilder::heavy_hitters))
    /// checks it (default [`TopSettings::default`](crate::top::TopSettings::default)): the
    /// settings are the limit's, so every limiter that checks it counts into one sketch of
    /// one shape. `limit.top_settings_late` once its heavy hitters are being tracked (a
    /// limiter checked it already): set them where the limit is made.
    ///
    /// ```
    /// use ratekeeper_core::Limit;
    /// use ratekeeper_core::top::TopSettings;
    /// use std::time::Duration;
    ///
    /// let poll = Limit::sliding_window("poll", 20, Duration::from_secs(60))?
    ///     .heavy_hitter_settings(TopSettings::new(512, Duration::from_secs(600)))?;
    /// # let _ = poll;
    /// # Ok::<(), ratekeeper_core::ConfigError>(())
    /// ```
    pub fn heavy_hitter_settings(
        self,
        settings: crate::top::TopSettings,
    ) -> Result<Self, ConfigError> {
        let late = {
            let mut current = self
                .inner
                .top_settings
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let late = self.inner.top.get().is_some() && *current != settings;
            if !late {
                *current = settings;
            }
            late
        };
        if late {
            return Err(ConfigError::new(
                ConfigErrorKind::TopSettingsLate,
                self.name().to_owned(),
                "its heavy hitters are tracked already; set their settings where the limit is made",
            ));
        }
        Ok(self)
    }

    /// How this limit's heavy hitters are tracked.
    pub(crate) fn top_settings(&self) -> crate::top::TopSettings {
        *self
            .inner
            .top_settings
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Counts an admission of `used` units, or `refused` refusals, of `principal`, whose
    /// key under this limit has the digest `digest`.
    pub(crate) fn observe(
        &self,
        (digest, principal): (u64, &Principal),
        (used, refused): (u64, u64),
        now: std::time::Instant,
    ) {
        let top = self
            .inner
            .top
            .get_or_init(|| crate::top::Top::new(self.top_settings(), now));
        top.record(digest, principal, used, refused, now);
    }

    /// What equality compares: the name, the parameters the limit was made with, its lease
    /// and its delay (see the `PartialEq` impl).
    pub(super) fn made_alike(&self, other: &Self) -> bool {
        let i = (&self.inner, &other.inner);
        let same =
            |a: &AtomicU64, b: &AtomicU64| a.load(Ordering::Relaxed) == b.load(Ordering::Relaxed);
        i.0.name == i.1.name
            && i.0.made == i.1.made
            && same(&i.0.lease_slice, &i.1.lease_slice)
            && same(&i.0.lease_us, &i.1.lease_us)
            && i.0.delay.iter().zip(&i.1.delay).all(|(a, b)| same(a, b))
            && self.same_calendar(other)
    }

    #[cfg(feature = "calendar")]
    fn same_calendar(&self, other: &Self) -> bool {
        self.inner.calendar == other.inner.calendar
    }

    #[cfg(not(feature = "calendar"))]
    fn same_calendar(&self, _: &Self) -> bool {
        true
    }

    /// A calendar quota's calendar.
    #[cfg(all(feature = "calendar", test))]
    pub(crate) fn calendar_of(&self) -> Option<&super::calendar::Calendar> {
        self.inner.calendar.as_ref()
    }

    /// The calendar a calendar quota's key with `params` counts by: the limit's, from the
    /// key's own anchor when it has one.
    #[cfg(feature = "calendar")]
    pub(crate) fn calendar_for(&self, params: Params) -> Option<super::calendar::Calendar> {
        let c = self.inner.calendar.as_ref()?;
        match params {
            Params::Calendar { anchor, .. } if anchor != 0 => {
                super::calendar::Anchor::from_code(anchor).map(|a| c.clone().anchored(a))
            }
            _ => Some(c.clone()),
        }
    }

    /// These parameters resolved at `now` (µs since the epoch) by a memory store (the
    /// only store that resolves them here): a calendar quota's period holding `now`; any
    /// other parameters as they are. The first calendar period a process counts in memory
    /// is warned of, once per limit: its count lives only as long as the process.
    pub(crate) fn resolve(&self, params: Params, now: u64) -> Params {
        #[cfg(feature = "calendar")]
        if let (Params::Calendar { quota, anchor, .. }, Some(c)) = (params, &self.inner.calendar) {
            let warned = &self.inner.in_memory_warned;
            if !warned.load(Ordering::Relaxed) && !warned.swap(true, Ordering::Relaxed) {
                tracing::warn!(
                    name: "rate_limit.calendar_in_memory",
                    target: "rate_limit.calendar_in_memory",
                    limit = self.name(),
                    "a calendar quota is counted in this process's memory (the memory store, or \
                     the fallback while the store is down): its period's count is lost when the \
                     process restarts and its key can be evicted under the memory store's key \
                     cap; count it on Redis"
                );
            }
            if anchor != 0
                && let Some(a) = super::calendar::Anchor::from_code(anchor)
            {
                return c.clone().anchored(a).period_params(quota, now);
            }
            return c.period_params(quota, now);
        }
        let _ = now;
        params
    }

    /// How many times the parameters were changed at run time (caches key on it).
    pub fn version(&self) -> u64 {
        self.inner.seq.load(Ordering::Acquire) / 2
    }

    /// Changes the quota (a bucket's capacity) while running: every clone of this limit,
    /// in every layer and handler of the process, uses it from its next check. The window
    /// (or refill rate) stays. The limit's parameters travel with every check, so stores
    /// keep no thresholds: instances configured alike agree.
    pub fn set_quota(&self, quota: u64) -> Result<(), ConfigError> {
        let next = match self.params() {
            Params::Fixed { window, .. } => {
                Self::fixed_window(self.name(), quota, Duration::from_micros(window))?
            }
            Params::Sliding { window, .. } => {
                Self::sliding_window(self.name(), quota, Duration::from_micros(window))?
            }
            Params::Log { window, .. } => {
                Self::sliding_log(self.name(), quota, Duration::from_micros(window))?
            }
            Params::Bucket { interval, .. } => {
                // Same refill rate: one token per `interval` µs.
                Self::token_bucket(self.name(), quota, 1, Duration::from_micros(interval))?
            }
            Params::Ban { within, ban, .. } => Self::ban(
                self.name(),
                quota,
                Duration::from_micros(within),
                Duration::from_micros(ban),
            )?,
            Params::Calendar { length, anchor, .. } => {
                let quota = super::validate::quota("quota", quota)?;
                self.inner.store(Params::Calendar {
                    quota,
                    length,
                    anchor,
                });
                return Ok(());
            }
            #[cfg(feature = "calendar")]
            Params::Period { .. } => return Ok(()), // resolved per check, never held
        };
        self.inner.store(next.params());
        Ok(())
    }

    /// Gives one principal its own quota under this limit (an admin override: a partner's
    /// API key, a venue that hosts big quiz nights). Applies to keys built from now on, on
    /// every store: the parameters travel with each check.
    pub fn set_override(&self, principal: &Principal, quota: u64) -> Result<(), ConfigError> {
        let probe = Limit::build(self.name(), self.params());
        probe.set_quota(quota)?;
        let mut map = self
            .inner
            .overrides
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        map.insert(principal.as_str().into(), probe.params());
        self.inner.has_overrides.store(true, Ordering::Release);
        Ok(())
    }

    /// The overrides in force: each principal's rendering and its quota, sorted.
    pub fn overrides(&self) -> Vec<(String, u64)> {
        let map = self
            .inner
            .overrides
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        let mut out: Vec<(String, u64)> = map
            .iter()
            .map(|(p, params)| (p.to_string(), Limit::build(self.name(), *params).quota()))
            .collect();
        out.sort_unstable();
        out
    }

    /// Replaces every override with `overrides` in one step: the new map is built first,
    /// and swapped in under one write lock (a fleet applying a whole state of thousands).
    pub(crate) fn replace_overrides(&self, overrides: Vec<(&Principal, u64)>) {
        let probe = Limit::build(self.name(), self.params());
        let mut next = HashMap::with_capacity(overrides.len());
        for (p, quota) in overrides {
            if probe.set_quota(quota).is_ok() {
                next.insert(Box::<str>::from(p.as_str()), probe.params());
            }
        }
        let mut map = self
            .inner
            .overrides
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        self.inner
            .has_overrides
            .store(!next.is_empty(), Ordering::Release);
        *map = next;
    }

    /// Removes a principal's override.
    pub fn clear_override(&self, principal: &Principal) {
        let mut map = self
            .inner
            .overrides
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        map.remove(principal.as_str());
        self.inner
            .has_overrides
            .store(!map.is_empty(), Ordering::Release);
    }

    /// The override for `principal`, if any (every key asks: the flag is read inline).
    #[inline]
    pub(crate) fn override_for(&self, principal: &Principal) -> Option<Params> {
        if !self.inner.has_overrides.load(Ordering::Acquire) {
            return None;
        }
        self.override_in_map(principal)
    }

    fn override_in_map(&self, principal: &Principal) -> Option<Params> {
        let map = self
            .inner
            .overrides
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        map.get(principal.as_str()).copied()
    }

    /// Replaces every parameter with those of `other` (same algorithm), e.g. from
    /// configuration read at start-up or reloaded. Errors with `limit.algorithm_changed` if
    /// the algorithms differ: an algorithm cannot change under live counters.
    pub fn set_from(&self, other: &Limit) -> Result<(), ConfigError> {
        if other.kind() != self.kind() {
            return Err(ConfigError::new(
                ConfigErrorKind::AlgorithmChanged,
                "algorithm",
                "a running limit cannot change its algorithm",
            ));
        }
        self.inner.store(other.params());
        Ok(())
    }
}

#[cfg(feature = "calendar")]
#[cfg_attr(docsrs, doc(cfg(feature = "calendar")))]
impl Limit {
    /// A quota per calendar period: at most `quota` units from one period's start to the
    /// next (`calendar`: a day, a week or a month in a time zone, from an anchor), a
    /// counter per period as a fixed window keeps one per window. A refusal's
    /// retry-after and every reset point at the period's end; a decision's window is the
    /// period's own length (a Berlin day of 23 or 25 hours, a month of 28 to 31 days).
    ///
    /// ```
    /// use ratekeeper_core::Limit;
    /// use ratekeeper_core::calendar::{Anchor, Calendar, Period};
    ///
    /// // 10 000 calls a month, renewed on the 15th at 09:00 in Berlin.
    /// let billing = Calendar::new(Period::Month, "Europe/Berlin")?
    ///     .anchored(Anchor::day(15)?.at(9, 0)?);
    /// let plan = Limit::calendar("plan", 10_000, billing)?;
    /// assert_eq!(plan.quota(), 10_000);
    /// # Ok::<(), ratekeeper_core::ConfigError>(())
    /// ```
    ///
    /// On Redis the server's clock picks the period, as it picks windows; this instance's
    /// clock names the candidates (see the store contract).
    ///
    /// # Errors
    ///
    /// `limit.name_invalid`, `limit.quota_zero`, `limit.overflow` as for any limit.
    pub fn calendar(
        name: &str,
        quota: u64,
        calendar: super::calendar::Calendar,
    ) -> Result<Self, ConfigError> {
        crate::name::validate_name(name)?;
        let quota = super::validate::quota("quota", quota)?;
        let length = calendar.nominal_micros();
        let mut inner = LimitInner::new(
            name,
            super::Params::Calendar {
                quota,
                length,
                anchor: 0,
            },
        );
        inner.calendar = Some(calendar);
        Ok(Self {
            inner: std::sync::Arc::new(inner),
        })
    }
}
