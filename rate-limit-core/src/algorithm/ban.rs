//! Bans: a gate that refuses a banned principal, and a log of the refusals that ban it.
//!
//! State: `until` (the ban's end, µs; 0 or past: not banned) and the refusals counted
//! within the last `within`, as `(timestamp, count)` entries. While banned, nothing is
//! counted; when `after` refusals are within `within`, the principal is banned until
//! `now + ban` and the log is cleared. The Redis store's `chain.lua` is the same, line for
//! line.

use std::collections::VecDeque;

use crate::protocol::Decision;

/// A ban's parameters (µs): `after` refusals within `within` ban for `ban`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Ban {
    pub(super) after: u64,
    pub(super) within: u64,
    pub(super) ban: u64,
}

/// A ban's state as it stands at `now`.
enum Now {
    /// Banned, until this time.
    Banned(u64),
    /// Not banned: the refusals still within `within` (from the future: clamped to now)
    /// and their sum.
    Counting(VecDeque<(u64, u64)>, u64),
}

impl Ban {
    fn now(self, until: u64, events: &VecDeque<(u64, u64)>, now: u64) -> Now {
        // A ban never lasts longer than its length from now (a corrupt or foreign state).
        let until = until.min(now.saturating_add(self.ban));
        if until > now {
            return Now::Banned(until);
        }
        let log: VecDeque<(u64, u64)> = events
            .iter()
            .map(|&(t, c)| (t.min(now), c))
            .filter(|&(t, _)| t.saturating_add(self.within) > now)
            .collect();
        let counted = log.iter().fold(0u64, |s, &(_, c)| s.saturating_add(c));
        Now::Counting(log, counted)
    }

    /// The gate's answer: denied while banned (retry-after: the ban's remaining time),
    /// otherwise allowed with the refusals still to go before a ban as `remaining`.
    pub(super) fn gate(self, until: u64, events: &VecDeque<(u64, u64)>, now: u64) -> Decision {
        let Self { after, within, ban } = self;
        match self.now(until, events, now) {
            Now::Banned(until) => {
                let left = until - now;
                Decision::denied(after, 0, left, left, ban).as_ban()
            }
            Now::Counting(log, counted) => {
                let reset = log.back().map_or(0, |&(t, _)| (t + within) - now);
                Decision::allowed(after, after.saturating_sub(counted), reset, within).as_ban()
            }
        }
    }

    /// Counts `n` refusals at `now`: the new `(until, events)`, or `None` while banned (a
    /// banned principal's requests count nothing).
    pub(super) fn count(
        self,
        until: u64,
        events: &VecDeque<(u64, u64)>,
        now: u64,
        n: u64,
    ) -> Option<(u64, VecDeque<(u64, u64)>)> {
        let Now::Counting(mut log, counted) = self.now(until, events, now) else {
            return None;
        };
        if n == 0 {
            return None;
        }
        match log.back_mut() {
            Some((t, c)) if *t == now => *c = c.saturating_add(n),
            _ => log.push_back((now, n)),
        }
        if counted.saturating_add(n) >= self.after {
            return Some((now.saturating_add(self.ban), VecDeque::new()));
        }
        Some((until.min(now), log))
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::Cell;
    use super::super::{Charge, State};
    use crate::limit::Params;

    const S: u64 = 1_000_000;

    #[test]
    fn bans_after_n_refusals_within_the_window_and_lifts_by_itself() {
        let params = Params::Ban {
            after: 3,
            within: 60 * S,
            ban: 600 * S,
        };
        let mut c = Cell::new(params);
        let t0 = 1_000 * S;
        assert!(c.probe(t0, 1).is_allowed());
        // Two refusals, then the window passes: they no longer count.
        c.count(t0, 1);
        c.count(t0 + S, 1);
        assert_eq!(c.probe(t0 + 2 * S, 1).remaining(), 1);
        c.count(t0 + 61 * S, 1);
        assert!(c.probe(t0 + 61 * S, 1).is_allowed(), "{:?}", c.state);
        // Three within a minute: banned for ten minutes, from the third.
        c.count(t0 + 70 * S, 1);
        c.count(t0 + 80 * S, 1);
        let banned = c.probe(t0 + 80 * S, 1);
        assert!(!banned.is_allowed() && banned.is_ban());
        assert_eq!(banned.retry_after().unwrap().as_secs(), 600);
        // While banned, nothing counts.
        c.count(t0 + 90 * S, 5);
        assert_eq!(
            c.probe(t0 + 90 * S, 1).retry_after().unwrap().as_secs(),
            590
        );
        // The ban ends by itself, and starts the count afresh.
        let after = c.probe(t0 + 680 * S, 1);
        assert!(after.is_allowed());
        assert_eq!(after.remaining(), 3);
        // A charge counts its cost in refusals at once.
        let charged = c.check(t0 + 700 * S, 3, Charge::Overdraw);
        assert!(!charged.is_allowed() && charged.is_ban());
        assert!(matches!(c.state, State::Ban { until, .. } if until == t0 + 1_300 * S));
    }
}
