//! Calendar periods: a day, a week or a month in a time zone, from an anchor. The
//! boundaries come from the calendar (days of 23 and 25 hours where the clocks change,
//! leap days, months of 28 to 31 days), never from a fixed length.
//!
//! ```
//! use ratekeeper_core::calendar::{Anchor, Calendar, Period, Timestamp};
//!
//! // A month from each customer's billing day: the 31st is the month's last day where the
//! // month is shorter.
//! let plan = Calendar::new(Period::Month, "Europe/Berlin")?.anchored(Anchor::day(31)?);
//! let at: Timestamp = "2026-02-15T12:00:00Z".parse()?;
//! let span = plan.span(at);
//! assert_eq!(span.start().to_string(), "2026-01-30T23:00:00Z"); // Jan 31, 00:00 in Berlin
//! assert_eq!(span.end().to_string(), "2026-02-27T23:00:00Z"); // Feb 28, 00:00 in Berlin
//! assert_eq!(span.number(), 20260131);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use jiff::civil::{Date, Time, Weekday};
use jiff::tz::TimeZone;
use jiff::{Timestamp, ToSpan};

use crate::error::{ConfigError, ConfigErrorKind};

/// How long a calendar period is.
///
/// You pick one when you build a `Calendar`: a quota per day, per week from a chosen first
/// day, or per month.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Period {
    /// A day, from the anchor's time of day (midnight by default).
    Day,
    /// A week, from its first day (`first`) at the anchor's time of day.
    Week {
        /// The week's first day (Monday for ISO weeks, Sunday in the United States).
        first: Weekday,
    },
    /// A month, from the anchor's day of the month (the first by default; days 29 to 31
    /// are the month's last day in shorter months) at the anchor's time of day.
    Month,
}

impl Period {
    /// A week starting on Monday (ISO 8601).
    pub const WEEK: Period = Period::Week {
        first: Weekday::Monday,
    };
}

impl std::str::FromStr for Period {
    type Err = ConfigError;

    /// `day`, `week` (from Monday), `week:<day>` (`week:sunday`) or `month`, as a
    /// configuration file writes it.
    ///
    /// # Errors
    ///
    /// `calendar.period_invalid` for anything else.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || {
            ConfigError::new(
                ConfigErrorKind::CalendarPeriodInvalid,
                "period",
                format!("a period is day, week, week:<day> (week:sunday) or month, not {s:?}"),
            )
        };
        match s.split_once(':') {
            None if s == "day" => Ok(Self::Day),
            None if s == "week" => Ok(Self::WEEK),
            None if s == "month" => Ok(Self::Month),
            Some(("week", day)) => {
                let first = match day {
                    "monday" => Weekday::Monday,
                    "tuesday" => Weekday::Tuesday,
                    "wednesday" => Weekday::Wednesday,
                    "thursday" => Weekday::Thursday,
                    "friday" => Weekday::Friday,
                    "saturday" => Weekday::Saturday,
                    "sunday" => Weekday::Sunday,
                    _ => return Err(bad()),
                };
                Ok(Self::Week { first })
            }
            _ => Err(bad()),
        }
    }
}

/// Where each period starts: a day of the month (months only) and a time of day, in the
/// calendar's zone. The default, [`Anchor::CALENDAR`], is the calendar's own start: the
/// first of the month, midnight.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Anchor {
    day: i8,
    time: Time,
}

impl Anchor {
    /// The calendar's own start: the first of the month, at midnight.
    pub const CALENDAR: Anchor = Anchor {
        day: 1,
        time: Time::midnight(),
    };

    /// A billing day of the month (1 to 31), at midnight.
    ///
    /// # Errors
    ///
    /// `calendar.anchor_invalid` for a day outside 1 to 31.
    pub fn day(day: u8) -> Result<Self, ConfigError> {
        if !(1..=31).contains(&day) {
            return Err(ConfigError::new(
                ConfigErrorKind::CalendarAnchorInvalid,
                "anchor",
                format!("a billing day is 1 to 31, not {day}"),
            ));
        }
        Ok(Self {
            day: day as i8,
            time: Time::midnight(),
        })
    }

    /// The same anchor at `hour:minute` (24-hour clock) instead of midnight.
    ///
    /// # Errors
    ///
    /// `calendar.anchor_invalid` for an hour above 23 or a minute above 59.
    pub fn at(self, hour: u8, minute: u8) -> Result<Self, ConfigError> {
        let time = Time::new(hour as i8, minute as i8, 0, 0).map_err(|_| {
            ConfigError::new(
                ConfigErrorKind::CalendarAnchorInvalid,
                "anchor",
                format!("a time of day is 00:00 to 23:59, not {hour}:{minute:02}"),
            )
        })?;
        Ok(Self { time, ..self })
    }

    /// The day of the month (1 to 31).
    pub fn day_of_month(self) -> u8 {
        self.day as u8
    }

    /// The time of day.
    pub fn time(self) -> Time {
        self.time
    }
}

impl std::str::FromStr for Anchor {
    type Err = ConfigError;

    /// A day of the month, a time of day, or both: `15`, `09:00`, `15 09:00`.
    ///
    /// # Errors
    ///
    /// `calendar.anchor_invalid` for anything else, a day outside 1 to 31 or a time past
    /// 23:59.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || {
            ConfigError::new(
                ConfigErrorKind::CalendarAnchorInvalid,
                "anchor",
                format!("an anchor is a day (15), a time (09:00) or both (15 09:00), not {s:?}"),
            )
        };
        let number = |p: &str| {
            (!p.is_empty() && p.len() <= 2 && p.bytes().all(|b| b.is_ascii_digit()))
                .then(|| p.parse::<u8>().ok())
                .flatten()
        };
        let (day, time) = match s.split_once(' ') {
            Some((d, t)) => (Some(d), Some(t)),
            None if s.contains(':') => (None, Some(s)),
            None => (Some(s), None),
        };
        let mut anchor = match day {
            Some(d) => Self::day(number(d).ok_or_else(bad)?)?,
            None => Self::CALENDAR,
        };
        if let Some(t) = time {
            let (h, m) = t.split_once(':').ok_or_else(bad)?;
            if h.len() != 2 || m.len() != 2 {
                return Err(bad());
            }
            anchor = anchor.at(number(h).ok_or_else(bad)?, number(m).ok_or_else(bad)?)?;
        }
        Ok(anchor)
    }
}

impl Default for Anchor {
    fn default() -> Self {
        Self::CALENDAR
    }
}

impl Anchor {
    /// The anchor as a number from 1 (the 1st, 00:00) to 44 640 (the 31st, 23:59), 0 being
    /// none: how a key's parameters carry it.
    pub(crate) fn code(self) -> u16 {
        let minutes = i32::from(self.time.hour()) * 60 + i32::from(self.time.minute());
        u16::try_from(1 + (i32::from(self.day) - 1) * 1_440 + minutes).unwrap_or(0)
    }

    /// The anchor of a [`code`](Self::code) (none for 0 or a number past the 31st).
    pub(crate) fn from_code(code: u16) -> Option<Self> {
        let n = code.checked_sub(1)?;
        let (day, minutes) = (n / 1_440 + 1, n % 1_440);
        Self::day(u8::try_from(day).ok()?)
            .ok()?
            .at(
                u8::try_from(minutes / 60).ok()?,
                u8::try_from(minutes % 60).ok()?,
            )
            .ok()
    }
}

/// A calendar: a [`Period`] in a time zone, from an [`Anchor`].
///
/// You need one for a quota that restarts at a calendar day, week or month in a time zone,
/// not after a span since the first request: pass it to `Limit::calendar` (feature
/// `calendar`).
#[derive(Debug, Clone, PartialEq)]
pub struct Calendar {
    period: Period,
    zone: TimeZone,
    anchor: Anchor,
}

/// One period: its start and end (the next period's start), and its number, the local
/// date it starts on as `yyyymmdd` (a key's suffix: a new period is a new key).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeriodSpan {
    start: Timestamp,
    end: Timestamp,
    number: i64,
}

impl PeriodSpan {
    /// Where the period starts.
    pub fn start(&self) -> Timestamp {
        self.start
    }

    /// Where it ends: the next period's start.
    pub fn end(&self) -> Timestamp {
        self.end
    }

    /// The local date it starts on, as `yyyymmdd`.
    pub fn number(&self) -> i64 {
        self.number
    }
}

impl Calendar {
    /// A calendar of `period` in `zone`: `UTC`, a fixed offset (`+05:30`, `-08:00`,
    /// `+01:00:30`) or an IANA name (`Europe/Berlin`), from [`Anchor::CALENDAR`].
    ///
    /// IANA names are read from the system's time zone database (`/usr/share/zoneinfo`
    /// on Unix; bundled on Windows); with the `calendar-tzdb` feature, from a copy built
    /// into the program, for images that have none (`scratch`, distroless).
    ///
    /// # Errors
    ///
    /// `calendar.zone_unknown` for a zone that is none of these, or whose name the
    /// database does not hold.
    pub fn new(period: Period, zone: &str) -> Result<Self, ConfigError> {
        Ok(Self {
            period,
            zone: parse_zone(zone)?,
            anchor: Anchor::CALENDAR,
        })
    }

    /// The same calendar from `anchor` (for a day, only its time counts; for a week,
    /// its time, from the week's first day).
    #[must_use]
    pub fn anchored(self, anchor: Anchor) -> Self {
        Self { anchor, ..self }
    }

    /// The period.
    pub fn period(&self) -> Period {
        self.period
    }

    /// The anchor.
    pub fn anchor(&self) -> Anchor {
        self.anchor
    }

    /// The time zone.
    pub fn zone(&self) -> &TimeZone {
        &self.zone
    }

    /// The period `at` falls in.
    pub fn span(&self, at: Timestamp) -> PeriodSpan {
        let date = at.to_zoned(self.zone.clone()).date();
        let mut first = self.first_on_or_before(date);
        let mut start = self.instant(first);
        if start > at {
            first = self.previous(first);
            start = self.instant(first);
        }
        let end = self.instant(self.next(first));
        PeriodSpan {
            start,
            end,
            number: i64::from(first.year()) * 10_000
                + i64::from(first.month()) * 100
                + i64::from(first.day()),
        }
    }

    /// The period after `span`.
    pub fn after(&self, span: &PeriodSpan) -> PeriodSpan {
        self.span(span.end)
    }

    /// The first day of the period holding `date` by the calendar (its instant may still
    /// be after a moment of `date`: the anchor's time).
    fn first_on_or_before(&self, date: Date) -> Date {
        match self.period {
            Period::Day => date,
            Period::Week { first } => {
                let back = date.weekday().since(first);
                date.checked_sub(i64::from(back).days()).unwrap_or(date)
            }
            Period::Month => {
                let this = self.month_day(date.year(), date.month());
                if this <= date {
                    this
                } else {
                    let prev = date.first_of_month().checked_sub(1.day()).unwrap_or(date);
                    self.month_day(prev.year(), prev.month())
                }
            }
        }
    }

    /// The anchor's day in a month: its day, or the month's last if the month is shorter.
    fn month_day(&self, year: i16, month: i8) -> Date {
        let last = Date::new(year, month, 1).map_or(28, |d| d.days_in_month());
        Date::new(year, month, self.anchor.day.min(last)).unwrap_or(Date::MIN)
    }

    fn previous(&self, first: Date) -> Date {
        match self.period {
            Period::Day => first.checked_sub(1.day()).unwrap_or(first),
            Period::Week { .. } => first.checked_sub(1.week()).unwrap_or(first),
            Period::Month => {
                let prev = first.first_of_month().checked_sub(1.day()).unwrap_or(first);
                self.month_day(prev.year(), prev.month())
            }
        }
    }

    fn next(&self, first: Date) -> Date {
        match self.period {
            Period::Day => first.checked_add(1.day()).unwrap_or(first),
            Period::Week { .. } => first.checked_add(1.week()).unwrap_or(first),
            Period::Month => {
                let next = first.last_of_month().checked_add(1.day()).unwrap_or(first);
                self.month_day(next.year(), next.month())
            }
        }
    }

    /// The instant a period starting on `date` starts: the anchor's time there, or, where
    /// the clocks skip that time, the first moment after the gap (a later instant for a
    /// time that occurs twice: the first).
    fn instant(&self, date: Date) -> Timestamp {
        self.zone
            .to_ambiguous_timestamp(date.to_datetime(self.anchor.time))
            .compatible()
            .unwrap_or(Timestamp::MIN)
    }
}

impl Calendar {
    /// A period's nominal length (µs), what [`Limit::window`](crate::Limit::window)
    /// reports: a day, seven days, or 30 days for a month. Decisions carry each period's
    /// own length.
    pub(crate) fn nominal_micros(&self) -> u64 {
        const DAY: u64 = 86_400_000_000;
        match self.period {
            Period::Day => DAY,
            Period::Week { .. } => 7 * DAY,
            Period::Month => 30 * DAY,
        }
    }

    /// The period holding `at` (µs since the epoch).
    pub(crate) fn span_micros(&self, at: u64) -> PeriodSpan {
        self.span(
            Timestamp::from_microsecond(i64::try_from(at).unwrap_or(i64::MAX))
                .unwrap_or(Timestamp::MAX),
        )
    }

    /// The period holding `now` (µs since the epoch) as the parameters a check runs on.
    pub(crate) fn period_params(&self, quota: u64, now: u64) -> super::Params {
        let span = self.span_micros(now);
        super::Params::Period {
            quota,
            number: u64::try_from(span.number).unwrap_or(0),
            start: span.start_micros(),
            end: span.end_micros(),
        }
    }
}

impl PeriodSpan {
    /// Its start, µs since the epoch (0 before it).
    pub(crate) fn start_micros(&self) -> u64 {
        u64::try_from(self.start.as_microsecond()).unwrap_or(0)
    }

    /// Its end, µs since the epoch (0 before it).
    pub(crate) fn end_micros(&self) -> u64 {
        u64::try_from(self.end.as_microsecond()).unwrap_or(0)
    }
}

/// `UTC`, a fixed offset or an IANA name.
fn parse_zone(zone: &str) -> Result<TimeZone, ConfigError> {
    let unknown = |why: &str| {
        ConfigError::new(
            ConfigErrorKind::CalendarZoneUnknown,
            "zone",
            format!(
                "{zone:?} is not UTC, an offset (+05:30) or a zone the time zone database \
                 holds ({why}; the `calendar-tzdb` feature builds a copy of the database in)"
            ),
        )
    };
    if zone.eq_ignore_ascii_case("utc") || zone == "Z" {
        return Ok(TimeZone::UTC);
    }
    if let Some(rest) = zone.strip_prefix(['+', '-']) {
        // ±hh, ±hh:mm or ±hh:mm:ss.
        let mut parts = rest.split(':').map(|p| {
            (p.len() == 2 && p.bytes().all(|b| b.is_ascii_digit()))
                .then(|| p.parse::<i32>().ok())
                .flatten()
        });
        let (h, m, sec) = (parts.next(), parts.next(), parts.next());
        let seconds = match (h.flatten(), m.unwrap_or(Some(0)), sec.unwrap_or(Some(0))) {
            (Some(h), Some(m), Some(sec))
                if parts.next().is_none() && h <= 18 && m < 60 && sec < 60 =>
            {
                h * 3600 + m * 60 + sec
            }
            _ => {
                return Err(unknown(
                    "an offset is ±hh, ±hh:mm or ±hh:mm:ss, at most 18 hours",
                ));
            }
        };
        let seconds = if zone.starts_with('-') {
            -seconds
        } else {
            seconds
        };
        let offset = jiff::tz::Offset::from_seconds(seconds)
            .map_err(|_| unknown("an offset is ±hh:mm, at most 18 hours"))?;
        return Ok(TimeZone::fixed(offset));
    }
    jiff::tz::db()
        .get(zone)
        .map_err(|_| unknown("no such name"))
}

#[cfg(test)]
#[path = "calendar_tests.rs"]
mod tests;
