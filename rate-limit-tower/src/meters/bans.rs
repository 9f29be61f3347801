//! `rate_limit_bans_active{limit}`: the principals each ban bans now, read from the store
//! by an admin call ([`AnyStore::bans`]) on the operator's schedule, never on a request's
//! path.

use std::time::Duration;

use metrics::{Gauge, Key, Label};
use ratekeeper_core::{AnyStore, Limit, StoreError};

use super::series::Series;

/// Samples how many principals each ban bans now into the gauge
/// `rate_limit_bans_active{limit}` (feature `metrics`).
///
/// Bans live in the store, shared by every instance, so the gauge reads them there:
/// [`AnyStore::bans`] — the memory store's record, or `SCAN` over every Redis master
/// (O(keys in the database) per sample, so sample every 30 s or more on a large Redis,
/// and from one instance or alert on `max`, not `sum`, across instances). A sample that
/// fails (the store down, a store of your own that cannot list bans) leaves the gauge as
/// it was and logs `rate_limit.bans_unsampled` once per episode.
///
/// ```no_run
/// use ratekeeper_tower::metrics::BansActive;
/// use ratekeeper_tower::{Limit, Limiter, MemoryStore};
/// use std::time::Duration;
///
/// # async fn run() -> Result<(), ratekeeper_tower::ConfigError> {
/// let limiter = Limiter::new(MemoryStore::new());
/// let ban = Limit::ban("login-ban", 20, Duration::from_secs(900), Duration::from_secs(3_600))?;
/// tokio::spawn(BansActive::new(limiter.store(), [ban]).run(Duration::from_secs(30)));
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct BansActive {
    store: AnyStore,
    bans: Vec<(Limit, Series<Gauge>)>,
    failing: bool,
}

impl BansActive {
    /// The gauges of `limits`' bans in `store` (limits that are not bans are skipped).
    pub fn new(store: &AnyStore, limits: impl IntoIterator<Item = Limit>) -> Self {
        let bans = limits
            .into_iter()
            .filter(|l| l.ban_duration().is_some())
            .map(|l| {
                let label = Label::new("limit", l.name().to_owned());
                let key = Key::from_parts("rate_limit_bans_active", vec![label]);
                (l, Series::new(key))
            })
            .collect();
        Self {
            store: store.clone(),
            bans,
            failing: false,
        }
    }

    /// One sample: each gauge set to the number of principals its ban bans now. On the
    /// first error, the gauges not yet set keep their value and the error is returned.
    pub async fn sample(&self) -> Result<(), StoreError> {
        for (limit, gauge) in &self.bans {
            let n = self.store.bans(limit).await?.len();
            #[allow(clippy::cast_precision_loss)]
            gauge.set(n as f64);
        }
        Ok(())
    }

    /// Samples every `every` (at least one second), for as long as the future runs: spawn
    /// it, and abort the task to stop.
    pub async fn run(mut self, every: Duration) {
        let mut tick = tokio::time::interval(every.max(Duration::from_secs(1)));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            match self.sample().await {
                Ok(()) => self.failing = false,
                Err(e) if !self.failing => {
                    self.failing = true;
                    tracing::warn!(
                        name: "rate_limit.bans_unsampled",
                        target: "rate_limit.bans_unsampled",
                        error = %e,
                        "could not read the bans in force; rate_limit_bans_active keeps its last value"
                    );
                }
                Err(_) => {}
            }
        }
    }
}
