//! Test utilities (feature `test-util`): a store that fails on demand.

#![allow(unreachable_pub)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use crate::{
    Chain, ChainDecision, Check, Decision, Key, MemoryStore, Store, StoreError, StoreErrorKind,
};

/// How a [`FaultyStore`] behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Mode {
    /// Answers from an in-memory store.
    Works,
    /// Fails every call with this kind.
    Fails(StoreErrorKind),
    /// Never answers.
    Hangs,
}

/// A store that works, fails with a chosen error kind, or never answers, and counts
/// its calls. Clones share the mode, the counter and the counters inside.
#[derive(Debug, Clone)]
pub struct FaultyStore {
    inner: MemoryStore,
    mode: Arc<Mutex<Mode>>,
    calls: Arc<AtomicU64>,
}

impl Default for FaultyStore {
    fn default() -> Self {
        Self::new()
    }
}

impl FaultyStore {
    /// A working store.
    pub fn new() -> Self {
        Self {
            inner: MemoryStore::new(),
            mode: Arc::new(Mutex::new(Mode::Works)),
            calls: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Changes how it behaves from the next call on.
    pub fn set(&self, mode: Mode) {
        *self.mode.lock().unwrap_or_else(PoisonError::into_inner) = mode;
    }

    /// How many calls reached it.
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::SeqCst)
    }

    async fn gate(&self) -> Result<(), StoreError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let mode = *self.mode.lock().unwrap_or_else(PoisonError::into_inner);
        let kind = match mode {
            Mode::Works => return Ok(()),
            Mode::Fails(kind) => kind,
            Mode::Hangs => return std::future::pending().await,
        };
        Err(StoreError::new(kind, "injected fault"))
    }
}

impl Store for FaultyStore {
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
