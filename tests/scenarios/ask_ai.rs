//! ask-ai: the docs platform's table, end to end.

use ratekeeper_core::{AnyStore, Chain, Limiter, MemoryStore, Principal, Store};
use ratekeeper_examples::ask_ai::{AskLimits, ai_update_after_push, app_with_store, org};
use ratekeeper_tests::redis::{RedisServer, down_store};
use ratekeeper_tests::{Server, client};
use reqwest::StatusCode;

async fn table(store: AnyStore) {
    let server = Server::start(app_with_store(store.clone()).unwrap())
        .await
        .unwrap();
    let http = client();
    let ask = |project: &str, ip: &str| {
        http.post(server.url(&format!("/projects/{project}/ask")))
            .header("cf-connecting-ip", ip)
            .body("{\"question\":\"How do I start?\"}")
            .send()
    };
    // 15 a day per project and visitor; the visitor is the /64.
    for i in 0..15 {
        let ip = format!("2001:db8:1:2::{i:x}");
        assert_eq!(
            ask("p1", &ip).await.unwrap().status(),
            StatusCode::OK,
            "{i}"
        );
    }
    let r = ask("p1", "2001:db8:1:2:ffff::1").await.unwrap();
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS, "same /64");
    assert_eq!(r.headers()["ratelimit-limit"], "15");
    assert_eq!(
        ask("p1", "2001:db8:1:3::1").await.unwrap().status(),
        StatusCode::OK,
        "next /64"
    );
    // In order, all or nothing: refused requests charged nothing, not even everybody's day.
    let limits = AskLimits::new().unwrap();
    let all = store
        .peek(&limits.ask_all.key(Principal::global()))
        .await
        .unwrap();
    assert_eq!(all.remaining(), 5_000 - 16);
    // 20 a minute per visitor across projects.
    for i in 0..20 {
        assert_eq!(
            ask(&format!("q{i}"), "198.51.100.9")
                .await
                .unwrap()
                .status(),
            StatusCode::OK,
            "{i}"
        );
    }
    let r = ask("q20", "198.51.100.9").await.unwrap();
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(r.headers()["ratelimit-limit"], "20");
    // Repository lookups: 60 an hour per org.
    let lookup = |org: &str| {
        http.get(server.url(&format!("/orgs/{org}/repos/lookup")))
            .send()
    };
    for _ in 0..60 {
        assert_eq!(lookup("acme").await.unwrap().status(), StatusCode::OK);
    }
    assert_eq!(
        lookup("acme").await.unwrap().status(),
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(lookup("other").await.unwrap().status(), StatusCode::OK);
    // Webhook deliveries are processed once.
    let hook = || {
        http.post(server.url("/webhooks/github"))
            .header("x-github-delivery", "abc-1")
            .send()
    };
    assert_eq!(
        hook().await.unwrap().text().await.unwrap(),
        "{\"processed\":true}"
    );
    assert_eq!(
        hook().await.unwrap().text().await.unwrap(),
        "{\"duplicate\":true}"
    );
    // The background job counts AI updates under the same key the routes' table names.
    let limiter = Limiter::new(store.clone());
    assert!(
        !ai_update_after_push(&limiter, &limits, "acme", 0)
            .await
            .unwrap(),
        "no AI work"
    );
    for _ in 0..15 {
        assert!(
            ai_update_after_push(&limiter, &limits, "acme", 3)
                .await
                .unwrap()
        );
    }
    assert!(
        !ai_update_after_push(&limiter, &limits, "acme", 3)
            .await
            .unwrap()
    );
    let d = store
        .check(&Chain::new().check(&limits.docs_update, org("acme").unwrap()))
        .await
        .unwrap();
    assert!(!d.is_allowed(), "the same key, seen from anywhere");
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
async fn with_redis_down_ask_fails_closed_and_signed_in_actions_stay_open() {
    let down = down_store();
    let server = Server::start(app_with_store(down).unwrap()).await.unwrap();
    let http = client();
    let r = http
        .post(server.url("/projects/p/ask"))
        .body("{\"question\":\"?\"}")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(r.headers().contains_key("retry-after"));
    let r = http
        .get(server.url("/orgs/acme/repos/lookup"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
}
