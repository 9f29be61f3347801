//! Calendar quotas on Redis: a key per period, `<name>:<yyyymmdd>` (the local date the
//! period starts on), its count an integer as a fixed window's. The instance does the
//! calendar's arithmetic (the zone, its daylight saving changes, month lengths, the
//! anchor) and names two candidate periods from its estimate of the server's clock: the
//! period of `T` less a quarter of the period's nominal length, and the next. The script
//! picks between them by the server's `TIME`, as it picks windows, so an instance's clock
//! names candidates and never decides which period a check counts in; a server time in
//! neither is a chain "moved", named again from the time the answer showed.
//!
//! A calendar check's four numbers: `6 + 16 × (a + 2²² × b)` (the two periods' lengths
//! in whole seconds: a month and a daylight saving hour is ~2.7 million, under 2²²), the
//! quota, the boundary between the two periods (µs since the epoch), the cost.

#[cfg(feature = "calendar")]
use super::script::PERIOD;
use super::windows::expand;
#[cfg(feature = "calendar")]
use super::windows::window_key;
use crate::key::Key;

/// A calendar quota's calendar.
#[cfg(feature = "calendar")]
pub(super) type Cal = crate::limit::calendar::Calendar;

/// Without the `calendar` feature no check has a calendar.
#[cfg(not(feature = "calendar"))]
#[derive(Debug, Clone)]
pub(super) enum Cal {}

/// A chain's calendar quotas: each one's index in the chain and its calendar. Empty (no
/// allocation) for a chain without one.
pub(super) type Periods = Vec<(usize, Cal)>;

/// The calendar quotas among `keys` (one per check, in order).
pub(super) fn of<'a>(keys: impl IntoIterator<Item = &'a Key>) -> Periods {
    #[cfg(feature = "calendar")]
    {
        // The kind first, a plain field: a chain of other limits reads no parameters here.
        keys.into_iter()
            .enumerate()
            .filter(|(_, k)| k.limit().kind() == crate::AlgorithmKind::Calendar)
            .filter_map(|(i, k)| Some((i, k.calendar()?)))
            .collect()
    }
    #[cfg(not(feature = "calendar"))]
    {
        let _ = keys;
        Vec::new()
    }
}

/// Appends the keys the script reads for one chain's checks (`names`, one base name per
/// check) named at the estimate `t`, and writes each calendar quota's candidates into its
/// numbers (`checks`: four per check, as sent).
pub(super) fn name_keys(
    names: &[String],
    checks: &mut [u64],
    periods: &[(usize, Cal)],
    t: u64,
    out: &mut Vec<String>,
) {
    if periods.is_empty() {
        expand(names, checks, t, out);
        return;
    }
    for (i, name) in names.iter().enumerate() {
        let Some(check) = checks.get_mut(i * 4..i * 4 + 4) else {
            return;
        };
        match periods.iter().find(|(j, _)| *j == i) {
            Some((_, cal)) => candidates(name, cal, t, check, out),
            None => expand(std::slice::from_ref(name), check, t, out),
        }
    }
}

/// The two candidate periods at the estimate `t`: their keys, and the check's code and
/// boundary.
#[cfg(feature = "calendar")]
fn candidates(name: &str, cal: &Cal, t: u64, check: &mut [u64], out: &mut Vec<String>) {
    let a = cal.span_micros(t.saturating_sub(cal.nominal_micros() / 4));
    let b = cal.after(&a);
    let seconds = |s: &crate::calendar::PeriodSpan| {
        (s.end_micros().saturating_sub(s.start_micros()) / 1_000_000).min((1 << 22) - 1)
    };
    check[0] = PERIOD + 16 * (seconds(&a) + (seconds(&b) << 22));
    check[2] = a.end_micros();
    out.push(window_key(name, a.number()));
    out.push(window_key(name, b.number()));
}

#[cfg(not(feature = "calendar"))]
fn candidates(_: &str, cal: &Cal, _: u64, _: &mut [u64], _: &mut Vec<String>) {
    match *cal {}
}

/// The key of the period holding `at` (µs, the server's time of a charge): what a refund
/// of it changes.
#[cfg(feature = "calendar")]
pub(super) fn charged(name: &str, cal: &Cal, at: u64) -> String {
    window_key(name, cal.span_micros(at).number())
}

#[cfg(not(feature = "calendar"))]
pub(super) fn charged(_: &str, cal: &Cal, _: u64) -> String {
    match *cal {}
}

/// The keys that may hold a calendar quota's state at the estimate `t`: the period before
/// the estimate's, its own and the next.
#[cfg(feature = "calendar")]
pub(super) fn around(name: &str, cal: &Cal, t: u64) -> Vec<String> {
    let now = cal.span_micros(t);
    let before = cal.span_micros(now.start_micros().saturating_sub(1));
    let next = cal.after(&now);
    [before, now, next]
        .iter()
        .map(|s| window_key(name, s.number()))
        .collect()
}

#[cfg(not(feature = "calendar"))]
pub(super) fn around(_: &str, cal: &Cal, _: u64) -> Vec<String> {
    match *cal {}
}

#[cfg(all(test, feature = "calendar"))]
mod tests {
    use super::*;
    use crate::calendar::{Calendar, Period};

    /// 2026-12-06 23:59:50 at +01:00: ten seconds before a day's boundary.
    const NEAR: u64 = 1_796_597_990_000_000;

    #[test]
    fn a_day_names_its_period_and_the_next_with_their_lengths_and_boundary() {
        let cal = Calendar::new(Period::Day, "+01:00").unwrap();
        let mut check = [PERIOD, 100, 0, 1];
        let mut keys = Vec::new();
        name_keys(
            &["q".into()],
            &mut check,
            &[(0, cal.clone())],
            NEAR,
            &mut keys,
        );
        assert_eq!(keys, ["q:20261206", "q:20261207"]);
        assert_eq!(check[0], PERIOD + 16 * (86_400 + (86_400 << 22)));
        assert_eq!(check[2], NEAR + 10_000_000, "the boundary: local midnight");
        assert_eq!(charged("q", &cal, NEAR), "q:20261206");
        assert_eq!(charged("q", &cal, NEAR + 10_000_000), "q:20261207");
        assert_eq!(
            around("q", &cal, NEAR),
            ["q:20261205", "q:20261206", "q:20261207"]
        );
    }

    #[test]
    fn early_in_a_period_the_one_before_is_a_candidate_and_other_checks_keep_their_keys() {
        // Five hours into Berlin's 25-hour day (the clocks go back on 2026-10-25): the
        // estimate less six hours is in the day before, of 24 hours.
        let cal = Calendar::new(Period::Day, "Europe/Berlin").unwrap();
        let t = 1_792_879_200_000_000 + 5 * 3_600_000_000; // 2026-10-25 00:00 CEST + 5 h
        let w = 1_000_000;
        let mut checks = [1, 10, w, 1, PERIOD, 100, 0, 1];
        let mut keys = Vec::new();
        let names = ["f".to_owned(), "q".to_owned()];
        name_keys(&names, &mut checks, &[(1, cal)], t, &mut keys);
        let fixed: Vec<String> = {
            let mut v = Vec::new();
            expand(&names[..1], &[1, 10, w, 1], t, &mut v);
            v
        };
        assert_eq!(keys[..2], fixed[..]);
        assert_eq!(keys[2..], ["q:20261024", "q:20261025"]);
        assert_eq!(checks[4], PERIOD + 16 * (86_400 + (90_000 << 22)));
        assert_eq!(checks[6], 1_792_879_200_000_000);
    }
}
