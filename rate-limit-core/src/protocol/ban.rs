//! Bans in force, as an admin reads them ([`AnyStore::bans`](crate::AnyStore::bans)).

use std::time::Duration;

use crate::key::Key;
use crate::principal::Principal;

/// A principal banned by a ban ([`Limit::ban`](crate::Limit::ban)), with the time left.
///
/// The principal is shown as stores keep it: an IP as itself, an API key hashed (never
/// the key). [`Store::reset`](crate::Store::reset) of [`key`](Self::key) lifts the ban.
#[derive(Debug, Clone)]
pub struct Banned {
    pub(crate) key: Key,
    pub(crate) remaining: Duration,
}

impl Banned {
    /// The banned principal (an API key's rendering is its hash).
    pub fn principal(&self) -> &Principal {
        self.key.principal()
    }

    /// The ban's key: [`Store::reset`](crate::Store::reset) it to lift the ban.
    pub fn key(&self) -> &Key {
        &self.key
    }

    /// How long the ban lasts from now.
    pub fn remaining(&self) -> Duration {
        self.remaining
    }
}
