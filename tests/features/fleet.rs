//! The fleet's gauges (`metrics::watch_fleet`), as Prometheus scrapes them: the version
//! applied follows each change, `rate_limit_fleet_listening` is 1 while the store's notices
//! arrive, and `rate_limit_fleet_in_step` drops to 0 when the store goes away (the settings
//! kept).

use std::time::{Duration, Instant};

use ratekeeper_core::Limit;
use ratekeeper_core::fleet::Fleet;
use ratekeeper_tests::redis::RedisServer;
use ratekeeper_tower::metrics::watch_fleet;

use crate::ban::prometheus;

fn gauge(name: &str) -> Option<f64> {
    let text = prometheus().render();
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
}

async fn until(name: &str, want: f64) {
    let t0 = Instant::now();
    while gauge(name) != Some(want) {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "{name} never {want}: {:?}",
            gauge(name)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn the_fleet_gauges_follow_what_this_instance_applied() {
    let mut redis = RedisServer::start();
    let poll = Limit::fixed_window("gauged", 10, Duration::from_secs(60)).unwrap();
    let fleet = Fleet::new(redis.store(), [poll.clone()]);
    watch_fleet(&fleet);
    let run = tokio::spawn(fleet.clone().run(Duration::from_millis(200)));
    until("rate_limit_fleet_listening", 1.0).await;
    fleet.set_quota("gauged", 3).await.unwrap();
    fleet.set_quota("gauged", 4).await.unwrap();
    until("rate_limit_fleet_version", 2.0).await;
    assert_eq!(gauge("rate_limit_fleet_in_step"), Some(1.0));
    assert!(gauge("rate_limit_fleet_applied_timestamp_seconds").unwrap() > 1.7e9);
    redis.kill();
    until("rate_limit_fleet_in_step", 0.0).await;
    until("rate_limit_fleet_listening", 0.0).await;
    assert_eq!(
        gauge("rate_limit_fleet_version"),
        Some(2.0),
        "the settings kept"
    );
    assert_eq!(poll.quota(), 4);
    run.abort();
}
