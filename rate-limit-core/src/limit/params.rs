//! What a limit counts with: its algorithm and the numbers the stores need.

/// Which algorithm a limit counts with.
///
/// You read it from a `Limit` (for an admin page, logs, metrics); you choose the algorithm
/// with `Limit`'s constructors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AlgorithmKind {
    /// A counter per epoch-aligned window; up to twice the quota across a boundary.
    FixedWindow,
    /// The approximate sliding window: the previous window weighted by its overlap, plus
    /// the current one. Two integers per key.
    SlidingWindow,
    /// The exact sliding window: a log of timestamps. Memory grows with the quota; meant
    /// for small security limits such as sign-in attempts.
    SlidingLog,
    /// A token bucket (GCRA, one timestamp per key): bursts up to the capacity, refilled
    /// at an average rate.
    TokenBucket,
    /// A ban ([`Limit::ban`](crate::Limit::ban)): refuses its principal for a while after enough refusals.
    Ban,
    /// A quota per calendar period (a day, a week or a month in a time zone, from an
    /// anchor): a counter per period, as a fixed window's per window.
    Calendar,
}

impl AlgorithmKind {
    /// A short, stable name: `fixed_window`, `sliding_window`, `sliding_log`, `token_bucket`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::FixedWindow => "fixed_window",
            Self::SlidingWindow => "sliding_window",
            Self::SlidingLog => "sliding_log",
            Self::TokenBucket => "token_bucket",
            Self::Ban => "ban",
            Self::Calendar => "calendar",
        }
    }
}

/// The parameters the algorithms run on, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Params {
    Fixed {
        quota: u64,
        window: u64,
    },
    Sliding {
        quota: u64,
        window: u64,
    },
    Log {
        quota: u64,
        window: u64,
    },
    /// GCRA: `interval` is the emission interval (µs per token), rounded up.
    Bucket {
        capacity: u64,
        interval: u64,
    },
    /// A ban: `after` refusals within `within` µs ban the principal for `ban` µs.
    Ban {
        after: u64,
        within: u64,
        ban: u64,
    },
    /// A quota per calendar period, as a limit holds it: `length` is a period's nominal
    /// length (µs: a day, seven, or 30 days, under 2^48); the periods themselves come from
    /// the limit's calendar ([`Key::params_at`](crate::Key::params_at) resolves them),
    /// from a key's own anchor when `anchor` is not 0 (`Anchor::code`).
    Calendar {
        quota: u64,
        length: u64,
        anchor: u16,
    },
    /// A calendar quota resolved at one instant: the period holding it, numbered by the
    /// local date it starts on (`yyyymmdd`), from `start` to `end` (µs). Never stored.
    #[cfg(feature = "calendar")]
    Period {
        quota: u64,
        number: u64,
        start: u64,
        end: u64,
    },
}

/// `Params::Ban` packs `after` into the low bits of its first word.
const BAN_AFTER_BITS: u32 = 10;
/// `Params::Calendar` packs a key's anchor above its length (under 2^48 µs: 8.9 years).
const CALENDAR_ANCHOR_SHIFT: u32 = 48;

impl Params {
    pub(crate) fn parts(self) -> (AlgorithmKind, u64, u64) {
        match self {
            Self::Fixed { quota, window } => (AlgorithmKind::FixedWindow, quota, window),
            Self::Sliding { quota, window } => (AlgorithmKind::SlidingWindow, quota, window),
            Self::Log { quota, window } => (AlgorithmKind::SlidingLog, quota, window),
            Self::Bucket { capacity, interval } => (AlgorithmKind::TokenBucket, capacity, interval),
            Self::Ban { after, within, ban } => {
                (AlgorithmKind::Ban, within << BAN_AFTER_BITS | after, ban)
            }
            Self::Calendar {
                quota,
                length,
                anchor,
            } => (
                AlgorithmKind::Calendar,
                quota,
                length | u64::from(anchor) << CALENDAR_ANCHOR_SHIFT,
            ),
            #[cfg(feature = "calendar")]
            Self::Period {
                quota, start, end, ..
            } => (AlgorithmKind::Calendar, quota, end.saturating_sub(start)),
        }
    }

    pub(crate) fn from_parts(kind: AlgorithmKind, a: u64, b: u64) -> Self {
        match kind {
            AlgorithmKind::FixedWindow => Self::Fixed {
                quota: a,
                window: b,
            },
            AlgorithmKind::SlidingWindow => Self::Sliding {
                quota: a,
                window: b,
            },
            AlgorithmKind::SlidingLog => Self::Log {
                quota: a,
                window: b,
            },
            AlgorithmKind::TokenBucket => Self::Bucket {
                capacity: a,
                interval: b,
            },
            AlgorithmKind::Ban => Self::Ban {
                after: a & ((1 << BAN_AFTER_BITS) - 1),
                within: a >> BAN_AFTER_BITS,
                ban: b,
            },
            AlgorithmKind::Calendar => Self::Calendar {
                quota: a,
                length: b & ((1 << CALENDAR_ANCHOR_SHIFT) - 1),
                anchor: u16::try_from(b >> CALENDAR_ANCHOR_SHIFT).unwrap_or(0),
            },
        }
    }
}
