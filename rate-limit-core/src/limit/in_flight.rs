//! In-flight (concurrency) limits: at most `max` requests of one principal at once
//! (Stripe's concurrent-request limiter, nginx's `limit_conn`).
//!
//! A request takes a *slot* before its work and gives it back when the work is done. In a
//! shared store a slot is a lease with a TTL that its holder renews while the work runs
//! (every third of the TTL), so the slots of a process that dies come back within the
//! TTL; a slot is released once (releasing is removing one id: a second release, or one
//! after the lease ran out, removes nothing).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::error::{ConfigError, ConfigErrorKind};
use crate::name::validate_name;
use crate::principal::Principal;

/// The shortest slot TTL: 100 ms (renewed every third of it).
pub(crate) const MIN_SLOT_TTL: Duration = Duration::from_millis(100);
/// The longest slot TTL: ten minutes (how long a dead process's slots can stay taken).
pub(crate) const MAX_SLOT_TTL: Duration = Duration::from_secs(600);

/// An in-flight limit: at most `max` requests of one principal at once.
///
/// ```
/// use ratekeeper_core::InFlight;
/// use std::time::Duration;
///
/// // Two report exports per account at once; a dead process's slots return within 30 s.
/// let exports = InFlight::new("exports", 2, Duration::from_secs(30))?;
/// assert_eq!(exports.max(), 2);
/// assert_eq!(InFlight::new("exports", 0, Duration::from_secs(30)).unwrap_err().code(), "limit.in_flight_invalid");
/// # Ok::<(), ratekeeper_core::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct InFlight {
    inner: Arc<Def>,
}

struct Def {
    name: Box<str>,
    max: u64,
    ttl: Duration,
}

impl fmt::Debug for InFlight {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InFlight")
            .field("name", &self.name())
            .field("max", &self.max())
            .field("ttl", &self.ttl())
            .finish()
    }
}

impl InFlight {
    /// The shortest slot TTL: 100 ms (renewed every third of it).
    pub const MIN_TTL: Duration = MIN_SLOT_TTL;
    /// The longest slot TTL: ten minutes (how long a dead process's slots can stay taken).
    pub const MAX_TTL: Duration = MAX_SLOT_TTL;

    /// At most `max` (1 to 1 000 000) in flight per principal; slots leased for `ttl`
    /// ([`InFlight::MIN_TTL`] to [`InFlight::MAX_TTL`]) and renewed while held.
    ///
    /// `limit.name_invalid` for a bad name; `limit.in_flight_invalid` otherwise.
    pub fn new(name: &str, max: u64, ttl: Duration) -> Result<Self, ConfigError> {
        validate_name(name)?;
        let invalid = |field, detail: String| {
            Err(ConfigError::new(
                ConfigErrorKind::InFlightInvalid,
                field,
                detail,
            ))
        };
        if max == 0 || max > 1_000_000 {
            return invalid("max", format!("at most 1 to 1000000 in flight, got {max}"));
        }
        if !(MIN_SLOT_TTL..=MAX_SLOT_TTL).contains(&ttl) {
            return invalid(
                "ttl",
                format!("a slot TTL of {MIN_SLOT_TTL:?} to {MAX_SLOT_TTL:?}, got {ttl:?}"),
            );
        }
        Ok(Self {
            inner: Arc::new(Def {
                name: name.into(),
                max,
                ttl,
            }),
        })
    }

    /// The name (in headers, metrics and the store's key).
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The most requests of one principal in flight at once.
    pub fn max(&self) -> u64 {
        self.inner.max
    }

    /// How long a slot lives without renewal.
    pub fn ttl(&self) -> Duration {
        self.inner.ttl
    }

    /// The slots of `principal`.
    pub fn slots(&self, principal: Principal) -> SlotKey {
        SlotKey {
            in_flight: self.clone(),
            principal,
        }
    }
}

/// The slots of one principal under one [`InFlight`] limit.
///
/// You make one (`InFlight::slots`) to take a principal's slot yourself, outside a layer.
#[derive(Debug, Clone)]
pub struct SlotKey {
    in_flight: InFlight,
    principal: Principal,
}

impl SlotKey {
    /// The limit.
    pub fn in_flight(&self) -> &InFlight {
        &self.in_flight
    }

    /// The principal.
    pub fn principal(&self) -> &Principal {
        &self.principal
    }

    /// A name for maps: the principal's rendering and the limit's name (which holds no `/`).
    pub(crate) fn local_name(&self) -> String {
        format!("{}/{}", self.principal.as_str(), self.in_flight.name())
    }
}
