//! Heavy hitters under a spray: 20 000 participants that polled once fill the sketch, a
//! flooder polls 20 times and an honest player 10, spread through the spray. The report
//! must not frame a once-poller: every count is shown with its bounds (and the truth lies
//! inside), the ranking is by what is guaranteed, and the page and the JSON say that the
//! principals cannot be told apart. A flood the sketch can see (400 more polls) stands
//! out, first.

use std::collections::HashMap;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::routing::get;
use ratekeeper_admin::{Admin, Role};
use ratekeeper_core::top::TopSettings;
use ratekeeper_core::{Limit, Limiter, MemoryStore, Principal, PrincipalKind};
use ratekeeper_tests::{Server, client};
use ratekeeper_tower::extract::HeaderKey;
use ratekeeper_tower::{RateLimitLayer, Rule};
use serde_json::Value;
use tower::ServiceExt;

use crate::api::OPS;

async fn poll(app: &Router, who: &str) {
    let req = axum::http::Request::get("/poll")
        .header("x-participant", who)
        .body(Body::empty())
        .unwrap();
    let r = app.clone().oneshot(req).await.unwrap();
    assert_eq!(r.status(), 200);
}

async fn top(s: &Server) -> Value {
    let r = client()
        .get(s.url("/admin/api/limits/poll/top?n=10"))
        .bearer_auth(OPS)
        .send()
        .await
        .unwrap();
    serde_json::from_str(&r.text().await.unwrap()).unwrap()
}

async fn page(s: &Server) -> String {
    let r = client()
        .get(s.url("/admin"))
        .header("accept", "text/html")
        .bearer_auth(OPS)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    r.text().await.unwrap()
}

/// Every listed hitter's bounds hold its true count, and the list is ranked by what is
/// guaranteed.
fn bounds_hold(t: &Value, truth: &HashMap<String, u64>) {
    let list = t["by_use"].as_array().unwrap();
    let mut last = u64::MAX;
    for h in list {
        let name = h["principal"].as_str().unwrap();
        let (lo, hi) = (
            h["guaranteed"].as_u64().unwrap(),
            h["count"].as_u64().unwrap(),
        );
        let real = truth.get(name).copied().unwrap_or(1);
        assert!(
            lo <= real && real <= hi,
            "{name}: {real} outside {lo}..={hi}"
        );
        assert!(lo <= last, "ranked by what is guaranteed: {list:?}");
        last = lo;
    }
}

#[tokio::test]
async fn a_spray_of_once_pollers_frames_nobody_and_a_real_flood_stands_out() {
    let limiter = Limiter::builder(MemoryStore::new())
        .heavy_hitters()
        .build()
        .unwrap();
    let who = HeaderKey::new("x-participant".parse().unwrap(), PrincipalKind::Participant);
    let layer = RateLimitLayer::new(limiter).rule(Rule::new(
        Limit::fixed_window("poll", 1_000, Duration::from_secs(600))
            .unwrap()
            .heavy_hitter_settings(TopSettings::new(128, Duration::from_secs(600)))
            .unwrap(),
        who,
    ));
    let admin = Admin::builder()
        .token("ops", OPS, Role::ReadWrite)
        .layer(&layer)
        .build()
        .unwrap();
    let app = Router::new().route("/poll", get(|| async { "{}" }).route_layer(layer));
    let s = Server::start(app.clone().merge(admin.router()))
        .await
        .unwrap();
    let name = |p: &str| Principal::participant(p).as_str().to_owned();
    let mut truth = HashMap::new();
    for i in 0..20_000_u32 {
        poll(&app, &format!("once-{i}")).await;
        if i % 1_000 == 999 {
            poll(&app, "flooder").await;
            *truth.entry(name("flooder")).or_default() += 1;
        }
        if i % 2_000 == 1_999 {
            poll(&app, "honest").await;
            *truth.entry(name("honest")).or_default() += 1;
        }
    }
    let t = top(&s).await;
    println!(
        "after the spray: first by use {}, unlisted at most {}",
        t["by_use"][0], t["unlisted_use_at_most"]
    );
    bounds_hold(&t, &truth);
    assert_eq!(t["by_use_tells_apart"], false, "{t}");
    let html = page(&s).await;
    assert!(html.contains("cannot be told apart"), "{html}");
    // No bare count on the page: each row shows what is guaranteed and the upper bound.
    let first = &t["by_use"][0];
    let shown = format!("{} – {}", first["guaranteed"], first["count"]);
    assert!(html.contains(&shown), "{shown} in the page");

    // A flood the sketch can see: 400 more polls. Guaranteed above what any principal not
    // listed may have, it is first and stands out.
    for _ in 0..400 {
        poll(&app, "flooder").await;
    }
    *truth.entry(name("flooder")).or_default() += 400;
    let t = top(&s).await;
    println!(
        "after the flood: first by use {}, unlisted at most {}",
        t["by_use"][0], t["unlisted_use_at_most"]
    );
    bounds_hold(&t, &truth);
    assert_eq!(t["by_use"][0]["principal"], name("flooder"), "{t}");
    assert_eq!(t["by_use"][0]["stands_out"], true, "{t}");
    assert_eq!(t["by_use_tells_apart"], true);
    let html = page(&s).await;
    assert!(!html.contains("By use: these principals cannot be told apart"));
}
