//! Heavy hitters for the fleet: each instance publishes its report of every tracked limit
//! to the store on a schedule ([`SHARED`] principals a list at most, with a TTL of three
//! periods), and any instance reads them all back merged
//! ([`HeavyHitters::merge`](crate::top::HeavyHitters::merge)).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::{Fleet, FleetError};
use crate::error::ConfigError;
use crate::name::validate_name;
use crate::protocol::{SharedState, Store, StoreErrorKind};
use crate::top::{HeavyHitters, SHARED};

/// How often an instance publishes its heavy hitters unless told otherwise.
pub const DEFAULT_HITTERS_EVERY: Duration = Duration::from_secs(5);

/// One instance's part in a fleet's report.
///
/// You read it in a fleet-wide heavy-hitter report (`FleetHitters`), to see which instances
/// reported and when.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Contributor {
    /// The instance's name ([`Fleet::named`]).
    pub instance: String,
    /// When it published, by its own clock (`None` for this instance's live report).
    pub published: Option<SystemTime>,
}

/// The heavy hitters of one limit over every instance that reported in the last three
/// periods ([`Fleet::hitters_every`]), and which ones did.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct FleetHitters {
    /// The merged report, with its error bound.
    pub report: HeavyHitters,
    /// The instances merged, this one first.
    pub instances: Vec<Contributor>,
}

impl<S: Store + SharedState + Clone> Fleet<S> {
    /// This instance's name in the fleet's reports: 1 to 64 bytes of `A-Z a-z 0-9 . _ -`
    /// (a host name, a pod's name). Without one, a random name.
    pub fn named(mut self, name: &str) -> Result<Self, ConfigError> {
        validate_name(name)?;
        self.name = name.into();
        Ok(self)
    }

    /// Publishes this instance's heavy hitters every `every` (default
    /// [`DEFAULT_HITTERS_EVERY`]; at least 100 ms) while [`run`](Self::run) runs; each
    /// report lives three periods in the store.
    #[must_use]
    pub fn hitters_every(mut self, every: Duration) -> Self {
        self.hitters_every = every.max(Duration::from_millis(100));
        self
    }

    /// This instance's name.
    pub fn instance(&self) -> &str {
        &self.name
    }

    /// The `n` heaviest principals of `limit` over the fleet (this instance's live report
    /// and every other one published in the last three periods); `None` when no limiter
    /// here tracks the limit's heavy hitters. On the memory store, the fleets over that store
    /// (clones of it); on a store that keeps no reports, this instance's alone.
    pub async fn heavy_hitters(
        &self,
        limit: &str,
        n: usize,
    ) -> Result<Option<FleetHitters>, FleetError> {
        let Some(own) = self.limit(limit)?.heavy_hitters(SHARED) else {
            return Ok(None);
        };
        let mut reports = vec![own];
        let mut instances = vec![Contributor {
            instance: self.name.to_string(),
            published: None,
        }];
        let published = match self.store.hitters_read(limit).await {
            Err(e) if e.kind() == StoreErrorKind::Unsupported => Vec::new(),
            r => r.map_err(FleetError::Store)?,
        };
        for (instance, text) in published {
            let parsed = text.split_once('\n').and_then(|(at, report)| {
                let ms: u64 = at.parse().ok()?;
                Some((ms, HeavyHitters::from_text(report)?))
            });
            if let (false, Some((ms, report))) = (instance == *self.name, parsed) {
                reports.push(report);
                instances.push(Contributor {
                    instance,
                    published: Some(UNIX_EPOCH + Duration::from_millis(ms)),
                });
            }
        }
        Ok(Some(FleetHitters {
            report: HeavyHitters::merge(&reports, n),
            instances,
        }))
    }

    /// Publishes this instance's report of every limit whose heavy hitters it tracks.
    pub(super) async fn publish_hitters(&self) {
        let ttl = self.hitters_every * 3;
        let at = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis();
        for (name, limit) in self.limits.iter() {
            if let Some(report) = limit.heavy_hitters(SHARED) {
                let text = format!("{at}\n{}", report.to_text());
                // A failure is the next period's to mend: the report lapses meanwhile.
                let _ = self.store.hitters_put(name, &self.name, &text, ttl).await;
            }
        }
    }
}

/// A name for an instance not given one: 8 random hex digits (from the standard library's
/// random hasher keys).
pub(super) fn random_name() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    format!("i-{:08x}", h.finish() as u32)
}
