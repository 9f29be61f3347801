//! The shared pacer's step: one call on a scope's AIMD state (`pacer.lua`, line for line).

use std::time::Duration;

use crate::protocol::pace::{PaceCall, PaceOp};

/// The longest pause: a remote side's `Retry-After` beyond an hour is honoured as an hour
/// (and a corrupt state's pause never stalls the workers longer).
pub(crate) const MAX_PAUSE_US: u64 = 3_600_000_000;
/// Successes reported with one call at most (the rest wait for the next).
const MAX_REPORTED: u64 = 100_000;

/// A scope's state as a store keeps it (the Redis store keeps the same five numbers).
///
/// Kept only by a store of your own that paces; a pacer's callers never see it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PacerState {
    /// The rate (calls a second).
    pub rate: f64,
    /// The next free slot (µs since the store's epoch).
    pub next: u64,
    /// Paused until (µs).
    pub paused: u64,
    /// The last decrease (µs; 0: none).
    pub last_decrease: u64,
    /// The most the remote side said it allows (calls a second; 0: it said nothing).
    pub cap: f64,
}

/// The time between two slots at `rate` calls a second (µs, at least 1).
pub(crate) fn interval(rate: f64) -> u64 {
    ((1_000_000.0 / rate).ceil() as u64).max(1)
}

/// `next` after the rate went from `old` to `new` at `now`: slots already taken keep their
/// times, and the next free one is one interval of the new rate after the last taken (a
/// rate told higher takes effect from the next slot, not after the gap the old one left).
pub(crate) fn respace(next: u64, old: f64, new: f64, now: u64) -> u64 {
    if next > now {
        next.saturating_sub(interval(old))
            .saturating_add(interval(new))
    } else {
        next
    }
}

/// Takes the next free slot (after `next` and `paused`) at `now` when it is at most
/// `within` away: whether it was taken, how far it is (µs), and `next` after it. Callers
/// are served in the order they asked, each told its own slot.
pub(crate) fn take_turn(
    next: u64,
    paused: u64,
    rate: f64,
    now: u64,
    within: u64,
) -> (bool, u64, u64) {
    let slot = now.max(next).max(paused);
    let wait = slot - now;
    if wait <= within {
        (true, wait, slot.saturating_add(interval(rate)))
    } else {
        (false, wait, next)
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// One call on a scope's state at `now` (µs, the store's clock): the state to keep,
/// whether a slot was taken, and the wait (µs). `state` is `None` when the store holds
/// none (or it lapsed). The memory store runs it under its lock, and Redis runs
/// `pacer.lua`, line for line; a store of your own runs it atomically per scope.
pub fn step(state: Option<PacerState>, call: &PaceCall<'_>, now: u64) -> (PacerState, bool, u64) {
    let c = call.config;
    let mut s = state.unwrap_or(PacerState {
        rate: c.initial,
        next: 0,
        paused: 0,
        last_decrease: 0,
        cap: 0.0,
    });
    let hi = if s.cap > 0.0 {
        s.cap.min(c.max).max(c.min)
    } else {
        c.max
    };
    // The rate the last slot taken was spaced by.
    let before = s.rate;
    s.rate = s.rate.clamp(c.min, hi);
    // A corrupt or foreign state never stalls the workers: the next slot and a pause are
    // at most an hour away (the longest reservation too).
    let horizon = now.saturating_add(MAX_PAUSE_US);
    s.next = s.next.min(horizon);
    s.paused = s.paused.min(now.saturating_add(MAX_PAUSE_US));
    let period = micros(c.period);
    for _ in 0..call.successes.min(MAX_REPORTED) {
        let per_period = s.rate * c.period.as_secs_f64();
        s.rate = (s.rate + c.increase / per_period.max(1.0)).min(hi);
    }
    let (mut go, mut wait) = (false, 0);
    match call.op {
        PaceOp::Rejected(retry) => {
            if s.last_decrease == 0 || now.saturating_sub(s.last_decrease) >= period {
                s.rate = (s.rate * c.decrease).max(c.min);
                s.last_decrease = now;
            }
            if retry > 0 {
                s.paused = s.paused.max(now.saturating_add(retry.min(MAX_PAUSE_US)));
            }
        }
        PaceOp::Told { pause, ceiling } => {
            if ceiling > 0.0 {
                s.cap = ceiling.clamp(c.min, c.max);
                // Up to what it allows, unless it refused within the period.
                let calm = s.last_decrease == 0 || now.saturating_sub(s.last_decrease) >= period;
                s.rate = if calm { s.cap } else { s.rate.min(s.cap) };
            }
            if pause > 0 {
                s.paused = s.paused.max(now.saturating_add(pause.min(MAX_PAUSE_US)));
            }
        }
        PaceOp::Acquire { .. } => {}
    }
    s.next = respace(s.next, before, s.rate, now).min(horizon);
    if let PaceOp::Acquire { within } = call.op {
        (go, wait, s.next) = take_turn(s.next, s.paused, s.rate, now, within.min(MAX_PAUSE_US));
    }
    (s, go, wait)
}
