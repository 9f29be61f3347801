//! The adaptive limiter for outbound calls: a pacer per scope whose rate follows AIMD.
//!
//! A harvester calling other people's servers does not know their limits; it learns them.
//! Each scope (an account, a site) has a rate. Every success adds a share of the additive
//! step, so a period of successes raises the rate by one step; a rejection (the remote
//! side answered 429 or 503) multiplies it by the decrease factor — at most once per
//! period, since one overload shows as several rejections — and pauses the scope for the
//! remote side's `Retry-After`. The caller gets a back-off signal ([`Pace::Wait`]), not an
//! HTTP response. It lives in process memory and fails open: a poisoned lock lets calls
//! through rather than stopping a harvester. Many workers calling one site share one rate
//! with [`SharedPacer`](crate::pacer::SharedPacer) instead.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::algorithm::pace::{respace, take_turn};
use crate::clock::{Clock, SystemClock};
use crate::error::{ConfigError, ConfigErrorKind};
use crate::limit::Aimd;

/// What a caller should do now.
///
/// You get it when you pace your own calls without the client layer (`Adaptive::acquire`,
/// `SharedPacer::acquire`): go now, or wait and ask again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pace {
    /// Call now (a slot was taken).
    Go,
    /// Wait this long, then ask again.
    Wait(Duration),
}

/// A caller's turn, asked for with a bound on the wait ([`Adaptive::reserve`],
/// [`SharedPacer::reserve`](crate::pacer::SharedPacer::reserve)): callers of one scope are
/// served in the order they asked, each told its own slot, so none waits while later ones
/// go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Turn {
    /// Call now (a slot was taken).
    Now,
    /// A slot was taken for the caller this far ahead: call then, without asking again.
    After(Duration),
    /// The next free slot is this far ahead, past the bound: nothing was taken.
    Beyond(Duration),
}

impl Turn {
    /// From a pacer step's answer: a slot taken (`go`) and the wait.
    pub(crate) fn of(go: bool, wait: Duration) -> Self {
        match (go, wait.is_zero()) {
            (true, true) => Self::Now,
            (true, false) => Self::After(wait),
            (false, _) => Self::Beyond(wait),
        }
    }

    /// What [`Pace`] says of it (a slot taken ahead is a wait in `Pace`'s terms only when it
    /// was not taken; `acquire` asks for none ahead).
    pub(crate) fn pace(self) -> Pace {
        match self {
            Self::Now => Pace::Go,
            Self::After(d) | Self::Beyond(d) => Pace::Wait(d),
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Scope {
    rate: f64,
    /// The next free slot (µs since the epoch).
    next: u64,
    paused_until: u64,
    last_decrease: u64,
}

impl Scope {
    /// A new rate, re-spacing the next free slot as the shared pacer does.
    fn set_rate(&mut self, rate: f64, now: u64) {
        self.next = respace(self.next, self.rate, rate, now);
        self.rate = rate;
    }
}

/// Per-scope AIMD pacers. Cheap to clone; clones share the scopes.
///
/// ```
/// use ratekeeper_core::pace::{Adaptive, Aimd, Pace};
/// use std::time::Duration;
///
/// let pacer = Adaptive::new(Aimd { initial: 5.0, ..Aimd::default() })?;
/// match pacer.acquire("example.org") {
///     Pace::Go => { /* call; then pacer.success(..) or pacer.rejected(.., retry_after) */ }
///     Pace::Wait(d) => { /* sleep d, then ask again */ let _ = d; }
/// }
/// pacer.rejected("example.org", Some(Duration::from_secs(30)));
/// assert!(matches!(pacer.acquire("example.org"), Pace::Wait(_)));
/// # Ok::<(), ratekeeper_core::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Adaptive {
    config: Aimd,
    clock: Arc<dyn Clock>,
    scopes: Arc<Mutex<HashMap<String, Scope>>>,
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

impl Adaptive {
    /// Pacers with these settings, on the system clock. `limit.rate_too_high` and
    /// `limit.quota_zero` guard the settings.
    pub fn new(config: Aimd) -> Result<Self, ConfigError> {
        Self::with_clock(config, SystemClock::new())
    }

    /// Pacers on a given clock (tests use a [`FakeClock`](crate::clock::FakeClock)).
    pub fn with_clock(config: Aimd, clock: impl Clock) -> Result<Self, ConfigError> {
        let bad = |field, why: &str| Err(ConfigError::new(ConfigErrorKind::QuotaZero, field, why));
        let finite = |v: f64| v.is_finite() && v > 0.0;
        if !(finite(config.min)
            && finite(config.initial)
            && finite(config.max)
            && finite(config.increase))
        {
            return bad("rate", "AIMD rates and the step must be positive");
        }
        if !(config.min <= config.initial && config.initial <= config.max) {
            return bad("initial", "min ≤ initial ≤ max");
        }
        if !(config.decrease > 0.0 && config.decrease < 1.0) {
            return bad("decrease", "the decrease factor is between 0 and 1");
        }
        if config.max > 1_000_000.0 {
            return Err(ConfigError::new(
                ConfigErrorKind::RateTooHigh,
                "max",
                "at most one call per microsecond",
            ));
        }
        if config.period.is_zero() {
            return bad("period", "the period must be above zero");
        }
        Ok(Self {
            config,
            clock: Arc::new(clock),
            scopes: Arc::default(),
        })
    }

    fn with_scope<T>(&self, scope: &str, f: impl FnOnce(&mut Scope, u64) -> T) -> Option<T> {
        let now = self.clock.now_micros();
        let mut scopes = self.scopes.lock().ok()?;
        let s = scopes.entry(scope.to_owned()).or_insert(Scope {
            rate: self.config.initial,
            next: 0,
            paused_until: 0,
            last_decrease: 0,
        });
        Some(f(s, now))
    }

    /// Takes a slot for one call in `scope`, or says how long to wait (then ask again).
    pub fn acquire(&self, scope: &str) -> Pace {
        self.reserve(scope, Duration::ZERO).pace()
    }

    /// Takes the next free slot of `scope` when it is at most `within` away (now, or
    /// reserved for the caller, who calls then without asking again), else says how far it
    /// is and takes nothing. Callers are served in the order they asked.
    pub fn reserve(&self, scope: &str, within: Duration) -> Turn {
        let within = u64::try_from(within.as_micros()).unwrap_or(u64::MAX);
        self.with_scope(scope, |s, now| {
            let (take, wait, next) = take_turn(s.next, s.paused_until, s.rate, now, within);
            s.next = next;
            Turn::of(take, Duration::from_micros(wait))
        })
        // Fails open.
        .unwrap_or(Turn::Now)
    }

    /// The remote side accepted a call: a period of these adds one step.
    pub fn success(&self, scope: &str) {
        let c = self.config;
        self.with_scope(scope, |s, now| {
            let per_period = s.rate * c.period.as_secs_f64();
            s.set_rate((s.rate + c.increase / per_period.max(1.0)).min(c.max), now);
        });
    }

    /// The remote side refused a call (429, 503): the rate drops by the decrease factor
    /// (once per period), and the scope waits out `retry_after` if the remote side gave one.
    pub fn rejected(&self, scope: &str, retry_after: Option<Duration>) {
        let c = self.config;
        self.with_scope(scope, |s, now| {
            if now.saturating_sub(s.last_decrease) >= micros(c.period) || s.last_decrease == 0 {
                s.set_rate((s.rate * c.decrease).max(c.min), now);
                s.last_decrease = now;
            }
            if let Some(wait) = retry_after {
                s.paused_until = s.paused_until.max(now.saturating_add(micros(wait)));
            }
        });
    }

    /// The scope's current rate (calls per second).
    pub fn rate(&self, scope: &str) -> f64 {
        self.with_scope(scope, |s, _| s.rate)
            .unwrap_or(self.config.initial)
    }
}
