//! The Redis store (feature `redis`); its documentation is [`RedisStore`]'s.

use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::{Script, Value};

use crate::chain::{Chain, ChainMode, Check};
use crate::key::Key;
use crate::protocol::{ChainDecision, Decision};
use crate::protocol::{Domains, Store, StoreError};
use crate::protocol::{KeyState, Reservation};

mod admin;
mod batch;
mod builder;
mod check;
#[cfg(feature = "cluster")]
mod cluster;
mod conn;
mod connect;
mod dedupe;
mod deny;
mod error;
mod fleet;
mod groups;
mod in_flight;
mod keys;
mod lease;
mod pace;
mod periods;
mod shared;
mod top;

mod script;
mod tls;
#[cfg(feature = "cluster")]
mod topology;
mod verify;
mod windows;

use batch::Batcher;
pub use builder::RedisStoreBuilder;
use check::Held;
use conn::Conn;
use deny::DenyCache;
use error::{bad_answer, store_error};
use lease::{Leases, Take, Taking, Units};
use script::{Invocation, REFUND_LUA, ScriptMode, mark_bans, push_lease, push_params};
pub use verify::{ServerVersion, Verified, VerifyError};

/// When a Cluster's slot map is read again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refresh {
    /// On its schedule.
    WhenDue,
    /// Soon: a node failed or redirected a command.
    Urgent,
}

/// How often ended slices' unused units are looked for, while slices exist.
const SWEEP_EVERY: Duration = Duration::from_millis(10);

/// The version of the key layout and stored state, written after the prefix in every key
/// name (see [`RedisStore`], "Keys").
pub const KEY_VERSION: &str = "v3";

#[doc = include_str!("README.md")]
#[derive(Clone)]
pub struct RedisStore {
    inner: Arc<RedisInner>,
}

struct RedisInner {
    conn: Arc<Conn>,
    /// Coalescing (standalone and Sentinel; `None` on a Cluster or when turned off).
    batch: Option<Batcher>,
    endpoint: String,
    prefix: String,
    slack_ms: u64,
    /// The estimate of the server's clock that names the windows' keys.
    clock: Arc<windows::ServerClock>,
    chain: Script,
    window: Script,
    refund: Script,
    slots: Script,
    pacer: Script,
    deny: Option<DenyCache>,
    leases: Leases,
}

impl fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStore")
            .field("endpoint", &self.inner.endpoint)
            .field("prefix", &self.inner.prefix)
            .finish_non_exhaustive()
    }
}

impl RedisStore {
    /// The address of the state clones share.
    pub(crate) fn identity(&self) -> usize {
        Arc::as_ptr(&self.inner) as usize
    }

    /// Where this store counts, e.g. `redis 127.0.0.1:6379` or
    /// `redis-cluster 10.0.0.1:7000,10.0.0.2:7000`: no user name, password or database,
    /// so it can be logged and printed. The name of its [`Limiter::shared`](crate::Limiter::shared).
    pub fn endpoint(&self) -> &str {
        &self.inner.endpoint
    }

    /// Drops what this process cached of `key`: its refusal and its leased slice.
    pub(super) fn forget_cached(&self, key: &Key) {
        if let Some(cache) = &self.inner.deny {
            cache.forget(&key.digest());
        }
        self.inner.leases.forget(key.digest());
    }

    /// How many checks the deny cache answered instead of Redis (0 with the cache off).
    pub fn deny_cache_hits(&self) -> u64 {
        self.inner.deny.as_ref().map_or(0, DenyCache::hits)
    }

    /// How many units of `key`'s quota this process holds in a leased slice (see
    /// [`Limit::leased`](crate::Limit::leased)): taken from Redis, not yet spent.
    pub fn leased_units(&self, key: &Key) -> u64 {
        self.inner.leases.held(key)
    }

    /// The Redis key name of a [`Key`]. A fixed or sliding window keeps a key per window
    /// under it, `<name>:<window number>` (the server's time in microseconds divided by
    /// the window's, rounded down): see [`RedisStore::key_names`].
    pub fn key_name(&self, key: &Key) -> String {
        keys::render(&self.inner.prefix, key)
    }

    /// The Redis keys that may hold `key`'s state now: its name, or for a fixed or sliding
    /// window the keys of the windows around the server's time as this instance estimates
    /// it (the one before, its own and the next). What [`Store::reset`] deletes.
    pub fn key_names(&self, key: &Key) -> Vec<String> {
        let mut check = Vec::with_capacity(4);
        push_params(&mut check, key, 0);
        let t = self.inner.clock.estimate(windows::local_us());
        match periods::of([key]).pop() {
            Some((_, cal)) => periods::around(&self.key_name(key), &cal, t),
            None => windows::around(&self.key_name(key), &check, t),
        }
    }

    /// The name a refund of `key`'s charge made at the server time `at` gives back to: a
    /// calendar quota's period's key, else the key's name (windows.rs names a window's).
    fn refund_name(&self, key: &Key, name: String, at: u64) -> String {
        match periods::of([key]).pop() {
            Some((_, cal)) => periods::charged(&name, &cal, at),
            None => name,
        }
    }

    /// Runs the chain script for one chain (on a Cluster, one slot group); `checks` holds
    /// four numbers per check, `periods` its calendar quotas. Through the coalescing task
    /// when there is one.
    async fn run(
        &self,
        keys: Vec<String>,
        mode: ScriptMode,
        checks: Vec<u64>,
        periods: periods::Periods,
    ) -> batch::BatchAnswer {
        if let Some(batch) = &self.inner.batch {
            return batch.run(keys, mode, checks, periods).await;
        }
        let to = batch::To {
            conn: &self.inner.conn,
            script: &self.inner.chain,
            window: &self.inner.window,
            clock: &self.inner.clock,
            slack_ms: self.inner.slack_ms,
        };
        batch::send(&to, &keys, &[(mode, &checks, &periods)])
            .await
            .pop()
            .unwrap_or_else(|| Err(bad_answer()))
    }

    async fn refund(&self, keys: &[String], at: u64, checks: &[u64]) {
        // A refund that fails leaves the charge until its window passes (documented).
        if let Err(e) = self.try_refund(keys, at, checks).await {
            tracing::warn!(
                name: "rate_limit.refund_failed",
                target: "rate_limit.refund_failed",
                error = e.kind().as_str(),
                "could not refund a chain's earlier slot group; its charge stays until the window passes"
            );
        }
    }

    /// The refund script on `keys` (one slot; a calendar quota's: the period's key, from
    /// [`Self::refund_name`]), for checks charged at `at`: a window's charge goes back to
    /// the key of the window it was charged in.
    async fn try_refund(&self, keys: &[String], at: u64, checks: &[u64]) -> Result<(), StoreError> {
        let mut args = Vec::with_capacity(1 + checks.len());
        args.push(at);
        args.extend_from_slice(checks);
        let mut named = Vec::with_capacity(keys.len() * 2);
        for (name, check) in keys.iter().zip(checks.chunks_exact(4)) {
            windows::charged(name, check, at, &mut named);
        }
        let keys = named;
        let inv = Invocation {
            script: &self.inner.refund,
            code: REFUND_LUA,
            keys: &keys,
            args: &args,
            doubles: false,
        };
        self.inner
            .conn
            .invoke::<Value>(&inv)
            .await
            .map(|_| ())
            .map_err(store_error)
    }

    /// Gives back a reservation: units taken from a live leased slice go back into it;
    /// the rest go to Redis, one refund per run of checks in one slot charged at one time.
    async fn give_back_units(&self, reservation: &Reservation) -> Result<(), StoreError> {
        if let Some(cache) = &self.inner.deny {
            // Given-back units make room again: refusals of these limits are not cached.
            cache.mark_refundable(&reservation.chain());
        }
        let now = Instant::now();
        // One call per run of checks in one slot charged at one time: (keys, time, numbers).
        let mut calls: Vec<(Vec<String>, u64, Vec<u64>)> = Vec::new();
        for item in &reservation.items {
            let (params, at, units) = match item.leased {
                Some(r) if self.inner.leases.restore(&r, now) => continue,
                Some(r) => (r.params, r.at, r.units),
                None => (item.check.key().params(), item.at, item.check.cost()),
            };
            let name = self.refund_name(item.check.key(), self.key_name(item.check.key()), at);
            let cluster = self.inner.conn.is_cluster();
            let joins = calls.last_mut().filter(|(keys, t, _)| {
                *t == at
                    && (!cluster
                        || keys.first().map(|k| keys::hash_slot(k)) == Some(keys::hash_slot(&name)))
            });
            match joins {
                Some((keys, _, args)) => {
                    keys.push(name);
                    push_lease(args, params, units, 0);
                }
                None => {
                    let mut args = Vec::with_capacity(4);
                    push_lease(&mut args, params, units, 0);
                    calls.push((vec![name], at, args));
                }
            }
        }
        let mut first_error = None;
        for (keys, at, args) in &calls {
            if let Err(e) = self.try_refund(keys, *at, args).await {
                // On a Cluster, the node that failed (not every node the chain touched).
                let slot = self
                    .inner
                    .conn
                    .is_cluster()
                    .then(|| keys::hash_slot(&keys[0]));
                first_error.get_or_insert(self.in_domain_of(e, slot));
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Reads the Cluster's slot map again in the background when it is due (sooner after
    /// a failure). Never on a request's path.
    fn refresh_topology(&self, refresh: Refresh) {
        #[cfg(feature = "cluster")]
        if let Some(c) = self.inner.conn.cluster() {
            c.refresh(refresh);
        }
        #[cfg(not(feature = "cluster"))]
        let _ = refresh;
    }

    /// `e`, marked with the failure domain of the node owning hash slot `slot` (on a
    /// Cluster; `None` or a standalone store: left as it is, the whole store's).
    fn in_domain_of(&self, e: StoreError, slot: Option<u16>) -> StoreError {
        match slot.and_then(|s| self.hash_slot_domains(std::iter::once(s)).iter().next()) {
            Some(d) if d != 0 => e.with_domain(d),
            _ => e,
        }
    }

    /// The failure domains of slots: on a Cluster, their owners; else the whole store.
    fn hash_slot_domains(&self, slots: impl Iterator<Item = u16>) -> Domains {
        #[cfg(feature = "cluster")]
        if let Some(c) = self.inner.conn.cluster() {
            return c.topology.domains(slots);
        }
        let _ = slots;
        Domains::WHOLE
    }
}

impl Store for RedisStore {
    async fn check(&self, chain: &Chain) -> Result<ChainDecision, StoreError> {
        if chain.is_empty() {
            return Ok(ChainDecision::new(Vec::new()));
        }
        if let Some(d) = self.try_check(chain) {
            return Ok(d);
        }
        // Boxed (one allocation per call that goes to Redis): the chain's future is deep
        // (leases, refunds, a Cluster's slot groups), and a handler awaiting it unboxed can
        // overflow rustc's recursion limit proving that the handler's future is `Send`.
        let call: Pin<Box<dyn Future<Output = _> + Send + '_>> = Box::pin(self.check_chain(chain));
        call.await
    }

    async fn charge(&self, check: &Check) -> Result<Decision, StoreError> {
        let mut args = Vec::with_capacity(4);
        push_params(&mut args, check.key(), check.cost());
        let (_, mut ds, _) = self
            .run(
                vec![self.key_name(check.key())],
                ScriptMode::Overdraw,
                args,
                periods::of([check.key()]),
            )
            .await?;
        mark_bans([check.key()], &mut ds);
        ds.pop().ok_or_else(bad_answer)
    }

    async fn peek(&self, key: &Key) -> Result<KeyState, StoreError> {
        let mut args = Vec::with_capacity(4);
        push_params(&mut args, key, 0);
        let (_, mut ds, _) = self
            .run(
                vec![self.key_name(key)],
                ScriptMode::InOrder,
                args,
                periods::of([key]),
            )
            .await?;
        mark_bans([key], &mut ds);
        ds.pop()
            .map(KeyState::from_free_check)
            .ok_or_else(bad_answer)
    }

    async fn give_back(&self, reservation: &Reservation) -> Result<(), StoreError> {
        // Boxed, as `check` is: a shallow future for callers that must prove `Send`.
        let call: Pin<Box<dyn Future<Output = _> + Send + '_>> =
            Box::pin(self.give_back_units(reservation));
        call.await
    }

    async fn reset(&self, key: &Key) -> Result<(), StoreError> {
        self.forget_cached(key);
        self.del(&self.key_names(key)).await
    }

    /// A refusal from the deny cache, if it holds one for this chain; or, for an in-order
    /// chain of leased limits only, an admission from this process's slices when they hold
    /// the units.
    fn try_check(&self, chain: &Chain) -> Option<ChainDecision> {
        if let Some(d) = self.inner.deny.as_ref().and_then(|c| c.lookup(chain)) {
            return Some(d);
        }
        let checks = chain.checks();
        if chain.chain_mode() != ChainMode::InOrder
            || checks.is_empty()
            || checks.iter().any(|c| c.key().limit().lease().is_none())
        {
            return None;
        }
        let leases = &self.inner.leases;
        let now = Instant::now();
        // One check: its take is final. More: each is reserved until all have their units.
        let reserve = checks.len() > 1;
        let mut held = Held {
            store: self,
            reserved: Vec::new(),
            refills: Vec::new(),
        };
        let mut decisions = Vec::with_capacity(checks.len());
        let mut taken = Vec::new();
        for (i, c) in checks.iter().enumerate() {
            let mut top_up = None;
            let units = if reserve {
                Units::Reserved
            } else {
                Units::Final
            };
            let take = leases.take(
                c.key(),
                c.cost(),
                now,
                Taking::LocalOnly,
                units,
                &mut Vec::new(),
                &mut top_up,
            );
            if let Some((extra, refill)) = top_up {
                self.top_up(c.key(), extra, refill);
            }
            match take {
                Take::Local(d, r) => {
                    if reserve {
                        held.reserved.push((i, r));
                    } else {
                        taken.push((i, r));
                    }
                    decisions.push(d);
                }
                _ => return None,
            }
        }
        taken.extend(held.commit());
        let mut d = ChainDecision::new(decisions);
        d.receipt.set_leased(taken);
        Some(d)
    }

    /// On a Cluster, the nodes that own the chain's keys (from the slot map, read in the
    /// background); standalone, the whole store.
    fn failure_domains(&self, chain: &Chain) -> Domains {
        if !self.inner.conn.is_cluster() {
            return Domains::WHOLE;
        }
        self.refresh_topology(Refresh::WhenDue);
        self.hash_slot_domains(
            chain
                .checks()
                .iter()
                .map(|c| keys::principal_hash_slot(c.key().principal().as_str())),
        )
    }

    fn domain_name(&self, domain: u32) -> Option<String> {
        #[cfg(feature = "cluster")]
        if let Some(c) = self.inner.conn.cluster() {
            return c.topology.name(domain);
        }
        let _ = domain;
        None
    }
}
