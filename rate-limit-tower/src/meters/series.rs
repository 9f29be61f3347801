//! One series: its key, built once, and the recorder's handle for it, asked for once.
//! Asking a recorder for a handle can allocate (the Prometheus recorder does, every
//! time), so a request uses the handle kept: two plain loads and a compare, no write to
//! memory other requests share but the count itself. The handle is kept for the recorder
//! installed at the series' first use; a recorder installed after that (install it
//! before the layer serves, as `metrics` advises) still gets every count, its handle
//! asked for each time.

use std::fmt;
use std::sync::OnceLock;

use metrics::{Counter, Gauge, Histogram, Key, Level, Metadata, Recorder};

static META: Metadata<'static> = Metadata::new(module_path!(), Level::INFO, Some(module_path!()));

pub(crate) struct Series<H> {
    key: Key,
    kept: OnceLock<(usize, H)>,
}

impl<H> fmt::Debug for Series<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Series").field(&self.key).finish()
    }
}

/// The installed recorder, by address.
fn recorder() -> usize {
    metrics::with_recorder(|r| std::ptr::from_ref(r).cast::<()>().addr())
}

impl<H> Series<H> {
    pub(crate) fn new(key: Key) -> Self {
        Self {
            key,
            kept: OnceLock::new(),
        }
    }

    /// `f` on this series' handle in the installed recorder.
    fn with(&self, register: impl FnOnce(&dyn Recorder, &Key) -> H, f: impl FnOnce(&H)) {
        let id = recorder();
        if let Some((at, h)) = self.kept.get()
            && *at == id
        {
            f(h);
            return;
        }
        let h = metrics::with_recorder(|r| register(r, &self.key));
        f(&h);
        // The first recorder's handle is kept; another's is asked for each time.
        let _ = self.kept.set((id, h));
    }
}

impl Series<Counter> {
    pub(crate) fn increment(&self) {
        self.with(|r, k| r.register_counter(k, &META), |c| c.increment(1));
    }
}

impl Series<Gauge> {
    pub(crate) fn add(&self, by: f64) {
        self.with(|r, k| r.register_gauge(k, &META), |g| g.increment(by));
    }

    pub(crate) fn set(&self, value: f64) {
        self.with(|r, k| r.register_gauge(k, &META), |g| g.set(value));
    }
}

impl Series<Histogram> {
    pub(crate) fn record(&self, value: f64) {
        self.with(|r, k| r.register_histogram(k, &META), |h| h.record(value));
    }
}

/// Counts one on `key`, asking the recorder for its handle (for rare series: errors).
pub(crate) fn count(key: &Key) {
    metrics::with_recorder(|r| r.register_counter(key, &META).increment(1));
}
