//! Checking a limit's numbers: spans in microseconds, quotas, window parameters.

use std::time::Duration;

use super::{MAX_SPAN, MAX_SPAN_US, MAX_UNITS_PER_US, MIN_WINDOW};
use crate::error::{ConfigError, ConfigErrorKind};
use crate::name::validate_name;

pub(super) fn micros(field: &'static str, d: Duration) -> Result<u64, ConfigError> {
    if d.is_zero() || d < MIN_WINDOW {
        return Err(ConfigError::new(
            ConfigErrorKind::WindowInvalid,
            field,
            format!("must be at least 1 ms, got {d:?}"),
        ));
    }
    if d > MAX_SPAN {
        return Err(ConfigError::new(
            ConfigErrorKind::Overflow,
            field,
            format!("must be at most {MAX_SPAN:?}, got {d:?}"),
        ));
    }
    // Checked against MAX_SPAN above, so this fits.
    Ok(u64::try_from(d.as_micros()).unwrap_or(MAX_SPAN_US))
}

pub(super) fn quota(field: &'static str, q: u64) -> Result<u64, ConfigError> {
    if q == 0 {
        return Err(ConfigError::new(
            ConfigErrorKind::QuotaZero,
            field,
            "must be at least 1",
        ));
    }
    if q > u64::from(u32::MAX) {
        return Err(ConfigError::new(
            ConfigErrorKind::Overflow,
            field,
            format!("must be at most {}, got {q}", u32::MAX),
        ));
    }
    Ok(q)
}

pub(super) fn window_params(
    name: &str,
    q: u64,
    window: Duration,
) -> Result<(u64, u64), ConfigError> {
    validate_name(name)?;
    let q = quota("quota", q)?;
    let w = micros("window", window)?;
    if q > w.saturating_mul(MAX_UNITS_PER_US) {
        return Err(ConfigError::new(
            ConfigErrorKind::RateTooHigh,
            "quota",
            format!("{q} per {window:?} is above 10^9 per second"),
        ));
    }
    Ok((q, w))
}
