//! quiz-night against abuse: a client naming its own IP, refused attempts aimed at a
//! victim's account, wrong methods spending a route's budget, and an outage logged once.

use ratekeeper_core::testing::LogCapture;
use ratekeeper_core::{AnyStore, MemoryStore};
use ratekeeper_tests::client;
use ratekeeper_tests::redis::down_store;
use reqwest::StatusCode;

use crate::start;

/// The trial's finding: behind a proxy that passes a client's own `X-Real-IP` through,
/// rotating it escaped the sign-in IP limit (21 of 21 allowed). One source now: the
/// 21st attempt from one address is refused whatever `X-Real-IP` says.
#[tokio::test]
async fn rotating_x_real_ip_does_not_escape_the_ip_limit() {
    let s = start(AnyStore::Memory(MemoryStore::new()), "127.0.0.0/8").await;
    let http = client();
    let mut allowed = 0;
    for i in 0..21 {
        let r = http
            .post(s.url("/auth/sign-in"))
            .header("x-forwarded-for", "203.0.113.77")
            .header("x-real-ip", format!("198.51.100.{i}"))
            .body(format!(
                "{{\"email\":\"user{i}@example.com\",\"password\":\"x\"}}"
            ))
            .send()
            .await
            .unwrap();
        if r.status() != StatusCode::TOO_MANY_REQUESTS {
            allowed += 1;
        }
    }
    assert_eq!(allowed, 20, "the IP limit is 20 per 15 minutes");
}

/// No lockout by refused attempts: once an attacker's IP is exhausted, its further attempts
/// on a victim's account are refused by the IP limit and charge the account nothing, so
/// the victim, from another IP, signs in with the right password.
#[tokio::test]
async fn refused_attempts_cannot_lock_a_victim_out() {
    let s = start(AnyStore::Memory(MemoryStore::new()), "127.0.0.0/8").await;
    let http = client();
    let sign_in = |ip: &'static str, email: String, password: &'static str| {
        http.post(s.url("/auth/sign-in"))
            .header("x-forwarded-for", ip)
            .body(format!(
                "{{\"email\":\"{email}\",\"password\":\"{password}\"}}"
            ))
            .send()
    };
    for i in 0..20 {
        let r = sign_in("198.51.100.66", format!("someone{i}@example.com"), "guess").await;
        assert_eq!(r.unwrap().status(), StatusCode::UNAUTHORIZED);
    }
    for _ in 0..10 {
        let r = sign_in("198.51.100.66", "demo@example.com".into(), "guess").await;
        assert_eq!(r.unwrap().status(), StatusCode::TOO_MANY_REQUESTS);
    }
    let r = sign_in("203.0.113.5", "demo@example.com".into(), "quiz")
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK, "the victim is not locked out");
}

/// Requests a route would never serve (405 wrong method, 404 unknown path) spend none of
/// its budget: every limit is a `route_layer`.
#[tokio::test]
async fn wrong_methods_and_unknown_paths_leave_the_budget_untouched() {
    let s = start(AnyStore::Memory(MemoryStore::new()), "").await;
    let http = client();
    for _ in 0..20 {
        let r = http
            .post(s.url("/api/games/g1/poll"))
            .header("x-participant-id", "p1")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
        let r = http
            .get(s.url("/api/games/g1/poll/nope"))
            .header("x-participant-id", "p1")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::NOT_FOUND);
    }
    let r = http
        .get(s.url("/api/games/g1/poll"))
        .header("x-participant-id", "p1")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.headers()["ratelimit-remaining"], "19");
}

/// Every layer and handler of the quiz shares one limiter: an outage is logged once, not
/// once per layer.
#[tokio::test]
async fn an_outage_is_logged_once_for_all_the_layers() {
    let logs = LogCapture::global();
    let store = down_store();
    // Named by its own free port: other tests' outages do not count here.
    let name = format!("store={} ", store.describe());
    let s = start(store, "").await;
    let http = client();
    for (method, path) in [
        ("GET", "/api/games/g1/poll"),
        ("POST", "/api/games/g1/answers"),
        ("POST", "/api/ask"),
        ("POST", "/webhooks/payments"),
        ("POST", "/auth/sign-in"),
        ("GET", "/"),
    ] {
        let _ = http
            .request(method.parse().unwrap(), s.url(path))
            .header("x-participant-id", "p1")
            .header("x-game-id", "g1")
            .header("x-delivery-id", "d1")
            .body("{\"email\":\"a@b.c\",\"password\":\"x\"}")
            .send()
            .await
            .unwrap();
    }
    assert_eq!(
        logs.count("rate_limit.fallback", &name),
        1,
        "{:?}",
        logs.lines()
    );
}

/// The most guesses one account gets in 15 minutes from one instance, whatever the number
/// of IPs (virtual time, the demo's delays): five at once, then held 1 s, 2 s, 4 s and 8 s
/// each, one at a time: 5 + 3 + 111 = 119. Five attackers keep the queue full, each
/// attempt from a new IP (a botnet: the per-IP limit never bites).
#[tokio::test(start_paused = true)]
async fn an_account_gets_at_most_119_guesses_in_15_minutes() {
    use std::net::SocketAddr;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::Duration;

    use axum::extract::ConnectInfo;
    use ratekeeper_examples::quiz_night::{QuizConfig, app_with_store};
    use tower::ServiceExt;

    let store = MemoryStore::builder()
        .clock(ratekeeper_core::clock::TokioClock::new())
        .build()
        .unwrap();
    let cfg = QuizConfig {
        store: ratekeeper_examples::StoreEnv::Memory,
        trusted_proxies: vec!["127.0.0.0/8".parse().unwrap()],
        sign_in_delay: None,
        ..QuizConfig::default()
    };
    let app = app_with_store(&cfg, AnyStore::Memory(store)).unwrap();
    let start = tokio::time::Instant::now();
    let quarter = Duration::from_secs(15 * 60);
    let next_ip = Arc::new(AtomicU32::new(0));
    let mut attackers = Vec::new();
    for _ in 0..5 {
        let (app, next_ip) = (app.clone(), next_ip.clone());
        attackers.push(tokio::spawn(async move {
            let (mut guesses, mut refused) = (0, 0);
            while start.elapsed() < quarter {
                let n = next_ip.fetch_add(1, Ordering::Relaxed);
                let ip = std::net::Ipv4Addr::from(0x0a00_0000 + n);
                let mut req = axum::http::Request::post("/auth/sign-in")
                    .header("x-forwarded-for", ip.to_string())
                    .body(axum::body::Body::from(
                        "{\"email\":\"demo@example.com\",\"password\":\"guess\"}",
                    ))
                    .unwrap();
                req.extensions_mut()
                    .insert(ConnectInfo(SocketAddr::from(([127, 0, 0, 1], 40_000))));
                let status = app.clone().oneshot(req).await.unwrap().status();
                if start.elapsed() >= quarter {
                    break;
                }
                match status {
                    StatusCode::UNAUTHORIZED => guesses += 1,
                    _ => refused += 1,
                }
            }
            (guesses, refused)
        }));
    }
    let (mut guesses, mut refused) = (0, 0);
    for a in attackers {
        let (g, r) = a.await.unwrap();
        guesses += g;
        refused += r;
    }
    assert_eq!((guesses, refused), (119, 0));
}
