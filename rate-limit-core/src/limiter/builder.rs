//! [`LimiterBuilder`]: a limiter's settings.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::health::Health;
use super::{FALLBACK_KEYS, Limiter, LimiterInner};
use crate::error::{ConfigError, ConfigErrorKind};
use crate::protocol::{Domains, Store};
use crate::store::MemoryStore;

/// Builds a [`Limiter`].
///
/// You need it (`Limiter::builder`) to change a limiter's defaults: a store call's time
/// budget, its retries, the cool-down after a failure, the in-memory fallback, heavy-hitter
/// tracking.
#[derive(Debug)]
#[must_use]
pub struct LimiterBuilder<S> {
    pub(super) store: S,
    pub(super) name: Cow<'static, str>,
    pub(super) timeout: Duration,
    pub(super) retries: u32,
    pub(super) retry_delay: Duration,
    pub(super) cooldown: Duration,
    pub(super) quiet: Duration,
    pub(super) fallback: Option<MemoryStore>,
    pub(super) top: bool,
}

impl<S: Store> LimiterBuilder<S> {
    /// The store's name in logs and metrics (default: the store's
    /// [`describe`](crate::AnyStore::describe), e.g. `redis 10.0.0.5:6379`, for
    /// [`Limiter::builder`]; `store` for [`Limiter::builder_with_store`]).
    pub fn name(mut self, name: impl Into<Cow<'static, str>>) -> Self {
        self.name = name.into();
        self
    }

    /// The time budget of one call, retries included (default 500 ms).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Retries for calls that surely did not run (default 2).
    pub fn retries(mut self, retries: u64) -> Self {
        self.retries = u32::try_from(retries).unwrap_or(u32::MAX);
        self
    }

    /// The pause between retries (default 100 ms).
    pub fn retry_delay(mut self, delay: Duration) -> Self {
        self.retry_delay = delay;
        self
    }

    /// How long the store is skipped after a failure (default 1 s; zero disables it).
    pub fn cooldown(mut self, cooldown: Duration) -> Self {
        self.cooldown = cooldown;
        self
    }

    /// How long the store must answer without failing before an episode of trouble ends and
    /// `rate_limit.recovered` is logged (default 5 s).
    pub fn quiet_period(mut self, quiet: Duration) -> Self {
        self.quiet = quiet;
        self
    }

    /// The in-process store used by [`FailurePolicy::Memory`](super::FailurePolicy::Memory) (default: a memory store
    /// capped at 100 000 keys).
    pub fn fallback(mut self, fallback: MemoryStore) -> Self {
        self.fallback = Some(fallback);
        self
    }

    /// Tracks who is being limited: per limit, the principals that use it the most and
    /// that it refuses the most, over the recent window, in this process
    /// ([`Limit::heavy_hitters`](crate::Limit::heavy_hitters); see [`crate::top`]).
    /// Off by default. Each limit keeps four sketches of its settings' capacity (use and
    /// refusals, this window and the last; [`Limit::heavy_hitter_settings`](crate::Limit::heavy_hitter_settings),
    /// default 128 counters and a minute): about 140 bytes per counter, 70 KiB per limit
    /// at the default, whatever the number of principals. A check costs one lock and a
    /// heap update per limit of its chain. The settings are the limit's, not the
    /// limiter's: every limiter tracking a limit counts into its one sketch.
    pub fn heavy_hitters(mut self) -> Self {
        self.top = true;
        self
    }

    /// Builds the limiter; `store.invalid` for a zero timeout.
    pub fn build(self) -> Result<Limiter<S>, ConfigError> {
        if self.timeout.is_zero() {
            return Err(ConfigError::new(
                ConfigErrorKind::StoreInvalid,
                "timeout",
                "the store timeout must be above zero",
            ));
        }
        let fallback = match self.fallback {
            Some(f) => f,
            None => MemoryStore::builder().max_keys(FALLBACK_KEYS).build()?,
        };
        Ok(Limiter {
            inner: Arc::new(LimiterInner {
                store: self.store,
                name: self.name,
                timeout: self.timeout,
                retries: self.retries,
                retry_delay: self.retry_delay,
                cooldown: self.cooldown,
                quiet: self.quiet,
                fallback,
                anchor: Instant::now(),
                health: (0..Domains::COUNT).map(|_| Health::default()).collect(),
                top: self.top,
            }),
        })
    }
}
