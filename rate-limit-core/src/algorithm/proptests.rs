//! Property tests: every algorithm, on an injected clock, against its documented bound,
//! with exact retry-afters.

use proptest::prelude::*;

use super::Charge;
use super::testing::Cell;
use crate::limit::Params;
use crate::protocol::Outcome;

/// A start on a window boundary far from zero, like a real epoch time.
const T0: u64 = 1_800_000_000_000_000;

fn params() -> impl Strategy<Value = Params> {
    let quota = 1u64..=12;
    let window = prop_oneof![Just(1_000u64), 1_000u64..=50_000, Just(1_000_000)];
    (0..4usize, quota, window).prop_map(|(kind, quota, window)| match kind {
        0 => Params::Fixed { quota, window },
        1 => Params::Sliding { quota, window },
        2 => Params::Log { quota, window },
        _ => Params::Bucket {
            capacity: quota,
            interval: window.div_ceil(quota).max(1),
        },
    })
}

/// Arrivals as (gap since the previous one, cost); gaps scaled to the window.
fn traffic() -> impl Strategy<Value = Vec<(u64, u64)>> {
    prop::collection::vec(
        (0u64..=1_000, prop_oneof![4 => Just(1u64), 1 => 0u64..=5]),
        1..300,
    )
}

fn window_of(p: Params) -> u64 {
    match p {
        Params::Fixed { window, .. }
        | Params::Sliding { window, .. }
        | Params::Log { window, .. } => window,
        Params::Bucket { capacity, interval } => capacity * interval,
        Params::Ban { within, .. } => within,
        Params::Calendar { length, .. } => length,
        #[cfg(feature = "calendar")]
        Params::Period { start, end, .. } => end - start,
    }
}

/// Runs the traffic; checks every retry-after on the way; returns admissions (t, cost).
fn run(p: Params, events: &[(u64, u64)]) -> Result<Vec<(u64, u64)>, TestCaseError> {
    let w = window_of(p);
    let mut cell = Cell::new(p);
    let mut now = T0 + (w / 3);
    let mut admitted = Vec::new();
    for &(gap, cost) in events {
        now += gap * w / 400;
        let before = cell.state.clone();
        let d = cell.check(now, cost, Charge::IfFits);
        match d.outcome() {
            Outcome::Allowed => admitted.push((now, cost)),
            Outcome::NeverFits => {
                prop_assert!(cost > d.limit());
                prop_assert_eq!(&cell.state, &before, "never-fits changed the state");
                prop_assert_eq!(d.retry_after(), None);
            }
            Outcome::Denied => {
                prop_assert_eq!(&cell.state, &before, "a denial changed the state");
                let r = u64::try_from(d.retry_after().unwrap().as_micros()).unwrap();
                prop_assert!(r >= 1_000);
                if r > 1_000 {
                    let early = cell.probe(now + r - 1, cost);
                    prop_assert_eq!(early.outcome(), Outcome::Denied, "1 µs early, r = {}", r);
                }
                let on_time = cell.probe(now + r, cost);
                prop_assert_eq!(on_time.outcome(), Outcome::Allowed, "at retry-after {}", r);
            }
        }
    }
    Ok(admitted)
}

/// Units admitted in `[from, to)`.
fn sum(admitted: &[(u64, u64)], from: u64, to: u64) -> u64 {
    admitted
        .iter()
        .filter(|&&(t, _)| t >= from && t < to)
        .map(|&(_, c)| c)
        .sum()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn admissions_stay_within_the_documented_bound(p in params(), events in traffic()) {
        let admitted = run(p, &events)?;
        let w = window_of(p);
        match p {
            Params::Fixed { quota, window } | Params::Sliding { quota, window } => {
                // At most the quota per aligned window.
                for &(t, _) in &admitted {
                    let start = t / window * window;
                    prop_assert!(sum(&admitted, start, start + window) <= quota);
                }
                for &(t, _) in &admitted {
                    let rolling = sum(&admitted, t, t + window);
                    if matches!(p, Params::Fixed { .. }) {
                        prop_assert!(rolling <= 2 * quota);
                    } else {
                        prop_assert!(rolling < 2 * quota, "rolling {} of {}", rolling, quota);
                    }
                }
            }
            Params::Log { quota, window } => {
                for &(t, _) in &admitted {
                    prop_assert!(sum(&admitted, t, t + window) <= quota);
                }
            }
            Params::Bucket { capacity, interval } => {
                for (i, &(a, _)) in admitted.iter().enumerate() {
                    for &(b, _) in &admitted[i..] {
                        let n = sum(&admitted, a, b + 1);
                        prop_assert!(n <= capacity + (b - a) / interval,
                            "{} in [{}, {}] (cap {}, T {})", n, a, b, capacity, interval);
                    }
                }
                let _ = w;
            }
            // Not generated: a ban admits whatever it has not banned; a calendar's periods
            // are tested on a fake clock (store/memory/calendar_tests.rs).
            Params::Ban { .. } | Params::Calendar { .. } => {}
            #[cfg(feature = "calendar")]
            Params::Period { .. } => {}
        }
    }

    #[test]
    fn fixed_windows_roll_over_on_the_epoch_boundary(
        quota in 1u64..20, window in 1_000u64..=86_400_000_000, k in 1u64..1_000,
    ) {
        let p = Params::Fixed { quota, window };
        let mut cell = Cell::new(p);
        let boundary = (T0 / window + k) * window;
        let last = boundary - 1;
        for _ in 0..quota {
            prop_assert!(cell.check(last, 1, Charge::IfFits).is_allowed());
        }
        let d = cell.check(last, 1, Charge::IfFits);
        prop_assert_eq!(d.outcome(), Outcome::Denied);
        prop_assert_eq!(d.retry_after().unwrap().as_micros(), 1_000); // 1 µs, floored to 1 ms
        prop_assert!(cell.probe(boundary, quota).is_allowed());
    }

    #[test]
    fn saturating_costs_never_wrap_to_allowed(p in params(), cost in (u64::MAX - 10)..=u64::MAX) {
        let mut cell = Cell::new(p);
        cell.check(T0, cost, Charge::Overdraw);
        cell.check(T0, cost, Charge::Overdraw);
        prop_assert!(!cell.probe(T0, 1).is_allowed());
        prop_assert_eq!(cell.check(T0, cost, Charge::IfFits).outcome(), Outcome::NeverFits);
    }
}

#[test]
fn peek_changes_nothing() {
    for p in [
        Params::Fixed {
            quota: 3,
            window: 1_000_000,
        },
        Params::Sliding {
            quota: 3,
            window: 1_000_000,
        },
        Params::Log {
            quota: 3,
            window: 1_000_000,
        },
        Params::Bucket {
            capacity: 3,
            interval: 1_000,
        },
    ] {
        let mut cell = Cell::new(p);
        cell.check(T0, 2, Charge::IfFits);
        let before = cell.state.clone();
        let d = cell.check(T0 + 1, 0, Charge::IfFits);
        assert!(d.is_allowed());
        assert_eq!(d.remaining(), 1, "{p:?}");
        assert_eq!(cell.state, before);
    }
}
