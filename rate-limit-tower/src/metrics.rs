#![doc = include_str!("../METRICS.md")]

/// The share of a quota left at or under which an admitted request counts as near its
/// limit, unless [`RateLimitLayer::near_limit`](crate::RateLimitLayer::near_limit) says
/// otherwise.
pub const DEFAULT_NEAR_LIMIT: f64 = crate::meters::DEFAULT_NEAR_LIMIT;

#[cfg(feature = "metrics")]
pub use crate::meters::bans::BansActive;
#[cfg(feature = "metrics")]
pub use crate::meters::fleet::watch_fleet;
