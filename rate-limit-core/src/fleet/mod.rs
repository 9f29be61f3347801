//! One operator's change, obeyed by every instance: quotas, per-principal overrides, lifted
//! bans and named settings (the access lists) written to the store and applied by every
//! instance that shares it.
//!
//! A [`Fleet`] holds the limits an instance runs. A change made through any instance
//! ([`Fleet::set_quota`], [`Fleet::set_override`], [`Fleet::clear_override`],
//! [`Fleet::lift_ban`], [`Fleet::set_setting`]) is written to the store first, as one
//! versioned step (on Redis one script: the version goes up by one, the entry changes and
//! the change is logged together, and the new version is published on the store's
//! channel). Each instance applies it when it next reads the state: at once when the
//! notice arrives, and on [`Fleet::run`]'s period whatever happens to the notice. A reader
//! that sees a newer version reads the changes since its own and applies those alone (a
//! change costs the same at 10 overrides and at 10 000), or the whole state when it is
//! on another history or too far behind; so every instance ends at the same settings in
//! version order, and a change it missed is healed by the next read.
//!
//! The store keeps the state through the [`SharedState`] contract: the memory store, Redis
//! (standalone, Cluster, Sentinel), or a store of your own that implements it.
//!
//! - **Refused, never half-applied**: a change the store cannot take is an error, and no
//!   instance applies it (not even the one that was asked).
//! - **Two operators at once** end in one value: the one written last, by version.
//! - **On the memory store** the state is this process's: changes apply at once, to the
//!   fleets over that store (clones of it) only.
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
//! replica that had it).
//!
//! **Histories.** The state carries an epoch, made with it, beside its version
//! ([`Applied::epoch`]). When a store comes back empty (a restart without persistence),
//! the first instance to notice puts back what it applied, epoch and version included,
//! and the others find their own history there. When a change reached the empty store
//! first (an instance started meanwhile, or one that was asked), that change starts a new
//! epoch and **the store's state wins**: every instance that applied the old history reads
//! the new one whole and applies it, and logs `the store's fleet state is another history`
//! (target `rate_limit.fleet`) with both marks. An acknowledged change is never undone by a
//! restore: a restore writes only onto an empty store. A failover to a replica that missed
//! the newest changes is the store's state too: instances ahead of it apply it, and log
//! the same line.

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
use crate::protocol::fleet::{FleetChange, FleetEntries, FleetMark, FleetRead};
use crate::protocol::{SharedState, Store, StoreError, StoreErrorKind};
use crate::store::any::AnyStore;

/// What an instance last applied.
///
/// You read it (`Fleet::applied`) for a health check or an admin page: whether this
/// instance is current, and why not.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Applied {
    /// The state's version (0: no change yet).
    pub version: u64,
    /// The state's history (0: none yet): see the module's "Histories".
    pub epoch: u64,
    /// When it was applied here.
    pub at: Option<SystemTime>,
    /// Why the last read failed, while it does (the store's message; never a key).
    pub error: Option<String>,
    /// Whether the store's notices arrive ([`Fleet::run`] subscribed): changes apply as
    /// they are made. `false`: at the next periodic read.
    pub listening: bool,
}

/// Why a change was not made.
///
/// Every change a fleet makes can return it (quotas, overrides, lifted bans, settings):
/// `Config` is the caller's mistake, to answer as a 4xx; `Store` means no instance applies
/// the change, to try again later.
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

/// The state an instance applied: what it puts back if the store loses it.
#[derive(Debug, Default)]
struct Held {
    mark: FleetMark,
    entries: FleetEntries,
}

/// The limits an instance runs, kept in step with the store's runtime state.
///
/// Generic over the store (any [`Store`] that implements [`SharedState`]), as
/// [`Limiter`](crate::Limiter) is, with [`AnyStore`] as the default.
#[derive(Clone)]
pub struct Fleet<S = AnyStore> {
    store: S,
    limits: Arc<HashMap<String, Limit>>,
    /// The quota each limit was written with, to return to when no change names it.
    written: Arc<HashMap<String, u64>>,
    applied: Arc<Mutex<Applied>>,
    held: Arc<Mutex<Held>>,
    watchers: Arc<Mutex<Watchers>>,
    /// One read at a time: a read that finds another under way waits for it.
    reading: Arc<tokio::sync::Mutex<()>>,
    /// `true` once a first read ended (applied, or failed): see [`Fleet::ready`].
    read_once: Arc<tokio::sync::watch::Sender<bool>>,
    /// This instance's name in the fleet's heavy hitters.
    name: Arc<str>,
    hitters_every: Duration,
}

impl<S> std::fmt::Debug for Fleet<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fleet")
            .field("name", &self.name)
            .field("limits", &self.limits.len())
            .field("applied", &self.lock_applied())
            .finish_non_exhaustive()
    }
}

impl<S: Store + SharedState + Clone> Fleet<S> {
    /// A fleet of `limits` over `store` (the one the limiter counts in). Give it the ban
    /// limits too, for [`lift_ban`](Self::lift_ban).
    pub fn new(store: S, limits: impl IntoIterator<Item = Limit>) -> Self {
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
            held: Arc::default(),
            watchers: Arc::default(),
            reading: Arc::default(),
            read_once: Arc::new(tokio::sync::watch::Sender::new(false)),
            name: hitters::random_name().into(),
            hitters_every: DEFAULT_HITTERS_EVERY,
        }
    }

    /// Sets `limit`'s quota on every instance; the change's version.
    pub async fn set_quota(&self, limit: &str, quota: u64) -> Result<u64, FleetError> {
        self.check_quota(limit, quota)?;
        let limit = limit.to_owned();
        self.change(FleetChange::Quota { limit, quota }).await
    }

    /// Gives `principal` its own quota of `limit` on every instance; the change's version.
    pub async fn set_override(
        &self,
        limit: &str,
        principal: &Principal,
        quota: u64,
    ) -> Result<u64, FleetError> {
        self.check_quota(limit, quota)?;
        let (limit, principal) = (limit.to_owned(), principal.clone());
        self.change(FleetChange::Override {
            limit,
            principal,
            quota,
        })
        .await
    }

    /// Removes `principal`'s own quota of `limit` on every instance; the change's version.
    pub async fn clear_override(
        &self,
        limit: &str,
        principal: &Principal,
    ) -> Result<u64, FleetError> {
        self.limit(limit)?;
        let (limit, principal) = (limit.to_owned(), principal.clone());
        self.change(FleetChange::ClearOverride { limit, principal })
            .await
    }

    /// Lifts `principal`'s ban under the ban limit `ban` (or resets its count under any
    /// other limit) in the store, for every instance; the change's version. The store
    /// holds the ban, so every instance sees it lifted at its next check of that key; the
    /// change tells each one to drop a refusal it cached (which would otherwise last up
    /// to a second).
    pub async fn lift_ban(&self, ban: &str, principal: &Principal) -> Result<u64, FleetError> {
        let key = self.limit(ban)?.key(principal.clone());
        self.store.reset(&key).await.map_err(FleetError::Store)?;
        let (ban, principal) = (ban.to_owned(), principal.clone());
        self.change(FleetChange::LiftBan { ban, principal }).await
    }

    /// Sets the setting `name` (1 to 64 bytes of `A-Z a-z 0-9 . _ -`) to `value` on every
    /// instance; each instance's [`watch_setting`](Self::watch_setting) callbacks get it.
    /// The admin keeps the access lists here.
    pub async fn set_setting(&self, name: &str, value: &str) -> Result<u64, FleetError> {
        validate_name(name).map_err(FleetError::Config)?;
        let (name, value) = (name.to_owned(), value.to_owned());
        self.change(FleetChange::Setting { name, value }).await
    }

    /// Reads the store's state and applies what changed since what was applied here; the
    /// version applied. On a failure the last state stays, and [`applied`](Self::applied)
    /// says why.
    pub async fn sync(&self) -> Result<u64, StoreError> {
        let _one = self.reading.lock().await;
        let r = self.read().await;
        self.update(|a| a.error = r.as_ref().err().map(ToString::to_string));
        self.read_once.send_replace(true);
        r
    }

    /// One read (one store call when nothing changed, or when changes did): what changed
    /// since the mark applied here, and a put-back when the store lost the state.
    async fn read(&self) -> Result<u64, StoreError> {
        let held = self.lock_held().mark;
        let mut read = self.store.fleet_read(held).await?;
        if matches!(&read, FleetRead::Whole(s) if s.mark.is_empty()) && !held.is_empty() {
            // The store lost the state (a restart without persistence): put back what this
            // instance applied, unless a change reached the empty store first.
            let state = {
                let h = self.lock_held();
                h.entries.to_state(h.mark)
            };
            if self.store.fleet_restore(&state).await? == held {
                tracing::warn!(
                    target: "rate_limit.fleet",
                    version = held.version,
                    epoch = held.epoch,
                    "the store had lost the fleet's runtime state: put back as applied here"
                );
            }
            read = self.store.fleet_read(held).await?;
        }
        let current = matches!(&read, FleetRead::Since { mark, changes } if *mark == held && changes.is_empty());
        if !current || self.applied().at.is_none() {
            self.apply(held, read);
        }
        Ok(self.applied().version)
    }
}

impl<S> Fleet<S> {
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

    /// Calls `f` after every read with what this instance applied: for a metric or a log
    /// of stragglers.
    pub fn on_applied(&self, f: impl Fn(&Applied) + Send + Sync + 'static) {
        self.lock_watchers().applied.push(Box::new(f));
    }

    /// Waits until this instance's first read of the store ended (it applied the state, or
    /// the store did not answer and it keeps the limits as written): what a server awaits
    /// before its first request, where it cannot await [`sync`](Self::sync) itself (a
    /// middleware: once ready, a check of one flag).
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

    fn lock_held(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
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
}

impl<S: Store + SharedState + Clone> Fleet<S> {
    async fn change(&self, change: FleetChange) -> Result<u64, FleetError> {
        for _ in 0..2 {
            let held = self.lock_held().mark;
            let made = self
                .store
                .fleet_change(&change, held, new_epoch())
                .await
                .map_err(FleetError::Store)?;
            if let Some(mark) = made {
                // The instance that was asked applies it at once; the others at the notice
                // or their next read.
                let _ = self.sync().await;
                return Ok(mark.version);
            }
            // The store lost the state this instance applied: put it back, then change.
            self.sync().await.map_err(FleetError::Store)?;
        }
        Err(FleetError::Store(StoreError::new(
            StoreErrorKind::Rejected,
            "the store's fleet state went empty twice during the change",
        )))
    }
}

/// A fresh epoch: random, above 0, below 2^53 (exact as a Lua number).
fn new_epoch() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    (h.finish() >> 11).max(1)
}
