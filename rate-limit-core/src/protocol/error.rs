//! Store errors: what failed, and whether the command may have run.

use std::error::Error as StdError;
use std::fmt;

/// How a store call failed. The kind tells the layers above whether a retry is safe.
///
/// You set it in a store of your own (it tells the limiter whether a retry is safe) and may
/// read it in logs; a limiter's caller gets a failure policy's answer instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StoreErrorKind {
    /// The command surely did not run (connection refused, not connected, script not
    /// loaded): safe to retry.
    NotExecuted,
    /// The command may have run (the connection broke after it was sent, or the store
    /// answered something it could not decode): never replay it.
    Indeterminate,
    /// No answer within the time budget; it may still run. Never replay it.
    TimedOut,
    /// The store is configured but was never reached (no connection yet, or not set up).
    Missing,
    /// The store refused the command (busy with a long script, out of memory): it did not
    /// run, but retrying would only add load, so it is not retried.
    Rejected,
    /// The store refused the connection's credentials (a wrong password, or none where one
    /// is needed): nothing ran, and nothing will until the credentials change. Not retried.
    Unauthenticated,
    /// The store does not do this (a store of your own that implements only checks, asked
    /// for in-flight slots or the fleet's state: see [`SharedState`](crate::store::SharedState)).
    /// Nothing ran; retrying cannot help.
    Unsupported,
    /// The store holds a value this release cannot read (written by a newer release, or
    /// by hand): nothing of it was applied. Not retried.
    Corrupt,
}

impl StoreErrorKind {
    /// A short, stable name: `not_executed`, `indeterminate`, `timed_out`, `missing`,
    /// `rejected`, `unauthenticated`, `unsupported`, `corrupt`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::NotExecuted => "not_executed",
            Self::Indeterminate => "indeterminate",
            Self::TimedOut => "timed_out",
            Self::Missing => "missing",
            Self::Rejected => "rejected",
            Self::Unauthenticated => "unauthenticated",
            Self::Unsupported => "unsupported",
            Self::Corrupt => "corrupt",
        }
    }

    /// Whether the command surely did not run, so retrying cannot count a request twice.
    pub const fn is_retryable(self) -> bool {
        matches!(self, Self::NotExecuted | Self::Missing)
    }
}

/// A store call that failed. Never holds a key or any client input.
///
/// You meet it calling a store yourself: a store of your own returns it, a fleet's change
/// carries it (`FleetError::Store`), `RedisStore::verify` wraps it. Through a limiter, a
/// failure policy answers instead.
#[derive(Debug)]
pub struct StoreError {
    kind: StoreErrorKind,
    message: &'static str,
    source: Option<Box<dyn StdError + Send + Sync>>,
    domain: Option<u32>,
}

impl StoreError {
    /// What a store answers for what it does not do ([`StoreErrorKind::Unsupported`]);
    /// `what` names it, e.g. `"this store keeps no fleet state"`.
    pub fn unsupported(what: &'static str) -> Self {
        Self::new(StoreErrorKind::Unsupported, what)
    }

    /// An error of `kind` with a fixed message (no keys, no client input).
    pub fn new(kind: StoreErrorKind, message: &'static str) -> Self {
        Self {
            kind,
            message,
            source: None,
            domain: None,
        }
    }

    /// Says which failure domain failed (a Redis Cluster node; see [`Domains`](crate::store::Domains)).
    #[must_use]
    pub fn with_domain(mut self, domain: u32) -> Self {
        self.domain = Some(domain);
        self
    }

    /// The failure domain that failed, when the store knows it.
    pub fn domain(&self) -> Option<u32> {
        self.domain
    }

    /// Attaches the underlying error.
    #[must_use]
    pub fn with_source(mut self, source: impl Into<Box<dyn StdError + Send + Sync>>) -> Self {
        self.source = Some(source.into());
        self
    }

    /// What failed.
    pub fn kind(&self) -> StoreErrorKind {
        self.kind
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "rate-limit store {}: {}",
            self.kind.as_str(),
            self.message
        )
    }
}

impl StdError for StoreError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn StdError + 'static))
    }
}
