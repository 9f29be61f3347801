//! What an upstream's answer says of its limits: refused or not, how long to wait, what it
//! allows. Read from the status, `Retry-After` (seconds or an HTTP date), the IETF
//! `RateLimit` / `RateLimit-Policy` fields (draft-11), the older `RateLimit-Limit`,
//! `-Remaining`, `-Reset` trio and its `X-RateLimit-*` form, and gRPC's `grpc-status`,
//! `grpc-retry-pushback-ms` and `RetryInfo`. What does not parse is ignored, and no wait is
//! longer than the caller's bound.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::{HeaderMap, StatusCode};

/// gRPC's `RESOURCE_EXHAUSTED`.
const GRPC_RESOURCE_EXHAUSTED: &str = "8";

/// What one answer said.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Told {
    /// A refusal: 429, 503, or gRPC `RESOURCE_EXHAUSTED`.
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
) -> Told {
    let text = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    let grpc_refused = text("grpc-status") == Some(GRPC_RESOURCE_EXHAUSTED);
    let refused = status == StatusCode::TOO_MANY_REQUESTS
        || status == StatusCode::SERVICE_UNAVAILABLE
        || grpc_refused;
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

/// `Retry-After`: delta-seconds or an HTTP date (past: no wait).
fn retry_after(v: &str, now: SystemTime) -> Option<Duration> {
    if let Ok(secs) = v.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = http_date(v)?;
    Some(at.duration_since(now).unwrap_or_default())
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
/// seconds, or Unix time when it is no earlier than a day before now).
fn trio<'a>(
    text: &impl Fn(&str) -> Option<&'a str>,
    prefix: &str,
    now: SystemTime,
) -> Option<(Option<f64>, Option<Duration>)> {
    let limit = text(&format!("{prefix}limit"));
    let remaining = text(&format!("{prefix}remaining"));
    if limit.is_none() && remaining.is_none() {
        return None;
    }
    let allows = limit.and_then(|l| {
        members(l)
            .filter_map(|m| Some(m.value? as f64 / m.param("w")? as f64))
            .filter(|r| *r > 0.0)
            .reduce(f64::min)
    });
    let reset = text(&format!("{prefix}reset")).and_then(|r| r.parse::<u64>().ok());
    // A reset at or after a day before now, read as Unix time, is one (GitHub's); anything
    // smaller is seconds from now.
    let unix_now = now.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
    let empty = match (remaining.and_then(|r| r.parse::<u64>().ok()), reset) {
        (Some(0), Some(r)) if r >= unix_now.saturating_sub(86_400) => {
            let at = UNIX_EPOCH + Duration::from_secs(r);
            Some(at.duration_since(now).unwrap_or_default())
        }
        (Some(0), Some(r)) => Some(Duration::from_secs(r)),
        _ => None,
    };
    Some((allows, empty))
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

/// An HTTP date (RFC 9110): the IMF-fixdate form `Sun, 06 Nov 1994 08:49:37 GMT`, and the
/// obsolete RFC 850 and asctime forms, which recipients must also read.
fn http_date(v: &str) -> Option<SystemTime> {
    let words: Vec<&str> = v.split([' ', ',', '-']).filter(|w| !w.is_empty()).collect();
    let (day, month, year, time) = match words[..] {
        // IMF-fixdate: Sun 06 Nov 1994 08:49:37 GMT; RFC 850: Sunday 06 Nov 94 08:49:37 GMT
        [_, d, m, y, t, "GMT"] => (d, m, y, t),
        // asctime: Sun Nov  6 08:49:37 1994
        [_, m, d, t, y] => (d, m, y, t),
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
    if !(1..=31).contains(&day) || h > 23 || mi > 59 || s > 60 || year < 1970 {
        return None;
    }
    let days = days_from_civil(year, month, day);
    Some(UNIX_EPOCH + Duration::from_secs(days * 86_400 + h * 3_600 + mi * 60 + s))
}

/// Days from 1970-01-01 to a date of the Gregorian calendar (Howard Hinnant's algorithm).
fn days_from_civil(y: u64, m: u64, d: u64) -> u64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: Duration = Duration::from_secs(3_600);

    fn at(h: &[(&'static str, &str)], status: u16) -> Told {
        let mut headers = HeaderMap::new();
        for (k, v) in h {
            headers.insert(*k, v.parse().unwrap());
        }
        let now = UNIX_EPOCH + Duration::from_secs(784_111_777); // Sun, 06 Nov 1994 08:49:37 GMT
        told(StatusCode::from_u16(status).unwrap(), &headers, now, HOUR)
    }

    #[test]
    fn retry_after_in_seconds_and_as_each_http_date_form() {
        let ten = Some(Duration::from_secs(10));
        assert_eq!(at(&[("retry-after", "10")], 429).wait, ten);
        for date in [
            "Sun, 06 Nov 1994 08:49:47 GMT",
            "Sunday, 06-Nov-94 08:49:47 GMT",
            "Sun Nov  6 08:49:47 1994",
        ] {
            assert_eq!(at(&[("retry-after", date)], 503).wait, ten, "{date}");
        }
        assert_eq!(
            at(&[("retry-after", "Sun, 06 Nov 1994 08:00:00 GMT")], 429).wait,
            Some(Duration::ZERO)
        );
        let week = at(&[("retry-after", "604800")], 429);
        assert_eq!(week.wait, Some(HOUR), "a week is held to the bound");
        for junk in ["-5", "soon", "1e9", "Sun, 32 Nov 1994 08:49:47 GMT", ""] {
            let t = at(&[("retry-after", junk)], 429);
            assert!(t.refused && t.wait.is_none(), "{junk:?}");
        }
    }

    #[test]
    fn the_ietf_fields_give_the_strictest_rate_and_the_reset_of_an_empty_limit() {
        let t = at(
            &[
                (
                    "ratelimit-policy",
                    r#""hour";q=1000;w=3600, "burst";q=50;w=1, "odd, name";q=5;w=0"#,
                ),
                ("ratelimit", r#""burst";r=0;t=2, "hour";r=900;t=1800"#),
            ],
            200,
        );
        assert!(!t.refused);
        assert_eq!(t.allows, Some(1000.0 / 3600.0));
        assert_eq!(t.wait, Some(Duration::from_secs(2)));
        let t = at(&[("ratelimit-policy", r#""p";q=50"#)], 200);
        assert_eq!((t.allows, t.wait), (Some(50.0), None), "w defaults to 1");
    }

    #[test]
    fn the_older_trios_with_a_window_a_delta_or_a_unix_reset() {
        let t = at(
            &[
                ("ratelimit-limit", "50, 50;w=1"),
                ("ratelimit-remaining", "0"),
                ("ratelimit-reset", "3"),
            ],
            200,
        );
        assert_eq!(
            (t.allows, t.wait),
            (Some(50.0), Some(Duration::from_secs(3)))
        );
        let t = at(
            &[
                ("x-ratelimit-limit", "5000"),
                ("x-ratelimit-remaining", "0"),
                ("x-ratelimit-reset", "784111837"),
            ],
            403,
        );
        assert_eq!(
            (t.allows, t.wait),
            (None, Some(Duration::from_secs(60))),
            "GitHub's Unix reset"
        );
        let t = at(
            &[
                ("x-ratelimit-remaining", "0"),
                ("x-ratelimit-reset", "99999999"),
            ],
            200,
        );
        assert_eq!(t.wait, Some(HOUR), "bounded");
    }

    #[test]
    fn grpc_resource_exhausted_with_its_pushback() {
        let t = at(
            &[("grpc-status", "8"), ("grpc-retry-pushback-ms", "1500")],
            200,
        );
        assert!(t.refused);
        assert_eq!(t.wait, Some(Duration::from_millis(1_500)));
        let t = at(&[("grpc-status", "0")], 200);
        assert!(!t.refused);
    }
}
