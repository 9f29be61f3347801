//! Who is being limited: per limit, the principals that used the most and were refused
//! the most over the recent window, from a bounded sketch (Space-Saving, `sketch.rs`).
//!
//! Turned on per limiter ([`LimiterBuilder::heavy_hitters`](crate::limiter::LimiterBuilder::heavy_hitters));
//! read per limit ([`Limit::heavy_hitters`](crate::Limit::heavy_hitters)). Each limit keeps
//! two sketches (use and refusals) for the current window and the one before: fixed
//! memory per limit, whatever the number of principals. The counts are this process's;
//! a [`Fleet`](crate::fleet::Fleet) publishes each instance's report to the store and
//! merges them ([`HeavyHitters::merge`], [`Fleet::heavy_hitters`](crate::fleet::Fleet::heavy_hitters)).
//! Principals are shown as keys hold them: an API key or personal data hashed.

mod fleet;
mod sketch;

pub use fleet::SHARED;

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use sketch::Sketch;

use crate::principal::Principal;

/// The default number of counters per sketch.
pub const DEFAULT_CAPACITY: usize = 128;
/// The default window: a report covers between one and two of them.
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(60);

/// How heavy hitters are tracked: counters per sketch, and the window.
///
/// You need it only to track a limit's heavy hitters with more counters or another window
/// than the defaults (`Limit::heavy_hitter_settings`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopSettings {
    pub(crate) capacity: usize,
    pub(crate) window: Duration,
}

impl TopSettings {
    /// `capacity` counters per sketch (at least 1, at most 65 536), and `window` (at
    /// least a second).
    pub fn new(capacity: usize, window: Duration) -> Self {
        Self {
            capacity: capacity.clamp(1, 1 << 16),
            window: window.max(Duration::from_secs(1)),
        }
    }
}

impl Default for TopSettings {
    fn default() -> Self {
        Self::new(DEFAULT_CAPACITY, DEFAULT_WINDOW)
    }
}

/// One principal of a report: its count, an upper bound, and the most by which it may
/// exceed the truth (the truth is within `count - error ..= count`).
#[derive(Debug, Clone)]
pub struct Hitter {
    principal: Principal,
    count: u64,
    error: u64,
}

impl Hitter {
    /// The principal, as keys hold it (an API key's rendering is its hash).
    pub fn principal(&self) -> &Principal {
        &self.principal
    }

    /// Units used (or refusals), an upper bound.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// How much [`count`](Self::count) may exceed the truth.
    pub fn error(&self) -> u64 {
        self.error
    }

    /// What the principal surely used (or was refused): `count - error`, a lower bound.
    /// Reports rank by it.
    pub fn guaranteed(&self) -> u64 {
        self.count - self.error
    }
}

/// The heaviest principals of one limit, in this process, over the recent window.
///
/// Each list is ranked by what is guaranteed ([`Hitter::guaranteed`]), then by the upper
/// bound. A spray of many principals that each came once fills the sketch with counters
/// whose error is most of their count: then no listed principal is known to have used
/// more than one not listed, and [`HeavyHitters::stands_out`] says so.
#[derive(Debug, Clone)]
pub struct HeavyHitters {
    /// By units used in admitted requests, most guaranteed first.
    pub by_use: Vec<Hitter>,
    /// By refusals, most guaranteed first.
    pub by_refusals: Vec<Hitter>,
    /// The most a principal not in [`by_use`](Self::by_use) may have used.
    pub unlisted_use: u64,
    /// The most a principal not in [`by_refusals`](Self::by_refusals) may have been
    /// refused.
    pub unlisted_refusals: u64,
    /// Units used in all, over the span reported.
    pub used: u64,
    /// Refusals in all, over the span reported.
    pub refused: u64,
    /// The span reported (one to two windows).
    pub span: Duration,
    /// Counters per sketch: an error is at most `2 × total ÷ capacity`.
    pub capacity: usize,
}

impl HeavyHitters {
    /// Whether `h`, from the list whose unlisted bound is `unlisted`
    /// ([`unlisted_use`](Self::unlisted_use) or [`unlisted_refusals`](Self::unlisted_refusals)),
    /// surely used more than any principal not listed: its guaranteed count is above
    /// that bound. When no listed principal stands out, the report cannot tell them from
    /// the rest (every count is within the error).
    pub fn stands_out(h: &Hitter, unlisted: u64) -> bool {
        h.guaranteed() > unlisted
    }
}

/// The two sketches of one window.
#[derive(Debug)]
struct Pair {
    used: Sketch,
    refused: Sketch,
}

impl Pair {
    fn new(capacity: usize) -> Self {
        Self {
            used: Sketch::new(capacity),
            refused: Sketch::new(capacity),
        }
    }

    fn clear(&mut self) {
        self.used.clear();
        self.refused.clear();
    }
}

#[derive(Debug)]
struct Windows {
    started: Instant,
    current: Pair,
    previous: Pair,
}

/// One limit's sketches.
#[derive(Debug)]
pub(crate) struct Top {
    settings: TopSettings,
    windows: Mutex<Windows>,
}

impl Top {
    pub(crate) fn new(settings: TopSettings, now: Instant) -> Self {
        Self {
            settings,
            windows: Mutex::new(Windows {
                started: now,
                current: Pair::new(settings.capacity),
                previous: Pair::new(settings.capacity),
            }),
        }
    }

    fn windows(&self, now: Instant) -> std::sync::MutexGuard<'_, Windows> {
        let mut w = self.windows.lock().unwrap_or_else(PoisonError::into_inner);
        let window = self.settings.window;
        let age = now.saturating_duration_since(w.started);
        if age >= window {
            let w = &mut *w;
            std::mem::swap(&mut w.current, &mut w.previous);
            w.current.clear();
            if age >= window * 2 {
                w.previous.clear();
            }
            w.started = now;
        }
        w
    }

    /// Counts `used` units (an admission) or `refused` refusals for the principal of the
    /// key whose digest is `digest`.
    pub(crate) fn record(&self, digest: u64, p: &Principal, used: u64, refused: u64, now: Instant) {
        let mut w = self.windows(now);
        w.current.used.add(digest, p, used);
        w.current.refused.add(digest, p, refused);
    }

    /// The `n` heaviest by use and by refusals.
    pub(crate) fn report(&self, n: usize, now: Instant) -> HeavyHitters {
        let w = self.windows(now);
        let (by_use, unlisted_use) = merged(&w.current.used, &w.previous.used, n);
        let (by_refusals, unlisted_refusals) = merged(&w.current.refused, &w.previous.refused, n);
        HeavyHitters {
            by_use,
            by_refusals,
            unlisted_use,
            unlisted_refusals,
            used: w.current.used.total + w.previous.used.total,
            refused: w.current.refused.total + w.previous.refused.total,
            span: now.saturating_duration_since(w.started) + self.settings.window,
            capacity: self.settings.capacity,
        }
    }
}

/// The `n` heaviest of two windows' sketches, by what is guaranteed, and the most a
/// principal not listed may have: a principal absent from one may have been counted there
/// up to that sketch's floor, so its upper bound adds the floor, and its error with it.
fn merged(a: &Sketch, b: &Sketch, n: usize) -> (Vec<Hitter>, u64) {
    let bounds = |s: &Sketch, digest: u64| {
        s.get(digest)
            .map_or((s.floor(), 0), |c| (c.count, c.count - c.error))
    };
    let mut out: Vec<Hitter> = a
        .counters()
        .iter()
        .chain(b.counters().iter().filter(|c| a.get(c.digest).is_none()))
        .map(|c| {
            let (hi_a, lo_a) = bounds(a, c.digest);
            let (hi_b, lo_b) = bounds(b, c.digest);
            let count = hi_a.saturating_add(hi_b);
            Hitter {
                principal: c.principal.clone(),
                count,
                error: count - lo_a.saturating_add(lo_b).min(count),
            }
        })
        .collect();
    out.sort_by(|x, y| {
        y.guaranteed()
            .cmp(&x.guaranteed())
            .then_with(|| y.count.cmp(&x.count))
            .then_with(|| x.principal.as_str().cmp(y.principal.as_str()))
    });
    // Beyond the `n` shown, a principal may be one cut off here or one never counted.
    let cut = out.iter().skip(n).map(|h| h.count).max().unwrap_or(0);
    let unlisted = cut.max(a.floor().saturating_add(b.floor()));
    out.truncate(n);
    (out, unlisted)
}

#[cfg(test)]
mod tests;
