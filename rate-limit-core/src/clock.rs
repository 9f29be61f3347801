//! Time: microseconds since the Unix epoch, from an injectable clock.
//!
//! Every store counts in one unit, the microsecond, held in a `u64` (integers below 2⁵³
//! survive Lua's doubles, so the Redis store agrees bit for bit). A clock reads "now"
//! as an epoch anchor plus monotonic progress: windows still align to the epoch (a day
//! is the UTC day), yet a wall-clock step never moves the limiter backwards.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A source of "now", in microseconds since the Unix epoch.
///
/// You implement it only for a clock of your own; tests use `FakeClock` or `TokioClock`,
/// production the default `SystemClock`.
pub trait Clock: Send + Sync + fmt::Debug + 'static {
    /// Microseconds since 1970-01-01T00:00:00Z.
    fn now_micros(&self) -> u64;
}

fn system_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

/// The real clock: the wall-clock time at creation plus `std::time::Instant` progress.
///
/// A check reads it once (the store's "now" serves every limit of the chain). On Linux that
/// read is `clock_gettime(CLOCK_MONOTONIC)` through the vDSO, about 20 ns. Reading the
/// CPU's time-stamp counter (as `quanta`, and so tower_governor, does) costs about a third of
/// that, and was not taken: a scaled counter drifts from the kernel's clock by its
/// calibration error (a microsecond a second is a second over a fortnight of uptime, and
/// windows here align to the epoch), does not count time across a suspend, and may step on
/// virtual machines that migrate between hosts, where the kernel's clock stays monotonic
/// and NTP-disciplined. A clock of one's own is a [`Clock`].
#[derive(Debug, Clone, Copy)]
pub struct SystemClock {
    anchor_micros: u64,
    anchor: std::time::Instant,
}

impl SystemClock {
    /// Anchors a new clock at the current wall-clock time.
    pub fn new() -> Self {
        Self {
            anchor_micros: system_micros(),
            anchor: std::time::Instant::now(),
        }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for SystemClock {
    fn now_micros(&self) -> u64 {
        let elapsed = self.anchor.elapsed().as_micros();
        self.anchor_micros
            .saturating_add(u64::try_from(elapsed).unwrap_or(u64::MAX))
    }
}

/// A clock that follows Tokio's time, so `tokio::time::pause` and `advance` drive it.
///
/// Anchored at the wall-clock time of creation; only Tokio's `Instant` moves it.
#[derive(Debug, Clone, Copy)]
pub struct TokioClock {
    anchor_micros: u64,
    anchor: tokio::time::Instant,
}

impl TokioClock {
    /// Anchors a new clock at the current wall-clock time and Tokio instant.
    pub fn new() -> Self {
        Self {
            anchor_micros: system_micros(),
            anchor: tokio::time::Instant::now(),
        }
    }

    /// Anchors a new clock at a given epoch time (microseconds) and the current Tokio instant.
    pub fn starting_at(epoch_micros: u64) -> Self {
        Self {
            anchor_micros: epoch_micros,
            anchor: tokio::time::Instant::now(),
        }
    }
}

impl Default for TokioClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for TokioClock {
    fn now_micros(&self) -> u64 {
        let elapsed = self.anchor.elapsed().as_micros();
        self.anchor_micros
            .saturating_add(u64::try_from(elapsed).unwrap_or(u64::MAX))
    }
}

/// A manual clock for tests: it stands still until told to move. Clones share the time.
///
/// ```
/// use ratekeeper_core::clock::{Clock, FakeClock};
/// use std::time::Duration;
///
/// let clock = FakeClock::at_micros(1_000_000);
/// clock.advance(Duration::from_millis(5));
/// assert_eq!(clock.now_micros(), 1_005_000);
/// ```
#[derive(Debug, Clone, Default)]
pub struct FakeClock {
    now: Arc<AtomicU64>,
}

impl FakeClock {
    /// A clock frozen at `micros` since the epoch.
    pub fn at_micros(micros: u64) -> Self {
        Self {
            now: Arc::new(AtomicU64::new(micros)),
        }
    }

    /// Moves the clock forward.
    pub fn advance(&self, by: Duration) {
        let by = u64::try_from(by.as_micros()).unwrap_or(u64::MAX);
        self.advance_micros(by);
    }

    /// Moves the clock forward by `micros`.
    pub fn advance_micros(&self, micros: u64) {
        // fetch_update never fails with a closure that always returns Some.
        let _ = self
            .now
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |t| {
                Some(t.saturating_add(micros))
            });
    }

    /// Sets the time, forwards or backwards.
    pub fn set_micros(&self, micros: u64) {
        self.now.store(micros, Ordering::SeqCst);
    }
}

impl Clock for FakeClock {
    fn now_micros(&self) -> u64 {
        self.now.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_clock_is_near_wall_time_and_monotonic() {
        let c = SystemClock::new();
        let a = c.now_micros();
        let b = c.now_micros();
        assert!(b >= a);
        let wall = system_micros();
        assert!(wall.abs_diff(a) < 5_000_000);
    }

    #[tokio::test(start_paused = true)]
    async fn tokio_clock_follows_paused_time() {
        let c = TokioClock::starting_at(10);
        tokio::time::advance(Duration::from_millis(3)).await;
        assert_eq!(c.now_micros(), 3_010);
    }
}
