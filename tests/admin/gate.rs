//! The admin's gate, over TCP: failed authentications limited per client IP (never the
//! operator's own address), bodies refused from the head or past their size, sign-out
//! closing the session without its CSRF token, the page's forms over HTTP/2 and
//! HTTP/1.1, and tokens too weak to start with.

use std::net::IpAddr;
use std::time::Duration;

use ratekeeper_admin::{Admin, FAILURES_PER_MINUTE, LOCKOUT, Role};
use ratekeeper_core::testing::LogCapture;
use ratekeeper_core::{AnyStore, Limit, MemoryStore};
use ratekeeper_tests::{Server, client, retry_after};
use ratekeeper_tower::RateLimitLayer;
use reqwest::StatusCode;

use crate::api::{OPS, app, form};
use crate::page::csrf_field;

/// A client whose connections come from `ip` (a loopback address: 127.0.0.0/8 is all
/// this machine's).
fn client_from(ip: &str) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(ip.parse::<IpAddr>().unwrap())
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// The binary's one Prometheus recorder, and the value of an unlabelled counter in it
/// (other tests of the binary may add to it too: compare with at least).
fn counter(name: &str) -> f64 {
    static HANDLE: std::sync::OnceLock<metrics_exporter_prometheus::PrometheusHandle> =
        std::sync::OnceLock::new();
    let handle = HANDLE.get_or_init(|| {
        let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        metrics::set_global_recorder(recorder).expect("the binary's first recorder");
        handle
    });
    handle
        .render()
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(0.0)
}

async fn limits(c: &reqwest::Client, s: &Server, token: &str) -> reqwest::Response {
    c.get(s.url("/admin/api/limits"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
}

/// An attacker's address guesses tokens: each wrong one is 401 until the minute's
/// allowance is spent, then every request from that address is 429 (the right token too,
/// and the sign-in form), with no token compared; the operator, from another address, is
/// never refused. The lockout is logged once, with the address and never the token.
#[tokio::test]
async fn failed_tokens_lock_out_the_address_and_never_the_operator() {
    let logs = LogCapture::global();
    let failures = counter("rate_limit_admin_auth_failures_total");
    let lockouts = counter("rate_limit_admin_lockouts_total");
    let (app, _) = app(AnyStore::Memory(MemoryStore::new()));
    let s = Server::start(app).await.unwrap();
    let (attacker, operator) = (client_from("127.0.0.2"), client_from("127.0.0.3"));
    let guess = "guess-0123456789abcdef-0123456789abcdef";
    let mut seen = Vec::new();
    for _ in 0..=FAILURES_PER_MINUTE {
        seen.push(limits(&attacker, &s, guess).await.status().as_u16());
        assert_eq!(limits(&operator, &s, OPS).await.status(), 200);
    }
    assert!(seen.iter().all(|&st| st == 401), "{seen:?}");
    // Locked out: a wrong token is refused, uncounted, without a compare mattering.
    let locked = limits(&attacker, &s, guess).await;
    assert_eq!(
        locked.status(),
        429,
        "a wrong token from a locked-out address"
    );
    let wait = retry_after(&locked);
    assert!(
        wait > LOCKOUT.as_secs() - 5 && wait <= LOCKOUT.as_secs(),
        "{wait}"
    );
    let body: serde_json::Value = serde_json::from_str(&locked.text().await.unwrap()).unwrap();
    assert_eq!(body["code"], "admin.locked_out");
    // The right token passes from that address (the host on the pub's Wi-Fi, which a
    // player locked out): only failures are refused.
    assert_eq!(
        limits(&attacker, &s, OPS).await.status(),
        200,
        "the right token from a locked-out address"
    );
    let origin = format!("http://{}", s.addr());
    let sign_in = |token: &str| send_token(&attacker, &s, &origin, token);
    assert_eq!(
        sign_in(guess).await.unwrap().status(),
        429,
        "a wrong token on the sign-in form"
    );
    assert_eq!(
        sign_in(OPS).await.unwrap().status(),
        303,
        "the right token on the sign-in form signs in"
    );
    assert_eq!(
        limits(&operator, &s, OPS).await.status(),
        200,
        "the operator"
    );
    // A missing token is no guess: never counted.
    for _ in 0..2 * FAILURES_PER_MINUTE {
        let r = operator
            .get(s.url("/admin/api/limits"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 401);
    }
    assert_eq!(limits(&operator, &s, OPS).await.status(), 200);
    assert_eq!(
        logs.count("rate_limit.admin_lockout", "127.0.0.2"),
        1,
        "{:?}",
        logs.lines()
    );
    assert!(
        !logs.contains(guess) && !logs.contains(OPS),
        "no token in a log"
    );
    let more = counter("rate_limit_admin_auth_failures_total") - failures;
    assert!(
        more >= (FAILURES_PER_MINUTE + 1) as f64,
        "{more} failures counted"
    );
    assert!(counter("rate_limit_admin_lockouts_total") - lockouts >= 1.0);
}

/// Wrong tokens on the sign-in form count as on the API: the 11th answers 401, the next
/// 429 (the form's body, 4 KiB at most, is read to tell a wrong token from the right
/// one); the right token still signs in from the locked-out address.
#[tokio::test]
async fn the_sign_in_form_counts_failures_per_address() {
    let (app, _) = app(AnyStore::Memory(MemoryStore::new()));
    let s = Server::start(app).await.unwrap();
    let attacker = client_from("127.0.0.4");
    let origin = format!("http://{}", s.addr());
    let sign_in = |token: &str| send_token(&attacker, &s, &origin, token);
    for i in 0..=FAILURES_PER_MINUTE {
        let st = sign_in("not-the-token-0123456789abcdef")
            .await
            .unwrap()
            .status();
        assert_eq!(st, 401, "guess {i}");
    }
    let wrong = sign_in("not-the-token-0123456789abcdef").await.unwrap();
    assert_eq!(wrong.status(), 429);
    assert_eq!(sign_in(OPS).await.unwrap().status(), 303);
    let operator = client_from("127.0.0.5");
    assert_eq!(limits(&operator, &s, OPS).await.status(), 200);
}

/// Bodies: an API call without a valid token is refused from its head (its 2 MB body is
/// never read), as is a form from another origin; a body past what the route accepts is
/// 413 (4 KiB for a form or a quota, 256 KiB for the access lists).
#[tokio::test]
async fn bodies_are_refused_from_the_head_or_past_their_size() {
    let (app, _) = app(AnyStore::Memory(MemoryStore::new()));
    let s = Server::start(app).await.unwrap();
    let big = vec![b' '; 2 * 1024 * 1024];
    let r = client()
        .put(s.url("/admin/api/access"))
        .header("content-type", "application/json")
        .body(big.clone())
        .send()
        .await;
    // The server answers 401 after the head and closes; the client may see the answer or
    // a connection closed while it still sent the body. Either way the body was not
    // buffered (the process's memory is measured in quiz-night's upload test).
    if let Ok(r) = r {
        assert_eq!(r.status(), 401);
    }
    let too_big = |path: &str, n: usize| {
        client()
            .put(s.url(&format!("/admin/api{path}")))
            .bearer_auth(OPS)
            .header("content-type", "application/json")
            .body(format!("{{\"quota\": 1{}}}", " ".repeat(n)))
            .send()
    };
    assert_eq!(
        too_big("/limits/answers/quota", 8 * 1024)
            .await
            .unwrap()
            .status(),
        StatusCode::PAYLOAD_TOO_LARGE
    );
    assert_eq!(
        too_big("/limits/answers/quota", 16).await.unwrap().status(),
        200
    );
    let lists = |n: usize| {
        client()
            .put(s.url("/admin/api/access"))
            .bearer_auth(OPS)
            .header("content-type", "application/json")
            .body(format!("{{}}{}", " ".repeat(n)))
            .send()
    };
    assert_eq!(lists(100 * 1024).await.unwrap().status(), 200);
    assert_eq!(
        lists(300 * 1024).await.unwrap().status(),
        StatusCode::PAYLOAD_TOO_LARGE
    );
    let sign_in = client()
        .post(s.url("/admin/login"))
        .header("origin", format!("http://{}", s.addr()))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("token={}", "x".repeat(8 * 1024)))
        .send()
        .await
        .unwrap();
    assert_eq!(sign_in.status(), StatusCode::PAYLOAD_TOO_LARGE);
}

/// Sign-out without the form's CSRF token still closes the session on the server (a
/// stolen cookie does not outlive a sign-out); from another origin it changes nothing.
#[tokio::test]
async fn sign_out_closes_the_session_without_its_csrf_token() {
    let (app, _) = app(AnyStore::Memory(MemoryStore::new()));
    let s = Server::start(app).await.unwrap();
    let origin = format!("http://{}", s.addr());
    let cookie = sign_in(&client(), &s, &origin).await;
    let page = |c: &str| {
        client()
            .get(s.url("/admin"))
            .header("accept", "text/html")
            .header("cookie", c.to_owned())
            .send()
    };
    assert_eq!(page(&cookie).await.unwrap().status(), 200);
    let out = |origin: &str| {
        client()
            .post(s.url("/admin/logout"))
            .header("cookie", &cookie)
            .header("origin", origin)
            .header("content-type", "application/x-www-form-urlencoded")
            .body("")
            .send()
    };
    assert_eq!(out("http://evil.example").await.unwrap().status(), 403);
    assert_eq!(page(&cookie).await.unwrap().status(), 200, "still open");
    let done = out(&origin).await.unwrap();
    assert_eq!(done.status(), 303);
    assert!(
        done.headers()["set-cookie"]
            .to_str()
            .unwrap()
            .contains("Max-Age=0")
    );
    assert_eq!(
        page(&cookie).await.unwrap().status(),
        401,
        "closed on the server"
    );
}

/// The sign-in form with `token`, sent by `c` with this `Origin`.
fn send_token(
    c: &reqwest::Client,
    s: &Server,
    origin: &str,
    token: &str,
) -> impl std::future::Future<Output = reqwest::Result<reqwest::Response>> + use<> {
    c.post(s.url("/admin/login"))
        .header("origin", origin)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form(&[("token", token.to_owned())]))
        .send()
}

/// Signs in through the form: the session cookie (`name=value`).
async fn sign_in(c: &reqwest::Client, s: &Server, origin: &str) -> String {
    let ok = send_token(c, s, origin, OPS).await.unwrap();
    assert_eq!(ok.status(), 303);
    let set = ok.headers()["set-cookie"].to_str().unwrap();
    set.split(';').next().unwrap().to_owned()
}

/// The page's forms over HTTP/2 (the host is the `:authority`, no `Host` header) and
/// HTTP/1.1: sign-in, a quota changed, sign-out; another origin refused on both.
#[tokio::test]
async fn the_pages_forms_work_over_http2_and_http1() {
    let (app, answers) = app(AnyStore::Memory(MemoryStore::new()));
    let s = Server::start(app).await.unwrap();
    let origin = format!("http://{}", s.addr());
    let h2 = reqwest::Client::builder()
        .http2_prior_knowledge()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    for (c, version, quota) in [
        (h2, reqwest::Version::HTTP_2, 7),
        (client(), reqwest::Version::HTTP_11, 8),
    ] {
        let cookie = sign_in(&c, &s, &origin).await;
        let page = c
            .get(s.url("/admin"))
            .header("accept", "text/html")
            .header("cookie", &cookie)
            .send()
            .await
            .unwrap();
        assert_eq!(page.version(), version);
        let html = page.text().await.unwrap();
        let csrf = csrf_field(&html);
        let post = |origin: &str| {
            c.post(s.url("/admin/forms/quota"))
                .header("cookie", &cookie)
                .header("origin", origin)
                .header("content-type", "application/x-www-form-urlencoded")
                .body(form(&[
                    ("limit", "answers".to_owned()),
                    ("quota", quota.to_string()),
                    ("csrf", csrf.clone()),
                ]))
                .send()
        };
        assert_eq!(post("http://evil.example").await.unwrap().status(), 403);
        let changed = post(&origin).await.unwrap();
        assert_eq!(changed.version(), version);
        assert_eq!(changed.status(), 303, "{version:?}");
        assert_eq!(answers.quota(), quota, "{version:?}");
    }
}

/// A token shorter than 32 bytes, or of fewer than 8 distinct bytes, is refused at start.
#[test]
fn weak_tokens_are_refused_at_start() {
    let layer = RateLimitLayer::in_memory().rule(ratekeeper_tower::Rule::new(
        Limit::fixed_window("x", 1, Duration::from_secs(1)).unwrap(),
        ratekeeper_tower::extract::Global,
    ));
    let build = |t: &str| {
        Admin::builder()
            .token("ops", t, Role::ReadWrite)
            .layer(&layer)
            .build()
    };
    for weak in [
        "0123456789abcdef0123456789abcde",
        &"a".repeat(64),
        &"ab".repeat(32),
    ] {
        let e = build(weak).unwrap_err();
        assert_eq!(e.code(), "admin.invalid", "{weak}");
        assert!(!e.to_string().contains(weak), "never the token: {e}");
    }
    build("0123456789abcdef0123456789abcdef").unwrap();
}
