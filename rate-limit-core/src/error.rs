//! Configuration errors: what an operator got wrong, with a stable code.

use std::fmt;

/// The kind of a [`ConfigError`]; each has a stable [`code`](ConfigErrorKind::code).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConfigErrorKind {
    /// A quota or capacity of zero: nothing could ever be allowed.
    QuotaZero,
    /// A window or refill period that is zero or shorter than one millisecond.
    WindowInvalid,
    /// A rate the time unit (one microsecond) cannot express, or above 10⁹ per second.
    RateTooHigh,
    /// A value too large for the counters: a quota above `u32::MAX`, or a window
    /// (or a bucket's whole refill time) longer than [`MAX_SPAN`](crate::MAX_SPAN).
    Overflow,
    /// A limit name that is empty, too long, or holds characters other than
    /// `A-Z a-z 0-9 . _ -`.
    NameInvalid,
    /// A store setting out of range (for example a key cap of zero).
    StoreInvalid,
    /// A Redis URL that does not parse.
    UrlInvalid,
    /// A running limit asked to change its algorithm.
    AlgorithmChanged,
}

impl ConfigErrorKind {
    /// The stable, dotted code of this kind, e.g. `limit.quota_zero`.
    ///
    /// Codes never change meaning between versions; log and match on them.
    pub const fn code(self) -> &'static str {
        match self {
            Self::QuotaZero => "limit.quota_zero",
            Self::WindowInvalid => "limit.window_invalid",
            Self::RateTooHigh => "limit.rate_too_high",
            Self::Overflow => "limit.overflow",
            Self::NameInvalid => "limit.name_invalid",
            Self::StoreInvalid => "store.invalid",
            Self::UrlInvalid => "redis.url_invalid",
            Self::AlgorithmChanged => "limit.algorithm_changed",
        }
    }
}

/// A configuration value that cannot work, found when a limit or store is built.
///
/// ```
/// use rate_limit_core::{Limit, ConfigErrorKind};
/// use std::time::Duration;
///
/// let err = Limit::fixed_window("api", 0, Duration::from_secs(60)).unwrap_err();
/// assert_eq!(err.kind(), ConfigErrorKind::QuotaZero);
/// assert_eq!(err.code(), "limit.quota_zero");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    kind: ConfigErrorKind,
    field: &'static str,
    detail: String,
}

impl ConfigError {
    pub(crate) fn new(
        kind: ConfigErrorKind,
        field: &'static str,
        detail: impl Into<String>,
    ) -> Self {
        Self {
            kind,
            field,
            detail: detail.into(),
        }
    }

    /// What went wrong.
    pub fn kind(&self) -> ConfigErrorKind {
        self.kind
    }

    /// The stable code, e.g. `limit.window_invalid`.
    pub fn code(&self) -> &'static str {
        self.kind.code()
    }

    /// The field the error is about, e.g. `window`.
    pub fn field(&self) -> &'static str {
        self.field
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}): {}", self.kind.code(), self.field, self.detail)
    }
}

impl std::error::Error for ConfigError {}
