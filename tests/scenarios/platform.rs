//! platform: login, API keys, messenger webhooks, and the adaptive harvester.

use std::time::Duration;

use ratekeeper_core::clock::{Clock, FakeClock};
use ratekeeper_core::{AnyStore, Chain, Limit, MemoryStore, Principal};
use ratekeeper_examples::platform::{
    Remote, app_with_login_delay, app_with_store, harvest, harvester,
};
use ratekeeper_tests::redis::{RedisServer, down_store};
use ratekeeper_tests::{Server, client, retry_after};
use reqwest::StatusCode;

async fn table(store: AnyStore) {
    // Real time (Redis counts with its clock): holds of 10, 20, 40, then 80 ms.
    let app = app_with_login_delay(store, Duration::from_millis(10)).unwrap();
    let server = Server::start(app).await.unwrap();
    let http = client();
    let login = |email: &str| {
        http.post(server.url("/login"))
            .body(format!("{{\"email\":\"{email}\",\"password\":\"x\"}}"))
            .send()
    };
    for _ in 0..5 {
        assert_eq!(
            login("eve@example.com").await.unwrap().status(),
            StatusCode::UNAUTHORIZED
        );
    }
    // The 6th failure is held (10 ms here, 1 s in the demo), then answered: slowed, not
    // locked out.
    let r = login("EVE@example.com").await.unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(r.headers()["server-timing"], "rate-limit-hold;dur=10");
    // The right password is not a failure: given back (the demo account).
    let r = http
        .post(server.url("/login"))
        .body("{\"email\":\"demo@example.com\",\"password\":\"platform\"}")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    for i in 0..23 {
        assert_eq!(
            login(&format!("u{i}@example.com")).await.unwrap().status(),
            StatusCode::UNAUTHORIZED,
            "{i}"
        );
    }
    let r = login("fresh@example.com").await.unwrap();
    assert_eq!(
        r.status(),
        StatusCode::TOO_MANY_REQUESTS,
        "30 attempts per IP"
    );
    assert_eq!(r.headers()["ratelimit-limit"], "30");
    // No lockout by refused attempts: this exhausted IP keeps trying the victim's account,
    // and is refused by its own IP limit each time without charging the account...
    for _ in 0..10 {
        let r = login("victim@example.com").await.unwrap();
        assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(r.headers()["ratelimit-limit"], "30", "the IP limit refused");
    }
    // ...so the victim, from another address, is answered (401: the demo knows no
    // passwords), not locked out.
    let elsewhere = reqwest::Client::builder()
        .local_address(std::net::IpAddr::from([127, 0, 0, 2]))
        .build()
        .unwrap();
    let victim_elsewhere = || {
        elsewhere
            .post(server.url("/login"))
            .body("{\"email\":\"victim@example.com\",\"password\":\"x\"}")
            .send()
    };
    let r = victim_elsewhere().await.unwrap();
    assert_eq!(
        r.status(),
        StatusCode::UNAUTHORIZED,
        "the victim is not locked out"
    );
    // The exhausted IP insists: its 20th refusal within 15 minutes bans it for an hour,
    // answered by the ban (nothing counted) while the other address is still answered.
    for _ in 0..9 {
        let r = login("victim@example.com").await.unwrap();
        assert_eq!(r.headers()["ratelimit-limit"], "30", "the IP limit refused");
    }
    let r = login("fresh@example.com").await.unwrap();
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    let wait: u64 = retry_after(&r);
    assert!(wait > 3_590, "banned for an hour: {wait}");
    assert!(
        r.headers()["ratelimit-policy"]
            .to_str()
            .unwrap()
            .contains("login-ip-ban")
    );
    let r = victim_elsewhere().await.unwrap();
    assert_eq!(
        r.status(),
        StatusCode::UNAUTHORIZED,
        "another IP is not banned"
    );

    let things = |key: Option<&str>| {
        let mut b = http.get(server.url("/api/v1/things"));
        if let Some(k) = key {
            b = b.header("x-api-key", k);
        }
        b.send()
    };
    for _ in 0..60 {
        assert_eq!(
            things(Some("sk_one")).await.unwrap().status(),
            StatusCode::OK
        );
    }
    assert_eq!(
        things(Some("sk_one")).await.unwrap().status(),
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(
        things(Some("sk_two")).await.unwrap().status(),
        StatusCode::OK
    );
    let r = things(None).await.unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(r.headers()["www-authenticate"], "ApiKey");

    let hook = |source: &str, channel: &str| {
        http.post(server.url(&format!("/messenger/{source}/{channel}")))
            .send()
    };
    for _ in 0..120 {
        assert_eq!(
            hook("slack", "general").await.unwrap().status(),
            StatusCode::OK
        );
    }
    let r = hook("slack", "general").await.unwrap();
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(r.headers()["ratelimit-limit"], "120");
    assert_eq!(
        hook("slack", "random").await.unwrap().status(),
        StatusCode::OK
    );
}

#[tokio::test]
async fn the_table_on_the_memory_store() {
    table(AnyStore::Memory(MemoryStore::new())).await;
}

#[tokio::test]
async fn the_table_on_redis() {
    let server = RedisServer::start();
    table(server.store()).await;
}

#[tokio::test]
async fn protection_fails_closed_throttling_fails_open() {
    let down = down_store();
    let server = Server::start(app_with_store(down).unwrap()).await.unwrap();
    let http = client();
    let r = http
        .post(server.url("/login"))
        .body("{\"email\":\"a@b.c\"}")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    let r = http
        .post(server.url("/messenger/slack/general"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    let r = http
        .get(server.url("/api/v1/things"))
        .header("x-api-key", "k")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
}

#[tokio::test]
async fn the_harvester_backs_off_and_settles_under_the_remote_limit() {
    const T0: u64 = 1_799_971_200_000_000;
    let clock = FakeClock::at_micros(T0);
    // The remote site: 10 calls a second, then 429 with Retry-After.
    let remote = MemoryStore::builder().clock(clock.clone()).build().unwrap();
    let limit = Limit::sliding_log("remote", 10, Duration::from_secs(1)).unwrap();
    let site = Chain::new().check(&limit, Principal::global());
    let store = MemoryStore::builder().clock(clock.clone()).build().unwrap();
    let pacer = harvester(AnyStore::Memory(store)).unwrap();
    let sent = std::cell::RefCell::new(Vec::new());
    let made = harvest(
        &pacer,
        "example.org",
        1_200,
        |d| {
            clock.advance(d);
            std::future::ready(())
        },
        || {
            sent.borrow_mut()
                .push((clock.now_micros() - T0) / 1_000_000);
            let d = remote.check_now(&site);
            std::future::ready(match d.denied_by() {
                None => Remote::Ok,
                Some((_, why)) => Remote::Refused(why.retry_after()),
            })
        },
    )
    .await;
    assert_eq!(made, 1_200);
    let sent = sent.into_inner();
    let last_second = *sent.last().unwrap();
    let per_second = |s: u64| sent.iter().filter(|&&t| t == s).count() as f64;
    let last20: Vec<f64> = (last_second - 20..last_second).map(per_second).collect();
    let avg = last20.iter().sum::<f64>() / 20.0;
    assert!(
        (6.0..=10.0).contains(&avg),
        "average {avg} of 10: {last20:?}"
    );
    assert!(sent.iter().map(|&s| per_second(s)).fold(0.0, f64::max) <= 11.0);
}

/// The harvester over HTTP against a real local upstream that enforces 30 calls a second
/// and says so (our own layer with the IETF fields): once it has said so, two workers on
/// one store, 80 calls each, stay under it — at most 1% refused — and run at 80% of it or
/// more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_harvester_over_http_stays_under_a_local_upstreams_stated_limit() {
    use ratekeeper_examples::platform::harvest_http;
    use ratekeeper_tower::HeaderStyle;
    use ratekeeper_tower::extract::Global;
    use ratekeeper_tower::{Answering, RateLimitLayer, Rule};
    let limit = Limit::fixed_window("remote", 30, Duration::from_secs(1)).unwrap();
    let layer = RateLimitLayer::new(ratekeeper_core::Limiter::new(MemoryStore::new()))
        .answering(Answering::new().headers(HeaderStyle::Ietf))
        .rule(Rule::new(limit, Global));
    let remote = ratekeeper_tests::Server::start(axum::Router::new().route(
        "/items",
        axum::routing::get(|| async { "item" }).route_layer(layer),
    ))
    .await
    .unwrap();
    let store = AnyStore::Memory(MemoryStore::new());
    let url = remote.url("/items");
    // One call first: its answer states the limit. Before any answer the workers pace at
    // AIMD's blind start (1 a second), and a slot taken at that pace keeps its time (callers
    // are served in order), so two workers starting blind together lose a second.
    let first = harvest_http(harvester(store.clone()).unwrap(), &url, 1).await;
    assert_eq!(first.ok, 1);
    let t0 = std::time::Instant::now();
    let (a, b) = tokio::join!(
        harvest_http(harvester(store.clone()).unwrap(), &url, 80),
        harvest_http(harvester(store).unwrap(), &url, 80)
    );
    let took = t0.elapsed().as_secs_f64();
    let (ok, refused) = (a.ok + b.ok, a.refused + b.refused);
    let rate = ok as f64 / took;
    println!(
        "harvester over HTTP: {ok} answered, {refused} refused in {took:.1} s ({rate:.1}/s of 30)"
    );
    assert_eq!(a.failed + b.failed, 0);
    assert!(refused * 100 <= ok + refused, "{refused} refused");
    assert!(rate >= 24.0, "{rate}/s");
}
