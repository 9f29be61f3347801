//! The exact sliding window: a log of `(timestamp, cost)` entries within the last window.
//!
//! An entry at `t` counts while `now < t + w`. The log keeps only the newest entries needed
//! to decide: once the entries after the oldest already exceed the quota, the oldest can
//! never change a decision, so it is dropped. A key therefore holds at most `quota + 1`
//! entries (fewer with costs above one).

use std::collections::VecDeque;

use super::{Charge, State, Step, verdict};

pub(super) fn step(
    quota: u64,
    w: u64,
    stored: &VecDeque<(u64, u64)>,
    now: u64,
    cost: u64,
    charge: Charge,
) -> Step {
    // Entries from the future (a clock that went back) are clamped to now.
    let live = stored
        .iter()
        .map(|&(t, c)| (t.min(now), c))
        .filter(|&(t, _)| t.saturating_add(w) > now);
    let mut log: VecDeque<(u64, u64)> = live.collect();
    let used = log.iter().fold(0u64, |s, &(_, c)| s.saturating_add(c));
    let fits = cost <= quota && used.saturating_add(cost) <= quota;
    let charged = charge.applies(fits, cost, quota);
    let retry = if fits || cost > quota {
        0
    } else {
        // Free the oldest entries until the cost fits.
        let mut left = used;
        let mut wait = 0;
        for &(t, c) in &log {
            left = left.saturating_sub(c);
            if left.saturating_add(cost) <= quota {
                wait = (t + w) - now;
                break;
            }
        }
        wait
    };
    let mut after = used;
    if charged {
        after = used.saturating_add(cost);
        match log.back_mut() {
            Some((t, c)) if *t == now => *c = c.saturating_add(cost),
            _ => log.push_back((now, cost)),
        }
        trim(&mut log, quota);
    }
    let remaining = quota.saturating_sub(after);
    let reset = log.back().map_or(0, |&(t, _)| (t + w) - now);
    let decision = verdict(charge, fits, cost, quota, remaining, reset, w, || retry);
    Step {
        decision,
        next: charged.then_some(State::Log(log)),
    }
}

/// Drops the oldest entries while the newer ones alone exceed the quota.
fn trim(log: &mut VecDeque<(u64, u64)>, quota: u64) {
    let mut total = log.iter().fold(0u64, |s, &(_, c)| s.saturating_add(c));
    while let Some(&(_, c)) = log.front() {
        let rest = total.saturating_sub(c);
        if rest > quota {
            total = rest;
            log.pop_front();
        } else {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::algorithm::testing::Cell;
    use crate::algorithm::{Charge::*, State};
    use crate::limit::Params;
    use crate::protocol::Outcome;

    const W: u64 = 900_000_000; // 15 minutes

    #[test]
    fn exact_count_in_any_window() {
        let mut c = Cell::new(Params::Log {
            quota: 3,
            window: W,
        });
        assert!(c.check(1_000, 1, IfFits).is_allowed());
        assert!(c.check(2_000, 1, IfFits).is_allowed());
        assert!(c.check(3_000, 1, IfFits).is_allowed());
        let d = c.check(4_000, 1, IfFits);
        assert_eq!(
            d.retry_after().unwrap().as_micros(),
            u128::from(W + 1_000 - 4_000)
        );
        assert_eq!(c.probe(W + 999, 1).outcome(), Outcome::Denied);
        assert!(c.probe(W + 1_000, 1).is_allowed());
    }

    #[test]
    fn charging_every_attempt_stays_bounded() {
        let mut c = Cell::new(Params::Log {
            quota: 5,
            window: W,
        });
        for i in 0..1_000 {
            c.check(i, 1, Always);
        }
        let State::Log(log) = &c.state else {
            panic!("log state")
        };
        assert_eq!(log.len(), 6);
        // Denied until the newest five have aged out.
        let d = c.probe(1_000, 1);
        assert_eq!(
            d.retry_after().unwrap().as_micros(),
            u128::from(995 + W - 1_000)
        );
    }
}
