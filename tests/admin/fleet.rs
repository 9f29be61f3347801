//! The admin writing through a `Fleet`, three instances over one store (Redis, a
//! Cluster), each its own server, layer, limits and fleet: a quota lowered through A's API
//! refuses on B and C within a second (measured); a ban lifted through B lets the principal
//! through on A and C at once; access lists replaced through A deny on B; the heavy hitters
//! read through C are merged over all three, a flooder spread over them at the top; a
//! read-only token changes nothing; each instance's API shows the version it applied. With
//! the store down a change is refused (503) and applied nowhere.

use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::get;
use ratekeeper_admin::{Admin, Role};
use ratekeeper_core::fleet::Fleet;
use ratekeeper_core::{AnyStore, Limit, Limiter, PrincipalKind};
use ratekeeper_tests::redis::{RedisCluster, RedisServer, down_store};
use ratekeeper_tests::{Server, client};
use ratekeeper_tower::access::Access;
use ratekeeper_tower::extract::{ClientIp, HeaderKey};
use ratekeeper_tower::{RateLimitLayer, Rule};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::api::{OPS, VIEWER, call, k};

const LIMIT: &str = "fleet-admin-poll";

struct Instance {
    server: Server,
    poll: Limit,
    fleet: Fleet,
}

/// `/poll` limited per `x-key` (10 a minute) behind a ban (2 refusals in a minute ban for
/// a minute) and access lists; its admin through its fleet.
async fn instance(store: AnyStore, name: &str) -> Instance {
    let minute = Duration::from_secs(60);
    let poll = Limit::fixed_window(LIMIT, 10, minute).unwrap();
    let ban = Limit::ban("fleet-admin-ban", 2, minute, minute).unwrap();
    let fleet = Fleet::new(store.clone(), [poll.clone(), ban.clone()])
        .named(name)
        .unwrap()
        .hitters_every(Duration::from_millis(200));
    fleet.sync().await.unwrap();
    tokio::spawn(fleet.clone().run(Duration::from_millis(500)));
    let key = || HeaderKey::new("x-key".parse().unwrap(), PrincipalKind::ApiKey);
    let limiter = Limiter::builder(store).heavy_hitters().build().unwrap();
    let layer = RateLimitLayer::new(limiter)
        .access(Access::new(ClientIp::new()))
        .rule(Rule::new(ban, key()))
        .rule(Rule::new(poll.clone(), key()));
    serve(layer, poll, fleet).await
}

/// `/poll` behind `layer`, and the admin over it through `fleet`.
async fn serve(layer: RateLimitLayer, poll: Limit, fleet: Fleet) -> Instance {
    let admin = Admin::builder()
        .token("ops", OPS, Role::ReadWrite)
        .token("viewer", VIEWER, Role::ReadOnly)
        .layer(&layer)
        .fleet(fleet.clone())
        .build()
        .unwrap();
    let app = Router::new()
        .route("/poll", get(|| async { "{}" }).route_layer(layer))
        .merge(admin.router());
    Instance {
        server: Server::start(app).await.unwrap(),
        poll,
        fleet,
    }
}

async fn poll(i: &Instance, who: &str) -> u16 {
    let r = client()
        .get(i.server.url("/poll"))
        .header("x-key", who)
        .send()
        .await
        .unwrap();
    let st = r.status().as_u16();
    assert_ne!(st, 500, "{}", r.text().await.unwrap());
    st
}

async fn put(i: &Instance, token: &str, path: &str, body: Value) -> (StatusCode, Value) {
    call(&i.server, Method::PUT, path, Some(token), Some(body)).await
}

/// Waits until every instance applied `version`, at most 2 s; how long it took.
async fn applied(all: &[&Instance], version: u64) -> Duration {
    let t0 = Instant::now();
    while !all.iter().all(|i| i.fleet.applied().version >= version) {
        assert!(t0.elapsed() < Duration::from_secs(2), "not applied in 2 s");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    t0.elapsed()
}

async fn three_instances(store: impl Fn() -> AnyStore, tag: &str) {
    let a = instance(store(), &format!("{tag}-a")).await;
    let b = instance(store(), &format!("{tag}-b")).await;
    let c = instance(store(), &format!("{tag}-c")).await;
    let quota = format!("/limits/{LIMIT}/quota");
    // A read-only token changes nothing.
    let (st, _) = put(&a, VIEWER, &quota, json!({"quota": 1})).await;
    assert_eq!(st, 403);
    assert_eq!(a.fleet.applied().version, 0);
    // A quota lowered through A: refused on B and C within a second.
    let (st, _) = put(&a, OPS, &quota, json!({"quota": 2})).await;
    assert_eq!(st, 200);
    let v = a.fleet.applied().version;
    let took = applied(&[&b, &c], v).await;
    println!("{tag}: quota 10 → 2 through A's API, applied by B and C in {took:?}");
    assert!(took < Duration::from_secs(1));
    assert_eq!(b.poll.quota(), 2);
    for (i, u) in [(&b, "u-b"), (&c, "u-c")] {
        assert_eq!(
            [poll(i, u).await, poll(i, u).await, poll(i, u).await],
            [200, 200, 429]
        );
    }
    let (_, limits) = call(&c.server, Method::GET, "/limits", Some(VIEWER), None).await;
    assert_eq!(limits["fleet"]["version"], v, "{limits}");
    assert_eq!(limits["fleet"]["listening"], true, "{limits}");
    assert_eq!(limits["fleet"]["instance"], format!("{tag}-c"), "{limits}");
    // Banned on A (its quota spent, then two refusals), refused on C as well.
    while poll(&a, "mallory").await == 200 {}
    poll(&a, "mallory").await;
    assert_ne!(poll(&c, "mallory").await, 200);
    // Lifted through B (and its count reset): through at once on A and C.
    let lift = format!("/bans/fleet-admin-ban/{}", k("mallory"));
    let (st, _) = call(&b.server, Method::DELETE, &lift, Some(OPS), None).await;
    assert_eq!(st, 204);
    let reset = format!("/limits/{LIMIT}/principals/{}", k("mallory"));
    let (st, _) = call(&b.server, Method::DELETE, &reset, Some(OPS), None).await;
    assert_eq!(st, 204);
    applied(&[&a, &c], b.fleet.applied().version).await;
    assert_eq!(
        [poll(&a, "mallory").await, poll(&c, "mallory").await],
        [200, 200]
    );
    // Access lists replaced through A: B denies.
    let deny = json!({"deny": {"addresses": ["127.0.0.1"]}});
    let (st, _) = put(&a, OPS, "/access", deny).await;
    assert_eq!(st, 200);
    applied(&[&b, &c], a.fleet.applied().version).await;
    assert_eq!(poll(&b, "someone").await, 403);
    let (_, lists) = call(&c.server, Method::GET, "/access", Some(VIEWER), None).await;
    assert_eq!(lists["deny"]["addresses"][0], "127.0.0.1", "{lists}");
    put(&b, OPS, "/access", json!({})).await;
    applied(&[&a, &c], b.fleet.applied().version).await;
    // Heavy hitters: a flooder spread over the three, under each one's own loudest.
    put(&a, OPS, &quota, json!({"quota": 1000})).await;
    applied(&[&b, &c], a.fleet.applied().version).await;
    for (i, loud) in [(&a, "loud-a"), (&b, "loud-b"), (&c, "loud-c")] {
        for _ in 0..12 {
            poll(i, loud).await;
        }
        for _ in 0..8 {
            poll(i, "flooder").await;
        }
    }
    // What is asserted is waited for: C merges its own live counts with A's and B's
    // published reports, each published every 200 ms, so a report read before the flood
    // shows fewer than 8 until its next publication (the wait is bounded generously: a
    // loaded machine can delay a publication by seconds, never forever).
    let t0 = Instant::now();
    let top = loop {
        let path = format!("/limits/{LIMIT}/top?n=3");
        let (_, top) = call(&c.server, Method::GET, &path, Some(VIEWER), None).await;
        if top["by_use"][0]["principal"] == k("flooder").as_str()
            && top["instances"].as_array().unwrap().len() == 3
            && top["by_use"][0]["guaranteed"].as_u64() >= Some(24)
        {
            break top;
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "{top}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    println!("{tag}: merged top through C's API: {}", top["by_use"]);
    assert_eq!(top["scope"], "fleet");
    assert_eq!(
        top["by_use"][0]["guaranteed"], 24,
        "8 on each of three: {top}"
    );
}

#[tokio::test]
async fn three_instances_obey_one_admin_on_redis() {
    let redis = RedisServer::start();
    three_instances(|| redis.store(), "admin-redis").await;
}

#[tokio::test]
async fn three_instances_obey_one_admin_on_a_cluster() {
    let cluster = RedisCluster::start();
    three_instances(|| cluster.store(), "admin-cluster").await;
}

#[tokio::test]
async fn with_the_store_down_a_change_is_refused_and_applied_nowhere() {
    let a = instance_down().await;
    let (st, body) = put(
        &a,
        OPS,
        &format!("/limits/{LIMIT}/quota"),
        json!({"quota": 2}),
    )
    .await;
    assert_eq!(st, 503);
    assert_eq!(body["code"], "admin.store_unavailable", "{body}");
    assert_eq!(a.poll.quota(), 10, "not applied here either");
    let (st, _) = put(
        &a,
        OPS,
        "/access",
        json!({"deny": {"addresses": ["10.0.0.0/8"]}}),
    )
    .await;
    assert_eq!(st, 503);
    let (_, lists) = call(&a.server, Method::GET, "/access", Some(VIEWER), None).await;
    assert_eq!(lists["deny"]["addresses"], json!([]), "{lists}");
}

async fn instance_down() -> Instance {
    let store = down_store();
    let minute = Duration::from_secs(60);
    let poll = Limit::fixed_window(LIMIT, 10, minute).unwrap();
    let fleet = Fleet::new(store.clone(), [poll.clone()]);
    let key = HeaderKey::new("x-key".parse().unwrap(), PrincipalKind::ApiKey);
    let layer = RateLimitLayer::new(Limiter::new(store))
        .access(Access::new(ClientIp::new()))
        .rule(Rule::new(poll.clone(), key));
    serve(layer, poll, fleet).await
}
