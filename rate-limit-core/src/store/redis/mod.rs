//! The Redis store (feature `redis`; Redis Cluster with feature `cluster`).
//!
//! - **One round trip per chain**: a Lua script (`EVALSHA`, reloaded once on `NOSCRIPT`)
//!   reads every key of the chain, decides with exactly the memory store's arithmetic, and
//!   writes each key's state *and* TTL in one `SET .. PX`, only if the chain passes.
//! - **Server time**: the script reads Redis `TIME`, so application servers' clocks never
//!   matter; a stored time in the future (a failover to a replica whose clock lags) is
//!   clamped as the algorithms document.
//! - **Keys**: `<prefix>:v2:{<principal>}:<limit>`, TTL = the state's life (the window;
//!   two for the sliding window) plus a small slack (default 1 s). The principal is the
//!   canonical rendering of [`Principal`](crate::Principal): API keys and credentials are
//!   hashed before they get here, so no secret reaches Redis, its logs or its files.
//!   Beside the limits' keys, in the principal's slot: a ban's key is a limit's key (its
//!   end and its refusals' times, `AnyStore::bans` finds them with `SCAN`); in-flight slots
//!   `…:{<principal>}:in-flight:<limit>` (a sorted set); a [`SharedPacer`](crate::SharedPacer)
//!   `…:{x.pacer:<scope>}:pacer:<name>` (rate, next slot, pause, last decrease) and
//!   `…:pacer-workers:<name>` (a sorted set of the workers lately seen).
//! - **Versioned names**: `v2` names the key layout and the stored state's format
//!   ([`KEY_VERSION`]): each state is its numbers as decimal text, space-separated. A release that changes either bumps it, so during a rolling upgrade
//!   old and new instances count in different keys and never misread or overwrite each
//!   other's state; what that costs is one window in which a client may be admitted by
//!   both generations (up to twice its quota), once. Version 1 was `<prefix>:{…}` without
//!   a version, with API keys read through `Principal::new` or `HeaderKey` left in plain
//!   text; its keys expire on their own.
//! - **Cluster**: each key is hash-tagged by its own principal. A chain whose keys fall
//!   in different slots runs slot group by slot group (consecutive checks of one slot
//!   form a group), in chain order, one call each. When a later group refuses or fails,
//!   what the earlier groups charged is refunded by a compensating script. This is **not
//!   atomic across slots**: between a group's charge and its refund, a concurrent request
//!   may see the charge and be refused; a crash between them leaves the charge in place
//!   until the window passes. Within a slot group it is exact.
//! - **Slots moving** (`redis-cli --cluster reshard`, a rebalance): `MOVED`, `ASK` and
//!   `TRYAGAIN` mean the script did not run. The store re-sends it at once — to the new
//!   owner for `MOVED` (and reads the slot map again in the background), with `ASKING` to
//!   the importing node for `ASK`, after 5, then 10, then 20 ms for `TRYAGAIN` (a slot whose
//!   keys are half moved) — at most 3 times, outside the limiter's retry budget. Nothing
//!   that may have run (a timeout, a dropped connection) is ever re-sent. Measured: 2 000
//!   slots moved under load, no request failed and no key admitted more than its limit.
//! - **A node down costs only its keys**: each master is a failure domain (its slots, read
//!   with `CLUSTER SLOTS` in the background), so the [`Limiter`](crate::Limiter) cools down
//!   and falls back for that node's keys alone, and one node's broken connection never
//!   drops the others. Run the Cluster with `cluster-require-full-coverage no`: with the
//!   default `yes`, Redis itself refuses *every* key about one node timeout after a master
//!   dies, and no client can help that.
//! - **Failover** (Cluster replicas, Sentinel): when a primary dies, its replica is
//!   promoted and the same store serves its keys again without a restart (measured: 4.1 s
//!   after a SIGKILL with a 2 s node timeout; the rules' policies answer in between).
//!   Replication is asynchronous: what the primary counted in its last instant before dying
//!   (its replication lag, usually well under a millisecond on a local network) may be
//!   missing on the replica. Those requests were admitted and are forgotten, so each key may
//!   admit that many more in its current window: over-admission is bounded by the requests
//!   admitted during the lag, never by the limit itself. Redis `WAIT` would close the gap at
//!   the cost of a round trip to a replica on every check; this store does not use it.
//! - **Connections**: a multiplexed connection (`ConnectionManager`) to the server, or on a
//!   Cluster one to each master, made by the store's own Cluster client (redis-rs's re-reads
//!   the slot map on the request path, holding up every node's requests while it asks a
//!   frozen one, and its retries replay commands that may have run). Connected lazily: the
//!   process starts while Redis is down, checks fail (and each rule's policy applies) until
//!   Redis appears, then work without a restart. No client replays a command: the
//!   [`Limiter`](crate::Limiter) retries only what surely did not run.
//! - **Corrupt state** (not numbers, another type) counts as no state and is replaced.
//!
//! # Coalescing
//!
//! On by default ([`RedisStoreBuilder::coalesce`] sets the most chains per call, 32; 0
//! turns it off): when no call is in flight on the connection — on a Cluster, for the
//! chain's hash slot, since a script's keys must share one — a check is sent at once;
//! checks that arrive while one is in flight ride the next call together, which leaves when
//! that call's answer arrives or as soon as it is full (full calls are pipelined, so a slow
//! network bounds latency, not throughput). No timer: an idle store adds no latency, and a
//! busy one makes a check wait at most for the call ahead of it. On a Cluster this is what
//! helps a hot key (a global budget, a big tenant): its node gets one call per batch, not
//! one per request; chains of different slots never share a call.
//!
//! One call runs its chains in turn, each atomic and all-or-nothing on its own exactly as
//! if it were alone: a later chain sees what an earlier one charged, a refused chain
//! charges nothing, and a chain whose arguments the script refuses fails alone (the script
//! checks that nothing in a call raised an error, and if something did, runs each chain
//! again under its own `pcall`: on Redis 7 a `pcall` costs about as much as a token
//! bucket's whole check, so not one per chain by default). What the chains share is the
//! call: one round trip, one `TIME`, one `MGET` of every key, and one `SET .. PX` per key
//! however many chains touched it. A caller that gives up before its call leaves (its
//! timeout, a dropped request) is not sent.
//!
//! Measured (`cargo bench -p rate-limit-examples --bench redis_cpu`, 64 tasks, one
//! connection): Redis's CPU per one-check chain fell to 0.48–0.50× of one call per check
//! (four-check chains: 0.77–0.80×), with 0.03 calls per check, and the load's throughput
//! doubled; see BENCHMARKS.md.
//!
//! # Giving units back
//!
//! [`Store::give_back`] (count by outcome, see [`Reservation`]) runs the
//! refund script once per run of the reservation's checks that share a slot and a charge
//! time: one command for a reservation standalone, one per slot group on a Cluster (a
//! failure names its node). Each check's cost goes back where its window still holds it,
//! with the time Redis charged it at (a fixed window's only into the window it was charged
//! in; an exact log's entry of that time). A unit taken from a leased slice goes back into
//! the slice while it lives (no command), else to Redis. A limit whose units were given
//! back is not answered from the deny cache from then on (room may reappear before a
//! refusal's retry-after).
//!
//! # Leases
//!
//! For a hot key — a global budget, a big tenant, a shared IP, which every request touches —
//! a limit can be leased ([`Limit::leased`](crate::Limit::leased), opt-in per limit): when
//! this process has no units of the key, the check asks Redis in the same call for its cost
//! plus up to `max_slice − cost` more units, all or nothing with the rest of its chain, and
//! the following checks spend the slice locally ([`Store::try_check`]: no round trip, no
//! call). Only in-order chains use slices (`ChargeAll` and `CountAttempts` chains, charges
//! and peeks check the key plainly).
//!
//! - **Slices shrink as the quota runs low**: one call grants at most a quarter of what the
//!   key has left after the cost, so with little left every process checks plainly, one
//!   unit at a time, as without a lease.
//! - **Slices follow the key's heat**: a key earns a slice once 4 of its checks went to
//!   Redis within one lifetime (a slice is then likely to be spent before it ends; unused
//!   units cost a call to give back); the first is 2 units, and the size doubles each time the slice runs under
//!   half within its lifetime — then it is topped up in the background, before it runs
//!   dry — and halves each time units are left when it ends, up to `max_slice`. While a
//!   refill is in flight, checks that find no units check plainly (their calls coalesce).
//! - **Every grant ends** at its lifetime (1 ms to [`MAX_LEASE_LIFETIME`](crate::MAX_LEASE_LIFETIME),
//!   100 ms, counted from when its call was sent; a slice topped up holds each grant with
//!   its own end, oldest spent first), a fixed window's also at its window's end, and all
//!   of a key's grants when its parameters change ([`Limit::set_quota`](crate::Limit::set_quota),
//!   an override), at this process's next check of the key. Unused units go back to Redis
//!   (the refund script: a fixed window's only into the window they came from) — at once
//!   when a check finds them ended, otherwise from a task that looks every 10 ms while
//!   slices exist. [`RedisStore::reset`](Store::reset) drops the key's slice.
//! - **In a chain**, a leased unit this process holds is reserved first and put back
//!   unless the rest of the chain (sent to Redis) admits: in-order all-or-nothing holds,
//!   and a refused chain reports the leased limit uncharged.
//! - **What a process admits in total**: a fixed window never more than its quota (a
//!   slice's units are counted in Redis, in the window they are spent in). A token bucket
//!   or sliding window moves a request by up to the lifetime: a unit taken at *t* and spent
//!   at *t + Δ* was counted at *t*, so over any interval the processes admit at most what
//!   Redis admits over that interval plus one lifetime: the burst may exceed the limit by
//!   up to its rate × the lifetime (100 per second and 50 ms: 5). Measured with four
//!   instances offered 1.2× (`tests/store/lease.rs`): the fixed window admitted exactly
//!   its quota, standalone and on a Cluster.
//! - **Quota held elsewhere**: a caller may be refused while other processes still hold
//!   units in their slices, at most one slice each, and slices are small when the quota
//!   runs low; a slice's units return within its lifetime. Measured in the same test: at
//!   any refusal the other three instances held at most 1 unit.
//! - **Headers** (`RateLimit-Remaining`, `RateLimit`): what this process knows. An answer
//!   from a slice reports what Redis had left at the latest grant plus the units this
//!   process holds; an answer from Redis adds the units the process held when it asked.
//!   Other processes' spending since the grant is not seen (the figure may be high by what
//!   they spent in the last lifetime), nor a top-up in flight (one process alone: off by at
//!   most one slice; measured exact in 9–300 of 300 checks); the reset counts down from
//!   Redis's answer.
//! - **A hot key at local speed**: measured over HTTP with every request on one key
//!   (`HTTP_BENCH_KEYS=1 cargo bench -p rate-limit-examples --bench http`, slices up to
//!   1 000; three runs): 0.94–1.005× the memory store's throughput with 0.0021–0.0022
//!   Redis calls per request, against 0.22–0.36× and 0.064 without leases. With 10 000
//!   keys, none hot, leasing costs nothing measurable: 0.292× against 0.305×, 0.0626
//!   calls per request both (see BENCHMARKS.md).
//! - **Redis down**: a slice keeps answering until it ends (its units were counted);
//!   then each rule's failure policy applies as without a lease.
//! - **The deny cache never holds a leased key's refusal**: units that slices give back
//!   can undo it before its retry-after. What that costs, measured (one key refused over
//!   HTTP): 0.065 calls per refusal (coalesced) and 0.31× the throughput of the same flood
//!   answered from the cache. Lease a limit alike on every instance (the same
//!   configuration): an instance that does not lease it may cache a refusal that another's
//!   returned units undo.
//!
//! # The deny cache
//!
//! On by default ([`RedisStoreBuilder::deny_cache`] sets its size; 0 turns it off). Once
//! Redis has refused a key, this process answers that key's refusals itself until the
//! retry-after Redis gave has passed, with the times counted down, and sends Redis nothing
//! for it meanwhile: a flood from one refused client costs one command per retry-after
//! period instead of one per request, and is answered without a round trip
//! ([`Store::try_check`]). It holds at most the configured number of keys (a full cache
//! makes room only by dropping lapsed entries).
//!
//! Why on: the answer is the one Redis would give. A refused check charges nothing, and
//! other clients' traffic can only use up more, so a key refused for a cost stays refused
//! for that cost until its retry-after (a cached refusal answers only the same cost); the
//! local countdown starts when the command was sent, so it lapses no later than Redis's.
//! It holds only refusals that nothing but time can undo. On a Cluster, a limit this
//! process has seen in an in-order chain split across slot groups is never cached: another
//! request's refund can give its key room back before the retry-after (measured before this
//! rule: a visitor's burst on one game left `ask-burst` refused from the cache for 27 s on
//! a fresh game while Redis held 15 of 20). Standalone Redis never splits a chain.
//! It applies only to [`ChainMode::InOrder`] chains (in `ChargeAll` a refusal still
//! charges the other limits) whose checks before the refused one are the keys they were;
//! their decisions in the headers are the ones Redis reported, counted down. An entry is dropped when the limit
//! changes at run time ([`Limit::version`](crate::Limit::version)), when the key's
//! parameters differ (an override), and on [`Store::reset`] through this store.
//!
//! While Redis is down, a key it refused before the outage stays refused until its
//! retry-after, whatever a rule's failure policy says: the [`Limiter`](crate::Limiter) asks
//! the cache first, and that refusal is still the true answer.
//!
//! What it cannot see, and when to turn it off: a reset, a raised limit or a refund made by
//! *another* process, or a Redis that lost its data, shows here only once the cached
//! retry-after has passed. If an operator must be able to lift a refusal at once from
//! elsewhere, set `deny_cache(0)`.
//!
//! # Example
//!
//! ```
//! use rate_limit_core::{Limiter, RedisStore};
//! use std::time::Duration;
//!
//! #[tokio::main]
//! async fn main() -> Result<(), rate_limit_core::ConfigError> {
//!     // Building connects nothing; the first check does.
//!     let store = RedisStore::builder("redis://:secret@127.0.0.1:6379/0")
//!         .prefix("quiz")
//!         .response_timeout(Duration::from_millis(200))
//!         .build()?;
//!     assert_eq!(store.endpoint(), "redis 127.0.0.1:6379"); // no password: safe to log
//!     let limiter = Limiter::shared(store.clone()); // what RateLimitLayer::new(store) uses
//!     assert_eq!(limiter.name(), "redis 127.0.0.1:6379");
//!     Ok(())
//! }
//! ```
//!
//! Outside a Tokio runtime, building is an error with a stable code, not a panic:
//!
//! ```
//! let err = rate_limit_core::RedisStore::builder("redis://127.0.0.1/").build().unwrap_err();
//! assert_eq!(err.code(), "store.no_runtime");
//! ```

use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use redis::{Script, Value};

use crate::chain::{Chain, ChainMode, Check};
use crate::decision::{ChainDecision, Decision};
use crate::inflight::{SlotKey, Slots, Taken};
use crate::key::Key;
use crate::reservation::Reservation;
use crate::store::{Dedupe, Domains, Store, StoreError};

mod batch;
mod builder;
#[cfg(feature = "cluster")]
mod cluster;
mod conn;
mod deny;
mod error;
mod keys;
mod lease;

/// Units an admitted chain took from this process's leased slices (see [`Reservation`](crate::Reservation)).
pub(crate) use lease::Reservation as LeaseUnits;
mod script;
mod tls;
#[cfg(feature = "cluster")]
mod topology;

use crate::pacer::{PaceCall, PaceOp, PaceReply};
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
    reserved: Vec<(usize, lease::Reservation)>,
    refills: Vec<lease::Refill>,
}

impl Held<'_> {
    /// The chain was admitted: its reserved units are spent. Returns them, by check index,
    /// for a give-back.
    fn commit(&mut self) -> Vec<(usize, lease::Reservation)> {
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
