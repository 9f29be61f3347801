//! [`BoxStore`]: any [`Store`] behind one cheap, cloneable handle, and what it shares
//! beyond checks when it implements that too ([`BoxStore::with_shared`]).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::chain::{Chain, Check};
use crate::key::Key;
use crate::protocol::{ChainDecision, Decision, Domains, KeyState, Reservation, Store, StoreError};
use crate::protocol::{Dedupe, SharedState, Slots};

mod shared;

use shared::DynShared;

type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

trait DynStore: Send + Sync + 'static {
    fn check_dyn<'a>(
        &'a self,
        chain: &'a Chain,
    ) -> BoxFuture<'a, Result<ChainDecision, StoreError>>;
    fn charge_dyn<'a>(&'a self, check: &'a Check) -> BoxFuture<'a, Result<Decision, StoreError>>;
    fn peek_dyn<'a>(&'a self, key: &'a Key) -> BoxFuture<'a, Result<KeyState, StoreError>>;
    fn give_back_dyn<'a>(&'a self, r: &'a Reservation) -> BoxFuture<'a, Result<(), StoreError>>;
    fn reset_dyn<'a>(&'a self, key: &'a Key) -> BoxFuture<'a, Result<(), StoreError>>;
    fn try_check_dyn(&self, chain: &Chain) -> Option<ChainDecision>;
    fn failure_domains_dyn(&self, chain: &Chain) -> Domains;
    fn domain_name_dyn(&self, domain: u32) -> Option<String>;
}

impl<S: Store> DynStore for S {
    fn check_dyn<'a>(
        &'a self,
        chain: &'a Chain,
    ) -> BoxFuture<'a, Result<ChainDecision, StoreError>> {
        Box::pin(self.check(chain))
    }
    fn charge_dyn<'a>(&'a self, check: &'a Check) -> BoxFuture<'a, Result<Decision, StoreError>> {
        Box::pin(self.charge(check))
    }
    fn peek_dyn<'a>(&'a self, key: &'a Key) -> BoxFuture<'a, Result<KeyState, StoreError>> {
        Box::pin(self.peek(key))
    }
    fn give_back_dyn<'a>(&'a self, r: &'a Reservation) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(self.give_back(r))
    }
    fn reset_dyn<'a>(&'a self, key: &'a Key) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(self.reset(key))
    }
    fn try_check_dyn(&self, chain: &Chain) -> Option<ChainDecision> {
        self.try_check(chain)
    }
    fn failure_domains_dyn(&self, chain: &Chain) -> Domains {
        self.failure_domains(chain)
    }
    fn domain_name_dyn(&self, domain: u32) -> Option<String> {
        self.domain_name(domain)
    }
}

/// Any [`Store`] behind a cheap, cloneable handle (one allocation per call).
///
/// [`BoxStore::new`] boxes the checks: asked for the fleet's state, in-flight slots or
/// de-duplication, it answers [`StoreErrorKind::Unsupported`](crate::store::StoreErrorKind::Unsupported).
/// [`BoxStore::with_shared`] boxes a store that implements [`SharedState`], [`Slots`] and
/// [`Dedupe`] too (each may keep their defaults), and forwards every one of them.
#[derive(Clone)]
pub struct BoxStore {
    inner: Arc<dyn DynStore>,
    /// Behind one more pointer: a `BoxStore` is as small as the other stores' handles.
    extra: Arc<Extra>,
}

struct Extra {
    shared: Option<Arc<dyn DynShared>>,
    name: &'static str,
}

impl BoxStore {
    /// Wraps a store's checks.
    pub fn new<S: Store>(store: S) -> Self {
        Self {
            inner: Arc::new(store),
            extra: Arc::new(Extra {
                shared: None,
                name: std::any::type_name::<S>(),
            }),
        }
    }

    /// Wraps a store that carries what instances share too: the fleet, heavy hitters, the
    /// shared pacer, bans listed ([`SharedState`]), in-flight slots ([`Slots`]) and
    /// de-duplication ([`Dedupe`]).
    pub fn with_shared<S: Store + SharedState + Slots + Dedupe>(store: S) -> Self {
        let store = Arc::new(store);
        Self {
            inner: store.clone(),
            extra: Arc::new(Extra {
                shared: Some(store),
                name: std::any::type_name::<S>(),
            }),
        }
    }
}

impl BoxStore {
    /// The identity of the store behind this handle (clones agree).
    pub(super) fn identity(&self) -> usize {
        Arc::as_ptr(&self.inner).cast::<()>() as usize
    }
}

impl fmt::Debug for BoxStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("BoxStore").field(&self.extra.name).finish()
    }
}

impl Store for BoxStore {
    // `async fn` here (not a forwarded future): the boxed future borrows `self` and the
    // argument under one lifetime, which an opaque return type cannot name.
    async fn check(&self, chain: &Chain) -> Result<ChainDecision, StoreError> {
        self.inner.check_dyn(chain).await
    }
    async fn charge(&self, check: &Check) -> Result<Decision, StoreError> {
        self.inner.charge_dyn(check).await
    }
    async fn peek(&self, key: &Key) -> Result<KeyState, StoreError> {
        self.inner.peek_dyn(key).await
    }
    async fn give_back(&self, reservation: &Reservation) -> Result<(), StoreError> {
        self.inner.give_back_dyn(reservation).await
    }
    async fn reset(&self, key: &Key) -> Result<(), StoreError> {
        self.inner.reset_dyn(key).await
    }
    fn try_check(&self, chain: &Chain) -> Option<ChainDecision> {
        self.inner.try_check_dyn(chain)
    }
    fn failure_domains(&self, chain: &Chain) -> Domains {
        self.inner.failure_domains_dyn(chain)
    }
    fn domain_name(&self, domain: u32) -> Option<String> {
        self.inner.domain_name_dyn(domain)
    }
}
