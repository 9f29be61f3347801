//! A store that works, fails with a chosen error kind, or never answers.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};

use rate_limit_core::{
    Chain, ChainDecision, Check, Decision, Key, MemoryStore, Store, StoreError, StoreErrorKind,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Works,
    Fails(StoreErrorKind),
    Hangs,
}

#[derive(Debug, Clone)]
pub(crate) struct Faulty {
    inner: MemoryStore,
    mode: Arc<AtomicU8>,
    pub(crate) calls: Arc<AtomicU64>,
}

impl Faulty {
    pub(crate) fn new() -> Self {
        Self {
            inner: MemoryStore::new(),
            mode: Arc::new(AtomicU8::new(0)),
            calls: Arc::new(AtomicU64::new(0)),
        }
    }

    pub(crate) fn set(&self, mode: Mode) {
        let v = match mode {
            Mode::Works => 0,
            Mode::Fails(StoreErrorKind::NotExecuted) => 1,
            Mode::Fails(StoreErrorKind::Indeterminate) => 2,
            Mode::Fails(StoreErrorKind::TimedOut) => 3,
            Mode::Fails(_) => 4,
            Mode::Hangs => 5,
        };
        self.mode.store(v, Ordering::SeqCst);
    }

    pub(crate) fn calls(&self) -> u64 {
        self.calls.load(Ordering::SeqCst)
    }

    async fn gate(&self) -> Result<(), StoreError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let kind = match self.mode.load(Ordering::SeqCst) {
            0 => return Ok(()),
            1 => StoreErrorKind::NotExecuted,
            2 => StoreErrorKind::Indeterminate,
            3 => StoreErrorKind::TimedOut,
            4 => StoreErrorKind::Missing,
            _ => return std::future::pending().await,
        };
        Err(StoreError::new(kind, "injected fault"))
    }
}

impl Store for Faulty {
    async fn check(&self, chain: &Chain) -> Result<ChainDecision, StoreError> {
        self.gate().await?;
        self.inner.check(chain).await
    }
    async fn charge(&self, check: &Check) -> Result<Decision, StoreError> {
        self.gate().await?;
        self.inner.charge(check).await
    }
    async fn peek(&self, key: &Key) -> Result<Decision, StoreError> {
        self.gate().await?;
        self.inner.peek(key).await
    }
    async fn reset(&self, key: &Key) -> Result<(), StoreError> {
        self.gate().await?;
        self.inner.reset(key).await
    }
}
