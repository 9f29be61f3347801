//! The algorithms: pure functions from (parameters, state, now, cost) to a decision and the
//! state to write. Stores do one atomic read-modify-write per key around them; the Redis
//! store's Lua scripts are line-for-line ports.
//!
//! Integer arithmetic only, in microseconds; products widen to `u128`; sums saturate, so
//! no input can wrap into "allowed".

use std::collections::VecDeque;

use crate::limit::Params;
use crate::protocol::Decision;

mod ban;
mod bucket;
mod fixed;
mod log;
pub(crate) mod pace;
mod sliding;

/// How a check charges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Charge {
    /// Charge only if the cost fits (the normal check).
    IfFits,
    /// Charge a cost that fits, and a denied one too (the charge-every-limit chain mode);
    /// a cost that can never fit is not charged.
    Always,
    /// Charge whatever happens, overdrawing if need be (a post-hoc charge for work whose
    /// cost was known only afterwards).
    Overdraw,
}

impl Charge {
    /// Whether a check of `cost` against `quota` writes, given whether it fits.
    pub(crate) fn applies(self, fits: bool, cost: u64, quota: u64) -> bool {
        cost > 0
            && match self {
                Self::IfFits => fits,
                Self::Always => cost <= quota,
                Self::Overdraw => true,
            }
    }
}

/// The outcome every algorithm reports the same way: never-fits (unless overdrawing),
/// allowed, or denied with the algorithm's exact retry-after.
#[allow(clippy::too_many_arguments)]
pub(crate) fn verdict(
    charge: Charge,
    fits: bool,
    cost: u64,
    quota: u64,
    remaining: u64,
    reset: u64,
    window: u64,
    retry_after: impl FnOnce() -> u64,
) -> Decision {
    if cost > quota && charge != Charge::Overdraw {
        Decision::never_fits(quota, remaining, reset, window)
    } else if fits {
        Decision::allowed(quota, remaining, reset, window)
    } else {
        Decision::denied(quota, remaining, reset, retry_after(), window)
    }
}

/// The state one key holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum State {
    Fixed {
        window: u64,
        count: u64,
    },
    Sliding {
        window: u64,
        curr: u64,
        prev: u64,
    },
    Bucket {
        tat: u64,
    },
    Log(VecDeque<(u64, u64)>),
    /// A ban's end (µs) and the refusals counted towards the next, `(timestamp, count)`.
    Ban {
        until: u64,
        events: VecDeque<(u64, u64)>,
    },
}

impl State {
    /// The state of a key never seen (or expired) for these parameters.
    pub(crate) fn fresh(params: Params) -> Self {
        match params {
            Params::Fixed { .. } => Self::Fixed {
                window: 0,
                count: 0,
            },
            Params::Sliding { .. } => Self::Sliding {
                window: 0,
                curr: 0,
                prev: 0,
            },
            Params::Bucket { .. } => Self::Bucket { tat: 0 },
            Params::Log { .. } => Self::Log(VecDeque::new()),
            Params::Ban { .. } => Self::Ban {
                until: 0,
                events: VecDeque::new(),
            },
            // A calendar quota counts as a fixed window does, numbered by its period.
            Params::Calendar { .. } => Self::Fixed {
                window: 0,
                count: 0,
            },
            #[cfg(feature = "calendar")]
            Params::Period { .. } => Self::Fixed {
                window: 0,
                count: 0,
            },
        }
    }

    /// Whether this state belongs to these parameters' algorithm.
    pub(crate) fn fits(&self, params: Params) -> bool {
        matches!(
            (self, params),
            (Self::Fixed { .. }, Params::Fixed { .. })
                | (Self::Sliding { .. }, Params::Sliding { .. })
                | (Self::Bucket { .. }, Params::Bucket { .. })
                | (Self::Log(_), Params::Log { .. })
                | (Self::Ban { .. }, Params::Ban { .. })
                | (Self::Fixed { .. }, Params::Calendar { .. })
        ) || self.fits_period(params)
    }

    #[cfg(feature = "calendar")]
    fn fits_period(&self, params: Params) -> bool {
        matches!((self, params), (Self::Fixed { .. }, Params::Period { .. }))
    }

    #[cfg(not(feature = "calendar"))]
    fn fits_period(&self, _: Params) -> bool {
        false
    }

    /// When the state stops mattering (µs since the epoch): after this, it equals
    /// [`State::fresh`], and a store may forget it.
    pub(crate) fn expires_at(&self, params: Params) -> u64 {
        match (self, params) {
            (Self::Fixed { window, .. }, Params::Fixed { window: w, .. }) => {
                window.saturating_add(1).saturating_mul(w)
            }
            (Self::Sliding { window, .. }, Params::Sliding { window: w, .. }) => {
                window.saturating_add(2).saturating_mul(w)
            }
            (Self::Bucket { tat }, Params::Bucket { .. }) => *tat,
            (Self::Log(log), Params::Log { window: w, .. }) => {
                log.back().map_or(0, |&(t, _)| t.saturating_add(w))
            }
            (Self::Ban { until, events }, Params::Ban { within, .. }) => events
                .back()
                .map_or(0, |&(t, _)| t.saturating_add(within))
                .max(*until),
            // A period's count lasts to its end (a number from the future, to this one's).
            #[cfg(feature = "calendar")]
            (Self::Fixed { window, .. }, Params::Period { number, end, .. })
                if *window >= number =>
            {
                end
            }
            _ => 0,
        }
    }
}

/// One step of an algorithm: the decision, and the state to write (`None`: unchanged).
#[derive(Debug)]
pub(crate) struct Step {
    pub(crate) decision: Decision,
    pub(crate) next: Option<State>,
}

/// Runs the algorithm of `params` on `state` (replaced by a fresh one if it belongs to
/// another algorithm).
pub(crate) fn step(params: Params, state: &State, now: u64, cost: u64, charge: Charge) -> Step {
    let fresh;
    let state = if state.fits(params) {
        state
    } else {
        fresh = State::fresh(params);
        &fresh
    };
    match (params, state) {
        (Params::Fixed { quota, window }, &State::Fixed { window: idx, count }) => {
            fixed::step(quota, window, idx, count, now, cost, charge)
        }
        (
            Params::Sliding { quota, window },
            &State::Sliding {
                window: idx,
                curr,
                prev,
            },
        ) => sliding::step(quota, window, idx, curr, prev, now, cost, charge),
        (Params::Bucket { capacity, interval }, &State::Bucket { tat }) => {
            bucket::step(capacity, interval, tat, now, cost, charge)
        }
        (Params::Log { quota, window }, State::Log(log)) => {
            log::step(quota, window, log, now, cost, charge)
        }
        #[cfg(feature = "calendar")]
        (
            Params::Period {
                quota,
                number,
                start,
                end,
            },
            &State::Fixed { window: idx, count },
        ) => fixed::period_step(quota, (number, start, end), (idx, count), now, cost, charge),
        // A ban's gate charges nothing; a charge (overdraw) counts its cost in refusals.
        (Params::Ban { after, within, ban }, State::Ban { until, events }) => {
            let b = ban::Ban { after, within, ban };
            let next = (charge == Charge::Overdraw)
                .then(|| b.count(*until, events, now, cost))
                .flatten();
            let decision = match &next {
                Some((until, events)) => b.gate(*until, events, now),
                None => b.gate(*until, events, now),
            };
            Step {
                decision,
                next: next.map(|(until, events)| State::Ban { until, events }),
            }
        }
        // `fits` guarantees the pairs above; a mismatch cannot reach here, but answer
        // safely rather than panic: nothing fits, nothing changes.
        _ => Step {
            decision: Decision::never_fits(0, 0, 0, 0),
            next: None,
        },
    }
}

/// Gives back `cost` units charged at `at` (µs, the store's clock), where the state still
/// holds them: a fixed window's only into the window they were charged in, a sliding
/// window's into that window (now the current or the previous one), an exact log's from
/// the entry stamped `at`, a bucket's by moving its arrival time back. `None`: nothing to
/// give back (the window they counted in has passed). The Redis store's refund script
/// is the same, line for line.
pub(crate) fn refund(params: Params, state: &State, at: u64, cost: u64) -> Option<State> {
    if cost == 0 || !state.fits(params) {
        return None;
    }
    match (params, state) {
        (Params::Fixed { window: w, .. }, &State::Fixed { window, count }) => (window == at / w)
            .then(|| State::Fixed {
                window,
                count: count.saturating_sub(cost),
            }),
        (Params::Sliding { window: w, .. }, &State::Sliding { window, curr, prev }) => {
            let charged = at / w;
            if window == charged {
                Some(State::Sliding {
                    window,
                    curr: curr.saturating_sub(cost),
                    prev,
                })
            } else if window == charged.saturating_add(1) {
                Some(State::Sliding {
                    window,
                    curr,
                    prev: prev.saturating_sub(cost),
                })
            } else {
                None
            }
        }
        #[cfg(feature = "calendar")]
        (Params::Period { number, .. }, &State::Fixed { window, count }) => (window == number)
            .then(|| State::Fixed {
                window,
                count: count.saturating_sub(cost),
            }),
        (Params::Bucket { interval, .. }, &State::Bucket { tat }) => Some(State::Bucket {
            tat: tat.saturating_sub(cost.saturating_mul(interval)),
        }),
        (Params::Log { .. }, State::Log(log)) => {
            let i = log.iter().position(|&(t, _)| t == at)?;
            let mut log = log.clone();
            let (t, c) = log[i];
            if c <= cost {
                log.remove(i);
            } else {
                log[i] = (t, c - cost);
            }
            Some(State::Log(log))
        }
        _ => None,
    }
}

/// Counts `n` refusals on a ban's `state` at `now` (see [`Limit::ban`](crate::Limit::ban)):
/// the state to write, or `None` when nothing changes (banned already, or not a ban).
pub(crate) fn ban_refusals(params: Params, state: &State, now: u64, n: u64) -> Option<State> {
    let (Params::Ban { after, within, ban }, State::Ban { until, events }) = (params, state) else {
        return None;
    };
    ban::Ban { after, within, ban }
        .count(*until, events, now, n)
        .map(|(until, events)| State::Ban { until, events })
}

/// `a * b / c` rounded down, in `u128`, saturated to `u64`.
pub(crate) fn mul_div(a: u64, b: u64, c: u64) -> u64 {
    if c == 0 {
        return u64::MAX;
    }
    // Most products fit in 64 bits; 128-bit division is several times slower.
    if let Some(p) = a.checked_mul(b) {
        return p / c;
    }
    let v = u128::from(a) * u128::from(b) / u128::from(c);
    u64::try_from(v).unwrap_or(u64::MAX)
}

#[cfg(test)]
pub(crate) mod testing;

#[cfg(test)]
mod proptests;
