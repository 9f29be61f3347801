//! The shared pacer's messages: one call on a scope's state, and the store's answer.

use std::time::Duration;

use crate::limit::Aimd;
use crate::principal::Principal;

/// What one call to the store does.
///
/// Read only by a store of your own; a pacer's callers use `SharedPacer`.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum PaceOp {
    /// A slot: now, or reserved when the next free one is at most `within` µs away (0:
    /// only now). The answer's `go` says a slot was taken, its wait when.
    Acquire {
        /// How far the slot may be (µs).
        within: u64,
    },
    /// The remote side refused: decrease, and pause for its Retry-After (µs; 0: none).
    Rejected(u64),
    /// The remote side said what it allows, refusing nothing: pause this long (µs; 0:
    /// none) without a decrease, and hold the rate to `ceiling` calls a second (0: none;
    /// the rate goes to it unless a decrease came within the period).
    Told {
        /// The pause (µs).
        pause: u64,
        /// The ceiling (calls a second).
        ceiling: f64,
    },
}

/// One call: the scope's pacer, the operation and what comes with it (made by
/// [`SharedPacer`](crate::pace::SharedPacer); a store reads it).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct PaceCall<'a> {
    /// The pacer's name.
    pub name: &'a str,
    /// The scope, rendered as a principal (injection-safe; the Cluster hash tag).
    pub scope: &'a Principal,
    /// What the call does.
    pub op: PaceOp,
    /// Successes the worker saw since its last call.
    pub successes: u64,
    /// The worker's id (below 2^53).
    pub worker: u64,
    /// How long the worker stays counted after this call.
    pub registration: Duration,
    /// How long the scope's state outlives this call.
    pub remember: Duration,
    /// The pacer's settings.
    pub config: Aimd,
}

/// The store's answer.
///
/// Built only by a store of your own, answering a `PaceOp`; a pacer's callers read `Pace`
/// and `Turn` instead.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PaceReply {
    /// A slot was taken (reserved `wait_us` from now when that is above 0).
    pub go: bool,
    /// How long until the slot taken, or until the next free one when none was.
    pub wait_us: u64,
    /// The scope's rate after the call (calls a second).
    pub rate: f64,
    /// The workers counted in the scope.
    pub workers: u32,
}
