//! The admin writing through a `Fleet`: a quota lowered through instance A's API is obeyed by
//! instance B, each its own process state over one `redis-server`; B's API shows the version
//! it applied; with the store down the change is refused (503) and applied nowhere.

use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::get;
use ratekeeper_axum::admin::{Admin, Role};
use ratekeeper_core::fleet::Fleet;
use ratekeeper_core::{AnyStore, Limit, Limiter, PrincipalKind};
use ratekeeper_tests::redis::{RedisServer, down_store};
use ratekeeper_tests::{Server, client};
use ratekeeper_tower::extract::HeaderKey;
use ratekeeper_tower::{RateLimitLayer, Rule};
use serde_json::Value;

use crate::admin::OPS;

/// One instance: `/poll` limited per `x-key` (10 a minute), its admin through its fleet.
async fn instance(store: AnyStore) -> (Server, Limit) {
    let poll = Limit::fixed_window("fleet-admin-poll", 10, Duration::from_secs(60)).unwrap();
    let fleet = Fleet::new(store.clone(), [poll.clone()]);
    let _ = fleet.sync().await;
    tokio::spawn(fleet.clone().run(Duration::from_millis(100)));
    let key = HeaderKey::new("x-key".parse().unwrap(), PrincipalKind::User);
    let layer = RateLimitLayer::new(Limiter::new(store)).rule(Rule::new(poll.clone(), key));
    let admin = Admin::builder()
        .token("ops", OPS, Role::ReadWrite)
        .layer(&layer)
        .fleet(fleet)
        .build()
        .unwrap();
    let app = Router::new()
        .route("/poll", get(|| async { "{}" }).route_layer(layer))
        .merge(admin.router());
    (Server::start(app).await.unwrap(), poll)
}

async fn set_quota(s: &Server, quota: u64) -> reqwest::Response {
    client()
        .put(s.url("/admin/api/limits/fleet-admin-poll/quota"))
        .bearer_auth(OPS)
        .header("content-type", "application/json")
        .body(format!("{{\"quota\": {quota}}}"))
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn a_quota_lowered_through_one_instances_admin_is_obeyed_by_another() {
    let redis = RedisServer::start();
    let (a, _) = instance(redis.store()).await;
    let (b, b_poll) = instance(redis.store()).await;
    assert_eq!(set_quota(&a, 2).await.status(), 200);
    let t0 = Instant::now();
    while b_poll.quota() != 2 {
        assert!(
            t0.elapsed() < Duration::from_secs(1),
            "B did not apply it within 1 s"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let status = |who: &'static str| {
        let b = &b;
        async move {
            client()
                .get(b.url("/poll"))
                .header("x-key", who)
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    };
    assert_eq!(
        [status("u").await, status("u").await, status("u").await],
        [200, 200, 429]
    );
    let limits = client()
        .get(b.url("/admin/api/limits"))
        .bearer_auth(OPS)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let limits: Value = serde_json::from_str(&limits).unwrap();
    assert_eq!(limits["limits"][0]["quota"], 2, "{limits}");
    assert!(
        limits["fleet"]["version"].as_u64().unwrap() >= 1,
        "{limits}"
    );
    assert!(limits["fleet"]["applied_at"].as_u64().is_some(), "{limits}");
}

#[tokio::test]
async fn with_the_store_down_a_change_is_refused_and_applied_nowhere() {
    let (a, poll) = instance(down_store()).await;
    let r = set_quota(&a, 2).await;
    assert_eq!(r.status(), 503);
    let body: Value = serde_json::from_str(&r.text().await.unwrap()).unwrap();
    assert_eq!(body["code"], "admin.store_unavailable", "{body}");
    assert_eq!(poll.quota(), 10, "not applied here either");
}
