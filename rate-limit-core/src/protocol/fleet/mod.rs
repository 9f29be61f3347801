//! The fleet's runtime state as the stores hold it: where its history stands
//! ([`FleetMark`]), the changes made to it ([`FleetChange`]), the whole state
//! ([`FleetState`]), what a reader gets ([`FleetRead`]), and the notices a store sends
//! when it changes ([`FleetNotices`]). The text form every store that keeps text uses is
//! in [`codec`](self::codec): one encoder, one decoder.

pub mod codec;
#[cfg(test)]
mod tests;

use std::collections::HashMap;

use crate::principal::Principal;

/// Where a fleet's history stands: which history (the epoch, made when the state was
/// created), how far along it (the version, one per change), and which change made it
/// (the tip: a random number each change brings).
///
/// Two epochs are two histories: a store that restarted empty and was changed again is a
/// new epoch, and an instance that applied the old one reads the new one whole rather than
/// comparing versions across histories. The tip tells apart two changes that took one
/// version in one epoch: a failover to a replica that missed a change, then another change
/// made there. An instance that applied the lost one finds another tip at its version and
/// reads the state whole.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct FleetMark {
    /// The history (0: the store holds no state, or one written before epochs existed).
    pub epoch: u64,
    /// Changes made in this history (0: none: the store holds no state).
    pub version: u64,
    /// The last change's stamp (0: none, or a state written before tips existed).
    pub tip: u64,
}

impl FleetMark {
    /// A store holding no state.
    pub const EMPTY: Self = Self {
        epoch: 0,
        version: 0,
        tip: 0,
    };

    /// Whether this is a store holding no state (no change made, none restored).
    pub const fn is_empty(self) -> bool {
        self.version == 0
    }
}

/// One change to the fleet's runtime state: the version goes up by one with it.
///
/// Used by a store of your own that keeps a fleet's state; a fleet's users change it
/// through `Fleet`'s methods (`set_quota`, `lift_ban`, …).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FleetChange {
    /// A limit's quota on every instance.
    Quota {
        /// The limit's name.
        limit: String,
        /// Its quota.
        quota: u64,
    },
    /// A principal's own quota of a limit.
    Override {
        /// The limit's name.
        limit: String,
        /// The principal (as stores render it: an API key hashed).
        principal: Principal,
        /// Its quota.
        quota: u64,
    },
    /// A principal's own quota removed.
    ClearOverride {
        /// The limit's name.
        limit: String,
        /// The principal.
        principal: Principal,
    },
    /// A named setting (the admin's access lists).
    Setting {
        /// The setting's name (`A-Z a-z 0-9 . _ -`, 1 to 64 bytes).
        name: String,
        /// Its value.
        value: String,
    },
    /// A ban lifted (its key reset in the store already): each instance drops the refusal
    /// it cached. Changes no entry.
    LiftBan {
        /// The ban limit's name.
        ban: String,
        /// The principal.
        principal: Principal,
    },
}

impl FleetChange {
    /// Whether this change leaves an entry in the state (a quota, an override, a
    /// setting), rather than removing one or changing none.
    pub fn is_entry(&self) -> bool {
        matches!(
            self,
            Self::Quota { .. } | Self::Override { .. } | Self::Setting { .. }
        )
    }
}

/// Every entry of the state at one mark: quotas, overrides and settings (each a
/// [`FleetChange`] of those kinds, at most one per limit, per limit and principal, per
/// setting).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FleetState {
    /// Where its history stands.
    pub mark: FleetMark,
    /// Its entries, in no particular order.
    pub entries: Vec<FleetChange>,
}

/// A state's entries by field, each change made in constant time: how the memory store
/// and each instance keep the state they hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FleetEntries {
    by_field: HashMap<String, FleetChange>,
}

impl FleetEntries {
    /// The entries of `entries` (a later one for the same field wins).
    pub fn new(entries: impl IntoIterator<Item = FleetChange>) -> Self {
        let mut out = Self::default();
        for e in entries {
            out.apply(&e);
        }
        out
    }

    /// Makes `change`: the entry it names set or removed (a lifted ban changes none).
    pub fn apply(&mut self, change: &FleetChange) {
        let Some(field) = codec::entry_field(change) else {
            return;
        };
        if change.is_entry() {
            self.by_field.insert(field, change.clone());
        } else {
            self.by_field.remove(&field);
        }
    }

    /// The entries, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = &FleetChange> {
        self.by_field.values()
    }

    /// How many entries there are.
    pub fn len(&self) -> usize {
        self.by_field.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.by_field.is_empty()
    }

    /// The state at `mark` with these entries.
    pub fn to_state(&self, mark: FleetMark) -> FleetState {
        FleetState {
            mark,
            entries: self.by_field.values().cloned().collect(),
        }
    }
}

/// What a reader gets from [`fleet_read`](super::SharedState::fleet_read).
///
/// Built only by a store of your own that keeps a fleet's state (the store contract's
/// `SharedState`); a fleet reads it, a user of the crate never does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FleetRead {
    /// The reader's history, with the changes made after its mark, oldest first (none
    /// when it is up to date).
    Since {
        /// The store's mark: the last change's.
        mark: FleetMark,
        /// The changes after the reader's mark.
        changes: Vec<FleetChange>,
    },
    /// The whole state: the reader is on another history, or so far behind that the store
    /// no longer holds every change since.
    Whole(FleetState),
}

/// A store's notices that the fleet's state changed: hints to read, never applied as
/// such. Ends when the store's channel does (the subscriber's connection lost); the
/// [`Fleet`](crate::fleet::Fleet) then reads on its period and asks again.
#[derive(Debug)]
pub struct FleetNotices {
    rx: tokio::sync::mpsc::Receiver<u64>,
}

/// The sending end of [`FleetNotices`], for a store: [`notify`](Self::notify) never
/// waits (a notice not yet read stands for any number).
#[derive(Debug, Clone)]
pub struct FleetNotifier {
    tx: tokio::sync::mpsc::Sender<u64>,
}

impl FleetNotices {
    /// A channel of notices: the store keeps the notifier, the fleet reads the notices.
    pub fn channel() -> (FleetNotifier, Self) {
        let (tx, rx) = tokio::sync::mpsc::channel(1);
        (FleetNotifier { tx }, Self { rx })
    }

    /// The next notice (the version the store says it wrote, 0 when it does not say);
    /// `None` once the store's channel ended.
    pub async fn next(&mut self) -> Option<u64> {
        self.rx.recv().await
    }
}

impl FleetNotifier {
    /// Tells the reader a version was written. `false` once the reader is gone (the store
    /// drops this notifier then).
    pub fn notify(&self, version: u64) -> bool {
        match self.tx.try_send(version) {
            Ok(()) | Err(tokio::sync::mpsc::error::TrySendError::Full(_)) => true,
            Err(tokio::sync::mpsc::error::TrySendError::Closed(_)) => false,
        }
    }

    /// Whether the reader is gone.
    pub fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }

    /// Waits until the reader is gone (a store's forwarding task ends then).
    pub async fn closed(&self) {
        self.tx.closed().await;
    }
}
