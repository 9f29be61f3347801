//! Calendar quotas on the memory store, on a fake clock: the count restarts at the
//! period's boundary (a Berlin day, a month anchored on the 31st), the wait points at the
//! boundary, a decision carries the period's own length, and units given back reach only
//! the period they were charged in.

use std::time::Duration;

use crate::clock::FakeClock;
use crate::limit::calendar::{Anchor, Calendar, Period};
use crate::protocol::Reservation;
use crate::{Chain, Limit, MemoryStore, Principal};

fn micros(s: &str) -> u64 {
    let t: jiff::Timestamp = s.parse().unwrap();
    u64::try_from(t.as_microsecond()).unwrap()
}

fn store_at(clock: &FakeClock) -> MemoryStore {
    MemoryStore::builder().clock(clock.clone()).build().unwrap()
}

#[test]
fn a_days_count_restarts_at_midnight_in_its_zone() {
    // 2026-10-25 in Berlin is 25 hours long (the clocks go back at 03:00).
    let clock = FakeClock::at_micros(micros("2026-10-25T22:59:58Z")); // 23:59:58 local
    let store = store_at(&clock);
    let day = Calendar::new(Period::Day, "Europe/Berlin").unwrap();
    let limit = Limit::calendar("daily", 3, day).unwrap();
    let chain = Chain::new().check(&limit, Principal::user("u"));
    for left in [2, 1, 0] {
        let d = store.check_now(&chain);
        assert!(d.is_allowed());
        assert_eq!(d.decisions()[0].remaining(), left);
        assert_eq!(d.decisions()[0].window(), Duration::from_secs(25 * 3600));
        assert_eq!(d.decisions()[0].reset_after(), Duration::from_secs(2));
    }
    let refused = store.check_now(&chain);
    let d = refused.denied_by().unwrap().1;
    assert_eq!(
        d.retry_after(),
        Some(Duration::from_secs(2)),
        "to the boundary"
    );
    // A microsecond before the boundary: still this day's.
    clock.set_micros(micros("2026-10-25T22:59:59.999999Z"));
    assert!(!store.check_now(&chain).is_allowed());
    // At the boundary, the next day's count: from nothing, a day of 24 hours.
    clock.set_micros(micros("2026-10-25T23:00:00Z"));
    let d = store.check_now(&chain);
    assert!(d.is_allowed());
    assert_eq!(d.decisions()[0].remaining(), 2);
    assert_eq!(d.decisions()[0].window(), Duration::from_secs(24 * 3600));
}

#[test]
fn a_month_from_the_31st_runs_to_the_last_of_february() {
    let clock = FakeClock::at_micros(micros("2027-02-15T12:00:00Z"));
    let store = store_at(&clock);
    let plan = Calendar::new(Period::Month, "UTC")
        .unwrap()
        .anchored(Anchor::day(31).unwrap());
    let limit = Limit::calendar("plan", 10, plan).unwrap();
    let chain = Chain::new().check_cost(&limit, Principal::api_key("sk_live_1"), 10);
    let d = store.check_now(&chain);
    assert!(d.is_allowed());
    // Jan 31 to Feb 28: 28 days; 12 days and a half left of it.
    assert_eq!(d.decisions()[0].window(), Duration::from_secs(28 * 86_400));
    let retry = store.check_now(&chain).denied_by().unwrap().1.retry_after();
    assert_eq!(retry, Some(Duration::from_secs(12 * 86_400 + 12 * 3600)));
    clock.set_micros(micros("2027-02-28T00:00:00Z"));
    assert!(
        store.check_now(&chain).is_allowed(),
        "a new period on Feb 28"
    );
}

#[test]
fn units_given_back_reach_only_the_period_they_were_charged_in() {
    let clock = FakeClock::at_micros(micros("2026-12-06T23:59:59Z"));
    let store = store_at(&clock);
    let limit = Limit::calendar("d", 5, Calendar::new(Period::Day, "UTC").unwrap()).unwrap();
    let chain = Chain::new().check_cost(&limit, Principal::user("u"), 2);
    let first = store.check_now(&chain);
    let back = Reservation::of(&chain, &first, crate::protocol::CountedIn::Store).unwrap();
    // Given back in the same day: the two units are there again.
    store.give_back_now(&back);
    let peek = Chain::new().check_cost(&limit, Principal::user("u"), 0);
    assert_eq!(store.check_now(&peek).decisions()[0].remaining(), 5);
    let kept = store.check_now(&chain);
    clock.set_micros(micros("2026-12-07T00:00:01Z"));
    assert!(store.check_now(&chain).is_allowed());
    // Yesterday's units given back today: today's count stays.
    let back = Reservation::of(&chain, &kept, crate::protocol::CountedIn::Store).unwrap();
    store.give_back_now(&back);
    assert_eq!(store.check_now(&peek).decisions()[0].remaining(), 3);
}

#[test]
fn a_calendar_quota_is_neither_leased_nor_delayed() {
    let day = || Calendar::new(Period::Day, "UTC").unwrap();
    let e = Limit::calendar("d", 5, day())
        .unwrap()
        .leased(2, Duration::from_millis(50))
        .unwrap_err();
    assert_eq!(e.code(), "limit.lease_invalid");
    let delay = crate::Delay::doubling(2, Duration::from_secs(1), Duration::from_secs(4)).unwrap();
    let e = Limit::calendar("d", 5, day())
        .unwrap()
        .delayed(delay)
        .unwrap_err();
    assert_eq!(e.code(), "limit.delay_invalid");
    assert_eq!(
        Limit::calendar("d", 0, day()).unwrap_err().code(),
        "limit.quota_zero"
    );
}
