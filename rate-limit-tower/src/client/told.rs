//! What an upstream's answer says of its limits: refused or not, how long to wait, what it
//! allows. Read from the status, `Retry-After` (seconds or an HTTP date), the IETF
//! `RateLimit` / `RateLimit-Policy` fields (draft-11), the older `RateLimit-Limit`,
//! `-Remaining`, `-Reset` trio and its `X-RateLimit-*` form, and gRPC's `grpc-status`,
//! `grpc-retry-pushback-ms` and `RetryInfo`. What does not parse is ignored, every time
//! computed from an upstream's numbers saturates (a date past any clock is "far", then held
//! to the bound), and no wait is longer than the caller's bound.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::{HeaderMap, StatusCode};

/// gRPC's `RESOURCE_EXHAUSTED`.
const GRPC_RESOURCE_EXHAUSTED: &str = "8";

/// A set of HTTP statuses (100 to 999), as bits: `Copy`, and no allocation to ask.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Statuses([u64; 16]);

impl Statuses {
    pub(crate) fn of(codes: impl IntoIterator<Item = StatusCode>) -> Self {
        let mut s = Self::default();
        for c in codes {
            let c = usize::from(c.as_u16());
            s.0[c / 64] |= 1 << (c % 64);
        }
        s
    }

    fn contains(&self, c: StatusCode) -> bool {
        let c = usize::from(c.as_u16());
        self.0[c / 64] & (1 << (c % 64)) != 0
    }
}

/// Which answers are refusals.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Refusals {
    /// Always a refusal (429 and 503 by default).
    pub(crate) always: Statuses,
    /// A refusal when the answer says how long to wait — `Retry-After` (or gRPC's pushback),
    /// or no quota left until a reset — and otherwise an answer like any other (403 by
    /// default: GitHub's primary and secondary limits; a 403 that says neither is about
    /// permissions, not pace).
    pub(crate) when_told: Statuses,
}

impl Default for Refusals {
    fn default() -> Self {
        Self {
            always: Statuses::of([
                StatusCode::TOO_MANY_REQUESTS,
                StatusCode::SERVICE_UNAVAILABLE,
            ]),
            when_told: Statuses::of([StatusCode::FORBIDDEN]),
        }
    }
}

/// What one answer said.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Told {
    /// A refusal: a status of [`Refusals`], or gRPC `RESOURCE_EXHAUSTED`.
    pub(crate) refused: bool,
    /// How long to wait before the next call (a refusal's `Retry-After`, or no quota left
    /// until a reset), at most the bound.
    pub(crate) wait: Option<Duration>,
    /// The most the upstream says it allows, in calls a second (the strictest policy).
    pub(crate) allows: Option<f64>,
}

/// Reads `status` and `headers` at `now`; no wait past `bound`.
pub(crate) fn told(
    status: StatusCode,
    headers: &HeaderMap,
    now: SystemTime,
    bound: Duration,
    refusals: &Refusals,
) -> Told {
    let text = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    // Now as seconds since the epoch: every date below is compared as a `Duration`, which
    // saturates, never added to a `SystemTime`, which panics past its range.
    let now = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    let grpc_refused = text("grpc-status") == Some(GRPC_RESOURCE_EXHAUSTED);
    let retry_after = text("retry-after")
        .and_then(|v| retry_after(v, now))
        .or_else(|| text("grpc-retry-pushback-ms").and_then(pushback))
        .or_else(|| {
            headers
                .get("grpc-status-details-bin")
                .and_then(|v| super::grpc::retry_info(v.as_bytes()))
        });
    let (allows, empty_until) = ietf(text("ratelimit-policy"), text("ratelimit"))
        .or_else(|| trio(&text, "ratelimit-", now))
        .or_else(|| trio(&text, "x-ratelimit-", now))
        .unwrap_or_default();
    let refused = refusals.always.contains(status)
        || grpc_refused
        || (refusals.when_told.contains(status)
            && (retry_after.is_some() || empty_until.is_some()));
    let wait = if refused {
        retry_after.or(empty_until)
    } else {
        empty_until
    }
    .map(|w| w.min(bound));
    Told {
        refused,
        wait,
        allows,
    }
}

/// `Retry-After`: delta-seconds or an HTTP date (past: no wait). `now` and the date are
/// times since the epoch.
fn retry_after(v: &str, now: Duration) -> Option<Duration> {
    if let Ok(secs) = v.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    Some(http_date(v)?.saturating_sub(now))
}

/// `grpc-retry-pushback-ms`: milliseconds (negative: do not retry, no wait said).
fn pushback(v: &str) -> Option<Duration> {
    v.parse::<u64>().ok().map(Duration::from_millis)
}

/// The IETF fields: the strictest policy's rate (`q` over `w` seconds, `w` 1 when absent)
/// and, when a limit has nothing left (`r=0`), its reset (`t` seconds).
fn ietf(policy: Option<&str>, state: Option<&str>) -> Option<(Option<f64>, Option<Duration>)> {
    if policy.is_none() && state.is_none() {
        return None;
    }
    let allows = policy.map(members).into_iter().flatten().filter_map(|m| {
        let q = m.param("q")?;
        let w = m.param("w").unwrap_or(1);
        (q > 0 && w > 0).then(|| q as f64 / w as f64)
    });
    let allows = allows.reduce(f64::min);
    let empty = state
        .map(members)
        .into_iter()
        .flatten()
        .filter(|m| m.param("r") == Some(0))
        .filter_map(|m| m.param("t"))
        .max()
        .map(Duration::from_secs);
    Some((allows, empty))
}

/// The older trio under `prefix` (`ratelimit-` or `x-ratelimit-`): a limit, with its window
/// when it names one (`10, 10;w=1`); nothing left (`remaining: 0`) until its reset (delta
/// seconds, or Unix time when it is no earlier than a day before now). Where no window is
/// named (GitHub's `x-ratelimit-limit: 5000`), what remains spread over the time to the
/// reset is the most it allows.
fn trio<'a>(
    text: &impl Fn(&str) -> Option<&'a str>,
    prefix: &str,
    now: Duration,
) -> Option<(Option<f64>, Option<Duration>)> {
    let limit = text(&format!("{prefix}limit"));
    let remaining = text(&format!("{prefix}remaining"));
    if limit.is_none() && remaining.is_none() {
        return None;
    }
    let windowed = limit.and_then(|l| {
        members(l)
            .filter_map(|m| Some(m.value? as f64 / m.param("w")? as f64))
            .filter(|r| *r > 0.0)
            .reduce(f64::min)
    });
    let remaining = remaining.and_then(|r| r.parse::<u64>().ok());
    // A reset at or after a day before now, read as Unix time, is one (GitHub's); anything
    // smaller is seconds from now.
    let until_reset = text(&format!("{prefix}reset"))
        .and_then(|r| r.parse::<u64>().ok())
        .map(|r| {
            let r = Duration::from_secs(r);
            if r >= now.saturating_sub(Duration::from_secs(86_400)) {
                r.saturating_sub(now)
            } else {
                r
            }
        });
    let empty = match (remaining, until_reset) {
        (Some(0), Some(d)) => Some(d),
        _ => None,
    };
    let spread = match (remaining, until_reset) {
        (Some(left @ 1..), Some(d)) if limit.is_some() && !d.is_zero() => {
            Some(left as f64 / d.as_secs_f64())
        }
        _ => None,
    };
    Some((windowed.or(spread), empty))
}

/// One member of a comma-separated list: a bare value (an integer, or a name) and its
/// `;key=integer` parameters.
struct Member<'a> {
    value: Option<u64>,
    params: Vec<(&'a str, u64)>,
}

impl Member<'_> {
    fn param(&self, key: &str) -> Option<u64> {
        self.params.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
    }
}

/// The members of a list field, at most 16, each parameter an integer (others skipped):
/// `"default";q=100;w=60, "burst";q=10;w=1` or `10, 10;w=1`. Quoted names holding `,` or
/// `;` are not split inside.
fn members(field: &str) -> impl Iterator<Item = Member<'_>> {
    split_outside_quotes(field, ',').take(16).map(|m| {
        let mut parts = split_outside_quotes(m, ';');
        let value = parts.next().and_then(|v| v.trim().parse().ok());
        let params = parts
            .take(16)
            .filter_map(|p| {
                let (k, v) = p.split_once('=')?;
                Some((k.trim(), v.trim().parse().ok()?))
            })
            .collect();
        Member { value, params }
    })
}

fn split_outside_quotes(s: &str, sep: char) -> impl Iterator<Item = &str> {
    let mut quoted = false;
    let mut escaped = false;
    s.split(move |c: char| {
        if escaped {
            escaped = false;
        } else if quoted && c == '\\' {
            escaped = true;
        } else if c == '"' {
            quoted = !quoted;
        }
        c == sep && !quoted
    })
}

/// An HTTP date (RFC 9110), as the time since the epoch: the IMF-fixdate form
/// `Sun, 06 Nov 1994 08:49:37 GMT`, and the obsolete RFC 850 and asctime forms, which
/// recipients must also read. A year past any clock saturates (a far future, never a panic).
fn http_date(v: &str) -> Option<Duration> {
    let mut words = v.split([' ', ',', '-']).filter(|w| !w.is_empty());
    let mut next = || words.next();
    let w = [next(), next(), next(), next(), next(), next(), next()];
    let (day, month, year, time) = match w {
        // IMF-fixdate: Sun 06 Nov 1994 08:49:37 GMT; RFC 850: Sunday 06 Nov 94 08:49:37 GMT
        [
            Some(_),
            Some(d),
            Some(m),
            Some(y),
            Some(t),
            Some("GMT"),
            None,
        ] => (d, m, y, t),
        // asctime: Sun Nov  6 08:49:37 1994
        [Some(_), Some(m), Some(d), Some(t), Some(y), None, None] => (d, m, y, t),
        _ => return None,
    };
    let day: u64 = day.parse().ok()?;
    let month = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ]
    .iter()
    .position(|m| *m == month)? as u64
        + 1;
    let mut year: u64 = year.parse().ok()?;
    if year < 100 {
        // RFC 850's two digits: RFC 9110 reads a year more than 50 years ahead as past.
        year += if year < 70 { 2000 } else { 1900 };
    }
    let mut hms = time.split(':').map(|n| n.parse::<u64>().ok());
    let (h, mi, s) = (hms.next()??, hms.next()??, hms.next()??);
    if hms.next().is_some() || !(1..=31).contains(&day) || h > 23 || mi > 59 || s > 60 {
        return None;
    }
    if year < 1970 {
        return None;
    }
    let secs = days_from_civil(year, month, day)
        .saturating_mul(86_400)
        .saturating_add(h * 3_600 + mi * 60 + s);
    Some(Duration::from_secs(secs))
}

/// Days from 1970-01-01 to a date of the Gregorian calendar (Howard Hinnant's algorithm),
/// for a year from 1970 (saturating: a year past any clock is far, not an overflow).
fn days_from_civil(y: u64, m: u64, d: u64) -> u64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era.saturating_mul(146_097)
        .saturating_add(doe)
        .saturating_sub(719_468)
}

#[cfg(test)]
mod props;
#[cfg(test)]
mod tests;
