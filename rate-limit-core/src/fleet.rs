//! One operator's change, obeyed by every instance: quotas and per-principal overrides of
//! running limits written to the store and applied by every instance that shares it.
//!
//! A [`Fleet`] holds the limits an instance runs. A change made through any instance
//! ([`Fleet::set_quota`], [`Fleet::set_override`], [`Fleet::clear_override`]) is written to
//! the store first, as one versioned step (on Redis one script: the version goes up by one
//! and the entry changes together); it is applied by each instance when it next reads the
//! state ([`Fleet::sync`], which [`Fleet::run`] calls on a period). A reader that sees a
//! newer version reads the whole state and applies it, so every instance ends at the same
//! settings in version order, and a change it missed is healed by the next read.
//!
//! - **Refused, never half-applied**: a change the store cannot take is an error, and no
//!   instance applies it (not even the one that was asked).
//! - **Two operators at once** end in one value: the one written last, by version.
//! - **On the memory store** the state is this process's: changes apply at once, here only.
//! - **An instance cut off from the store** keeps its last state, and says so
//!   ([`Fleet::applied`]: the version, when it was applied, the last error).
//! - **Start**: call [`Fleet::sync`] once before serving, so a new instance obeys every
//!   change made before it started from its first request.
//!
//! The state is the operators' settings and has no TTL: it lives until it is changed. It
//! survives what Redis's own data survives (a restart with persistence, a failover to a
//! replica that had it); without persistence a restart forgets it, and every instance keeps
//! the settings it last applied until the next change.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use crate::error::{ConfigError, ConfigErrorKind};
use crate::limit::Limit;
use crate::principal::Principal;
use crate::protocol::StoreError;
use crate::protocol::fleet::FleetState;
use crate::store::any::AnyStore;

/// What an instance last applied.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Applied {
    /// The state's version (0: no change yet).
    pub version: u64,
    /// When it was applied here.
    pub at: Option<SystemTime>,
    /// Why the last read failed, while it does (the store's message; never a key).
    pub error: Option<String>,
}

/// Why a change was not made.
#[derive(Debug)]
#[non_exhaustive]
pub enum FleetError {
    /// A limit this fleet does not run, or a quota no limit can have.
    Config(ConfigError),
    /// The store could not take the change: no instance applies it.
    Store(StoreError),
}

impl std::fmt::Display for FleetError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Config(e) => write!(f, "{e}"),
            Self::Store(e) => write!(f, "the change was not made: {e}"),
        }
    }
}

impl std::error::Error for FleetError {}

/// The limits an instance runs, kept in step with the store's runtime state.
#[derive(Debug, Clone)]
pub struct Fleet {
    store: AnyStore,
    limits: Arc<HashMap<String, Limit>>,
    /// The quota each limit was written with, to return to when no change names it.
    written: Arc<HashMap<String, u64>>,
    applied: Arc<Mutex<Applied>>,
    /// The state itself, for a store that keeps none (memory: this process's).
    local: Arc<Mutex<FleetState>>,
}

impl Fleet {
    /// A fleet of `limits` over `store` (the one the limiter counts in).
    pub fn new(store: AnyStore, limits: impl IntoIterator<Item = Limit>) -> Self {
        let limits: HashMap<String, Limit> = limits
            .into_iter()
            .map(|l| (l.name().to_owned(), l))
            .collect();
        let written = limits.iter().map(|(n, l)| (n.clone(), l.quota())).collect();
        Self {
            store,
            limits: Arc::new(limits),
            written: Arc::new(written),
            applied: Arc::default(),
            local: Arc::default(),
        }
    }

    /// Sets `limit`'s quota on every instance; the change's version.
    pub async fn set_quota(&self, limit: &str, quota: u64) -> Result<u64, FleetError> {
        self.check_quota(limit, quota)?;
        self.change(&format!("q:{limit}"), Some(&quota.to_string()))
            .await
    }

    /// Gives `principal` its own quota of `limit` on every instance; the change's version.
    pub async fn set_override(
        &self,
        limit: &str,
        principal: &Principal,
        quota: u64,
    ) -> Result<u64, FleetError> {
        self.check_quota(limit, quota)?;
        let field = format!("o:{limit}:{}", principal.as_str());
        self.change(&field, Some(&quota.to_string())).await
    }

    /// Removes `principal`'s own quota of `limit` on every instance; the change's version.
    pub async fn clear_override(
        &self,
        limit: &str,
        principal: &Principal,
    ) -> Result<u64, FleetError> {
        self.limit(limit)?;
        self.change(&format!("o:{limit}:{}", principal.as_str()), None)
            .await
    }

    /// Reads the store's state and applies it when it is newer than what was applied; the
    /// version applied. On a failure the last state stays, and [`applied`](Self::applied)
    /// says why.
    pub async fn sync(&self) -> Result<u64, StoreError> {
        if matches!(self.store, AnyStore::Memory(_)) {
            return Ok(self.applied().version);
        }
        let read = async {
            let version = self.store.fleet_version().await?;
            if version > self.applied().version || (version == 0 && self.applied().at.is_none()) {
                let state = self.store.fleet_read().await?;
                self.apply(&state);
            }
            Ok::<_, StoreError>(self.applied().version)
        };
        match read.await {
            Ok(v) => Ok(v),
            Err(e) => {
                self.lock_applied().error = Some(e.to_string());
                Err(e)
            }
        }
    }

    /// Calls [`sync`](Self::sync) every `period`, for as long as the returned future runs
    /// (spawn it). A period of 250 ms applies every change within about a quarter of a
    /// second of its write, at two small reads a second per instance.
    pub async fn run(self, period: Duration) {
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let _ = self.sync().await;
        }
    }

    /// What this instance last applied.
    pub fn applied(&self) -> Applied {
        self.lock_applied().clone()
    }

    fn lock_applied(&self) -> std::sync::MutexGuard<'_, Applied> {
        self.applied.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn limit(&self, name: &str) -> Result<&Limit, FleetError> {
        self.limits.get(name).ok_or_else(|| {
            FleetError::Config(ConfigError::new(
                ConfigErrorKind::UnknownLimit,
                "limit",
                format!("this fleet runs no limit named {name:?}"),
            ))
        })
    }

    fn check_quota(&self, limit: &str, quota: u64) -> Result<(), FleetError> {
        self.limit(limit)?;
        if quota == 0 || quota > u64::from(u32::MAX) {
            return Err(FleetError::Config(ConfigError::new(
                if quota == 0 {
                    ConfigErrorKind::QuotaZero
                } else {
                    ConfigErrorKind::Overflow
                },
                "quota",
                "a quota from 1 to 4 294 967 295",
            )));
        }
        Ok(())
    }

    async fn change(&self, field: &str, value: Option<&str>) -> Result<u64, FleetError> {
        if matches!(self.store, AnyStore::Memory(_)) {
            let state = {
                let mut local = self.local.lock().unwrap_or_else(PoisonError::into_inner);
                local.entries.retain(|(k, _)| k != field);
                if let Some(v) = value {
                    local.entries.push((field.to_owned(), v.to_owned()));
                }
                local.version += 1;
                local.clone()
            };
            self.apply(&state);
            return Ok(state.version);
        }
        let version = self
            .store
            .fleet_change(field, value)
            .await
            .map_err(FleetError::Store)?;
        // The instance that was asked applies it at once; the others at their next read.
        let _ = self.sync().await;
        Ok(version)
    }

    /// Every limit's quota and overrides as `state` says (a limit it does not name: as
    /// written, no overrides).
    fn apply(&self, state: &FleetState) {
        let mut quotas: HashMap<&str, u64> = HashMap::new();
        let mut overrides: HashMap<&str, Vec<(Principal, u64)>> = HashMap::new();
        for (field, value) in &state.entries {
            let Ok(n) = value.parse::<u64>() else {
                continue;
            };
            if let Some(limit) = field.strip_prefix("q:") {
                quotas.insert(limit, n);
            } else if let Some(rest) = field.strip_prefix("o:") {
                // Limit names hold no ':' (their alphabet), so the first ':' ends the name.
                let Some((limit, who)) = rest.split_once(':') else {
                    continue;
                };
                let Some(p) = Principal::from_rendered(who) else {
                    continue;
                };
                overrides.entry(limit).or_default().push((p, n));
            }
        }
        for (name, limit) in self.limits.iter() {
            let quota = quotas
                .get(name.as_str())
                .copied()
                .unwrap_or(self.written[name]);
            if limit.quota() != quota {
                let _ = limit.set_quota(quota);
            }
            let wanted = overrides.remove(name.as_str()).unwrap_or_default();
            for (rendered, _) in limit.overrides() {
                let still = wanted.iter().any(|(p, _)| p.as_str() == rendered);
                if let (false, Some(p)) = (still, Principal::from_rendered(&rendered)) {
                    limit.clear_override(&p);
                }
            }
            for (p, q) in wanted {
                let _ = limit.set_override(&p, q);
            }
        }
        let mut applied = self.lock_applied();
        applied.version = state.version;
        applied.at = Some(SystemTime::now());
        applied.error = None;
    }
}
