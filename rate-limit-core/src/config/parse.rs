//! Checking the file's values: durations, policies, limits, delays, access-list entries.

use std::time::Duration;

use super::raw::{RawDelay, RawLimit};
use crate::error::{ConfigError, ConfigErrorKind};
use crate::limit::Limit;
use crate::limiter::FailurePolicy;

/// A limit's `delay = { .. }`, applied. Fields are named from the limit (the caller adds
/// its path).
fn delayed(l: Limit, raw: &RawDelay) -> Result<Limit, ConfigError> {
    let first = duration(&raw.first, "delay.first".to_owned())?;
    let max = duration(&raw.max, "delay.max".to_owned())?;
    let delay = match raw.growth.as_deref() {
        None | Some("doubling") => crate::Delay::doubling(raw.after, first, max),
        Some("linear") => crate::Delay::linear(raw.after, first, max),
        Some(other) => Err(invalid(
            ConfigErrorKind::DelayInvalid,
            "delay.growth".to_owned(),
            format!("{other:?}: use doubling or linear"),
        )),
    }?;
    let delay = match raw.max_held {
        Some(n) => delay.max_held(n)?,
        None => delay,
    };
    l.delayed(delay)
}

/// Checks an allow or deny list entry: a CIDR (`10.0.0.0/8`, `2001:db8::/32`) or an IP
/// address. `access.entry_invalid` naming the entry (`access.allow[2]`) otherwise.
pub(super) fn access_entry(entry: &str, field: String) -> Result<(), ConfigError> {
    entry
        .parse::<crate::net::IpBlock>()
        .map(|_| ())
        .map_err(|e| invalid(ConfigErrorKind::AccessEntryInvalid, field, e.to_string()))
}

pub(super) fn invalid(
    kind: ConfigErrorKind,
    field: String,
    detail: impl Into<String>,
) -> ConfigError {
    ConfigError::new(kind, field, detail)
}

/// `500ms`, `60s`, `15m`, `1h`, `1d`.
pub(super) fn duration(text: &str, field: String) -> Result<Duration, ConfigError> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num.parse().map_err(|_| {
        invalid(
            ConfigErrorKind::WindowInvalid,
            field.clone(),
            format!("{text:?} is not a duration like 60s"),
        )
    })?;
    let secs = |m: u64| Duration::from_secs(n.saturating_mul(m));
    Ok(match unit.trim() {
        "ms" => Duration::from_millis(n),
        "s" => secs(1),
        "m" => secs(60),
        "h" => secs(3_600),
        "d" => secs(86_400),
        _ => {
            return Err(invalid(
                ConfigErrorKind::WindowInvalid,
                field,
                format!("{text:?}: use ms, s, m, h or d"),
            ));
        }
    })
}

pub(super) fn policy(text: Option<&str>, field: String) -> Result<FailurePolicy, ConfigError> {
    match text {
        None | Some("closed") => Ok(FailurePolicy::Closed),
        Some("memory") => Ok(FailurePolicy::Memory),
        Some("open") => Ok(FailurePolicy::Open),
        Some(other) => Err(invalid(
            ConfigErrorKind::PolicyInvalid,
            field,
            format!("{other:?}: use closed, memory or open"),
        )),
    }
}

fn need<T>(v: Option<T>, path: &str, name: &str) -> Result<T, ConfigError> {
    v.ok_or_else(|| {
        invalid(
            ConfigErrorKind::ConfigInvalid,
            format!("{path}.{name}"),
            "this field is required",
        )
    })
}

pub(super) fn limit(name: &str, raw: &RawLimit) -> Result<Limit, ConfigError> {
    let path = format!("limits.{name}");
    let window = |field: &str, v: &Option<String>| -> Result<Duration, ConfigError> {
        duration(&need(v.clone(), &path, field)?, format!("{path}.{field}"))
    };
    if raw.algorithm != "calendar" {
        for (field, given) in [("zone", &raw.zone), ("anchor", &raw.anchor)] {
            if given.is_some() {
                return Err(invalid(
                    ConfigErrorKind::ConfigInvalid,
                    format!("{path}.{field}"),
                    "only a calendar quota (algorithm = \"calendar\") has a zone and an anchor",
                ));
            }
        }
    }
    let built = match raw.algorithm.as_str() {
        "fixed_window" => Limit::fixed_window(
            name,
            need(raw.quota, &path, "quota")?,
            window("window", &raw.window)?,
        ),
        "sliding_window" => Limit::sliding_window(
            name,
            need(raw.quota, &path, "quota")?,
            window("window", &raw.window)?,
        ),
        "sliding_log" => Limit::sliding_log(
            name,
            need(raw.quota, &path, "quota")?,
            window("window", &raw.window)?,
        ),
        "token_bucket" => Limit::token_bucket(
            name,
            need(raw.capacity, &path, "capacity")?,
            need(raw.refill, &path, "refill")?,
            window("period", &raw.period)?,
        ),
        "ban" => Limit::ban(
            name,
            need(raw.after, &path, "after")?,
            window("within", &raw.within)?,
            window("duration", &raw.duration)?,
        ),
        "calendar" => calendar(
            name,
            need(raw.quota, &path, "quota")?,
            need(raw.period.as_deref(), &path, "period")?,
            raw,
        ),
        other => {
            return Err(invalid(
                ConfigErrorKind::AlgorithmInvalid,
                format!("{path}.algorithm"),
                format!(
                    "{other:?}: use fixed_window, sliding_window, sliding_log, token_bucket, ban or calendar"
                ),
            ));
        }
    };
    let built = match (built, &raw.lease) {
        (Ok(l), Some(lease)) => {
            let lifetime = duration(&lease.lifetime, format!("{path}.lease.lifetime"))?;
            l.leased(lease.max_slice, lifetime)
        }
        (built, _) => built,
    };
    let built = match (built, &raw.delay) {
        (Ok(l), Some(d)) => delayed(l, d),
        (built, _) => built,
    };
    built.map_err(|e| {
        if e.kind() == ConfigErrorKind::NameInvalid {
            ConfigError::new(e.kind(), path.clone(), e.to_string())
        } else {
            e.at(&path)
        }
    })
}

/// `algorithm = "calendar"`: `quota`, `period` (`day`, `week`, `week:<first day>`,
/// `month`), `zone` (default `UTC`) and `anchor` (`15`, `09:00`, `15 09:00`).
/// Its errors name the field alone (`limit` puts the limit's path before it).
#[cfg(feature = "calendar")]
fn calendar(name: &str, quota: u64, period: &str, raw: &RawLimit) -> Result<Limit, ConfigError> {
    use crate::limit::calendar::{Anchor, Calendar, Period};
    let mut cal = Calendar::new(
        period.parse::<Period>()?,
        raw.zone.as_deref().unwrap_or("UTC"),
    )?;
    if let Some(anchor) = &raw.anchor {
        cal = cal.anchored(anchor.parse::<Anchor>()?);
    }
    Limit::calendar(name, quota, cal)
}

/// Without the `calendar` feature a calendar quota cannot be built.
#[cfg(not(feature = "calendar"))]
fn calendar(_: &str, _: u64, _: &str, _: &RawLimit) -> Result<Limit, ConfigError> {
    Err(invalid(
        ConfigErrorKind::AlgorithmInvalid,
        "algorithm".to_owned(),
        "\"calendar\" needs the crate's `calendar` feature",
    ))
}
