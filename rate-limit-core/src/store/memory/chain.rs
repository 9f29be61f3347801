//! A chain of two or more checks: every key's shard locked at once (ascending shard order,
//! so two chains never wait on each other in a cycle), each key found once, decided in
//! order, and written only when the chain's mode charges it.

use std::sync::MutexGuard;

use smallvec::SmallVec;

use super::{MemoryStore, hot, lock, shard::Shard};
use crate::algorithm::{self, Charge, State};
use crate::chain::{ChainMode, Check};
use crate::limit::Params;
use crate::protocol::{ChainDecision, Decision};

/// Up to eight of each inline: a layer's chain of eight rules costs no allocation here.
type Inline<T> = SmallVec<[T; 8]>;

/// One check's key as the chain sees it.
struct Seen {
    digest: [u64; 2],
    /// Its shard's place in the chain's guards.
    guard: usize,
    /// Its slab index in that shard (valid until the shard changes shape: the chain
    /// overwrites found keys before it inserts new ones).
    found: Option<usize>,
    /// Its state in the store (fresh when absent).
    stored: State,
    /// What the chain would write.
    pending: Option<State>,
}

impl MemoryStore {
    pub(super) fn chain(&self, checks: &[Check], mode: ChainMode, charge: Charge) -> ChainDecision {
        let mut owners: Inline<usize> = checks.iter().map(|c| self.shard_of(c.key())).collect();
        let owner_of = owners.clone();
        owners.sort_unstable();
        owners.dedup();
        let mut guards: Inline<(usize, MutexGuard<'_, Shard>)> = owners
            .iter()
            .map(|&i| (i, lock(&self.inner.shards[i])))
            .collect();
        let now = self.inner.clock.now_micros();
        for (_, g) in &mut guards {
            self.sweep_if_due(g, now);
        }
        let mut seen: Inline<Seen> = SmallVec::with_capacity(checks.len());
        let mut decisions: SmallVec<[Decision; 4]> = SmallVec::with_capacity(checks.len());
        for (i, check) in checks.iter().enumerate() {
            let (digest, params) = (check.key().digest(), check.key().params_at(now));
            let guard = guards
                .iter()
                .position(|(s, _)| *s == owner_of[i])
                .unwrap_or(0);
            let shard = &mut guards[guard].1;
            let found = shard.find(&digest);
            let stored = found.map_or_else(|| State::fresh(params), |f| shard.get_at(f));
            // A key that appears twice sees the first check's tentative state.
            let earlier = seen
                .iter()
                .rev()
                .filter(|s| s.digest == digest)
                .find_map(|s| s.pending.clone());
            let state = earlier.as_ref().unwrap_or(&stored);
            let step = algorithm::step(params, state, now, check.cost(), charge);
            let allowed = step.decision.is_allowed();
            // A banned principal: nothing is charged, whatever the mode.
            let banned = !allowed && step.decision.is_ban();
            decisions.push(step.decision);
            seen.push(Seen {
                digest,
                guard,
                found,
                stored,
                pending: step.next,
            });
            if !allowed && (mode == ChainMode::InOrder || banned) {
                // Nothing is charged: the limits before the refusal report their state as
                // it stays, not as it would have been.
                for (j, d) in decisions.iter_mut().enumerate().take(i) {
                    let params = checks[j].key().params_at(now);
                    *d = algorithm::step(params, &seen[j].stored, now, 0, Charge::IfFits).decision;
                }
                if !banned {
                    self.count_ban_refusals(checks, &seen, i, &mut guards, now);
                }
                return ChainDecision::from_decisions(decisions).charged_at(now);
            }
            if !allowed && mode == ChainMode::CountAttempts {
                // Charged up to here, the refusal included; the later limits untouched.
                break;
            }
        }
        let result = ChainDecision::from_decisions(decisions).charged_at(now);
        if result.is_allowed() || mode != ChainMode::InOrder {
            self.write_chain(checks, &mut seen, &result, &mut guards, now);
        }
        if let Some((r, _)) = result.denied_by() {
            self.count_ban_refusals(checks, &seen, r, &mut guards, now);
        }
        result
    }

    /// Writes what an admitted (or charged) chain changed: keys found first, in place,
    /// then the new ones (an insertion may move others).
    fn write_chain(
        &self,
        checks: &[Check],
        seen: &mut [Seen],
        result: &ChainDecision,
        guards: &mut [(usize, MutexGuard<'_, Shard>)],
        now: u64,
    ) {
        for pass_found in [true, false] {
            for (i, s) in seen.iter_mut().enumerate() {
                if s.found.is_some() != pass_found {
                    continue;
                }
                let Some(next) = s.pending.take() else {
                    continue;
                };
                let key = checks[i].key();
                let hot = hot(key, &result.decisions()[i], &next, now);
                let shard = &mut guards[s.guard].1;
                self.note_ban(key, &next, now);
                match s.found {
                    Some(f) => {
                        let expires = self.expires_sec(next.expires_at(key.params_at(now)));
                        shard.set_at(f, next, expires, Some(hot));
                    }
                    None => self.write(shard, &s.digest, next, key.params_at(now), now, hot),
                }
            }
        }
    }

    /// Counts a refusal by check `refused` on the bans before it of the same principal
    /// (see [`Limit::ban`](crate::Limit::ban)), under the chain's shard locks.
    fn count_ban_refusals(
        &self,
        checks: &[Check],
        seen: &[Seen],
        refused: usize,
        guards: &mut [(usize, MutexGuard<'_, Shard>)],
        now: u64,
    ) {
        let who = checks[refused].key().principal();
        for (j, check) in checks.iter().enumerate().take(refused) {
            let params = check.key().params();
            if !matches!(params, Params::Ban { .. }) || check.key().principal() != who {
                continue;
            }
            if let Some(next) = algorithm::ban_refusals(params, &seen[j].stored, now, check.cost())
            {
                self.note_ban(check.key(), &next, now);
                let shard = &mut guards[seen[j].guard].1;
                self.write(shard, &seen[j].digest, next, params, now, true);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::{Chain, Limit, MemoryStore, Principal};

    /// A chain that inserts a key into a full limit (evicting, which moves the shard's
    /// other keys in its slab) writes the keys it found before: their places are still
    /// theirs.
    #[test]
    fn an_eviction_in_a_chain_moves_no_found_key_under_its_write() {
        let store = MemoryStore::builder()
            .shards(1)
            .max_keys(1)
            .build()
            .unwrap();
        let minute = Duration::from_secs(60);
        let (a, b) = (
            Limit::fixed_window("a", 5, minute).unwrap(),
            Limit::fixed_window("b", 5, minute).unwrap(),
        );
        let (u, x, y) = (
            Principal::user("u"),
            Principal::user("x"),
            Principal::user("y"),
        );
        // b's key first in the slab, then a's.
        assert!(store.check_now(&Chain::new().check(&b, x)).is_allowed());
        assert!(
            store
                .check_now(&Chain::new().check(&a, u.clone()))
                .is_allowed()
        );
        // a's key found; b's full, so y's insertion evicts x and a's key moves down.
        let chain = Chain::new().check(&a, u.clone()).check(&b, y.clone());
        assert!(store.check_now(&chain).is_allowed());
        let peek = Chain::new().check_cost(&a, u, 0).check_cost(&b, y, 0);
        let left: Vec<u64> = store
            .check_now(&peek)
            .decisions()
            .iter()
            .map(crate::Decision::remaining)
            .collect();
        assert_eq!(left, [3, 4]);
        assert_eq!(store.evictions(), 1);
    }

    /// A principal's keys under every limit live in one shard (a layer's chain of rules on
    /// one principal takes one lock), and principals spread over the shards.
    #[test]
    fn a_principals_keys_share_a_shard_and_principals_spread() {
        let store = MemoryStore::builder().shards(64).build().unwrap();
        let minute = Duration::from_secs(60);
        let limits: Vec<Limit> = (0..8)
            .map(|i| Limit::fixed_window(&format!("l{i}"), 5, minute).unwrap())
            .collect();
        let mut used = std::collections::HashSet::new();
        for n in 0..1000 {
            let p = Principal::user(format!("user-{n}"));
            let shards: std::collections::HashSet<usize> = limits
                .iter()
                .map(|l| store.shard_of(&l.key(p.clone())))
                .collect();
            assert_eq!(shards.len(), 1, "{p:?} spans {shards:?}");
            used.extend(shards);
        }
        // 1 000 principals over 64 shards: every shard is hit (the odds of one missed
        // are below 64 * (63/64)^1000, about 1e-5, whatever the process's digest key).
        assert_eq!(used.len(), 64);
    }
}
