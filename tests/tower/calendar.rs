//! A calendar quota's answer over TCP: `Retry-After`, `RateLimit`'s `t` and the trio's
//! reset point at the period's boundary, and `RateLimit-Policy`'s `w` is the period's own
//! length (a Berlin day of 25 hours when the clocks go back).

use std::time::Duration;

use axum::Router;
use axum::routing::get;
use ratekeeper_core::calendar::{Calendar, Period, Timestamp};
use ratekeeper_core::clock::FakeClock;
use ratekeeper_core::{Limit, Limiter, MemoryStore, PrincipalKind};
use ratekeeper_tests::{Server, client};
use ratekeeper_tower::extract::HeaderKey;
use ratekeeper_tower::{RateLimitLayer, Rule};

fn micros(s: &str) -> u64 {
    u64::try_from(s.parse::<Timestamp>().unwrap().as_microsecond()).unwrap()
}

#[tokio::test]
async fn a_calendar_quota_answers_with_the_boundary_and_the_periods_own_length() {
    // 2026-10-25 in Berlin: 25 hours; 2.5 s before its end.
    let clock = FakeClock::at_micros(micros("2026-10-25T22:59:57.500Z"));
    let store = MemoryStore::builder().clock(clock.clone()).build().unwrap();
    let day = Calendar::new(Period::Day, "Europe/Berlin").unwrap();
    let layer = RateLimitLayer::new(Limiter::new(store)).rule(Rule::new(
        Limit::calendar("daily", 2, day).unwrap(),
        HeaderKey::new("x-key".parse().unwrap(), PrincipalKind::ApiKey),
    ));
    let app = Router::new().route("/", get(|| async { "ok" }).route_layer(layer));
    let server = Server::start(app).await.unwrap();
    let get = || async {
        client()
            .get(server.url("/"))
            .header("x-key", "k")
            .send()
            .await
            .unwrap()
    };
    let header = |r: &reqwest::Response, name: &str| {
        r.headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
    };
    let first = get().await;
    assert_eq!(first.status(), 200);
    assert_eq!(
        header(&first, "ratelimit-policy").as_deref(),
        Some("\"daily\";q=2;w=90000"),
        "the period's own length: 25 hours"
    );
    assert_eq!(
        header(&first, "ratelimit").as_deref(),
        Some("\"daily\";r=1;t=3")
    );
    assert_eq!(get().await.status(), 200);
    let refused = get().await;
    assert_eq!(refused.status(), 429);
    // 2.5 s to the boundary, rounded up.
    assert_eq!(header(&refused, "retry-after").as_deref(), Some("3"));
    assert_eq!(
        header(&refused, "ratelimit").as_deref(),
        Some("\"daily\";r=0;t=3")
    );
    assert_eq!(header(&refused, "ratelimit-reset").as_deref(), Some("3"));
    // Past the boundary: a new day of 24 hours, its count from nothing.
    clock.advance(Duration::from_millis(2_500));
    let next = get().await;
    assert_eq!(next.status(), 200);
    assert_eq!(
        header(&next, "ratelimit-policy").as_deref(),
        Some("\"daily\";q=2;w=86400")
    );
    assert_eq!(
        header(&next, "ratelimit").as_deref(),
        Some("\"daily\";r=1;t=86400")
    );
}

/// A month's wait is days: the problem's detail says the instant it ends, in UTC.
#[tokio::test]
async fn a_months_refusal_says_the_date_it_ends() {
    use ratekeeper_tower::{Answering, ProblemResponder};
    let now = u64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_micros(),
    )
    .unwrap();
    let clock = FakeClock::at_micros(now);
    let store = MemoryStore::builder().clock(clock).build().unwrap();
    let month = Calendar::new(Period::Month, "UTC").unwrap();
    let end = month
        .span(Timestamp::from_microsecond(i64::try_from(now).unwrap()).unwrap())
        .end();
    let layer = RateLimitLayer::new(Limiter::new(store))
        .answering(Answering::new().with_responder(ProblemResponder))
        .rule(Rule::new(
            Limit::calendar("monthly", 1, month).unwrap(),
            HeaderKey::new("x-key".parse().unwrap(), PrincipalKind::ApiKey),
        ));
    let app = Router::new().route("/", get(|| async { "ok" }).route_layer(layer));
    let server = Server::start(app).await.unwrap();
    let get = || client().get(server.url("/")).header("x-key", "k").send();
    assert_eq!(get().await.unwrap().status(), 200);
    let refused = get().await.unwrap();
    assert_eq!(refused.status(), 429);
    let body: serde_json::Value = serde_json::from_str(&refused.text().await.unwrap()).unwrap();
    let detail = body["detail"].as_str().unwrap();
    let at: Timestamp = detail
        .split("(at ")
        .nth(1)
        .and_then(|s| s.strip_suffix(").").map(str::to_owned))
        .unwrap_or_else(|| panic!("no instant in {detail:?}"))
        .parse()
        .unwrap();
    // The period's end, to the second (the wait rounded up, read a moment later).
    let off = at.as_second() - end.as_second();
    assert!((0..=2).contains(&off), "{detail}: the month ends at {end}");
}

/// Each API key counted from its customer's billing day (`Rule::anchor_from`, a lookup in
/// the customer records): the same plan refuses each until its own boundary.
#[tokio::test]
async fn each_customer_waits_for_its_own_billing_day() {
    use ratekeeper_core::Principal;
    use ratekeeper_core::calendar::Anchor;
    use std::collections::HashMap;
    // 2 s before Dec 15 (UTC): the 15th's customer renews then, the 1st's on Jan 1.
    let clock = FakeClock::at_micros(micros("2026-12-14T23:59:58Z"));
    let store = MemoryStore::builder().clock(clock.clone()).build().unwrap();
    let billing: HashMap<String, Anchor> = HashMap::from([(
        Principal::api_key("k-15").as_str().to_owned(),
        Anchor::day(15).unwrap(),
    )]);
    let month = Calendar::new(Period::Month, "UTC").unwrap();
    let layer = RateLimitLayer::new(Limiter::new(store)).rule(
        Rule::new(
            Limit::calendar("plan", 1, month).unwrap(),
            HeaderKey::new("x-key".parse().unwrap(), PrincipalKind::ApiKey),
        )
        .anchor_from(move |p, _| billing.get(p.as_str()).copied()),
    );
    let app = Router::new().route("/", get(|| async { "ok" }).route_layer(layer));
    let server = Server::start(app).await.unwrap();
    let get = |key: &'static str| client().get(server.url("/")).header("x-key", key).send();
    let wait = |r: &reqwest::Response| {
        r.headers()["retry-after"]
            .to_str()
            .unwrap()
            .parse::<u64>()
            .unwrap()
    };
    for key in ["k-15", "k-1"] {
        assert_eq!(get(key).await.unwrap().status(), 200, "{key}");
    }
    let r15 = get("k-15").await.unwrap();
    let r1 = get("k-1").await.unwrap();
    assert_eq!((r15.status().as_u16(), r1.status().as_u16()), (429, 429));
    assert_eq!(wait(&r15), 2, "to Dec 15, 00:00");
    assert_eq!(wait(&r1), 17 * 86_400 + 2, "to Jan 1, 00:00");
    clock.advance(Duration::from_secs(2));
    assert_eq!(
        get("k-15").await.unwrap().status(),
        200,
        "renewed on the 15th"
    );
    assert_eq!(get("k-1").await.unwrap().status(), 429, "not before Jan 1");
}
