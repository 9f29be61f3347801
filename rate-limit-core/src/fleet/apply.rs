//! Applying a state read from the store: every limit's quota and overrides, every watched
//! setting, and a notice's event.

use std::collections::HashMap;
use std::time::SystemTime;

use super::Fleet;
use crate::principal::Principal;
use crate::protocol::fleet::FleetState;

impl Fleet {
    /// Every limit's quota and overrides, and every watched setting, as `state` says (a
    /// limit it does not name: as written, no overrides).
    pub(super) fn apply(&self, state: &FleetState) {
        let mut quotas: HashMap<&str, u64> = HashMap::new();
        let mut overrides: HashMap<&str, Vec<(Principal, u64)>> = HashMap::new();
        let mut settings: HashMap<&str, &str> = HashMap::new();
        for (field, value) in &state.entries {
            if let Some(name) = field.strip_prefix("s:") {
                settings.insert(name, value);
                continue;
            }
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
        self.apply_settings(&settings);
        *self.lock_local() = state.clone();
        self.update(|a| {
            a.version = state.version;
            a.at = Some(SystemTime::now());
            a.error = None;
        });
    }

    /// Gives each watcher its setting's value when it changed.
    fn apply_settings(&self, settings: &HashMap<&str, &str>) {
        let mut w = self.lock_watchers();
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

    /// A notice's event, from another instance: `lift <ban> <principal>` drops the lifted
    /// ban's refusal this instance cached. Anything else is ignored.
    #[cfg(feature = "redis")]
    pub(super) fn apply_event(&self, event: &str) {
        let mut words = event.splitn(3, ' ');
        let (Some("lift"), Some(ban), Some(who)) = (words.next(), words.next(), words.next())
        else {
            return;
        };
        if let (Some(limit), Some(p)) = (self.limits.get(ban), Principal::from_rendered(who)) {
            self.store.forget_cached(&limit.key(p));
        }
    }
}
