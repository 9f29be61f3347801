//! A request reset while its in-flight slot is being taken (the store frozen, the client
//! giving up and resetting its HTTP/2 stream: one packet, no connection held): once the
//! store answers, the slot is released by id, and the account's next request is
//! admitted, not refused for the slot's whole TTL. Through the layer, on standalone Redis
//! and a Cluster.

use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::get;
use ratekeeper_core::{AnyStore, InFlight, Limiter, PrincipalKind};
use ratekeeper_tests::Server;
use ratekeeper_tests::redis::{RedisCluster, RedisServer};
use ratekeeper_tower::extract::HeaderKey;
use ratekeeper_tower::{InFlightRule, RateLimitLayer};

async fn reset_while_taking(store: AnyStore, servers: &[RedisServer]) {
    // One at a time per account, leased for 30 s: a slot left to its lease refuses the
    // account for 30 s.
    let watch = InFlight::new("watch", 1, Duration::from_secs(30)).unwrap();
    let limiter = Limiter::builder(store)
        .timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let layer = RateLimitLayer::new(limiter).in_flight(InFlightRule::new(
        watch,
        HeaderKey::new("x-account".parse().unwrap(), PrincipalKind::User),
    ));
    let app = Router::new().route("/watch", get(|| async { "ok" }).route_layer(layer));
    let server = Server::start(app).await.unwrap();
    let h2 = reqwest::Client::builder()
        .http2_prior_knowledge()
        .build()
        .unwrap();
    let watch = |account: &str, timeout: Duration| {
        h2.get(server.url("/watch"))
            .header("x-account", account)
            .timeout(timeout)
            .send()
    };
    let long = Duration::from_secs(5);
    // The connection to the store is up (a slot taken and released).
    assert_eq!(watch("ada", long).await.unwrap().status(), 200);
    servers.iter().for_each(RedisServer::pause);
    // The client resets its stream at 100 ms, inside the store's time budget.
    let cut = watch("ada", Duration::from_millis(100)).await;
    assert!(
        cut.is_err_and(|e| e.is_timeout()),
        "gave up while the store was frozen"
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    servers.iter().for_each(RedisServer::resume);
    let thawed = Instant::now();
    loop {
        let st = watch("ada", long).await.unwrap().status();
        if st == 200 {
            break;
        }
        assert_eq!(st, 429);
        assert!(
            thawed.elapsed() < Duration::from_secs(3),
            "the reset request's slot is still held {:?} after the thaw",
            thawed.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!(
        "the account was admitted again {:?} after the thaw",
        thawed.elapsed()
    );
}

#[tokio::test]
async fn a_request_reset_while_its_slot_is_taken_holds_no_slot_on_redis() {
    let redis = RedisServer::start();
    reset_while_taking(redis.store(), std::slice::from_ref(&redis)).await;
}

#[tokio::test]
async fn a_request_reset_while_its_slot_is_taken_holds_no_slot_on_a_cluster() {
    let cluster = RedisCluster::start();
    reset_while_taking(cluster.store(), cluster.nodes()).await;
}
