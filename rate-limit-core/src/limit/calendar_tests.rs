//! Boundary arithmetic at fixed instants (the instant a test passes is its clock).

use jiff::Timestamp;
use jiff::civil::Weekday;

use super::{Anchor, Calendar, Period};
use crate::error::ConfigErrorKind;

fn at(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn hours(start: Timestamp, end: Timestamp) -> i64 {
    (end.as_second() - start.as_second()) / 3600
}

#[test]
fn a_berlin_day_is_23_hours_in_march_and_25_in_october() {
    let day = Calendar::new(Period::Day, "Europe/Berlin").unwrap();
    // 2026-03-29: the clocks go from 02:00 to 03:00 (CET to CEST).
    let spring = day.span(at("2026-03-29T12:00:00Z"));
    assert_eq!(spring.start(), at("2026-03-28T23:00:00Z"));
    assert_eq!(spring.end(), at("2026-03-29T22:00:00Z"));
    assert_eq!(hours(spring.start(), spring.end()), 23);
    assert_eq!(spring.number(), 20260329);
    // 2026-10-25: from 03:00 back to 02:00.
    let autumn = day.span(at("2026-10-25T12:00:00Z"));
    assert_eq!(autumn.start(), at("2026-10-24T22:00:00Z"));
    assert_eq!(autumn.end(), at("2026-10-25T23:00:00Z"));
    assert_eq!(hours(autumn.start(), autumn.end()), 25);
    // Either side of a boundary, to the microsecond.
    let before = day.span(at("2026-10-24T21:59:59.999999Z"));
    assert_eq!(before.number(), 20261024);
    assert_eq!(before.end(), autumn.start());
    assert_eq!(day.span(autumn.start()).number(), 20261025);
    assert_eq!(day.after(&before), autumn);
    // A day anchored at 02:30, a time the spring change skips: that day's period starts
    // after the gap (03:00 CEST), and the one before it is 23 hours and a half.
    let late = day.anchored(Anchor::CALENDAR.at(2, 30).unwrap());
    let skipped = late.span(at("2026-03-29T12:00:00Z"));
    assert_eq!(skipped.start(), at("2026-03-29T01:30:00Z"));
    let before = late.span(at("2026-03-29T01:00:00Z"));
    assert_eq!(before.end(), skipped.start());
    assert_eq!(before.start(), at("2026-03-28T01:30:00Z"));
}

#[test]
fn a_month_anchored_on_the_31st_ends_on_each_months_last_day() {
    let month = Calendar::new(Period::Month, "UTC")
        .unwrap()
        .anchored(Anchor::day(31).unwrap());
    let mut span = month.span(at("2027-01-31T00:00:00Z"));
    let mut starts = vec![span.start()];
    for _ in 0..4 {
        span = month.after(&span);
        starts.push(span.start());
    }
    let want = [
        "2027-01-31T00:00:00Z",
        "2027-02-28T00:00:00Z",
        "2027-03-31T00:00:00Z",
        "2027-04-30T00:00:00Z",
        "2027-05-31T00:00:00Z",
    ];
    assert_eq!(starts, want.map(at));
    // A leap year: February's period starts on the 29th.
    let leap = month.span(at("2028-03-01T00:00:00Z"));
    assert_eq!(leap.start(), at("2028-02-29T00:00:00Z"));
    assert_eq!(leap.end(), at("2028-03-31T00:00:00Z"));
    assert_eq!(leap.number(), 20280229);
    // Just before the anchor, the period is the previous month's.
    let before = month.span(at("2027-03-30T23:59:59Z"));
    assert_eq!(before.start(), at("2027-02-28T00:00:00Z"));
    // Billing on the 15th at 09:00 in Berlin.
    let billing = Calendar::new(Period::Month, "Europe/Berlin")
        .unwrap()
        .anchored(Anchor::day(15).unwrap().at(9, 0).unwrap());
    let s = billing.span(at("2026-12-15T07:59:59Z"));
    assert_eq!(s.start(), at("2026-11-15T08:00:00Z"));
    assert_eq!(s.end(), at("2026-12-15T08:00:00Z"));
    assert_eq!(billing.span(s.end()).number(), 20261215);
}

#[test]
fn a_week_from_monday_crosses_the_year_end() {
    let week = Calendar::new(Period::WEEK, "UTC").unwrap();
    // 2026-12-31 is a Thursday.
    let s = week.span(at("2026-12-31T15:00:00Z"));
    assert_eq!(s.start(), at("2026-12-28T00:00:00Z"));
    assert_eq!(s.end(), at("2027-01-04T00:00:00Z"));
    assert_eq!(s.number(), 20261228);
    assert_eq!(week.span(at("2027-01-03T23:59:59Z")), s);
    // From Sunday, in a fixed offset.
    let sunday = Calendar::new(
        Period::Week {
            first: Weekday::Sunday,
        },
        "-05:00",
    )
    .unwrap();
    let s = sunday.span(at("2027-01-01T03:00:00Z")); // Thursday 22:00 at -05:00
    assert_eq!(s.start(), at("2026-12-27T05:00:00Z"));
    assert_eq!(s.end(), at("2027-01-03T05:00:00Z"));
}

#[test]
fn a_bad_zone_or_anchor_is_a_configuration_error_with_a_stable_code() {
    for zone in ["Mars/Olympus", "+25:00", "+5:x", "", "Europe/"] {
        let e = Calendar::new(Period::Day, zone).unwrap_err();
        assert_eq!(e.kind(), ConfigErrorKind::CalendarZoneUnknown, "{zone}");
        assert_eq!(e.code(), "calendar.zone_unknown");
    }
    for day in [0, 32] {
        assert_eq!(
            Anchor::day(day).unwrap_err().code(),
            "calendar.anchor_invalid"
        );
    }
    assert_eq!(
        Anchor::CALENDAR.at(24, 0).unwrap_err().code(),
        "calendar.anchor_invalid"
    );
    assert!(Calendar::new(Period::Day, "+05:30").is_ok());
    assert!(Calendar::new(Period::Day, "utc").is_ok());
}

#[test]
fn periods_and_anchors_parse_as_a_configuration_file_writes_them() {
    assert_eq!("day".parse::<Period>().unwrap(), Period::Day);
    assert_eq!("week".parse::<Period>().unwrap(), Period::WEEK);
    assert_eq!(
        "week:sunday".parse::<Period>().unwrap(),
        Period::Week {
            first: Weekday::Sunday
        }
    );
    assert_eq!("month".parse::<Period>().unwrap(), Period::Month);
    for bad in [
        "",
        "Month",
        "year",
        "week:",
        "week:someday",
        "day:monday",
        "30d",
    ] {
        let e = bad.parse::<Period>().unwrap_err();
        assert_eq!(e.code(), "calendar.period_invalid", "{bad:?}");
    }
    let a: Anchor = "15 09:30".parse().unwrap();
    assert_eq!(
        (a.day_of_month(), a.time().hour(), a.time().minute()),
        (15, 9, 30)
    );
    let a: Anchor = "31".parse().unwrap();
    assert_eq!((a.day_of_month(), a.time().hour()), (31, 0));
    let a: Anchor = "23:59".parse().unwrap();
    assert_eq!(
        (a.day_of_month(), a.time().hour(), a.time().minute()),
        (1, 23, 59)
    );
    for bad in [
        "",
        "0",
        "32",
        "15 24:00",
        "15 9:00",
        "15  09:00",
        "09:60",
        "x",
        "15 09:00:00",
        "-1",
    ] {
        let e = bad.parse::<Anchor>().unwrap_err();
        assert_eq!(e.code(), "calendar.anchor_invalid", "{bad:?}");
    }
}

#[test]
fn an_offset_may_name_seconds_so_a_boundary_can_be_placed_to_the_second() {
    let day = Calendar::new(Period::Day, "+01:00:30").unwrap();
    let s = day.span(at("2026-12-06T12:00:00Z"));
    assert_eq!(s.start(), at("2026-12-05T22:59:30Z"));
    assert_eq!(s.end(), at("2026-12-06T22:59:30Z"));
    let west = Calendar::new(Period::Day, "-05").unwrap();
    assert_eq!(
        west.span(at("2026-12-06T12:00:00Z")).start(),
        at("2026-12-06T05:00:00Z")
    );
    for bad in ["+1:00", "+01:0", "+01:00:60", "+19:00", "+01:00:00:00", "+"] {
        assert_eq!(
            Calendar::new(Period::Day, bad).unwrap_err().code(),
            "calendar.zone_unknown",
            "{bad:?}"
        );
    }
}

#[test]
fn an_anchor_travels_as_a_number_and_back() {
    let mut codes = std::collections::HashSet::new();
    for day in 1..=31 {
        for (h, m) in [(0, 0), (9, 30), (23, 59)] {
            let a = Anchor::day(day).unwrap().at(h, m).unwrap();
            let code = a.code();
            assert!(code >= 1 && codes.insert(code), "{a:?}: {code}");
            assert_eq!(Anchor::from_code(code), Some(a));
        }
    }
    assert_eq!(Anchor::CALENDAR.code(), 1);
    assert_eq!(Anchor::from_code(0), None);
    assert_eq!(Anchor::from_code(44_641), None, "past the 31st, 23:59");
}
