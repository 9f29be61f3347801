//! Fixed window: one counter per epoch-aligned window, tied to its window number.

use super::{Charge, State, Step, verdict};

pub(super) fn step(
    quota: u64,
    w: u64,
    stored_window: u64,
    stored_count: u64,
    now: u64,
    cost: u64,
    charge: Charge,
) -> Step {
    let window = now / w;
    let end = (window + 1).saturating_mul(w).saturating_sub(now);
    counted(
        quota,
        (window, end, w),
        (stored_window, stored_count),
        cost,
        charge,
    )
}

/// A calendar period's step: a fixed window's arithmetic on the period numbered `number`
/// from `start` to `end` (µs).
#[cfg(feature = "calendar")]
pub(super) fn period_step(
    quota: u64,
    (number, start, end): (u64, u64, u64),
    stored: (u64, u64),
    now: u64,
    cost: u64,
    charge: Charge,
) -> Step {
    let left = end.saturating_sub(now);
    counted(
        quota,
        (number, left, end.saturating_sub(start)),
        stored,
        cost,
        charge,
    )
}

/// The count of window (or period) `window`, which ends in `end` µs and lasts `w`, given
/// the count stored for `stored_window`.
fn counted(
    quota: u64,
    (window, end, w): (u64, u64, u64),
    (stored_window, stored_count): (u64, u64),
    cost: u64,
    charge: Charge,
) -> Step {
    // A window number from the future (a clock that went back) is clamped to the current
    // window: the count is kept, never turned into a long wait.
    let count = if stored_window >= window {
        stored_count
    } else {
        0
    };
    let reset = |used: u64| if used > 0 { end } else { 0 };
    let fits = cost <= quota && count.saturating_add(cost) <= quota;
    let charged = charge.applies(fits, cost, quota);
    // Debt stops at one extra quota; the count is forgotten when the window ends anyway.
    let after = if charged {
        count.saturating_add(cost).min(quota.saturating_mul(2))
    } else {
        count
    };
    let remaining = quota.saturating_sub(after);
    let decision = verdict(
        charge,
        fits,
        cost,
        quota,
        remaining,
        reset(after),
        w,
        || end,
    );
    Step {
        decision,
        next: charged.then_some(State::Fixed {
            window,
            count: after,
        }),
    }
}

#[cfg(test)]
mod tests {
    use crate::algorithm::Charge::*;
    use crate::algorithm::testing::Cell;
    use crate::limit::Params;
    use crate::protocol::Outcome;

    const W: u64 = 60_000_000;

    #[test]
    fn counts_and_rolls_over_on_the_aligned_boundary() {
        let mut c = Cell::new(Params::Fixed {
            quota: 2,
            window: W,
        });
        let t0 = 100 * W + 59_000_000; // one second before a boundary
        assert!(c.check(t0, 1, IfFits).is_allowed());
        let d = c.check(t0, 1, IfFits);
        assert_eq!((d.is_allowed(), d.remaining()), (true, 0));
        let d = c.check(t0 + 999_999, 1, IfFits);
        assert_eq!(d.outcome(), Outcome::Denied);
        // 1 µs to the boundary, reported as the 1 ms floor.
        assert_eq!(d.retry_after().unwrap().as_micros(), 1_000);
        // The next window starts at 101 * W exactly.
        assert!(c.check(101 * W, 1, IfFits).is_allowed());
    }

    #[test]
    fn never_fits_and_overdraw() {
        let mut c = Cell::new(Params::Fixed {
            quota: 5,
            window: W,
        });
        let d = c.check(W, 6, IfFits);
        assert_eq!(d.outcome(), Outcome::NeverFits);
        assert_eq!(d.retry_after(), None);
        assert_eq!(c.probe(W, 5).outcome(), Outcome::Allowed);
        c.check(W, 9, Overdraw);
        assert_eq!(c.probe(W + 1, 0).outcome(), Outcome::Denied);
        assert!(c.probe(2 * W, 1).is_allowed());
    }

    #[test]
    fn huge_costs_saturate() {
        let mut c = Cell::new(Params::Fixed {
            quota: 5,
            window: W,
        });
        c.check(W, u64::MAX, Overdraw);
        c.check(W, u64::MAX, Overdraw);
        assert_eq!(c.probe(W, 1).outcome(), Outcome::Denied);
        assert_eq!(c.check(W, u64::MAX, IfFits).outcome(), Outcome::NeverFits);
    }
}
