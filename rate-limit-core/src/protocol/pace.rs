//! The shared pacer's messages: one call on a scope's state, and the store's answer.

use std::time::Duration;

use crate::limit::Aimd;
use crate::principal::Principal;

/// What one call to the store does.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum PaceOp {
    /// A slot: now, or reserved when the next free one is at most `within` µs away (0:
    /// only now). The answer's `go` says a slot was taken, its wait when.
    Acquire { within: u64 },
    /// The remote side refused: decrease, and pause for its Retry-After (µs; 0: none).
    Rejected(u64),
    /// The remote side said what it allows, refusing nothing: pause this long (µs; 0:
    /// none) without a decrease, and hold the rate to `ceiling` calls a second (0: none;
    /// the rate goes to it unless a decrease came within the period).
    Told { pause: u64, ceiling: f64 },
}

/// One call: the scope's pacer, the operation and what comes with it.
#[derive(Debug, Clone)]
pub(crate) struct PaceCall<'a> {
    pub(crate) name: &'a str,
    /// The scope, rendered as a principal (injection-safe; the Cluster hash tag).
    pub(crate) scope: &'a Principal,
    pub(crate) op: PaceOp,
    pub(crate) successes: u64,
    pub(crate) worker: u64,
    pub(crate) registration: Duration,
    pub(crate) remember: Duration,
    pub(crate) config: Aimd,
}

/// The store's answer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct PaceReply {
    /// A slot was taken (reserved `wait_us` from now when that is above 0).
    pub(crate) go: bool,
    /// How long until the slot taken, or until the next free one when none was.
    pub(crate) wait_us: u64,
    pub(crate) rate: f64,
    pub(crate) workers: u32,
}
