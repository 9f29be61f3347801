//! quiz-night's admin: mounted at `/admin` only with `QUIZ_ADMIN_TOKEN`, outside every
//! limit, over the quiz's own limits: a participant flooding the poll is the poll's
//! heaviest hitter, and a quota lowered through the API refuses them; two instances on
//! one Redis obey one admin (its fleet).

use ratekeeper_core::{AnyStore, MemoryStore};
use ratekeeper_examples::quiz_night::{QuizConfig, app_with_store};
use ratekeeper_tests::redis::RedisServer;
use ratekeeper_tests::{Server, client};
use serde_json::Value;

const TOKEN: &str = "quiz-admin-token-0123456789abcdef-0123456789";

async fn quiz(store: AnyStore, token: Option<&str>) -> Server {
    let cfg = QuizConfig {
        admin_token: token.map(str::to_owned),
        ..QuizConfig::default()
    };
    Server::start(app_with_store(&cfg, store).unwrap())
        .await
        .unwrap()
}

async fn poll(s: &Server, who: &str) -> u16 {
    let r = client()
        .get(s.url("/api/games/g1/poll"))
        .header("x-participant-id", who)
        .send()
        .await
        .unwrap();
    r.status().as_u16()
}

async fn api(s: &Server, method: reqwest::Method, path: &str, body: Option<&str>) -> (u16, Value) {
    let mut r = client()
        .request(method, s.url(&format!("/admin/api{path}")))
        .bearer_auth(TOKEN);
    if let Some(b) = body {
        r = r
            .header("content-type", "application/json")
            .body(b.to_owned());
    }
    let resp = r.send().await.unwrap();
    let status = resp.status().as_u16();
    (
        status,
        serde_json::from_str(&resp.text().await.unwrap()).unwrap_or(Value::Null),
    )
}

async fn admin_on(store: AnyStore) {
    let s = quiz(store, Some(TOKEN)).await;
    for _ in 0..25 {
        poll(&s, "flooder").await;
    }
    for _ in 0..3 {
        assert_eq!(poll(&s, "quiet").await, 200);
    }
    let (st, top) = api(&s, reqwest::Method::GET, "/limits/poll/top", None).await;
    assert_eq!(st, 200, "{top}");
    assert_eq!(top["by_use"][0]["principal"], "p:flooder", "{top}");
    assert_eq!(top["by_use"][0]["count"], 20);
    assert_eq!(top["by_refusals"][0]["principal"], "p:flooder");
    assert_eq!(top["by_refusals"][0]["count"], 5);
    // The handlers' limits are listed with the layers'.
    let (_, limits) = api(&s, reqwest::Method::GET, "/limits", None).await;
    let names: Vec<&str> = limits["limits"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|l| l["name"].as_str())
        .collect();
    for n in ["global-ip", "poll", "answers", "ask-all", "sign-in-account"] {
        assert!(names.contains(&n), "{n} in {names:?}");
    }
    // Lowered to 3: the quiet participant (3 used) is refused now; restored, let through.
    let (st, _) = api(
        &s,
        reqwest::Method::PUT,
        "/limits/poll/quota",
        Some(r#"{"quota":3}"#),
    )
    .await;
    assert_eq!(st, 200);
    assert_eq!(poll(&s, "quiet").await, 429);
    let (st, _) = api(
        &s,
        reqwest::Method::PUT,
        "/limits/poll/quota",
        Some(r#"{"quota":20}"#),
    )
    .await;
    assert_eq!(st, 200);
    assert_eq!(poll(&s, "quiet").await, 200);
}

#[tokio::test]
async fn the_admin_on_quiz_night_on_memory() {
    admin_on(AnyStore::Memory(MemoryStore::new())).await;
}

#[tokio::test]
async fn the_admin_on_quiz_night_on_redis() {
    let redis = RedisServer::start();
    admin_on(redis.store()).await;
}

/// Two quiz-night instances on one Redis: the poll's quota lowered through A's admin is
/// obeyed by B within a second, and B's API shows the version it applied.
#[tokio::test]
async fn two_instances_obey_one_admin_on_redis() {
    let redis = RedisServer::start();
    let a = quiz(redis.store(), Some(TOKEN)).await;
    let b = quiz(redis.store(), Some(TOKEN)).await;
    let (st, _) = api(
        &a,
        reqwest::Method::PUT,
        "/limits/poll/quota",
        Some(r#"{"quota":3}"#),
    )
    .await;
    assert_eq!(st, 200);
    let t0 = std::time::Instant::now();
    loop {
        let (_, limits) = api(&b, reqwest::Method::GET, "/limits", None).await;
        let poll_quota = limits["limits"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["name"] == "poll")
            .map(|l| l["quota"].clone());
        if poll_quota == Some(Value::from(3)) {
            assert!(limits["fleet"]["version"].as_u64() >= Some(1), "{limits}");
            break;
        }
        assert!(t0.elapsed() < std::time::Duration::from_secs(1), "{limits}");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    println!("applied by B {:?} after A's answer", t0.elapsed());
    let answers = [
        poll(&b, "p").await,
        poll(&b, "p").await,
        poll(&b, "p").await,
        poll(&b, "p").await,
    ];
    assert_eq!(answers, [200, 200, 200, 429]);
}

/// Without `QUIZ_ADMIN_TOKEN` there is no admin route at all.
#[tokio::test]
async fn no_token_no_admin() {
    let s = quiz(AnyStore::Memory(MemoryStore::new()), None).await;
    for path in ["/admin", "/admin/api/limits"] {
        let r = client()
            .get(s.url(path))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 404, "{path}");
    }
}
