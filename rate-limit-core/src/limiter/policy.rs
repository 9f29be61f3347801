//! Failure policies, failure reasons and what a limiter answers.

use std::time::Duration;

use crate::protocol::StoreErrorKind;
use crate::protocol::{ChainDecision, CountedIn, Reservation};

/// What a rule does when its store cannot answer. Written where the rule is written.
///
/// The default is [`Closed`](Self::Closed): "we could not verify the limit" is not
/// permission. Failing open is a decision a rule declares deliberately.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FailurePolicy {
    /// Refuse: the HTTP layer answers 503 with a short `Retry-After`.
    #[default]
    Closed,
    /// Count in process memory instead, so the limit still holds per process.
    Memory,
    /// Allow, and log that the limit was not checked.
    Open,
}

impl FailurePolicy {
    /// The stricter of two policies: closed, then memory, then open. When one chain mixes
    /// policies and the store fails, the strictest wins.
    pub fn strictest(self, other: Self) -> Self {
        fn rank(p: FailurePolicy) -> u8 {
            match p {
                FailurePolicy::Closed => 2,
                FailurePolicy::Memory => 1,
                FailurePolicy::Open => 0,
            }
        }
        if rank(other) > rank(self) {
            other
        } else {
            self
        }
    }

    /// A short, stable name: `closed`, `memory`, `open`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Closed => "closed",
            Self::Memory => "memory",
            Self::Open => "open",
        }
    }
}

/// Why a store could not answer (the `reason` field of `rate_limit.fallback` events).
///
/// You see it when a store failure decided an answer (`Answer::Memory`, the fallback
/// events), to tell a store that is down from one that is slow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FailureReason {
    /// Configured but not reachable (not connected, connection refused).
    Missing,
    /// It answered with an error, or the connection broke mid-call.
    Failed,
    /// No answer within the limiter's timeout.
    TimedOut,
}

impl FailureReason {
    /// `missing`, `failed` or `timed_out`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Missing => "missing",
            Self::Failed => "failed",
            Self::TimedOut => "timed_out",
        }
    }

    pub(crate) const fn bit(self) -> u8 {
        match self {
            Self::Missing => 1,
            Self::Failed => 2,
            Self::TimedOut => 4,
        }
    }

    pub(crate) fn from_bits(bits: u8) -> Self {
        match bits {
            1 => Self::Missing,
            4 => Self::TimedOut,
            _ => Self::Failed,
        }
    }

    pub(crate) fn of(kind: StoreErrorKind) -> Self {
        match kind {
            StoreErrorKind::Missing | StoreErrorKind::NotExecuted => Self::Missing,
            StoreErrorKind::TimedOut => Self::TimedOut,
            _ => Self::Failed,
        }
    }
}

/// What a [`Limiter`](super::Limiter) answered for a chain.
///
/// You get it from `Limiter::check` when you call the limiter yourself: whether the store
/// or process memory decided, or the policy let the chain through, and the decision to act
/// on.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Answer {
    /// The store decided.
    Store(ChainDecision),
    /// The store failed; the chain was counted in process memory.
    Memory {
        /// The in-memory decision.
        decision: ChainDecision,
        /// Why the store was not used.
        reason: FailureReason,
    },
    /// The store failed and the policy lets the request through unchecked.
    Open(FailureReason),
    /// The store failed and the policy refuses the request.
    Closed {
        /// Why.
        reason: FailureReason,
        /// When to try again (the limiter's cool-down, at least one second).
        retry_after: Duration,
    },
}

impl Answer {
    /// Whether the request may go ahead.
    pub fn is_allowed(&self) -> bool {
        match self {
            Self::Store(d) | Self::Memory { decision: d, .. } => d.is_allowed(),
            Self::Open(_) => true,
            Self::Closed { .. } => false,
        }
    }

    /// The decision, when one was made (by the store or in memory).
    pub fn decision(&self) -> Option<&ChainDecision> {
        match self {
            Self::Store(d) | Self::Memory { decision: d, .. } => Some(d),
            _ => None,
        }
    }

    /// Why the store was not used, if it was not.
    pub fn failure(&self) -> Option<FailureReason> {
        match self {
            Self::Store(_) => None,
            Self::Memory { reason, .. } | Self::Open(reason) | Self::Closed { reason, .. } => {
                Some(*reason)
            }
        }
    }

    /// What an admitted `chain` (the chain this answer is for) reserved: to keep, or to
    /// give back with [`Limiter::give_back`](super::Limiter::give_back) once the outcome is
    /// known. `None` when nothing was charged: a refusal, or a store failure let through
    /// unchecked ([`FailurePolicy::Open`]).
    pub fn reservation(&self, chain: &crate::Chain) -> Option<crate::protocol::Reservation> {
        match self {
            Self::Store(d) => Reservation::of(chain, d, CountedIn::Store),
            Self::Memory { decision, .. } => Reservation::of(chain, decision, CountedIn::Fallback),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::FailurePolicy::*;

    #[test]
    fn strictest_wins() {
        assert_eq!(Open.strictest(Memory), Memory);
        assert_eq!(Memory.strictest(Closed), Closed);
        assert_eq!(Closed.strictest(Open), Closed);
        assert_eq!(Open.strictest(Open), Open);
    }
}
