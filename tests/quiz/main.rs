//! quiz-night end to end: its whole table over TCP, on the memory store and on a
//! `redis-server` the test starts; and with the store down.

#![allow(clippy::too_many_lines, reason = "a test reads top to bottom")]

use std::time::{Duration, Instant};

use ratekeeper_core::{AnyStore, MemoryStore};
use ratekeeper_examples::quiz_night::{QuizConfig, app_with_store};
use ratekeeper_tests::redis::{RedisServer, down_store};
use ratekeeper_tests::{Server, client, retry_after};
use reqwest::StatusCode;

mod abuse;
mod admin;
mod client;
mod flood;
mod holds;
mod proxy;
mod room;
mod socket;

/// The first sign-in hold in these tests (1 s in the demo).
const SIGN_IN_DELAY: Duration = Duration::from_millis(10);

/// The hold a response reports (`Server-Timing`), in ms; 0 if it was not held.
fn held_ms(r: &reqwest::Response) -> u64 {
    r.headers().get("server-timing").map_or(0, |v| {
        let v = v.to_str().unwrap();
        v.strip_prefix("rate-limit-hold;dur=")
            .unwrap()
            .parse()
            .unwrap()
    })
}

pub(crate) async fn start(store: AnyStore, trusted: &str) -> Server {
    let cfg = QuizConfig {
        store: ratekeeper_examples::StoreEnv::Memory,
        trusted_proxies: trusted
            .split(',')
            .filter(|s| !s.is_empty())
            .map(|s| s.parse().unwrap())
            .collect(),
        // Real time (Redis counts with its clock): 10, 20, 40, then 80 ms.
        sign_in_delay: Some(SIGN_IN_DELAY),
        ..QuizConfig::default()
    };
    Server::start(app_with_store(&cfg, store).unwrap())
        .await
        .unwrap()
}

async fn table(store: AnyStore) {
    let s = start(store, "").await;
    let http = client();
    let url = |p: &str| s.url(p);

    // Poll: 20 per participant, then 429 JSON with headers; another player is fine.
    let poll = |who: &str| {
        http.get(url("/api/games/g1/poll"))
            .header("x-participant-id", who)
            .send()
    };
    for _ in 0..20 {
        let r = poll("p1").await.unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        assert!(
            r.headers().contains_key("ratelimit-limit")
                && r.headers().contains_key("ratelimit-policy")
        );
    }
    let r = poll("p1").await.unwrap();
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(retry_after(&r) >= 1);
    assert_eq!(r.headers()["ratelimit-remaining"], "0");
    assert!(r.text().await.unwrap().starts_with("{\"error\":"));
    assert_eq!(poll("p2").await.unwrap().status(), StatusCode::OK);
    // A browser is sent to the friendly page, which loads.
    let r = http
        .get(url("/api/games/g1/poll"))
        .header("x-participant-id", "p1")
        .header("accept", "text/html")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    // The page is told the wait, and says it.
    let wait = retry_after(&r);
    assert!(wait >= 1);
    let location = r.headers()["location"].to_str().unwrap().to_owned();
    assert_eq!(location, format!("/too-many-requests?wait={wait}"));
    let page = http.get(url(&location)).send().await.unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    let page = page.text().await.unwrap();
    assert!(page.contains("Slow down"), "{page}");
    let says = if wait == 1 {
        "1 second".to_owned()
    } else {
        format!("{wait} seconds")
    };
    assert!(page.contains(&format!("Wait {says},")), "{page}");
    // A wait typed into the URL by anyone is only ever a number.
    let forged = http
        .get(url("/too-many-requests?wait=<script>"))
        .send()
        .await
        .unwrap();
    assert!(forged.text().await.unwrap().contains("Wait a few seconds,"));
    // A wait of days (a calendar quota's, to its period's end) says the date it ends.
    let days = 14 * 86_400;
    let page = http
        .get(url(&format!("/too-many-requests?wait={days}")))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let then = |skew: i64| {
        let at = ratekeeper_core::calendar::Timestamp::now().as_second() + days + skew;
        let at = ratekeeper_core::calendar::Timestamp::from_second(at).unwrap();
        format!("Wait until {} UTC,", at.strftime("%Y-%m-%d %H:%M"))
    };
    assert!(
        page.contains(&then(0)) || page.contains(&then(-60)),
        "{page}"
    );

    // Bad participant ids are 400, never 5xx.
    for bad in [
        None,
        Some(""),
        Some(&"x".repeat(129)[..]),
        Some("two words"),
    ] {
        let mut b = http.get(url("/api/games/g1/poll"));
        if let Some(v) = bad {
            b = b.header("x-participant-id", v);
        }
        assert_eq!(
            b.send().await.unwrap().status(),
            StatusCode::BAD_REQUEST,
            "{bad:?}"
        );
    }

    // Answers: 30 per participant.
    let answer = |who: &str| {
        http.post(url("/api/games/g1/answers"))
            .header("x-participant-id", who)
            .send()
    };
    for _ in 0..30 {
        assert_eq!(answer("a1").await.unwrap().status(), StatusCode::OK);
    }
    assert_eq!(
        answer("a1").await.unwrap().status(),
        StatusCode::TOO_MANY_REQUESTS
    );

    // Host controls: a bucket of 10 per user; no bearer is a 401 with a challenge.
    let next = || {
        http.post(url("/host/games/g1/next"))
            .header("authorization", "Bearer host-1")
            .send()
    };
    for _ in 0..10 {
        assert_eq!(next().await.unwrap().status(), StatusCode::OK);
    }
    assert_eq!(
        next().await.unwrap().status(),
        StatusCode::TOO_MANY_REQUESTS
    );
    let r = http.post(url("/host/games/g1/next")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(r.headers()["www-authenticate"], "Bearer");

    // Sign-in: every attempt counts per IP (20); per account only failures, 5 at once and
    // then held (10, 20, 40, then 80 ms here; 1 s to 8 s in the demo), never refused.
    let sign = |email: &str, pw: &str| {
        http.post(url("/auth/sign-in"))
            .header("content-type", "application/json")
            .body(format!("{{\"email\":\"{email}\",\"password\":\"{pw}\"}}"))
            .send()
    };
    let r = sign("Demo@Example.com", "quiz").await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert!(r.headers().contains_key("ratelimit-policy"));
    let r = sign("demo@example.com", "wrong").await.unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(
        r.text().await.unwrap(),
        "{\"error\":\"invalid credentials\"}"
    );
    for _ in 0..4 {
        let r = sign("demo@example.com", "wrong").await.unwrap();
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(held_ms(&r), 0, "five failures are answered at once");
    }
    let r = sign("demo@example.com", "wrong").await.unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED, "the 6th failure");
    assert_eq!(held_ms(&r), 10);
    // The right password after six failures: held like any attempt (the 7th in flight),
    // then admitted; it does not count as a failure.
    let r = sign("demo@example.com", "quiz").await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(held_ms(&r), 20);
    let r = sign("demo@example.com", "wrong").await.unwrap();
    assert_eq!(
        held_ms(&r),
        20,
        "the 7th failure, as the right password was given back"
    );
    let r = http
        .post(url("/auth/sign-in"))
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    // 20 attempts per IP across accounts (9 used above, the bad JSON did not count).
    for i in 0..11 {
        assert_ne!(
            sign(&format!("u{i}@example.com"), "x")
                .await
                .unwrap()
                .status(),
            StatusCode::TOO_MANY_REQUESTS,
            "{i}"
        );
    }
    assert_eq!(
        sign("fresh@example.com", "x").await.unwrap().status(),
        StatusCode::TOO_MANY_REQUESTS
    );
    // A browser refused inside the handler is sent to the page too.
    let r = http
        .post(url("/auth/sign-in"))
        .header("accept", "text/html")
        .body("{\"email\":\"demo@example.com\",\"password\":\"quiz\"}")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let location = r.headers()["location"].to_str().unwrap();
    assert_eq!(
        location,
        format!("/too-many-requests?wait={}", retry_after(&r))
    );

    // Ask: canned answers; 15 per visitor and game a day.
    let ask = |game: Option<&str>, body: &str| {
        let mut b = http
            .post(url("/api/ask"))
            .header("content-type", "application/json")
            .body(body.to_owned());
        if let Some(g) = game {
            b = b.header("x-game-id", g);
        }
        b.send()
    };
    let q = "{\"question\":\"Who wrote Dracula?\"}";
    let r = ask(Some("g1"), q).await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert!(r.text().await.unwrap().starts_with("{\"answer\":"));
    assert_eq!(
        ask(None, q).await.unwrap().status(),
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        ask(Some("g1"), "{\"q\":").await.unwrap().status(),
        StatusCode::BAD_REQUEST
    );
    for _ in 0..13 {
        assert_eq!(ask(Some("g1"), q).await.unwrap().status(), StatusCode::OK);
    }
    // 15 counted (the bad-JSON request passed the limiter too); the 16th is refused.
    let r = ask(Some("g1"), q).await.unwrap();
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(r.headers()["ratelimit-limit"], "15");
    assert_eq!(
        ask(Some("g2"), q).await.unwrap().status(),
        StatusCode::OK,
        "another game"
    );

    // Webhooks: once per delivery id; a failed delivery is released and retried.
    let hook = |id: Option<&str>, body: &str| {
        let mut b = http.post(url("/webhooks/payments")).body(body.to_owned());
        if let Some(i) = id {
            b = b.header("x-delivery-id", i);
        }
        b.send()
    };
    assert_eq!(
        hook(Some("d1"), "{}").await.unwrap().text().await.unwrap(),
        "{\"processed\":true}"
    );
    assert_eq!(
        hook(Some("d1"), "{}").await.unwrap().text().await.unwrap(),
        "{\"duplicate\":true}"
    );
    assert_eq!(
        hook(None, "{}").await.unwrap().status(),
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        hook(Some("d2"), "garbled").await.unwrap().status(),
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        hook(Some("d2"), "{}").await.unwrap().text().await.unwrap(),
        "{\"processed\":true}"
    );

    // Origin: the headers are exposed to browsers.
    let r = http
        .get(url("/"))
        .header("origin", "https://quiz.example")
        .send()
        .await
        .unwrap();
    let exposed = r.headers()["access-control-expose-headers"]
        .to_str()
        .unwrap()
        .to_owned();
    for h in [
        "retry-after",
        "ratelimit-limit",
        "ratelimit-remaining",
        "ratelimit-reset",
        "ratelimit-policy",
        "ratelimit",
    ] {
        assert!(exposed.split(", ").any(|e| e == h), "{h} in {exposed}");
    }

    // Robots, health.
    let robots = http
        .get(url("/robots.txt"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for p in ["/too-many-requests", "/api", "/auth", "/host", "/webhooks"] {
        assert!(robots.contains(&format!("Disallow: {p}\n")), "{p}");
    }
    assert_eq!(
        http.get(url("/healthz")).send().await.unwrap().status(),
        StatusCode::OK
    );
}

#[tokio::test]
async fn the_whole_table_on_the_memory_store() {
    table(AnyStore::Memory(MemoryStore::new())).await;
}

#[tokio::test]
async fn the_whole_table_on_redis() {
    let server = RedisServer::start();
    table(server.store()).await;
}

#[tokio::test]
async fn the_whole_table_on_a_cluster_named_by_redis_cluster() {
    let cluster = ratekeeper_tests::redis::RedisCluster::start();
    let nodes: Vec<String> = cluster
        .nodes()
        .iter()
        .map(|n| format!("127.0.0.1:{}", n.port()))
        .collect();
    let env = ratekeeper_examples::StoreEnv::from_lookup(|k| {
        (k == "REDIS_CLUSTER").then(|| nodes.join(","))
    })
    .unwrap();
    table(env.build().unwrap()).await;
}

#[tokio::test]
async fn the_global_guard_counts_a_whole_room_and_never_the_page_or_health() {
    let s = start(AnyStore::Memory(MemoryStore::new()), "127.0.0.0/8").await;
    let http = client();
    // Behind a trusted proxy, the rightmost X-Forwarded-For hop that is not a proxy.
    let venue = |ip: &str| format!("6.6.6.6, {ip}");
    for i in 0..1_200 {
        let r = http
            .get(s.url("/"))
            // A spoofed leftmost hop and X-Real-IP change nothing.
            .header(
                "x-forwarded-for",
                format!("9.9.9.{}, 203.0.113.50", i % 250),
            )
            .header("x-real-ip", format!("198.51.100.{}", i % 250))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK);
    }
    let r = http
        .get(s.url("/"))
        .header("x-forwarded-for", venue("203.0.113.50"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    for path in ["/too-many-requests", "/healthz"] {
        let r = http
            .get(s.url(path))
            .header("x-forwarded-for", venue("203.0.113.50"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{path}");
    }
    let r = http
        .get(s.url("/"))
        .header("x-forwarded-for", venue("203.0.113.51"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK, "another venue");
}

#[tokio::test]
async fn with_redis_down_fail_closed_routes_answer_503_within_a_second() {
    let s = start(down_store(), "").await;
    let http = client();
    let t0 = Instant::now();
    let r = http
        .post(s.url("/api/ask"))
        .header("x-game-id", "g1")
        .body("{\"question\":\"?\"}")
        .send()
        .await
        .unwrap();
    assert!(t0.elapsed() < Duration::from_secs(1), "{:?}", t0.elapsed());
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(retry_after(&r) >= 1);
    assert!(r.text().await.unwrap().starts_with("{\"error\":"));
    let r = http
        .post(s.url("/auth/sign-in"))
        .body("{\"email\":\"a@b.c\",\"password\":\"x\"}")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    // Fail-open routes keep the quiz running; the global guard counts in memory.
    let r = http
        .get(s.url("/api/games/g1/poll"))
        .header("x-participant-id", "p")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(
        http.get(s.url("/healthz")).send().await.unwrap().status(),
        StatusCode::OK
    );
}
