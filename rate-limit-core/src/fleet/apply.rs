//! Applying what a read brought: the changes since the mark applied here, each on its own
//! (one limit, one override, one setting: the same cost at 10 overrides as at 10 000), or
//! a whole state, every limit's overrides swapped in one step.

use std::collections::HashMap;
use std::time::SystemTime;

use super::{Fleet, Held};
use crate::principal::Principal;
use crate::protocol::SharedState;
use crate::protocol::fleet::{FleetChange, FleetEntries, FleetMark, FleetRead};

impl<S: SharedState> Fleet<S> {
    /// Applies `read`, made from the mark `from`.
    pub(super) fn apply(&self, from: FleetMark, read: FleetRead) {
        let mark = match read {
            FleetRead::Since { mark, changes } => {
                for c in &changes {
                    self.apply_change(c);
                }
                let mut held = self.lock_held();
                for c in &changes {
                    held.entries.apply(c);
                }
                held.mark = mark;
                mark
            }
            FleetRead::Whole(state) => {
                let mark = state.mark;
                let behind = mark.epoch == from.epoch && mark.version < from.version;
                if !from.is_empty() && (mark.epoch != from.epoch || behind) {
                    tracing::warn!(
                        target: "rate_limit.fleet",
                        applied_epoch = from.epoch,
                        applied_version = from.version,
                        store_epoch = mark.epoch,
                        store_version = mark.version,
                        "the store's fleet state is another history (a restart or a failover \
                         lost what was applied here): applied the store's"
                    );
                }
                let entries = FleetEntries::new(state.entries);
                self.apply_whole(&entries);
                *self.lock_held() = Held { mark, entries };
                mark
            }
        };
        self.update(|a| {
            a.version = mark.version;
            a.epoch = mark.epoch;
            a.at = Some(SystemTime::now());
            a.error = None;
        });
    }

    /// One change, on the one limit or setting it names (a limit this instance does not
    /// run: nothing).
    fn apply_change(&self, change: &FleetChange) {
        match change {
            FleetChange::Quota { limit, quota } => {
                if let Some(l) = self.limits.get(limit.as_str())
                    && l.quota() != *quota
                {
                    let _ = l.set_quota(*quota);
                }
            }
            FleetChange::Override {
                limit,
                principal,
                quota,
            } => {
                if let Some(l) = self.limits.get(limit.as_str()) {
                    let _ = l.set_override(principal, *quota);
                }
            }
            FleetChange::ClearOverride { limit, principal } => {
                if let Some(l) = self.limits.get(limit.as_str()) {
                    l.clear_override(principal);
                }
            }
            FleetChange::Setting { name, value } => self.tell(name, Some(value)),
            FleetChange::LiftBan { ban, principal } => {
                // Drops the refusal this instance cached: the store holds the ban lifted.
                if let Some(l) = self.limits.get(ban.as_str()) {
                    self.store.forget_cached(&l.key(principal.clone()));
                }
            }
        }
    }

    /// Every limit's quota and overrides, and every watched setting, as `entries` say (a
    /// limit they do not name: as written, no overrides).
    fn apply_whole(&self, entries: &FleetEntries) {
        let mut quotas: HashMap<&str, u64> = HashMap::new();
        let mut overrides: HashMap<&str, Vec<(&Principal, u64)>> = HashMap::new();
        let mut settings: HashMap<&str, &str> = HashMap::new();
        for e in entries.iter() {
            match e {
                FleetChange::Quota { limit, quota } => {
                    quotas.insert(limit, *quota);
                }
                FleetChange::Override {
                    limit,
                    principal,
                    quota,
                } => overrides
                    .entry(limit)
                    .or_default()
                    .push((principal, *quota)),
                FleetChange::Setting { name, value } => {
                    settings.insert(name, value);
                }
                _ => {}
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
            limit.replace_overrides(overrides.remove(name.as_str()).unwrap_or_default());
        }
        let mut w = self.lock_watchers();
        for name in settings.keys() {
            w.settings.entry((*name).to_owned()).or_default();
        }
        for (name, (last, watchers)) in &mut w.settings {
            let now = settings.get(name.as_str()).copied();
            if last.as_deref() != now {
                *last = now.map(str::to_owned);
                for f in watchers.iter() {
                    f(now);
                }
            }
        }
    }

    /// Gives the setting `name`'s watchers its value, when it changed.
    fn tell(&self, name: &str, value: Option<&str>) {
        let mut w = self.lock_watchers();
        let (last, watchers) = w.settings.entry(name.to_owned()).or_default();
        if last.as_deref() != value {
            *last = value.map(str::to_owned);
            for f in watchers.iter() {
                f(value);
            }
        }
    }
}
