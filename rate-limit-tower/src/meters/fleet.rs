//! The fleet's gauges: the version of the operators' settings this instance applied, and
//! whether it is in step with the store, so an operator can see a straggler.

use std::time::UNIX_EPOCH;

use ratekeeper_core::fleet::{Applied, Fleet};

/// Keeps this instance's fleet gauges (feature `metrics`), set after every read the
/// fleet makes:
///
/// - `rate_limit_fleet_version`: the version applied. Instances that share a store show
///   the same number within a second of a change; alert on
///   `max(rate_limit_fleet_version) - min(rate_limit_fleet_version) > 0` for a minute.
/// - `rate_limit_fleet_applied_timestamp_seconds`: when it was applied (Unix time).
/// - `rate_limit_fleet_in_step`: 1 while the last read succeeded, 0 while this instance is
///   cut off from the store (it keeps its last settings).
/// - `rate_limit_fleet_listening`: 1 while the store's notices arrive, 0 while changes
///   apply at each periodic read only.
///
/// ```no_run
/// use ratekeeper_tower::metrics::watch_fleet;
/// use ratekeeper_tower::core::{AnyStore, Limit};
/// use ratekeeper_tower::core::fleet::Fleet;
/// use std::time::Duration;
///
/// # fn run(store: AnyStore, poll: Limit) {
/// let fleet = Fleet::new(store, [poll]);
/// watch_fleet(&fleet);
/// tokio::spawn(fleet.run(Duration::from_secs(1)));
/// # }
/// ```
pub fn watch_fleet(fleet: &Fleet) {
    fleet.on_applied(set);
    set(&fleet.applied());
}

#[allow(clippy::cast_precision_loss)] // versions and seconds far below 2^52
fn set(a: &Applied) {
    metrics::gauge!("rate_limit_fleet_version").set(a.version as f64);
    let at =
        a.at.and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map_or(0.0, |d| d.as_secs_f64());
    metrics::gauge!("rate_limit_fleet_applied_timestamp_seconds").set(at);
    metrics::gauge!("rate_limit_fleet_in_step").set(if a.error.is_none() { 1.0 } else { 0.0 });
    metrics::gauge!("rate_limit_fleet_listening").set(if a.listening { 1.0 } else { 0.0 });
}
