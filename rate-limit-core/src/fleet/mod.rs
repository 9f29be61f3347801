//! One operator's change, obeyed by every instance: quotas, per-principal overrides, lifted
//! bans and named settings (the access lists) written to the store and applied by every
//! instance that shares it.
//!
//! A [`Fleet`] holds the limits an instance runs. A change made through any instance
//! ([`Fleet::set_quota`], [`Fleet::set_override`], [`Fleet::clear_override`],
//! [`Fleet::lift_ban`], [`Fleet::set_setting`]) is written to the store first, as one
//! versioned step (on Redis one script: the version goes up by one and the entry changes
//! together, and the new version is published on the store's channel). Each instance
//! applies it when it next reads the state: at once when the notice arrives, and on
//! [`Fleet::run`]'s period whatever happens to the notice. A reader that sees a newer
//! version reads the whole state and applies it, so every instance ends at the same
//! settings in version order, and a change it missed is healed by the next read.
//!
//! - **Refused, never half-applied**: a change the store cannot take is an error, and no
//!   instance applies it (not even the one that was asked).
//! - **Two operators at once** end in one value: the one written last, by version.
//! - **On the memory store** the state is this process's: changes apply at once, here only.
//! - **An instance cut off from the store** keeps its last state, and says so
//!   ([`Fleet::applied`]: the version, when it was applied, the last error, whether
//!   notices arrive).
//! - **Start**: call [`Fleet::sync`] once before serving, so a new instance obeys every
//!   change made before it started from its first request.
//! - **Trusting the store**: a notice is only a prompt to read; what is applied is what
//!   the state's hash holds. A client that can publish on the channel can make instances
//!   read (at most one read in flight per instance, however many notices), and drop a
//!   lifted ban's cached refusal early; one that can write the hash can set any setting,
//!   as it could any count: give the store's user to the service alone (the stores
//!   guide's ACL line).
//!
//! The state is the operators' settings and has no TTL: it lives until it is changed. It
//! survives what Redis's own data survives (a restart with persistence, a failover to a
//! replica that had it); without persistence a restart forgets it, and every instance keeps
//! the settings it last applied until the next change.

mod apply;
mod hitters;
mod run;

pub use hitters::{Contributor, DEFAULT_HITTERS_EVERY, FleetHitters};

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use crate::error::{ConfigError, ConfigErrorKind};
use crate::limit::Limit;
use crate::name::validate_name;
use crate::principal::Principal;
use crate::protocol::fleet::{FleetChange, FleetState};
use crate::protocol::{Store, StoreError};
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
    /// Whether the store's notices arrive ([`Fleet::run`] subscribed): changes apply as
    /// they are made. `false`: at the next periodic read.
    pub listening: bool,
}

/// Why a change was not made.
#[derive(Debug)]
#[non_exhaustive]
pub enum FleetError {
    /// A limit this fleet does not run, a quota no limit can have, or a setting's name
    /// outside its alphabet.
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

type Watcher = Box<dyn Fn(Option<&str>) + Send + Sync>;
type Observer = Box<dyn Fn(&Applied) + Send + Sync>;

/// Who is told of what was applied.
#[derive(Default)]
struct Watchers {
    /// A setting's watchers, with the value they were last given.
    settings: HashMap<String, (Option<String>, Vec<Watcher>)>,
    applied: Vec<Observer>,
}

/// The limits an instance runs, kept in step with the store's runtime state.
#[derive(Clone)]
pub struct Fleet {
    store: AnyStore,
    limits: Arc<HashMap<String, Limit>>,
    /// The quota each limit was written with, to return to when no change names it.
    written: Arc<HashMap<String, u64>>,
    applied: Arc<Mutex<Applied>>,
    /// The state last applied: on the memory store the state itself (this process's); on
    /// a shared store what is put back if the store loses it.
    local: Arc<Mutex<FleetState>>,
    watchers: Arc<Mutex<Watchers>>,
    /// One read at a time: a read that finds another under way waits for it.
    reading: Arc<tokio::sync::Mutex<()>>,
    /// `true` once a first read ended (applied, or failed): see [`Fleet::ready`].
    read_once: Arc<tokio::sync::watch::Sender<bool>>,
    /// This instance's name in the fleet's heavy hitters.
    name: Arc<str>,
    hitters_every: Duration,
}

impl std::fmt::Debug for Fleet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fleet")
            .field("store", &self.store.describe())
            .field("name", &self.name)
            .field("limits", &self.limits.len())
            .field("applied", &self.applied())
            .finish_non_exhaustive()
    }
}

impl Fleet {
    /// A fleet of `limits` over `store` (the one the limiter counts in). Give it the ban
    /// limits too, for [`lift_ban`](Self::lift_ban).
    pub fn new(store: AnyStore, limits: impl IntoIterator<Item = Limit>) -> Self {
        let local = matches!(store, AnyStore::Memory(_));
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
            watchers: Arc::default(),
            reading: Arc::default(),
            read_once: Arc::new(tokio::sync::watch::Sender::new(local)),
            name: hitters::random_name().into(),
            hitters_every: DEFAULT_HITTERS_EVERY,
        }
    }

    /// Sets `limit`'s quota on every instance; the change's version.
    pub async fn set_quota(&self, limit: &str, quota: u64) -> Result<u64, FleetError> {
        self.check_quota(limit, quota)?;
        let quota = quota.to_string();
        self.change(FleetChange::Set(&format!("q:{limit}"), &quota))
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
        self.change(FleetChange::Set(&field, &quota.to_string()))
            .await
    }

    /// Removes `principal`'s own quota of `limit` on every instance; the change's version.
    pub async fn clear_override(
        &self,
        limit: &str,
        principal: &Principal,
    ) -> Result<u64, FleetError> {
        self.limit(limit)?;
        let field = format!("o:{limit}:{}", principal.as_str());
        self.change(FleetChange::Remove(&field)).await
    }

    /// Lifts `principal`'s ban under the ban limit `ban` (or resets its count under any
    /// other limit) in the store, for every instance; the change's version. The store
    /// holds the ban, so every instance sees it lifted at its next check of that key; the
    /// notice tells each one to drop a refusal it cached (which would otherwise last up
    /// to a second).
    pub async fn lift_ban(&self, ban: &str, principal: &Principal) -> Result<u64, FleetError> {
        let key = self.limit(ban)?.key(principal.clone());
        self.store.reset(&key).await.map_err(FleetError::Store)?;
        let event = format!("lift {ban} {}", principal.as_str());
        self.change(FleetChange::Event(&event)).await
    }

    /// Sets the setting `name` (1 to 64 bytes of `A-Z a-z 0-9 . _ -`) to `value` on every
    /// instance; each instance's [`watch_setting`](Self::watch_setting) callbacks get it.
    /// The admin keeps the access lists here.
    pub async fn set_setting(&self, name: &str, value: &str) -> Result<u64, FleetError> {
        validate_name(name).map_err(FleetError::Config)?;
        self.change(FleetChange::Set(&format!("s:{name}"), value))
            .await
    }

    /// Calls `f` with the setting `name`'s value whenever an applied state changes it
    /// (`None`: the state holds none), and once now if one was applied already.
    pub fn watch_setting(&self, name: &str, f: impl Fn(Option<&str>) + Send + Sync + 'static) {
        let mut w = self.lock_watchers();
        let entry = w.settings.entry(name.to_owned()).or_default();
        if entry.0.is_some() {
            f(entry.0.as_deref());
        }
        entry.1.push(Box::new(f));
    }

    /// Calls `f` after every read (and every change on the memory store) with what this
    /// instance applied: for a metric or a log of stragglers.
    pub fn on_applied(&self, f: impl Fn(&Applied) + Send + Sync + 'static) {
        self.lock_watchers().applied.push(Box::new(f));
    }

    /// Reads the store's state and applies it when it is newer than what was applied; the
    /// version applied. On a failure the last state stays, and [`applied`](Self::applied)
    /// says why.
    pub async fn sync(&self) -> Result<u64, StoreError> {
        if matches!(self.store, AnyStore::Memory(_)) {
            return Ok(self.applied().version);
        }
        let _one = self.reading.lock().await;
        let read = async {
            let mut version = self.store.fleet_version().await?;
            let applied = self.applied();
            if version < applied.version {
                // The store lost changes (a restart without persistence, a failover to a
                // replica that never had them): put back what this instance applied.
                let state = self.lock_local().clone();
                version = self.store.fleet_restore(&state).await?;
                tracing::warn!(
                    target: "rate_limit.fleet",
                    store = %self.store.describe(),
                    version = state.version,
                    "the store had lost the fleet's runtime state: put back as applied here"
                );
            }
            if version > applied.version || applied.at.is_none() {
                let state = self.store.fleet_read().await?;
                self.apply(&state);
            }
            Ok::<_, StoreError>(self.applied().version)
        };
        let r = read.await;
        self.update(|a| a.error = r.as_ref().err().map(ToString::to_string));
        self.read_once.send_replace(true);
        r
    }

    /// Waits until this instance's first read of the store ended (it applied the state, or
    /// the store did not answer and it keeps the limits as written): what a server awaits
    /// before its first request, where it cannot await [`sync`](Self::sync) itself (a
    /// middleware: once ready, a check of one flag). At once on the memory store.
    pub async fn ready(&self) {
        if self.is_ready() {
            return;
        }
        let mut seen = self.read_once.subscribe();
        let _ = seen.wait_for(|done| *done).await;
    }

    /// Whether this instance's first read of the store ended ([`ready`](Self::ready)
    /// would not wait): one flag, for a request's path.
    pub fn is_ready(&self) -> bool {
        *self.read_once.borrow()
    }

    /// What this instance last applied.
    pub fn applied(&self) -> Applied {
        self.lock_applied().clone()
    }

    /// The limits this fleet runs, by name.
    pub fn limit(&self, name: &str) -> Result<&Limit, FleetError> {
        self.limits.get(name).ok_or_else(|| {
            FleetError::Config(ConfigError::new(
                ConfigErrorKind::UnknownLimit,
                "limit",
                format!("this fleet runs no limit named {name:?}"),
            ))
        })
    }

    fn lock_applied(&self) -> std::sync::MutexGuard<'_, Applied> {
        self.applied.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn lock_local(&self) -> std::sync::MutexGuard<'_, FleetState> {
        self.local.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn lock_watchers(&self) -> std::sync::MutexGuard<'_, Watchers> {
        self.watchers.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Changes what was applied, and tells the observers.
    fn update(&self, f: impl FnOnce(&mut Applied)) {
        let now = {
            let mut a = self.lock_applied();
            f(&mut a);
            a.clone()
        };
        for o in &self.lock_watchers().applied {
            o(&now);
        }
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

    async fn change(&self, change: FleetChange<'_>) -> Result<u64, FleetError> {
        if matches!(self.store, AnyStore::Memory(_)) {
            let state = {
                let mut local = self.lock_local();
                local.change(change);
                local.clone()
            };
            self.apply(&state);
            return Ok(state.version);
        }
        let mut version = None;
        for _ in 0..2 {
            version = self
                .store
                .fleet_change(change, self.applied().version)
                .await
                .map_err(FleetError::Store)?;
            if version.is_some() {
                break;
            }
            // The store lost changes this instance applied: put them back, then change.
            self.sync().await.map_err(FleetError::Store)?;
        }
        let version = version.ok_or_else(|| {
            FleetError::Store(StoreError::new(
                crate::protocol::StoreErrorKind::Rejected,
                "the store's fleet state went back twice during the change",
            ))
        })?;
        // The instance that was asked applies it at once; the others at the notice or their
        // next read.
        let _ = self.sync().await;
        Ok(version)
    }
}

impl FleetState {
    /// Makes `change` here (the memory store's state).
    fn change(&mut self, change: FleetChange<'_>) {
        let field = match change {
            FleetChange::Set(f, _) | FleetChange::Remove(f) => f,
            FleetChange::Event(_) => "",
        };
        self.entries.retain(|(k, _)| k != field);
        if let FleetChange::Set(f, v) = change {
            self.entries.push((f.to_owned(), v.to_owned()));
        }
        self.version += 1;
    }
}
