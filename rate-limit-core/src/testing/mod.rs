//! Test utilities (feature `test-util`): a store that fails on demand, a capture of
//! every `tracing` event, and the shared-state conformance suite a store of your own can
//! run ([`shared_state`]).

#![allow(unreachable_pub)]

mod shared;

pub use shared::shared_state;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use crate::store::{KeyState, StoreErrorKind};
use crate::{Chain, ChainDecision, Check, Decision, Key, MemoryStore, Store, StoreError};

/// How a [`FaultyStore`] behaves.
///
/// You set it in your own tests (feature `test-util`) to make a `FaultyStore` fail or hang
/// when you choose, and see what your service answers then.
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
    async fn peek(&self, key: &Key) -> Result<KeyState, StoreError> {
        self.gate().await?;
        self.inner.peek(key).await
    }
    async fn reset(&self, key: &Key) -> Result<(), StoreError> {
        self.gate().await?;
        self.inner.reset(key).await
    }
}

/// Every `tracing` event of the process, captured as `name field=value …` lines, for tests
/// that look at what was logged (how often, and that no secret is in it).
///
/// One process-wide subscriber: a thread-local one misses events when parallel tests share
/// callsites (tracing caches callsite interest). Tests filter by a name or a store's name.
#[derive(Debug, Clone, Default)]
pub struct LogCapture(Arc<Mutex<Vec<String>>>);

struct Fields(String);

impl tracing::field::Visit for Fields {
    fn record_debug(&mut self, f: &tracing::field::Field, v: &dyn std::fmt::Debug) {
        use std::fmt::Write as _;
        let _ = write!(self.0, "{}={:?} ", f.name(), v);
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for LogCapture {
    fn on_event(&self, e: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        let mut f = Fields(format!("{} ", e.metadata().name()));
        e.record(&mut f);
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(f.0);
    }
}

impl LogCapture {
    /// The process-wide capture, installed as the global subscriber on first use.
    ///
    /// # Panics
    ///
    /// If another global subscriber was installed first.
    pub fn global() -> Self {
        use tracing_subscriber::layer::SubscriberExt as _;
        static CAPTURE: std::sync::OnceLock<LogCapture> = std::sync::OnceLock::new();
        CAPTURE
            .get_or_init(|| {
                let c = LogCapture::default();
                tracing::subscriber::set_global_default(
                    tracing_subscriber::registry().with(c.clone()),
                )
                .expect("no other global subscriber");
                c
            })
            .clone()
    }

    /// Every line so far.
    pub fn lines(&self) -> Vec<String> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// How many events named `name` hold `needle` in their fields.
    pub fn count(&self, name: &str, needle: &str) -> usize {
        let prefix = format!("{name} ");
        self.lines()
            .iter()
            .filter(|l| l.starts_with(&prefix) && l.contains(needle))
            .count()
    }

    /// Whether any line holds `needle`.
    pub fn contains(&self, needle: &str) -> bool {
        self.lines().iter().any(|l| l.contains(needle))
    }
}
