//! The Tower layer end to end: an axum router on a real TCP listener, a real HTTP client.
//!
//! One router carries a global IP guard (`Router::layer`) and a per-route participant rule
//! (`MethodRouter::route_layer`), with tower-http's `CorsLayer` outside the limiter.

#![allow(clippy::too_many_lines, reason = "a test reads top to bottom")]

mod answers;
mod calendar;
mod client_ip;
mod costs;
mod forwarded;
mod refusals;
mod shared_keys;
mod trace;

use std::time::Duration;

use axum::Router;
use axum::routing::get;
use ratekeeper_core::{FailurePolicy, Limit, PrincipalKind};
use ratekeeper_tests::{Server, client, connect_info_peer, retry_after};
use ratekeeper_tower::extract::{ClientIp, HeaderKey};
use ratekeeper_tower::{Answering, EXPOSED_HEADERS, RateLimitLayer, Rule};
use reqwest::StatusCode;
use tower_http::cors::{Any, CorsLayer};

const PAGE: &str = "<!doctype html><title>Slow down</title><p>Too many requests.</p>";

fn app(global_quota: u64, poll_quota: u64) -> Router {
    let minute = Duration::from_secs(60);
    let answering = Answering::new()
        .redirect_browsers("/too-many-requests")
        .unwrap();
    let global = RateLimitLayer::in_memory()
        .rule(
            Rule::new(
                Limit::sliding_window("global-ip", global_quota, minute).unwrap(),
                ClientIp::new().peer_source(connect_info_peer),
            )
            .on_store_error(FailurePolicy::Memory),
        )
        .exempt("/healthz")
        .answering(answering.clone());
    let poll = RateLimitLayer::in_memory().answering(answering).rule(
        Rule::new(
            Limit::sliding_window("poll", poll_quota, minute).unwrap(),
            HeaderKey::new(
                "x-participant-id".parse().unwrap(),
                PrincipalKind::Participant,
            ),
        )
        .on_store_error(FailurePolicy::Open),
    );
    Router::new()
        .route(
            "/api/poll",
            get(|| async { "{\"question\":null}" }).route_layer(poll),
        )
        .route("/", get(|| async { axum::response::Html("<h1>Quiz</h1>") }))
        .route(
            "/too-many-requests",
            get(|| async { axum::response::Html(PAGE) }),
        )
        .route("/healthz", get(|| async { "ok" }))
        .layer(global)
        .layer(
            CorsLayer::new()
                .allow_origin(Any)
                .expose_headers(EXPOSED_HEADERS),
        )
}

#[tokio::test]
async fn participants_behind_one_ip_are_limited_apart_and_the_ip_guard_counts_everyone() {
    let server = Server::start(app(10, 3)).await.unwrap();
    let http = client();
    let poll = |who: &str| {
        http.get(server.url("/api/poll"))
            .header("x-participant-id", who)
            .send()
    };
    for _ in 0..3 {
        assert_eq!(poll("p1").await.unwrap().status(), StatusCode::OK);
    }
    let r = poll("p1").await.unwrap();
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    let secs: u64 = retry_after(&r);
    assert!((1..=120).contains(&secs), "{secs}");
    assert_eq!(r.headers()["ratelimit-limit"], "3");
    assert_eq!(r.headers()["ratelimit-remaining"], "0");
    // The same room, another player: fine.
    let r = poll("p2").await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    // The global guard counted every request that reached it (5 so far, the refused one
    // included), and the route's tighter limit is the one described.
    assert_eq!(r.headers()["ratelimit-limit"], "3");
    assert_eq!(r.headers()["ratelimit-remaining"], "2");
    let policy = r.headers()["ratelimit-policy"].to_str().unwrap();
    assert!(
        policy.contains("\"global-ip\";q=10;w=60") && policy.contains("\"poll\";q=3;w=60"),
        "{policy}"
    );
    let current = r.headers()["ratelimit"].to_str().unwrap();
    assert!(current.contains("\"global-ip\";r=5;"), "{current}");
    // Other players exhaust the IP guard: 10 requests per minute from this address.
    for i in 0..5 {
        let r = poll(&format!("q{i}")).await.unwrap();
        assert_eq!(r.status(), StatusCode::OK, "request {}", 6 + i);
    }
    let r = poll("fresh-player").await.unwrap();
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        r.headers()["ratelimit-limit"],
        "10",
        "the guard refused, and says so"
    );
    // Health checks are never limited.
    assert_eq!(
        http.get(server.url("/healthz"))
            .send()
            .await
            .unwrap()
            .status(),
        StatusCode::OK
    );
}

#[tokio::test]
async fn a_limited_browser_lands_on_the_page_without_a_loop() {
    let server = Server::start(app(2, 100)).await.unwrap();
    let browser = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::limited(5))
        .build()
        .unwrap();
    let page = || {
        browser
            .get(server.url("/"))
            .header("accept", "text/html")
            .send()
    };
    for _ in 0..2 {
        assert_eq!(page().await.unwrap().status(), StatusCode::OK);
    }
    let r = page().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.url().path(), "/too-many-requests");
    assert_eq!(r.text().await.unwrap(), PAGE);
    // The redirect itself says when to come back.
    let r = client()
        .get(server.url("/"))
        .header("accept", "text/html")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(r.headers()["location"], "/too-many-requests");
    assert!(r.headers().contains_key("retry-after"));
}

/// The trial's finding: a browser refused by the route's limit got a 303 carrying the
/// outer guard's `RateLimit-*` fields. Whichever layer refuses, its limit is described; an
/// admitted request, through axum's router, describes the tighter.
#[tokio::test]
async fn nested_layers_describe_the_limit_that_refused() {
    let server = Server::start(app(1_000, 2)).await.unwrap();
    let http = client();
    let poll = |accept: &'static str| {
        http.get(server.url("/api/poll"))
            .header("x-participant-id", "p1")
            .header("accept", accept)
            .send()
    };
    for left in ["1", "0"] {
        // Admitted: the outer guard merges the route's record, whose limit is tighter.
        let r = poll("*/*").await.unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(r.headers()["ratelimit-limit"], "2", "the route's limit");
        assert_eq!(r.headers()["ratelimit-remaining"], left);
        let policy = r.headers()["ratelimit-policy"].to_str().unwrap();
        assert_eq!(policy, "\"global-ip\";q=1000;w=60, \"poll\";q=2;w=60");
    }
    for (accept, status) in [
        ("application/json", StatusCode::TOO_MANY_REQUESTS),
        ("text/html", StatusCode::SEE_OTHER),
    ] {
        let r = poll(accept).await.unwrap();
        assert_eq!(r.status(), status);
        let h = r.headers();
        assert_eq!(h["ratelimit-limit"], "2", "{accept}: the route's limit");
        assert_eq!(h["ratelimit-remaining"], "0", "{accept}");
        let retry: u64 = h["retry-after"].to_str().unwrap().parse().unwrap();
        assert!(retry >= 1, "{accept}: {retry}");
        // The IETF field lists both limits; the guard's is there with its own count.
        let current = h["ratelimit"].to_str().unwrap();
        assert!(current.contains("\"poll\";r=0;"), "{current}");
        assert!(current.contains("\"global-ip\";r="), "{current}");
    }
    // Refused by the outer guard: its limit is described.
    let server = Server::start(app(3, 100)).await.unwrap();
    for _ in 0..3 {
        let r = http
            .get(server.url("/api/poll"))
            .header("x-participant-id", "p1")
            .send()
            .await;
        assert_eq!(r.unwrap().status(), StatusCode::OK);
    }
    for accept in ["application/json", "text/html"] {
        let r = http
            .get(server.url("/api/poll"))
            .header("x-participant-id", "p1")
            .header("accept", accept)
            .send()
            .await
            .unwrap();
        assert_eq!(
            r.headers()["ratelimit-limit"],
            "3",
            "{accept}: the guard's limit"
        );
        assert_eq!(r.headers()["ratelimit-remaining"], "0", "{accept}");
    }
}

#[tokio::test]
async fn cors_outside_the_limiter_exposes_the_headers() {
    let server = Server::start(app(1, 100)).await.unwrap();
    let http = client();
    for expected in [StatusCode::OK, StatusCode::TOO_MANY_REQUESTS] {
        let r = http
            .get(server.url("/"))
            .header("origin", "https://quiz.example")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), expected);
        assert_eq!(r.headers()["access-control-allow-origin"], "*");
        let exposed = r.headers()["access-control-expose-headers"]
            .to_str()
            .unwrap()
            .to_ascii_lowercase();
        for h in EXPOSED_HEADERS {
            assert!(exposed.contains(h.as_str()), "{h} in {exposed}");
        }
    }
}

#[tokio::test]
async fn bad_input_over_the_wire_is_a_4xx_never_a_5xx() {
    let server = Server::start(app(1_000, 100)).await.unwrap();
    let http = client();
    let poll = || http.get(server.url("/api/poll"));
    let cases: Vec<(reqwest::RequestBuilder, StatusCode)> = vec![
        (poll(), StatusCode::BAD_REQUEST),
        (
            poll().header("x-participant-id", ""),
            StatusCode::BAD_REQUEST,
        ),
        (
            poll().header("x-participant-id", "a".repeat(300 * 1024)),
            StatusCode::BAD_REQUEST,
        ),
        (
            poll().header(
                "x-participant-id",
                reqwest::header::HeaderValue::from_bytes(&[0xff, 0xfe]).unwrap(),
            ),
            StatusCode::BAD_REQUEST,
        ),
        (
            poll()
                .header("x-participant-id", "ok")
                .header("x-forwarded-for", "garbage, , ::::"),
            StatusCode::OK,
        ),
    ];
    for (i, (req, want)) in cases.into_iter().enumerate() {
        let r = req.send().await.unwrap();
        assert_eq!(r.status(), want, "case {i}");
        if want == StatusCode::BAD_REQUEST {
            let body = r.text().await.unwrap();
            assert!(
                body.starts_with("{\"error\":") && body.len() < 200,
                "case {i}: {body}"
            );
        }
    }
}

/// The deny cache over HTTP: `bench-server`'s app on a real `redis-server`, flooded by one
/// refused key. Sequentially, the flood costs Redis one command; with requests in flight
/// at once, at most one more per request already sent when the first refusal came back.
#[tokio::test]
async fn a_flood_from_one_refused_key_costs_redis_one_command() {
    use ratekeeper_examples::bench_server::{BenchConfig, app};
    use ratekeeper_tests::redis::RedisServer;

    let redis = RedisServer::start();
    let cfg = BenchConfig {
        algorithm: "token-bucket".to_owned(),
        limit: 2,
        window_ms: 3_600_000,
        lease: 0,
        store: ratekeeper_examples::StoreEnv::Redis(redis.url()),
        ..BenchConfig::default()
    };
    let server = Server::start(app(&cfg).unwrap()).await.unwrap();
    let http = client();
    let get = |key: &'static str| {
        let req = http.get(server.url("/")).header("x-key", key);
        async move { req.send().await.unwrap() }
    };
    for _ in 0..2 {
        assert_eq!(get("mallory").await.status(), StatusCode::OK);
    }
    redis.cli(&["CONFIG", "RESETSTAT"]);
    for _ in 0..2_000 {
        let r = get("mallory").await;
        assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
        let retry: u64 = retry_after(&r);
        // Two tokens an hour: one every 1 800 s, counted down.
        assert!((1_790..=1_800).contains(&retry), "{retry}");
        assert_eq!(r.headers()["ratelimit-remaining"], "0");
    }
    assert_eq!(redis.command_calls("evalsha"), 1);

    // Eight at a time, from a fresh key.
    for _ in 0..2 {
        assert_eq!(get("trudy").await.status(), StatusCode::OK);
    }
    redis.cli(&["CONFIG", "RESETSTAT"]);
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..8 {
        let req = http.get(server.url("/")).header("x-key", "trudy");
        tasks.spawn(async move {
            for _ in 0..250 {
                let r = req.try_clone().unwrap().send().await.unwrap();
                assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
    let calls = redis.command_calls("evalsha");
    assert!(
        (1..=8).contains(&calls),
        "{calls} commands for 2 000 refusals"
    );
}

/// Jitter: 200 clients refused together are told to come back spread over 30 s more than
/// the true wait, never less; one client is told the same each time within the window.
/// Allow and deny lists on a real `redis-server`: a denied client is answered 403 before
/// any store call; an allowed one (as resolved through the trusted proxy) skips the
/// limits; a replacement reaches every clone of the layer at its next request.
#[tokio::test]
async fn allow_and_deny_lists_act_before_the_store_and_can_be_replaced_at_run_time() {
    use ratekeeper_tests::redis::RedisServer;
    use ratekeeper_tower::access::{Access, List};

    let redis = RedisServer::start();
    let ip = ClientIp::new()
        .peer_source(connect_info_peer)
        .trusted_proxies(["127.0.0.0/8".parse().unwrap()]);
    let access = Access::new(ip.clone())
        .allow(List::parse(&["10.0.0.0/8", "2001:db8::/32"]).unwrap())
        .deny(List::parse(&["203.0.113.0/24"]).unwrap());
    let layer = RateLimitLayer::new(ratekeeper_core::Limiter::new(redis.store()))
        .rule(Rule::new(
            Limit::fixed_window("per-ip", 1, Duration::from_secs(3_600)).unwrap(),
            ip,
        ))
        .access(access.clone());
    // Two routes, two clones of the layer.
    let app = Router::new()
        .route("/a", get(|| async { "a" }).route_layer(layer.clone()))
        .route("/b", get(|| async { "b" }).route_layer(layer));
    let server = Server::start(app).await.unwrap();
    let http = client();
    let get_as = |path: &str, client_ip: &str| {
        http.get(server.url(path))
            .header("x-forwarded-for", client_ip)
            .send()
    };
    // Warm the script cache, then count from zero.
    assert_eq!(
        get_as("/a", "198.51.100.1").await.unwrap().status(),
        StatusCode::OK
    );
    redis.cli(&["CONFIG", "RESETSTAT"]);
    let scripts = || redis.command_calls("evalsha") + redis.command_calls("eval");

    let r = get_as("/a", "203.0.113.9").await.unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    assert_eq!(
        r.text().await.unwrap(),
        "{\"error\":\"Forbidden.\",\"code\":\"access.denied\"}"
    );
    for _ in 0..5 {
        let r = get_as("/b", "10.1.2.3").await.unwrap();
        assert_eq!(r.status(), StatusCode::OK, "allowed: no limit applies");
        assert!(r.headers().get("ratelimit-limit").is_none());
        let r = get_as("/a", "2001:db8::7").await.unwrap();
        assert_eq!(r.status(), StatusCode::OK);
    }
    assert_eq!(scripts(), 0, "lists answer before any store call");
    // (path, client IP, status), in order.
    let expect = |cases: &'static [(&'static str, &'static str, StatusCode)]| {
        let get_as = &get_as;
        async move {
            for &(path, ip, want) in cases {
                let got = get_as(path, ip).await.unwrap().status();
                assert_eq!(got, want, "{path} from {ip}");
            }
        }
    };
    // On neither list: the limit applies (one per hour).
    expect(&[
        ("/a", "198.51.100.2", StatusCode::OK),
        ("/b", "198.51.100.2", StatusCode::TOO_MANY_REQUESTS),
    ])
    .await;
    // Replaced at run time: 10/8 is now denied, 203.0.113/24 allowed, on both clones.
    access.replace(
        List::parse(&["203.0.113.0/24"]).unwrap(),
        List::parse(&["10.0.0.0/8"]).unwrap(),
    );
    expect(&[
        ("/a", "10.1.2.3", StatusCode::FORBIDDEN),
        ("/b", "10.1.2.3", StatusCode::FORBIDDEN),
        ("/b", "203.0.113.9", StatusCode::OK),
    ])
    .await;
    // A client that is not behind the trusted proxy cannot name an allowed address.
    let direct = reqwest::Client::builder()
        .local_address(std::net::IpAddr::from([127, 0, 0, 2]))
        .build()
        .unwrap();
    let untrusted = Server::start(
        Router::new().route(
            "/",
            get(|| async { "ok" }).route_layer(
                RateLimitLayer::in_memory()
                    .rule(Rule::new(
                        Limit::fixed_window("u", 1, Duration::from_secs(3_600)).unwrap(),
                        ClientIp::new().peer_source(connect_info_peer),
                    ))
                    .access(
                        Access::new(ClientIp::new().peer_source(connect_info_peer))
                            .allow(List::parse(&["203.0.113.0/24"]).unwrap()),
                    ),
            ),
        ),
    )
    .await
    .unwrap();
    let spoof = || {
        direct
            .get(untrusted.url("/"))
            .header("x-forwarded-for", "203.0.113.9")
            .send()
    };
    assert_eq!(spoof().await.unwrap().status(), StatusCode::OK);
    assert_eq!(
        spoof().await.unwrap().status(),
        StatusCode::TOO_MANY_REQUESTS,
        "no trusted proxy: the header is not believed"
    );
}
