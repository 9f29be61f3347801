//! Delay instead of refuse: requests over a soft threshold are held, not refused.

use std::time::Duration;

use crate::error::{ConfigError, ConfigErrorKind};

/// The longest a request may be held for a [`Delay`]: one minute. A hold is a timer and an
/// open connection; longer waits belong in a `Retry-After`.
pub(crate) const MAX_DELAY: Duration = Duration::from_secs(60);

/// How a delay grows with how far over its threshold a request is.
///
/// You choose it when a limit holds requests instead of refusing them (`Delay`): linear for
/// a gentle slope, doubling to slow a flood quickly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Growth {
    /// `first × k` for the k-th request over the threshold.
    Linear,
    /// `first × 2^(k−1)` for the k-th request over the threshold.
    Doubling,
}

/// Hold instead of refuse (nginx's `limit_req … delay=`, express-slow-down): the first
/// `after` units of a limit's window are answered at once; each further request is held
/// for a delay that grows with how far over `after` it is ([`Growth`]), up to `max`; past
/// the limit's quota (the hard ceiling) requests are refused as usual. Set on a limit with
/// [`Limit::delayed`](crate::Limit::delayed).
///
/// Held requests of one principal wait in one line and are released one at a time, each at
/// least its delay after the previous one: parallel attempts do not multiply the rate. A
/// line holding [`max_held`](Self::max_held) turns away (429 at once) a request from a
/// source already in it, never a newcomer. See [`Holding`](crate::limiter::Holding).
///
/// ```
/// use ratekeeper_core::Delay;
/// use std::time::Duration;
///
/// // 5 at once; then 1 s, 2 s, 4 s, 8 s, 8 s, …; a line of 5 is full.
/// let delay = Delay::doubling(5, Duration::from_secs(1), Duration::from_secs(8))?.max_held(5)?;
/// assert_eq!(delay.for_count(5), Duration::ZERO);
/// assert_eq!(delay.for_count(6), Duration::from_secs(1));
/// assert_eq!(delay.for_count(8), Duration::from_secs(4));
/// assert_eq!(delay.for_count(40), Duration::from_secs(8));
/// # Ok::<(), ratekeeper_core::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delay {
    after: u64,
    first: Duration,
    max: Duration,
    growth: Growth,
    max_held: u32,
}

impl Delay {
    /// The longest delay a request is held for: a minute.
    pub const MAX: Duration = MAX_DELAY;

    /// Doubling delays: `first` for the first request over `after`, twice that for the
    /// next, and so on, up to `max`. At most 5 held at once per principal by default.
    ///
    /// `limit.delay_invalid` for a zero `first`, a `max` under `first` or above
    /// [`Delay::MAX`].
    pub fn doubling(after: u64, first: Duration, max: Duration) -> Result<Self, ConfigError> {
        Self::new(after, first, max, Growth::Doubling)
    }

    /// Linear delays: `step` for the first request over `after`, `2 × step` for the next,
    /// and so on, up to `max`.
    pub fn linear(after: u64, step: Duration, max: Duration) -> Result<Self, ConfigError> {
        Self::new(after, step, max, Growth::Linear)
    }

    fn new(
        after: u64,
        first: Duration,
        max: Duration,
        growth: Growth,
    ) -> Result<Self, ConfigError> {
        if first.is_zero() || first > max || max > MAX_DELAY {
            return Err(ConfigError::new(
                ConfigErrorKind::DelayInvalid,
                "delay",
                format!(
                    "the first delay must be above zero and at most the maximum, itself at most {MAX_DELAY:?}; got {first:?} and {max:?}"
                ),
            ));
        }
        Ok(Self {
            after,
            first,
            max,
            growth,
            max_held: 5,
        })
    }

    /// A line of `n` held requests of one principal (1 to 1 000) is full: past it, a request
    /// from a source already in the line is refused at once with 429; one from any other
    /// source still joins (see [`Holding`](crate::limiter::Holding)).
    pub fn max_held(mut self, n: u64) -> Result<Self, ConfigError> {
        let held = u32::try_from(n).ok().filter(|n| (1..=1_000).contains(n));
        let Some(n) = held else {
            return Err(ConfigError::new(
                ConfigErrorKind::DelayInvalid,
                "delay.max_held",
                format!("must be between 1 and 1000, got {n}"),
            ));
        };
        self.max_held = n;
        Ok(self)
    }

    /// How many units of a window are answered at once.
    pub fn after(&self) -> u64 {
        self.after
    }

    /// The delay of the first request over the threshold (the step, for linear growth).
    pub fn first(&self) -> Duration {
        self.first
    }

    /// The longest delay.
    pub fn max(&self) -> Duration {
        self.max
    }

    /// How the delay grows.
    pub fn growth(&self) -> Growth {
        self.growth
    }

    /// How many held requests of one principal make its line full.
    pub fn held_at_most(&self) -> u64 {
        u64::from(self.max_held)
    }

    /// The delay of a request that makes `count` units used in its window.
    pub fn for_count(&self, count: u64) -> Duration {
        let Some(k) = count.checked_sub(self.after).filter(|&k| k > 0) else {
            return Duration::ZERO;
        };
        let d = match self.growth {
            Growth::Linear => self
                .first
                .saturating_mul(u32::try_from(k).unwrap_or(u32::MAX)),
            Growth::Doubling => {
                let shift = u32::try_from(k - 1).unwrap_or(u32::MAX).min(31);
                self.first.saturating_mul(1 << shift)
            }
        };
        d.min(self.max)
    }

    /// Packed into three words for a limit's atomics: (after, first µs, max µs | growth |
    /// max held).
    pub(super) fn pack(&self) -> [u64; 3] {
        let us = |d: Duration| u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        let growth = match self.growth {
            Growth::Linear => 1,
            Growth::Doubling => 2,
        };
        // max ≤ 60 s = 6·10⁷ µs < 2²⁶; growth in 2 bits; max_held ≤ 1 000 < 2¹⁰.
        let tail = us(self.max) | growth << 32 | u64::from(self.max_held) << 40;
        [self.after, us(self.first), tail]
    }

    pub(super) fn unpack(words: [u64; 3]) -> Option<Self> {
        let [after, first, tail] = words;
        let growth = match (tail >> 32) & 0xff {
            1 => Growth::Linear,
            2 => Growth::Doubling,
            _ => return None,
        };
        Some(Self {
            after,
            first: Duration::from_micros(first),
            max: Duration::from_micros(tail & 0xffff_ffff),
            growth,
            max_held: u32::try_from(tail >> 40).unwrap_or(5),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_grow_and_stop_at_the_maximum() {
        let s = Duration::from_secs;
        let d = Delay::doubling(5, s(1), s(8)).unwrap();
        let seen: Vec<u64> = (0..=12).map(|n| d.for_count(n).as_secs()).collect();
        assert_eq!(seen, [0, 0, 0, 0, 0, 0, 1, 2, 4, 8, 8, 8, 8]);
        assert_eq!(d.for_count(u64::MAX), s(8));
        let l = Delay::linear(2, Duration::from_millis(300), s(1)).unwrap();
        let seen: Vec<u128> = (2..=7).map(|n| l.for_count(n).as_millis()).collect();
        assert_eq!(seen, [0, 300, 600, 900, 1_000, 1_000]);
        assert_eq!(Delay::unpack(d.pack()), Some(d));
        let held = l.max_held(1_000).unwrap();
        assert_eq!(Delay::unpack(held.pack()), Some(held));
    }

    #[test]
    fn bad_delays_have_a_stable_code() {
        let s = Duration::from_secs;
        for bad in [
            Delay::doubling(5, Duration::ZERO, s(8)),
            Delay::doubling(5, s(9), s(8)),
            Delay::linear(5, s(1), s(61)),
            Delay::linear(5, s(1), s(2)).and_then(|d| d.max_held(0)),
            Delay::linear(5, s(1), s(2)).and_then(|d| d.max_held(1_001)),
        ] {
            assert_eq!(bad.unwrap_err().code(), "limit.delay_invalid");
        }
    }
}
