#![doc = include_str!("README.md")]

use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use redis::{Script, Value};

use crate::chain::{Chain, ChainMode, Check};
use crate::key::Key;
use crate::limit::SlotKey;
use crate::protocol::Reservation;
use crate::protocol::{ChainDecision, Decision};
use crate::protocol::{Dedupe, Domains, Store, StoreError};
use crate::protocol::{Slots, Taken};

mod batch;
mod builder;
#[cfg(feature = "cluster")]
mod cluster;
mod conn;
mod connect;
mod deny;
mod error;
mod keys;
mod lease;

mod script;
mod tls;
#[cfg(feature = "cluster")]
mod topology;

use crate::protocol::lease::LeasedUnits;
use crate::protocol::pace::{PaceCall, PaceOp, PaceReply};
use batch::Batcher;
pub use builder::RedisStoreBuilder;
use conn::Conn;
use deny::DenyCache;
use error::{bad_answer, classify, store_error};
use lease::{Leases, Leftover, Take};
use script::{
    CHAIN_LUA, Invocation, Mode, PACER_LUA, REFUND_LUA, SLOTS_LUA, as_charged, decode, head,
    mark_bans, push_lease, push_params,
};

/// How often ended slices' unused units are looked for, while slices exist.
const SWEEP_EVERY: Duration = Duration::from_millis(10);

/// The version of the key layout and stored state, written after the prefix in every key
/// name (see the [module docs](self)).
pub const KEY_VERSION: &str = "v2";

/// The Redis store. Cheap to clone; clones share the connection. See the [module docs](self).
#[derive(Clone)]
pub struct RedisStore {
    inner: Arc<Inner>,
}

struct Inner {
    conn: Arc<Conn>,
    /// Coalescing (standalone and Sentinel; `None` on a Cluster or when turned off).
    batch: Option<Batcher>,
    endpoint: String,
    prefix: String,
    slack_ms: u64,
    chain: Script,
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

    /// How many checks the deny cache answered instead of Redis (0 with the cache off).
    pub fn deny_cache_hits(&self) -> u64 {
        self.inner.deny.as_ref().map_or(0, DenyCache::hits)
    }

    /// How many units of `key`'s quota this process holds in a leased slice (see
    /// [`Limit::leased`](crate::Limit::leased)): taken from Redis, not yet spent.
    pub fn leased_units(&self, key: &Key) -> u64 {
        self.inner.leases.held(key)
    }

    /// The Redis key name of a [`Key`].
    pub fn key_name(&self, key: &Key) -> String {
        keys::render(&self.inner.prefix, key)
    }

    /// Runs the chain script for one chain (on a Cluster, one slot group); `checks` holds
    /// four numbers per check. Through the coalescing task when there is one.
    async fn run(&self, keys: Vec<String>, mode: Mode, checks: Vec<u64>) -> batch::Answer {
        if let Some(batch) = &self.inner.batch {
            return batch.run(keys, mode, checks).await;
        }
        let (conn, script) = (&self.inner.conn, &self.inner.chain);
        batch::send(conn, script, self.inner.slack_ms, &keys, &[(mode, &checks)])
            .await
            .pop()
            .unwrap_or_else(|| Err(bad_answer()))
    }

    async fn refund(&self, keys: &[String], at: u64, checks: &[u64]) {
        // A refund that fails leaves the charge until its window passes (documented).
        if let Err(e) = self.try_refund(keys, at, checks).await {
            tracing::warn!(
                name: "rate_limit.refund_failed",
                error = e.kind().as_str(),
                "could not refund a chain's earlier slot group; its charge stays until the window passes"
            );
        }
    }

    /// The refund script on `keys` (one slot), for checks charged at `at`.
    async fn try_refund(&self, keys: &[String], at: u64, checks: &[u64]) -> Result<(), StoreError> {
        let mut args = Vec::with_capacity(1 + checks.len());
        args.push(at);
        args.extend_from_slice(checks);
        let inv = Invocation {
            script: &self.inner.refund,
            code: REFUND_LUA,
            keys,
            args: &args,
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
            let name = self.key_name(item.check.key());
            let cluster = self.inner.conn.is_cluster();
            let joins = calls.last_mut().filter(|(keys, t, _)| {
                *t == at
                    && (!cluster || keys.first().map(|k| keys::slot(k)) == Some(keys::slot(&name)))
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
                let slot = self.inner.conn.is_cluster().then(|| keys::slot(&keys[0]));
                let e = match self.slot_domains(slot.into_iter()).iter().next() {
                    Some(d) if slot.is_some() && d != 0 => e.with_domain(d),
                    _ => e,
                };
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Checks that the script path works (loading the script if Redis lost it): a health
    /// check that means what it says, unlike `PING`.
    ///
    /// On a Cluster, every master must answer.
    pub async fn health(&self) -> Result<(), StoreError> {
        #[cfg(feature = "cluster")]
        if let Some(c) = self.inner.conn.cluster() {
            let args = head(self.inner.slack_ms, 0);
            let inv = Invocation {
                script: &self.inner.chain,
                code: CHAIN_LUA,
                keys: &[],
                args: &args,
            };
            for m in c.masters().await.map_err(store_error)? {
                let v: Value = c
                    .send(cluster::Target::Node(m), true, |text| inv.cmd(text))
                    .await
                    .map_err(store_error)?;
                decode(&v, 0)?;
            }
            return Ok(());
        }
        self.run(Vec::new(), Mode::InOrder, Vec::new())
            .await
            .map(|_| ())
    }

    /// Warns (`rate_limit.redis_eviction`) when Redis may evict limiter keys: any
    /// `maxmemory-policy` but `noeviction` (the keys carry TTLs, so `volatile-*` policies
    /// evict them too), on every master. Returns the policies seen, or the error if
    /// `CONFIG GET` was refused (managed Redis), which it also logs.
    pub async fn check_eviction_policy(&self) -> Result<Vec<String>, StoreError> {
        match self.inner.conn.config_get("maxmemory-policy").await {
            Ok(policies) => {
                for p in &policies {
                    if p != "noeviction" {
                        tracing::warn!(
                            name: "rate_limit.redis_eviction",
                            policy = %p,
                            "Redis may evict rate-limit keys under memory pressure; limits then over-admit. Use maxmemory-policy noeviction"
                        );
                    }
                }
                Ok(policies)
            }
            Err(e) => {
                tracing::warn!(
                    name: "rate_limit.redis_eviction",
                    error = classify(&e).as_str(),
                    "could not read Redis's maxmemory-policy; make sure it is noeviction"
                );
                Err(store_error(e))
            }
        }
    }

    /// The principals `ban` bans now, with the time left (an admin call; see
    /// [`Banned`](crate::Banned)). Reads every master with `SCAN` for the ban's keys, then
    /// each key: O(keys in the database), not for a request's path.
    pub async fn bans(&self, ban: &crate::Limit) -> Result<Vec<crate::Banned>, StoreError> {
        let glob = |s: &str| {
            let mut out = String::with_capacity(s.len());
            for c in s.chars() {
                if matches!(c, '*' | '?' | '[' | ']' | '\\') {
                    out.push('\\');
                }
                out.push(c);
            }
            out
        };
        let pattern = format!("{}:{{*}}:{}", glob(&self.inner.prefix), glob(ban.name()));
        let names = self.inner.conn.scan(&pattern).await.map_err(store_error)?;
        let mut out = Vec::new();
        for name in names {
            let Some(principal) = name
                .split_once('{')
                .and_then(|(_, rest)| rest.split_once('}'))
                .and_then(|(p, _)| crate::Principal::from_rendered(p))
            else {
                continue;
            };
            let key = ban.key(principal);
            if self.key_name(&key) != name {
                continue;
            }
            let d = self.peek(&key).await?;
            if let Some(remaining) = d.retry_after() {
                out.push(crate::Banned { key, remaining });
            }
        }
        out.sort_by(|a, b| a.principal().as_str().cmp(b.principal().as_str()));
        Ok(out)
    }

    async fn del(&self, name: &str) -> Result<(), StoreError> {
        let mut cmd = redis::cmd("DEL");
        cmd.arg(name);
        self.inner
            .conn
            .query::<Value>(&cmd, name)
            .await
            .map_err(store_error)?;
        Ok(())
    }

    /// Reads the Cluster's slot map again in the background when it is due (`urgent`: after
    /// a failure). Never on a request's path.
    fn refresh_topology(&self, urgent: bool) {
        #[cfg(feature = "cluster")]
        if let Some(c) = self.inner.conn.cluster() {
            c.refresh(urgent);
        }
        #[cfg(not(feature = "cluster"))]
        let _ = urgent;
    }

    /// The failure domains of slots: on a Cluster, their owners; else the whole store.
    fn slot_domains(&self, slots: impl Iterator<Item = u16>) -> Domains {
        #[cfg(feature = "cluster")]
        if let Some(c) = self.inner.conn.cluster() {
            return c.topology.domains(slots);
        }
        let _ = slots;
        Domains::WHOLE
    }

    fn dedupe_key(&self, id: &str) -> String {
        let p = crate::principal::Principal::new(
            crate::PrincipalKind::custom("dedupe").unwrap_or(crate::PrincipalKind::Global),
            id,
        );
        format!("{}:{{{}}}", self.inner.prefix, p.as_str())
    }

    async fn check_chain(&self, chain: &Chain) -> Result<ChainDecision, StoreError> {
        let mode = match chain.chain_mode() {
            ChainMode::InOrder => Mode::InOrder,
            ChainMode::ChargeAll => Mode::ChargeAll,
            ChainMode::CountAttempts => Mode::CountAttempts,
        };
        let checks = chain.checks();
        if let (Some(cache), true) = (
            &self.inner.deny,
            mode == Mode::InOrder && self.splits(checks),
        ) {
            cache.mark_refundable(chain);
        }
        let sent = self.inner.deny.as_ref().map(DenyCache::now);
        let leased =
            mode == Mode::InOrder && checks.iter().any(|c| c.key().limit().lease().is_some());
        let mut decision = if leased {
            self.check_leased(checks).await?
        } else {
            self.check_checks(checks, &[], mode)
                .await?
                .into_chain_decision()
        };
        mark_bans(checks.iter().map(Check::key), decision.decisions_mut());
        if let (Some(cache), Some(sent)) = (&self.inner.deny, sent) {
            cache.record(chain, decision.decisions(), sent);
        }
        Ok(decision)
    }

    /// Whether a chain's checks fall in more than one slot (a Cluster's slot groups).
    fn splits(&self, checks: &[Check]) -> bool {
        self.inner.conn.is_cluster()
            && checks.windows(2).any(|w| {
                keys::principal_slot(w[0].key().principal().as_str())
                    != keys::principal_slot(w[1].key().principal().as_str())
            })
    }

    /// An in-order chain with leased limits: the units this process holds are spent first
    /// (reserved, and put back unless the rest of the chain admits); the other checks go
    /// to Redis, a leased one asking for a new slice on the way.
    async fn check_leased(&self, checks: &[Check]) -> Result<ChainDecision, StoreError> {
        let leases = &self.inner.leases;
        let now = Instant::now();
        let mut held = Held {
            store: self,
            reserved: Vec::new(),
            refills: Vec::new(),
        };
        let mut local: Vec<Option<Decision>> = Vec::with_capacity(checks.len());
        let mut remote: Vec<Check> = Vec::new();
        let (mut extras, mut holding): (Vec<u64>, Vec<u64>) = (Vec::new(), Vec::new());
        for c in checks {
            let (mut leftovers, mut top_up) = (Vec::new(), None);
            let take = leases.take(
                c.key(),
                c.cost(),
                now,
                true,
                true,
                &mut leftovers,
                &mut top_up,
            );
            if let Some((extra, refill)) = top_up {
                self.top_up(c.key(), extra, refill);
            }
            for l in leftovers {
                // Ended parts (their lifetime, or the limit changed): their unused units go
                // back before this check is counted.
                self.return_units(l).await;
            }
            match take {
                Take::Local(d, r) => {
                    held.reserved.push((local.len(), r));
                    local.push(Some(d));
                    continue;
                }
                Take::Refill(extra, refill) => {
                    held.refills.push(refill);
                    extras.push(extra);
                }
                Take::Plain => extras.push(0),
            }
            local.push(None);
            // Units this process holds were counted by Redis before this check is: an
            // admission reports them as remaining too (units in flight are not known).
            holding.push(leases.held(c.key()));
            remote.push(c.clone());
        }
        self.sweep_later(); // forgets the keys seen here once they go quiet
        if remote.is_empty() {
            let leased = held.commit();
            let mut d = ChainDecision::new(local.into_iter().flatten().collect());
            d.receipt.set_leased(leased);
            return Ok(d);
        }
        let sent = Instant::now();
        let Checked {
            decisions: ds,
            times: remote_times,
            granted: grants,
        } = self.check_checks(&remote, &extras, Mode::InOrder).await?;
        let admitted = ds.len() == remote.len() && ds.iter().all(Decision::is_allowed);
        let mut ds = ds.into_iter();
        let mut out = Vec::with_capacity(checks.len());
        let mut times = Vec::with_capacity(checks.len());
        let mut r = 0;
        for (c, l) in checks.iter().zip(local) {
            match l {
                Some(d) if admitted => {
                    out.push(d);
                    times.push(0); // given back into its slice, not by time
                }
                // Refused later: the unit goes back, the check reports it uncharged.
                Some(d) => out.push(d.plus_remaining(c.cost())),
                None => {
                    let Some(mut d) = ds.next() else { break };
                    times.push(remote_times.get(r).copied().unwrap_or(0));
                    let refused = !d.is_allowed();
                    if let Some(&(_, units, at)) = grants.iter().find(|g| g.0 == r) {
                        self.install(remote[r].key(), units, &d, at, sent);
                        d = d.plus_remaining(units);
                    }
                    if !refused {
                        // What this process knows: Redis's count plus its own slice.
                        d = d.plus_remaining(holding[r]);
                    }
                    r += 1;
                    out.push(d);
                    if refused {
                        break;
                    }
                }
            }
        }
        let mut d = ChainDecision::new(out);
        if admitted {
            d.receipt.set_leased(held.commit());
            d.receipt.set_times(times);
        }
        Ok(d)
    }

    /// Installs a slice Redis granted (see [`Leases::install`]).
    fn install(&self, key: &Key, units: u64, decision: &Decision, at: u64, sent: Instant) {
        let name = self.key_name(key);
        let grant = lease::Grant {
            key,
            name: &name,
            units,
            decision,
            at,
            sent,
        };
        for l in self.inner.leases.install(&grant) {
            self.give_back(l);
        }
        self.sweep_later();
    }

    /// Asks Redis, in the background, for `extra` more units of `key`'s slice, which is
    /// running low (the refill [`Leases::take`] began ends when the answer is in).
    fn top_up(&self, key: &Key, extra: u64, refill: lease::Refill) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.inner.leases.end_refill(refill);
            return;
        };
        let store = self.clone();
        let check = Check::new(key.clone(), 0);
        runtime.spawn(async move {
            let _refill = Held {
                store: &store,
                reserved: Vec::new(),
                refills: vec![refill],
            };
            let sent = Instant::now();
            let checks = std::slice::from_ref(&check);
            if let Ok(Checked {
                decisions: ds,
                granted: grants,
                ..
            }) = store.check_checks(checks, &[extra], Mode::InOrder).await
                && let (Some(d), Some(&(_, units, at))) = (ds.first(), grants.first())
            {
                store.install(check.key(), units, d, at, sent);
            }
        });
    }

    /// Returns an ended slice's unused units to Redis, in the background.
    fn give_back(&self, l: Leftover) {
        let store = self.clone();
        tokio::spawn(async move { store.return_units(l).await });
    }

    /// Returns an ended slice's unused units to Redis.
    async fn return_units(&self, l: Leftover) {
        let mut args = Vec::with_capacity(4);
        push_lease(&mut args, l.params, l.units, 0);
        self.refund(&[l.name], l.at, &args).await;
    }

    /// Makes sure a task returns slices' unused units when they end, while any exist.
    fn sweep_later(&self) {
        if self.inner.leases.sweeping.swap(true, Ordering::AcqRel) {
            return;
        }
        let weak = Arc::downgrade(&self.inner);
        tokio::spawn(async move {
            let mut leftovers = Vec::new();
            loop {
                tokio::time::sleep(SWEEP_EVERY).await;
                let Some(inner) = weak.upgrade() else { return };
                let store = RedisStore { inner };
                let left = store.inner.leases.sweep(Instant::now(), &mut leftovers);
                for l in leftovers.drain(..) {
                    store.give_back(l);
                }
                if !left {
                    store.inner.leases.sweeping.store(false, Ordering::Release);
                    // A slice installed meanwhile saw the flag still set: look once more.
                    if store.inner.leases.sweep(Instant::now(), &mut leftovers)
                        && !store.inner.leases.sweeping.swap(true, Ordering::AcqRel)
                    {
                        continue;
                    }
                    for l in leftovers.drain(..) {
                        store.give_back(l);
                    }
                    return;
                }
            }
        });
    }

    /// Sends `checks` to Redis in order (on a Cluster, slot group by slot group), with
    /// `extras[i]` units asked for a lease by check `i` (empty: none). Returns the
    /// decisions with the server time of each, and, when the chain was admitted, what its
    /// leases were granted: (check index, units, server time).
    async fn check_checks(
        &self,
        checks: &[Check],
        extras: &[u64],
        mode: Mode,
    ) -> Result<Checked, StoreError> {
        let mut names: Vec<String> = checks.iter().map(|c| self.key_name(c.key())).collect();
        // Consecutive checks in one slot form a group (one group when not clustered).
        let mut groups: Vec<std::ops::Range<usize>> = Vec::new();
        let mut start = 0;
        for i in 1..=checks.len() {
            let split = i == checks.len()
                || (self.inner.conn.is_cluster()
                    && keys::slot(&names[i]) != keys::slot(&names[start]));
            if split {
                groups.push(start..i);
                start = i;
            }
        }
        let mut decisions = Vec::with_capacity(checks.len());
        let mut times = Vec::with_capacity(checks.len());
        let mut granted = Vec::new();
        let mut charged: Vec<(std::ops::Range<usize>, u64, Vec<u64>)> = Vec::new();
        // One group (always, standalone): its names and numbers go to the call as they are;
        // with more, each group's are copied, as a refund may need them afterwards.
        let single = groups.len() == 1;
        for g in groups {
            let mut args = Vec::with_capacity(g.len() * 4);
            for (i, c) in checks[g.clone()].iter().enumerate() {
                let extra = extras.get(g.start + i).copied().unwrap_or(0);
                push_lease(&mut args, c.key().params(), c.cost(), extra);
            }
            let slot = self
                .inner
                .conn
                .is_cluster()
                .then(|| keys::slot(&names[g.start]));
            let mut kept = (!single).then(|| args.clone());
            let group = if single {
                std::mem::take(&mut names)
            } else {
                names[g.clone()].to_vec()
            };
            let (now, ds, grants) = match self.run(group, mode, args).await {
                Ok(answer) => answer,
                Err(e) => {
                    if !self.inner.conn.is_cluster() {
                        return Err(e);
                    }
                    // One node failed: say which, look at the slot map again soon, and give
                    // back what the groups before it charged (in order, nothing may stay).
                    self.refresh_topology(true);
                    if mode == Mode::InOrder {
                        for (range, at, args) in charged.iter().rev() {
                            self.refund(&names[range.clone()], *at, args).await;
                        }
                    }
                    let domain = self.slot_domains(slot.into_iter());
                    return Err(match domain.iter().next() {
                        Some(d) if d != 0 => e.with_domain(d),
                        _ => e,
                    });
                }
            };
            for &(i, units) in &grants {
                granted.push((g.start + i, units, now));
                if let Some(kept) = &mut kept {
                    // A refund gives back the grant too.
                    as_charged(&mut kept[i * 4..i * 4 + 4], units);
                }
            }
            let refused = ds.iter().any(|d| !d.is_allowed());
            times.resize(times.len() + ds.len(), now);
            decisions.extend(ds);
            if refused && mode == Mode::InOrder {
                // Give back what earlier groups took; report them as uncharged.
                for (range, at, args) in charged.iter().rev() {
                    self.refund(&names[range.clone()], *at, args).await;
                    for (i, d) in decisions[range.clone()].iter_mut().enumerate() {
                        let at = range.start + i;
                        // What it charged (a lease's grant too) is back.
                        let grant = granted.iter().find(|g| g.0 == at).map_or(0, |g| g.1);
                        *d = d.plus_remaining(checks[at].cost().saturating_add(grant));
                    }
                }
                granted.clear();
                break;
            }
            if refused && mode == Mode::CountAttempts {
                // The groups charged so far stay charged; later groups are not sent.
                break;
            }
            if let Some(args) = kept {
                charged.push((g, now, args));
            }
        }
        Ok(Checked {
            decisions,
            times,
            granted,
        })
    }
}

/// What [`RedisStore::check_checks`] answers.
struct Checked {
    decisions: Vec<Decision>,
    /// The server time of each decision (its slot group's node's clock).
    times: Vec<u64>,
    /// What the chain's leases were granted: (check index, units, server time).
    granted: Vec<(usize, u64, u64)>,
}

impl Checked {
    /// The chain decision, with what a give-back needs.
    fn into_chain_decision(self) -> ChainDecision {
        let at = self.times.first().copied().unwrap_or(0);
        let mut d = ChainDecision::new(self.decisions).charged_at(at);
        if self.times.iter().any(|&t| t != at) {
            d.receipt.set_times(self.times);
        }
        d
    }
}

/// A leased chain's hold on its slices: units reserved and refills begun, undone when it
/// ends however it ends (refused, failed, or dropped mid-call) unless committed.
struct Held<'a> {
    store: &'a RedisStore,
    /// By check index.
    reserved: Vec<(usize, LeasedUnits)>,
    refills: Vec<lease::Refill>,
}

impl Held<'_> {
    /// The chain was admitted: its reserved units are spent. Returns them, by check index,
    /// for a give-back.
    fn commit(&mut self) -> Vec<(usize, LeasedUnits)> {
        for &(_, r) in &self.reserved {
            self.store.inner.leases.commit(r);
        }
        std::mem::take(&mut self.reserved)
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        let now = Instant::now();
        for (_, r) in self.reserved.drain(..) {
            if let Some(l) = self.store.inner.leases.release(r, now) {
                self.store.give_back(l);
            }
        }
        for r in self.refills.drain(..) {
            self.store.inner.leases.end_refill(r);
        }
    }
}

impl RedisStore {
    /// `<prefix>:{<principal>}:in-flight:<limit>`: the principal's slot, and a name no
    /// limit can have (limit names hold no `:`).
    fn slot_key(&self, key: &SlotKey) -> String {
        format!(
            "{}:{{{}}}:in-flight:{}",
            self.inner.prefix,
            key.principal().as_str(),
            key.in_flight().name()
        )
    }

    /// Boxed, as `check` is: a shallow future for callers that must prove `Send`.
    fn slots<'a>(
        &'a self,
        key: &'a SlotKey,
        op: u64,
        id: u64,
    ) -> Pin<Box<dyn Future<Output = Result<Value, StoreError>> + Send + 'a>> {
        Box::pin(self.slot_call(key, op, id))
    }

    async fn slot_call(&self, key: &SlotKey, op: u64, id: u64) -> Result<Value, StoreError> {
        let keys = [self.slot_key(key)];
        let ttl = u64::try_from(key.in_flight().ttl().as_millis()).unwrap_or(u64::MAX);
        let args = [op, id, u64::from(key.in_flight().max()), ttl];
        let inv = Invocation {
            script: &self.inner.slots,
            code: SLOTS_LUA,
            keys: &keys,
            args: &args,
        };
        let domain = |e: StoreError| {
            let slot = self.inner.conn.is_cluster().then(|| keys::slot(&keys[0]));
            match self.slot_domains(slot.into_iter()).iter().next() {
                Some(d) if slot.is_some() && d != 0 => e.with_domain(d),
                _ => e,
            }
        };
        self.inner
            .conn
            .invoke::<Value>(&inv)
            .await
            .map_err(|e| domain(store_error(e)))
    }
}

impl RedisStore {
    /// One call of a shared pacer (`pacer.lua`): keys `<prefix>:{<scope>}:pacer:<name>` and
    /// `…:pacer-workers:<name>`, one slot.
    pub(crate) async fn pace(&self, call: &PaceCall<'_>) -> Result<PaceReply, StoreError> {
        // Boxed, as `check` is: a shallow future for callers that must prove `Send`.
        let fut: Pin<Box<dyn Future<Output = _> + Send + '_>> = Box::pin(self.pace_call(call));
        fut.await
    }

    async fn pace_call(&self, call: &PaceCall<'_>) -> Result<PaceReply, StoreError> {
        let base = format!("{}:{{{}}}", self.inner.prefix, call.scope.as_str());
        let keys = [
            format!("{base}:pacer:{}", call.name),
            format!("{base}:pacer-workers:{}", call.name),
        ];
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1);
        let e6 = |x: f64| (x * 1e6).round() as u64;
        let (op, retry) = match call.op {
            PaceOp::Acquire => (1, 0),
            PaceOp::Rejected(us) => (2, us),
        };
        let c = call.config;
        let args = [
            op,
            call.successes,
            retry,
            call.worker,
            ms(call.registration),
            ms(call.remember),
            e6(c.initial),
            e6(c.min),
            e6(c.max),
            e6(c.increase),
            e6(c.decrease),
            u64::try_from(c.period.as_micros()).unwrap_or(u64::MAX),
        ];
        let inv = Invocation {
            script: &self.inner.pacer,
            code: PACER_LUA,
            keys: &keys,
            args: &args,
        };
        let v: Value = self.inner.conn.invoke(&inv).await.map_err(store_error)?;
        let Value::Array(v) = v else {
            return Err(bad_answer());
        };
        let rate = match v.get(2) {
            Some(Value::BulkString(b)) => std::str::from_utf8(b)
                .ok()
                .and_then(|s| s.parse::<f64>().ok()),
            Some(Value::SimpleString(s)) => s.parse::<f64>().ok(),
            _ => None,
        }
        .ok_or_else(bad_answer)?;
        Ok(PaceReply {
            go: int(v.first()) == 1,
            wait_us: int(v.get(1)),
            rate,
            workers: u32::try_from(int(v.get(3))).unwrap_or(u32::MAX),
        })
    }
}

fn int(v: Option<&Value>) -> u64 {
    match v {
        Some(Value::Int(n)) => u64::try_from(*n).unwrap_or(0),
        _ => 0,
    }
}

impl Slots for RedisStore {
    async fn take_slot(&self, key: &SlotKey, id: u64) -> Result<Taken, StoreError> {
        let Value::Array(v) = self.slots(key, 1, id).await? else {
            return Err(bad_answer());
        };
        Ok(Taken {
            taken: int(v.first()) == 1,
            in_use: u32::try_from(int(v.get(1))).unwrap_or(u32::MAX),
            retry_after: Duration::from_millis(int(v.get(2))),
        })
    }

    async fn renew_slot(&self, key: &SlotKey, id: u64) -> Result<bool, StoreError> {
        Ok(int(Some(&self.slots(key, 2, id).await?)) == 1)
    }

    async fn release_slot(&self, key: &SlotKey, id: u64) -> Result<(), StoreError> {
        self.slots(key, 3, id).await.map(|_| ())
    }
}

impl Dedupe for RedisStore {
    /// `SET NX PX`.
    async fn first_seen(&self, id: &str, ttl: Duration) -> Result<bool, StoreError> {
        let name = self.dedupe_key(id);
        let ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1);
        let mut cmd = redis::cmd("SET");
        cmd.arg(&name).arg(1).arg("NX").arg("PX").arg(ms);
        let v: Value = self
            .inner
            .conn
            .query(&cmd, &name)
            .await
            .map_err(store_error)?;
        Ok(!matches!(v, Value::Nil))
    }

    /// `DEL`.
    async fn release(&self, id: &str) -> Result<(), StoreError> {
        let name = self.dedupe_key(id);
        self.del(&name).await
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
            .run(vec![self.key_name(check.key())], Mode::Overdraw, args)
            .await?;
        mark_bans([check.key()], &mut ds);
        ds.pop().ok_or_else(bad_answer)
    }

    async fn peek(&self, key: &Key) -> Result<Decision, StoreError> {
        let mut args = Vec::with_capacity(4);
        push_params(&mut args, key, 0);
        let (_, mut ds, _) = self
            .run(vec![self.key_name(key)], Mode::InOrder, args)
            .await?;
        mark_bans([key], &mut ds);
        ds.pop().ok_or_else(bad_answer)
    }

    async fn give_back(&self, reservation: &Reservation) -> Result<(), StoreError> {
        // Boxed, as `check` is: a shallow future for callers that must prove `Send`.
        let call: Pin<Box<dyn Future<Output = _> + Send + '_>> =
            Box::pin(self.give_back_units(reservation));
        call.await
    }

    async fn reset(&self, key: &Key) -> Result<(), StoreError> {
        if let Some(cache) = &self.inner.deny {
            cache.forget(&key.digest());
        }
        self.inner.leases.forget(key.digest());
        let name = self.key_name(key);
        self.del(&name).await
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
            let take = leases.take(
                c.key(),
                c.cost(),
                now,
                false,
                reserve,
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
        self.refresh_topology(false);
        self.slot_domains(
            chain
                .checks()
                .iter()
                .map(|c| keys::principal_slot(c.key().principal().as_str())),
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
