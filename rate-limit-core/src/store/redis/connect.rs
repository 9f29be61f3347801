//! How the store's connections to one server behave: timeouts and reconnection.

use std::time::Duration;

use redis::aio::ConnectionManagerConfig;

/// What the store's URLs name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Deployment {
    /// One server (or Sentinel's primary).
    Standalone,
    /// The seed nodes of a Redis Cluster.
    Cluster,
}

/// A server's connection settings: the timeouts, and reconnection attempts but never
/// command replays (a failed command is never resent).
pub(super) fn manager_config(
    connect_timeout: Duration,
    response_timeout: Duration,
) -> ConnectionManagerConfig {
    ConnectionManagerConfig::new()
        .set_connection_timeout(Some(connect_timeout))
        .set_response_timeout(Some(response_timeout))
        .set_number_of_retries(1)
        .set_min_delay(Duration::from_millis(10))
        .set_max_delay(Duration::from_millis(100))
}
