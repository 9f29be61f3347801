//! Configuration errors: what an operator got wrong, with a stable code.

use std::borrow::Cow;
use std::fmt;

/// The kind of a [`ConfigError`]; each has a stable [`code`](ConfigErrorKind::code).
///
/// Match on it, or log its code, when a limit, a builder or a configuration file is refused
/// at start, to tell the operator which setting to fix.
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
    /// (or a bucket's whole refill time) longer than [`MAX_SPAN`](crate::Limit::MAX_SPAN).
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
    /// An unknown store kind in configuration (`memory`, `redis`, `cluster` are known).
    StoreKindInvalid,
    /// A rule names a limit the configuration does not define.
    UnknownLimit,
    /// A failure policy other than `closed`, `memory`, `open`.
    PolicyInvalid,
    /// An algorithm other than `fixed_window`, `sliding_window`, `sliding_log`,
    /// `token_bucket`.
    AlgorithmInvalid,
    /// A configuration file that does not parse (syntax, an unknown field, a wrong type).
    ConfigInvalid,
    /// A [`HashKey`](crate::HashKey) shorter than 16 bytes.
    HashKeyInvalid,
    /// A page to redirect refused browsers to that is not a valid `Location` value.
    RedirectInvalid,
    /// A network prefix length beyond the address (over 32 for IPv4, 128 for IPv6).
    PrefixInvalid,
    /// A store that needs a Tokio runtime built outside one.
    NoRuntime,
    /// A lease that cannot work: a slice of zero or above the quota, a lifetime under
    /// 1 ms or above [`MAX_LEASE_LIFETIME`](crate::Limit::MAX_LEASE_LIFETIME), or a sliding log
    /// (which cannot be leased).
    LeaseInvalid,
    /// A delay that cannot work: a zero first delay, a maximum under it or above
    /// [`MAX_DELAY`](crate::limit::Delay::MAX), a threshold not under the quota, at most 0 or over
    /// 1 000 held, or a leased limit (a delay reads the exact count).
    DelayInvalid,
    /// An in-flight limit of 0 or over 1 000 000, or a slot TTL outside
    /// [`MIN_SLOT_TTL`](crate::limit::InFlight::MIN_TTL) to [`MAX_SLOT_TTL`](crate::limit::InFlight::MAX_TTL).
    InFlightInvalid,
    /// An allow or deny list entry that is neither a CIDR nor an IP address.
    AccessEntryInvalid,
    /// An admin API built without a token, with a token under 16 bytes or a name twice,
    /// without a store, or mounted at a path that is not `/` and letters.
    AdminInvalid,
    /// Heavy-hitter settings for a limit whose heavy hitters are already being tracked
    /// (with the settings it was tracked with from its first check).
    TopSettingsLate,
    /// A trusted proxy that is not a CIDR or an address.
    ProxyInvalid,
    /// A WebSocket's message ceiling of 0 messages or a period of 0.
    SocketInvalid,
    /// A calendar's time zone that is not `UTC`, an offset or a name the time zone
    /// database holds.
    CalendarZoneUnknown,
    /// A calendar's anchor out of range: a day of the month outside 1 to 31, a time of
    /// day past 23:59.
    CalendarAnchorInvalid,
    /// A calendar period other than `day`, `week`, `week:<day>` or `month`.
    CalendarPeriodInvalid,
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
            Self::StoreKindInvalid => "rate_limits.store_invalid",
            Self::UnknownLimit => "rule.unknown_limit",
            Self::PolicyInvalid => "policy.invalid",
            Self::AlgorithmInvalid => "limit.algorithm_invalid",
            Self::ConfigInvalid => "config.invalid",
            Self::HashKeyInvalid => "principal.hash_key_invalid",
            Self::RedirectInvalid => "answer.redirect_invalid",
            Self::PrefixInvalid => "ip.prefix_invalid",
            Self::ProxyInvalid => "ip.proxy_invalid",
            Self::SocketInvalid => "ws.ceiling_invalid",
            Self::NoRuntime => "store.no_runtime",
            Self::LeaseInvalid => "limit.lease_invalid",
            Self::DelayInvalid => "limit.delay_invalid",
            Self::TopSettingsLate => "limit.top_settings_late",
            Self::InFlightInvalid => "limit.in_flight_invalid",
            Self::AccessEntryInvalid => "access.entry_invalid",
            Self::AdminInvalid => "admin.invalid",
            Self::CalendarZoneUnknown => "calendar.zone_unknown",
            Self::CalendarAnchorInvalid => "calendar.anchor_invalid",
            Self::CalendarPeriodInvalid => "calendar.period_invalid",
        }
    }
}

/// A configuration value that cannot work, found when a limit or store is built.
///
/// ```
/// use ratekeeper_core::{Limit, ConfigErrorKind};
/// use std::time::Duration;
///
/// let err = Limit::fixed_window("api", 0, Duration::from_secs(60)).unwrap_err();
/// assert_eq!(err.kind(), ConfigErrorKind::QuotaZero);
/// assert_eq!(err.code(), "limit.quota_zero");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    kind: ConfigErrorKind,
    field: Cow<'static, str>,
    detail: String,
}

impl ConfigError {
    /// An error of `kind` about `field`, with a sentence for the operator (never a
    /// secret or client input). For the crates built on this one, and your own stores.
    pub fn new(
        kind: ConfigErrorKind,
        field: impl Into<Cow<'static, str>>,
        detail: impl Into<String>,
    ) -> Self {
        Self {
            kind,
            field: field.into(),
            detail: detail.into(),
        }
    }

    /// The same error about a field further down a configuration path, e.g. `window`
    /// becomes `limits.poll.window`.
    #[cfg_attr(not(feature = "config"), allow(dead_code))]
    #[must_use]
    pub(crate) fn at(mut self, path: &str) -> Self {
        self.field = Cow::Owned(format!("{path}.{}", self.field));
        self
    }

    /// What went wrong.
    pub fn kind(&self) -> ConfigErrorKind {
        self.kind
    }

    /// The stable code, e.g. `limit.window_invalid`.
    pub fn code(&self) -> &'static str {
        self.kind.code()
    }

    /// The field the error is about, e.g. `window` or `limits.poll.window`.
    pub fn field(&self) -> &str {
        &self.field
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}): {}", self.kind.code(), self.field, self.detail)
    }
}

impl std::error::Error for ConfigError {}
