//! Token bucket as GCRA: one "theoretical arrival time" (`tat`) per key.
//!
//! With capacity `B` and emission interval `T` (µs per token), the bucket holds
//! `(now + B·T − tat) / T` tokens. A cost `c` fits when `max(tat, now) + c·T ≤ now + B·T`.

use super::{Charge, State, Step, verdict};

pub(super) fn step(
    capacity: u64,
    interval: u64,
    tat: u64,
    now: u64,
    cost: u64,
    charge: Charge,
) -> Step {
    let span = capacity * interval; // bounded by MAX_SPAN at construction
    let full_at = now.saturating_add(span);
    // Debt stops at one full bucket (the bucket is whole again within two refills): a
    // stored time from the future, or a runaway charge, never becomes a huge wait.
    let limit_at = now.saturating_add(span.saturating_mul(2));
    let start = tat.max(now).min(limit_at);
    // When the cost would fit; only what is stored is capped.
    let new_tat = start.saturating_add(cost.saturating_mul(interval));
    let fits = cost <= capacity && new_tat <= full_at;
    let charged = charge.applies(fits, cost, capacity);
    let after = if charged {
        new_tat.min(limit_at)
    } else {
        start
    };
    let remaining = full_at.saturating_sub(after) / interval;
    let reset = after - now;
    let decision = verdict(charge, fits, cost, capacity, remaining, reset, span, || {
        new_tat.saturating_sub(full_at)
    });
    Step {
        decision,
        next: charged.then_some(State::Bucket { tat: after }),
    }
}

#[cfg(test)]
mod tests {
    use crate::algorithm::Charge::*;
    use crate::algorithm::testing::Cell;
    use crate::limit::Params;
    use crate::protocol::Outcome;

    #[test]
    fn burst_then_refill() {
        // 10 tokens, 2 per second.
        let mut c = Cell::new(Params::Bucket {
            capacity: 10,
            interval: 500_000,
        });
        let t = 1_000_000_000;
        for i in 0..10 {
            let d = c.check(t, 1, IfFits);
            assert!(d.is_allowed());
            assert_eq!(d.remaining(), 9 - i);
        }
        let d = c.check(t, 1, IfFits);
        assert_eq!(d.outcome(), Outcome::Denied);
        assert_eq!(d.retry_after().unwrap().as_micros(), 500_000);
        assert_eq!(d.reset_after().as_micros(), 5_000_000);
        assert!(c.check(t + 500_000, 1, IfFits).is_allowed());
    }

    #[test]
    fn overdraw_creates_debt() {
        let mut c = Cell::new(Params::Bucket {
            capacity: 10,
            interval: 1_000,
        });
        c.check(0, 30, Overdraw);
        // 30 tokens spent from 10: debt stops at one full bucket (10), plus one → 11 ms.
        let d = c.probe(0, 1);
        assert_eq!(d.retry_after().unwrap().as_micros(), 11_000);
        assert_eq!(c.check(0, 11, IfFits).outcome(), Outcome::NeverFits);
    }
}
