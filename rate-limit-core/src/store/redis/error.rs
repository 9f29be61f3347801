//! What a Redis error means: whether the command ran, for the limiter's retries.

use redis::RedisError;

use crate::error::{ConfigError, ConfigErrorKind};
use crate::protocol::{StoreError, StoreErrorKind};

/// What an error means for a retry (see the limiter's retries).
pub(super) fn classify(e: &RedisError) -> StoreErrorKind {
    use redis::{ErrorKind, ServerErrorKind};
    // A wrong password fails the connection's AUTH; a missing one answers every command
    // with NOAUTH (WRONGPASS where a client re-authenticates).
    if e.kind() == ErrorKind::AuthenticationFailed
        || e.code()
            .is_some_and(|c| matches!(c, "NOAUTH" | "WRONGPASS"))
    {
        StoreErrorKind::Unauthenticated
    } else if e.is_connection_refusal() {
        StoreErrorKind::NotExecuted
    } else if e.is_timeout() {
        StoreErrorKind::TimedOut
    } else if e.is_connection_dropped() || e.is_io_error() {
        StoreErrorKind::Indeterminate
    } else {
        match e.kind() {
            ErrorKind::Server(ServerErrorKind::NoScript) => StoreErrorKind::NotExecuted,
            // Redis 6 wraps a refusal of a script's first write (at the memory cap, on a
            // replica): nothing was written.
            ErrorKind::Server(ServerErrorKind::ResponseError)
                if script_refusal(e).is_some_and(refused) =>
            {
                StoreErrorKind::Rejected
            }
            // A generic ERR may come from a script that failed part-way.
            ErrorKind::Server(ServerErrorKind::ResponseError) => StoreErrorKind::Indeterminate,
            // MOVED, ASK, TRYAGAIN, CLUSTERDOWN, LOADING, READONLY…: refused before running.
            ErrorKind::Server(_) => StoreErrorKind::Rejected,
            ErrorKind::Extension if e.code().is_some_and(refused) => StoreErrorKind::Rejected,
            _ => StoreErrorKind::Indeterminate,
        }
    }
}

/// Codes of replies that refuse a command before it runs (beyond those redis-rs knows).
fn refused(code: &str) -> bool {
    matches!(
        code,
        "BUSY" | "OOM" | "MISCONF" | "NOREPLICAS" | "NOPERM" | "READONLY"
    )
}

/// The code of the reply a script's call met, where Redis 6 wraps it in a generic error:
/// `ERR Error running script (call to f_…): @user_script:1: … -OOM command not allowed …`.
/// (Redis 7 answers with the call's own code.)
fn script_refusal(e: &RedisError) -> Option<&str> {
    let detail = e.detail()?;
    if !detail.starts_with("Error running script") {
        return None;
    }
    let inner = &detail[detail.rfind(": -")? + 3..];
    let code = inner.split(' ').next()?;
    (!code.is_empty() && code.bytes().all(|b| b.is_ascii_uppercase())).then_some(code)
}

/// Whether `e` says the node is a read-only replica (an old primary after a failover), in
/// Redis 7's words or in Redis 6's wrapping of a script's write.
#[cfg(any(feature = "cluster", feature = "sentinel"))]
pub(super) fn is_read_only(e: &RedisError) -> bool {
    use redis::{ErrorKind, ServerErrorKind};
    e.kind() == ErrorKind::Server(ServerErrorKind::ReadOnly)
        || script_refusal(e) == Some("READONLY")
}

pub(super) fn store_error(e: RedisError) -> StoreError {
    let kind = classify(&e);
    let message = match kind {
        StoreErrorKind::NotExecuted => "redis: not connected",
        StoreErrorKind::TimedOut => "redis: no answer in time",
        StoreErrorKind::Rejected => "redis: command refused",
        // Never the password: the URL's user is the operator's to check.
        StoreErrorKind::Unauthenticated => {
            "redis: authentication failed (check the user and password the store connects with)"
        }
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

/// A URL the Redis client cannot use, as a configuration error (never the URL: it may
/// hold a password).
pub(super) fn url_error(e: &RedisError) -> ConfigError {
    ConfigError::new(
        ConfigErrorKind::UrlInvalid,
        "url",
        format!("not a usable Redis URL ({:?})", e.kind()),
    )
}
