//! Checking a chain on Redis: one script call per slot group, leased slices answered in
//! this process, and the units a refused chain took from a slice given back.

use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use super::SWEEP_EVERY;
use super::deny::DenyCache;
use super::groups::{Charged, Granted, uncharge};
use super::keys;
use super::lease::{self, Leftover, Take, Taking, Units};
use super::periods;
use super::script::{ScriptMode, as_charged, mark_bans, push_lease};
use super::{RedisStore, Refresh};
use crate::chain::{Chain, ChainMode, Check};
use crate::key::Key;
use crate::protocol::lease::LeasedUnits;
use crate::protocol::{ChainDecision, Decision, StoreError};

impl RedisStore {
    pub(super) async fn check_chain(&self, chain: &Chain) -> Result<ChainDecision, StoreError> {
        let mode = match chain.chain_mode() {
            ChainMode::InOrder => ScriptMode::InOrder,
            ChainMode::ChargeAll => ScriptMode::ChargeAll,
            ChainMode::CountAttempts => ScriptMode::CountAttempts,
        };
        let checks = chain.checks();
        if let (Some(cache), true) = (
            &self.inner.deny,
            mode == ScriptMode::InOrder && self.splits(checks),
        ) {
            cache.mark_refundable(chain);
        }
        let sent = self.inner.deny.as_ref().map(DenyCache::now);
        let leased =
            mode == ScriptMode::InOrder && checks.iter().any(|c| c.key().limit().lease().is_some());
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
                keys::principal_hash_slot(w[0].key().principal().as_str())
                    != keys::principal_hash_slot(w[1].key().principal().as_str())
            })
    }

    /// An in-order chain with leased limits: the units this process holds are spent first
    /// (reserved, and put back unless the rest of the chain admits); the other checks go
    /// to Redis, a leased one asking for a new slice on the way.
    async fn check_leased(&self, checks: &[Check]) -> Result<ChainDecision, StoreError> {
        let now = Instant::now();
        let mut held = Held {
            store: self,
            reserved: Vec::new(),
            refills: Vec::new(),
        };
        let Split {
            local,
            remote,
            extras,
            holding,
        } = self.take_from_slices(checks, now, &mut held).await;
        self.sweep_later(); // forgets the keys seen here once they go quiet
        if remote.is_empty() {
            let leased = held.commit();
            let mut d = ChainDecision::new(local.into_iter().flatten().collect());
            d.receipt.set_leased(leased);
            return Ok(d);
        }
        let sent = Instant::now();
        let GroupAnswers {
            decisions: ds,
            times: remote_times,
            granted: grants,
        } = self
            .check_checks(&remote, &extras, ScriptMode::InOrder)
            .await?;
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
                    if let Some(&Granted { units, at, .. }) = grants.iter().find(|g| g.index == r) {
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

    /// The first half of [`check_leased`](Self::check_leased): each check answered from a
    /// slice this process holds (its units reserved in `held`), or sent on to Redis.
    async fn take_from_slices(&self, checks: &[Check], now: Instant, held: &mut Held<'_>) -> Split {
        let leases = &self.inner.leases;
        let mut local: Vec<Option<Decision>> = Vec::with_capacity(checks.len());
        let mut remote: Vec<Check> = Vec::new();
        let (mut extras, mut holding): (Vec<u64>, Vec<u64>) = (Vec::new(), Vec::new());
        for c in checks {
            let (mut leftovers, mut top_up) = (Vec::new(), None);
            let take = leases.take(
                c.key(),
                c.cost(),
                now,
                Taking::MayRefill,
                Units::Reserved,
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
        Split {
            local,
            remote,
            extras,
            holding,
        }
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
            self.return_leftover(l);
        }
        self.sweep_later();
    }

    /// Asks Redis, in the background, for `extra` more units of `key`'s slice, which is
    /// running low (the refill [`Leases::take`] began ends when the answer is in).
    pub(super) fn top_up(&self, key: &Key, extra: u64, refill: lease::Refill) {
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
            if let Ok(GroupAnswers {
                decisions: ds,
                granted: grants,
                ..
            }) = store
                .check_checks(checks, &[extra], ScriptMode::InOrder)
                .await
                && let (Some(d), Some(&Granted { units, at, .. })) = (ds.first(), grants.first())
            {
                store.install(check.key(), units, d, at, sent);
            }
        });
    }

    /// Returns an ended slice's unused units to Redis, in the background.
    pub(super) fn return_leftover(&self, l: Leftover) {
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
                    store.return_leftover(l);
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
                        store.return_leftover(l);
                    }
                    return;
                }
            }
        });
    }

    /// Consecutive checks whose keys share a hash slot form a group, sent in one call (one
    /// group when not clustered).
    fn hash_slot_groups(&self, names: &[String]) -> Vec<Range<usize>> {
        let mut groups = Vec::new();
        let mut start = 0;
        for i in 1..=names.len() {
            let split = i == names.len()
                || (self.inner.conn.is_cluster()
                    && keys::hash_slot(&names[i]) != keys::hash_slot(&names[start]));
            if split {
                groups.push(start..i);
                start = i;
            }
        }
        groups
    }

    /// Gives back what the slot groups charged so far took, last first.
    async fn refund_groups(&self, checks: &[Check], names: &[String], charged: &[Charged]) {
        for c in charged.iter().rev() {
            let named: Vec<String> = c
                .range
                .clone()
                .map(|i| self.refund_name(checks[i].key(), names[i].clone(), c.at))
                .collect();
            self.refund(&named, c.at, &c.args).await;
        }
    }

    /// Sends `checks` to Redis in order (on a Cluster, slot group by slot group), with
    /// `extras[i]` units asked for a lease by check `i` (empty: none). Returns the
    /// decisions with the server time of each, and, when the chain was admitted, what its
    /// leases were granted.
    async fn check_checks(
        &self,
        checks: &[Check],
        extras: &[u64],
        mode: ScriptMode,
    ) -> Result<GroupAnswers, StoreError> {
        let mut names: Vec<String> = checks.iter().map(|c| self.key_name(c.key())).collect();
        let groups = self.hash_slot_groups(&names);
        let mut decisions = Vec::with_capacity(checks.len());
        let mut times = Vec::with_capacity(checks.len());
        let mut granted = Vec::new();
        let mut charged: Vec<Charged> = Vec::new();
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
                .then(|| keys::hash_slot(&names[g.start]));
            let mut kept = (!single).then(|| args.clone());
            let group = if single {
                std::mem::take(&mut names)
            } else {
                names[g.clone()].to_vec()
            };
            let periods = periods::of(checks[g.clone()].iter().map(Check::key));
            let (now, ds, grants) = match self.run(group, mode, args, periods).await {
                Ok(answer) => answer,
                Err(e) => {
                    if !self.inner.conn.is_cluster() {
                        return Err(e);
                    }
                    // One node failed: say which, look at the slot map again soon, and give
                    // back what the groups before it charged (in order, nothing may stay).
                    self.refresh_topology(Refresh::Urgent);
                    if mode == ScriptMode::InOrder {
                        self.refund_groups(checks, &names, &charged).await;
                    }
                    return Err(self.in_domain_of(e, slot));
                }
            };
            for &(i, units) in &grants {
                granted.push(Granted {
                    index: g.start + i,
                    units,
                    at: now,
                });
                if let Some(kept) = &mut kept {
                    // A refund gives back the grant too.
                    as_charged(&mut kept[i * 4..i * 4 + 4], units);
                }
            }
            let refused = ds.iter().any(|d| !d.is_allowed());
            times.resize(times.len() + ds.len(), now);
            decisions.extend(ds);
            if refused && mode == ScriptMode::InOrder {
                // Give back what earlier groups took; report them as uncharged.
                self.refund_groups(checks, &names, &charged).await;
                uncharge(&mut decisions, &charged, &granted, checks);
                granted.clear();
                break;
            }
            if refused && mode == ScriptMode::CountAttempts {
                // The groups charged so far stay charged; later groups are not sent.
                break;
            }
            if let Some(args) = kept {
                charged.push(Charged {
                    range: g,
                    at: now,
                    args,
                });
            }
        }
        Ok(GroupAnswers {
            decisions,
            times,
            granted,
        })
    }
}

/// What [`RedisStore::check_checks`] answers.
struct GroupAnswers {
    decisions: Vec<Decision>,
    /// The server time of each decision (its slot group's node's clock).
    times: Vec<u64>,
    /// What the chain's leases were granted.
    granted: Vec<Granted>,
}

impl GroupAnswers {
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
pub(super) struct Held<'a> {
    pub(super) store: &'a RedisStore,
    /// By check index.
    pub(super) reserved: Vec<(usize, LeasedUnits)>,
    pub(super) refills: Vec<lease::Refill>,
}

impl Held<'_> {
    /// The chain was admitted: its reserved units are spent. Returns them, by check index,
    /// for a give-back.
    pub(super) fn commit(&mut self) -> Vec<(usize, LeasedUnits)> {
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
                self.store.return_leftover(l);
            }
        }
        for r in self.refills.drain(..) {
            self.store.inner.leases.end_refill(r);
        }
    }
}

/// A leased chain split: what slices answered, and what goes to Redis.
struct Split {
    /// By check: the decision a slice gave, or `None` (asked of Redis).
    local: Vec<Option<Decision>>,
    /// The checks asked of Redis, in order.
    remote: Vec<Check>,
    /// Units each remote check asks for a slice (0: none).
    extras: Vec<u64>,
    /// Units this process holds of each remote check's key.
    holding: Vec<u64>,
}
