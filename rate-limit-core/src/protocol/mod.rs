//! The protocol between the limiter and the stores: what a store takes and answers.
//!
//! Decisions and the receipts behind them, reservations, leased units, store errors,
//! failure domains, the [`Store`], [`Dedupe`], [`Slots`] and [`SharedState`] traits, the
//! fleet's changes and their text form, the shared pacer's messages, and the bans a store
//! lists. Every store implements this protocol and
//! imports nothing above it (see `docs/ARCHITECTURE.md`, "core's layers").

use std::future::Future;
use std::sync::Arc;

use crate::chain::{Chain, Check};
use crate::key::Key;

mod ban;
mod decision;
mod dedupe;
mod domains;
mod error;
pub(crate) mod fleet;
mod key_state;
pub(crate) mod lease;
pub(crate) mod pace;
mod reservation;
mod shared;
mod slots;
#[cfg(feature = "calendar")]
pub(crate) mod usage;

pub use ban::Banned;
pub use decision::{ChainDecision, Decision, Outcome};
pub use dedupe::Dedupe;
pub use domains::Domains;
pub use error::{StoreError, StoreErrorKind};
pub use key_state::KeyState;
pub(crate) use reservation::CountedIn;
pub use reservation::Reservation;
pub use shared::SharedState;
pub use slots::{Slots, Taken};

/// A counter store. Every method is one atomic operation on the store (one round trip for
/// a remote store), whatever the chain's length.
///
/// Implementations must give every store the same semantics; the crate's conformance tests
/// run one suite against each.
pub trait Store: Send + Sync + 'static {
    /// Checks and charges a chain atomically, in its [`ChainMode`](crate::ChainMode).
    fn check(
        &self,
        chain: &Chain,
    ) -> impl Future<Output = Result<ChainDecision, StoreError>> + Send;

    /// Charges a cost known only after the work (LLM tokens, bytes sent): always applied,
    /// overdrawing if need be, so later checks are refused until the debt is repaid.
    /// The decision says whether the charge fit.
    fn charge(&self, check: &Check) -> impl Future<Output = Result<Decision, StoreError>> + Send;

    /// Gives back what an admitted chain reserved ([`Reservation`]): each check's cost,
    /// where its window still holds it (a fixed window's only in the window it was charged
    /// in). One atomic operation per key.
    ///
    /// The default answers an error ([`StoreErrorKind::Rejected`]): a store that cannot give
    /// units back keeps them counted, which errs towards refusing.
    fn give_back(
        &self,
        reservation: &Reservation,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        let _ = reservation;
        std::future::ready(Err(StoreError::new(
            StoreErrorKind::Rejected,
            "this store cannot give units back",
        )))
    }

    /// Reads a key's state without changing it (an admin read): what a request would meet.
    fn peek(&self, key: &Key) -> impl Future<Output = Result<KeyState, StoreError>> + Send;

    /// Forgets a key's state: its next check starts afresh.
    fn reset(&self, key: &Key) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Checks a chain at once, without I/O, when this store can: the memory store always
    /// does; a remote store may, from a local cache (the Redis store's deny cache). The
    /// answer, when there is one, is what [`check`](Store::check) would have answered, and
    /// charges the same. `None` (the default): nothing was charged; call `check`.
    ///
    /// The layer calls this first, so that a store answering from memory costs no future.
    fn try_check(&self, chain: &Chain) -> Option<ChainDecision> {
        let _ = chain;
        None
    }

    /// The failure domains `chain` depends on: the nodes of a Redis Cluster that own its
    /// keys. The [`Limiter`](crate::Limiter) keeps health, cool-down and logs per domain, so
    /// that one node's failure is not every key's. Default: the whole store, one domain.
    fn failure_domains(&self, chain: &Chain) -> Domains {
        let _ = chain;
        Domains::WHOLE
    }

    /// A domain's name for logs (a node's `host:port`), never a key or a password.
    fn domain_name(&self, domain: u32) -> Option<String> {
        let _ = domain;
        None
    }
}

impl<S: Store> Store for Arc<S> {
    fn check(
        &self,
        chain: &Chain,
    ) -> impl Future<Output = Result<ChainDecision, StoreError>> + Send {
        (**self).check(chain)
    }
    fn charge(&self, check: &Check) -> impl Future<Output = Result<Decision, StoreError>> + Send {
        (**self).charge(check)
    }
    fn peek(&self, key: &Key) -> impl Future<Output = Result<KeyState, StoreError>> + Send {
        (**self).peek(key)
    }
    fn give_back(
        &self,
        reservation: &Reservation,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        (**self).give_back(reservation)
    }
    fn reset(&self, key: &Key) -> impl Future<Output = Result<(), StoreError>> + Send {
        (**self).reset(key)
    }
    fn try_check(&self, chain: &Chain) -> Option<ChainDecision> {
        (**self).try_check(chain)
    }
    fn failure_domains(&self, chain: &Chain) -> Domains {
        (**self).failure_domains(chain)
    }
    fn domain_name(&self, domain: u32) -> Option<String> {
        (**self).domain_name(domain)
    }
}
