//! The approximate sliding window: `prev × (w − e)/w + curr`, where `e` is the time elapsed
//! in the current epoch-aligned window (Cloudflare's "sliding window counter").
//!
//! Kept scaled by `w` so every comparison is exact integer arithmetic:
//! `used = prev × (w − e) + curr × w`, and a cost `c` fits when `used + c × w ≤ quota × w`.

use super::{Charge, State, Step, mul_div, verdict};

#[allow(clippy::too_many_arguments)]
pub(super) fn step(
    quota: u64,
    w: u64,
    stored_window: u64,
    stored_curr: u64,
    stored_prev: u64,
    now: u64,
    cost: u64,
    charge: Charge,
) -> Step {
    let window = now / w;
    // A window from the future (a clock that went back) counts as the current one.
    // Counts stop at twice the quota (debt beyond one extra quota is forgotten), so
    // `count × window` stays exact in every store.
    let cap = quota.saturating_mul(2);
    let (stored_curr, stored_prev) = (stored_curr.min(cap), stored_prev.min(cap));
    let (curr, prev) = if stored_window >= window {
        (stored_curr, stored_prev)
    } else if stored_window + 1 == window {
        (0, stored_curr)
    } else {
        (0, 0)
    };
    let e = now - window * w;
    let used = |curr: u64| u128::from(prev) * u128::from(w - e) + u128::from(curr) * u128::from(w);
    let limit = u128::from(quota) * u128::from(w);
    let fits = cost <= quota && used(curr) + u128::from(cost) * u128::from(w) <= limit;
    let charged = charge.applies(fits, cost, quota);
    let after = if charged {
        curr.saturating_add(cost)
    } else {
        curr
    };
    // ⌊(quota·w − used)/w⌋ = quota − after − ⌈prev·(w − e)/w⌉, without a 128-bit division.
    let weighted = mul_div(prev, w - e, w) + u64::from(mul_rem_nonzero(prev, w - e, w));
    let remaining = quota.saturating_sub(after).saturating_sub(weighted);
    let reset = if after > 0 {
        (window + 2) * w - now
    } else if prev > 0 {
        (window + 1) * w - now
    } else {
        0
    };
    let decision = verdict(charge, fits, cost, quota, remaining, reset, w, || {
        retry_after(quota, w, curr, prev, e, cost)
    });
    Step {
        decision,
        next: charged.then_some(State::Sliding {
            window,
            curr: after,
            prev,
        }),
    }
}

/// Whether `a·b mod c ≠ 0` (the rounding-up carry of a ceiling division).
fn mul_rem_nonzero(a: u64, b: u64, c: u64) -> bool {
    match a.checked_mul(b) {
        Some(p) => p % c != 0,
        None => u128::from(a) * u128::from(b) % u128::from(c) != 0,
    }
}

/// The exact wait until `cost` fits, for a denied check (`cost ≤ quota`).
fn retry_after(quota: u64, w: u64, curr: u64, prev: u64, e: u64, cost: u64) -> u64 {
    let room = quota.saturating_sub(cost); // what others may use when this cost goes in
    if curr <= room && prev > 0 {
        // Still this window, once the previous window's weight has faded enough:
        // prev × (w − e') ≤ (room − curr) × w  ⇔  e' ≥ w − ⌊(room − curr) × w / prev⌋.
        let m = mul_div(room - curr, w, prev).min(w);
        (w - m).saturating_sub(e)
    } else {
        // Next window, where prev' = curr > room ≥ 0:
        // curr × (w − e'') ≤ room × w  ⇔  e'' ≥ w − ⌊room × w / curr⌋.
        let m = mul_div(room, w, curr.max(1)).min(w);
        (w - e) + (w - m)
    }
}

#[cfg(test)]
mod tests {
    use crate::algorithm::Charge::*;
    use crate::algorithm::testing::Cell;
    use crate::limit::Params;
    use crate::protocol::Outcome;

    const W: u64 = 10_000_000;

    #[test]
    fn previous_window_weighs_by_overlap() {
        let mut c = Cell::new(Params::Sliding {
            quota: 10,
            window: W,
        });
        for _ in 0..10 {
            assert!(c.check(5 * W, 1, IfFits).is_allowed());
        }
        // Halfway through the next window, the previous 10 weigh 5.
        let t = 6 * W + W / 2;
        let d = c.probe(t, 5);
        assert!(d.is_allowed());
        assert_eq!(c.probe(t, 6).outcome(), Outcome::Denied);
        for _ in 0..5 {
            assert!(c.check(t, 1, IfFits).is_allowed());
        }
        let d = c.check(t, 1, IfFits);
        assert_eq!(d.outcome(), Outcome::Denied);
        // prev weight must drop by one unit: e' = w − ⌊(10−1−5)·w/10⌋ = 0.6 w.
        assert_eq!(d.retry_after().unwrap().as_micros(), u128::from(W / 10));
        assert_eq!(c.probe(t + W / 10 - 1, 1).outcome(), Outcome::Denied);
        assert!(c.probe(t + W / 10, 1).is_allowed());
    }

    #[test]
    fn retry_into_next_window() {
        let mut c = Cell::new(Params::Sliding {
            quota: 4,
            window: W,
        });
        for _ in 0..4 {
            c.check(3 * W + 1, 1, IfFits);
        }
        let d = c.check(3 * W + 1, 1, IfFits);
        // Next window: prev' = 4 must weigh ≤ 3 → e'' ≥ w − ⌊3w/4⌋ = w/4.
        let r = u64::try_from(d.retry_after().unwrap().as_micros()).unwrap();
        assert_eq!(r, (W - 1) + W / 4);
        assert_eq!(c.probe(3 * W + 1 + r - 1, 1).outcome(), Outcome::Denied);
        assert!(c.probe(3 * W + 1 + r, 1).is_allowed());
    }
}
