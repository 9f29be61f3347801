//! What a Redis error means: whether the command ran, for the limiter's retries.

use redis::RedisError;

use crate::store::{StoreError, StoreErrorKind};

/// What an error means for a retry (see the limiter's retries).
pub(super) fn classify(e: &RedisError) -> StoreErrorKind {
    use redis::{ErrorKind, ServerErrorKind};
    if e.is_connection_refusal() {
        StoreErrorKind::NotExecuted
    } else if e.is_timeout() {
        StoreErrorKind::TimedOut
    } else if e.is_connection_dropped() || e.is_io_error() {
        StoreErrorKind::Indeterminate
    } else {
        match e.kind() {
            ErrorKind::Server(ServerErrorKind::NoScript) => StoreErrorKind::NotExecuted,
            // A generic ERR may come from a script that failed part-way.
            ErrorKind::Server(ServerErrorKind::ResponseError) => StoreErrorKind::Indeterminate,
            // MOVED, ASK, TRYAGAIN, CLUSTERDOWN, LOADING, READONLY…: refused before running.
            ErrorKind::Server(_) => StoreErrorKind::Rejected,
            ErrorKind::Extension
                if e.code().is_some_and(|c| {
                    matches!(
                        c,
                        "BUSY" | "OOM" | "MISCONF" | "NOREPLICAS" | "NOPERM" | "NOAUTH"
                    )
                }) =>
            {
                StoreErrorKind::Rejected
            }
            _ => StoreErrorKind::Indeterminate,
        }
    }
}

pub(super) fn store_error(e: RedisError) -> StoreError {
    let kind = classify(&e);
    let message = match kind {
        StoreErrorKind::NotExecuted => "redis: not connected",
        StoreErrorKind::TimedOut => "redis: no answer in time",
        StoreErrorKind::Rejected => "redis: command refused",
        _ => "redis: connection lost or bad answer",
    };
    StoreError::new(kind, message).with_source(e)
}

pub(super) fn bad_answer() -> StoreError {
    StoreError::new(
        StoreErrorKind::Indeterminate,
        "redis: unexpected script answer",
    )
}

/// The script refused one chain's arguments (it charged nothing for it).
pub(super) fn refused_chain() -> StoreError {
    StoreError::new(
        StoreErrorKind::Rejected,
        "redis: the script refused a chain's arguments",
    )
}
