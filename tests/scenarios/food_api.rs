//! food-api: two keys per route, per-route failure policies, a shared model budget.

use ratekeeper_core::{AnyStore, Limit, Limiter, MemoryStore, Principal, PrincipalKind, Store};
use ratekeeper_examples::food_api::{app_with_store, model_budget, resolve_ingredients};
use ratekeeper_tests::redis::{RedisServer, down_store};
use ratekeeper_tests::{Server, client, retry_after};
use reqwest::StatusCode;

async fn table(store: AnyStore) {
    let model = model_budget().unwrap();
    let server = Server::start(app_with_store(store.clone(), model.clone()).unwrap())
        .await
        .unwrap();
    let http = client();
    let search = |account: &str| {
        http.get(server.url("/search"))
            .header("authorization", format!("Bearer {account}"))
            .send()
    };
    // Account cycling from one address: each account is fine, the address is not.
    for i in 0..300 {
        let r = search(&format!("acct{}", i / 30)).await.unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{i}");
    }
    let r = search("acct-fresh").await.unwrap();
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        r.headers()["ratelimit-limit"],
        "300",
        "the IP limit refused"
    );
    // Problem details (RFC 9457), the IETF draft's problem type.
    assert_eq!(r.headers()["content-type"], "application/problem+json");
    let retry: u64 = retry_after(&r);
    let body = r.text().await.unwrap();
    assert_eq!(
        body,
        format!(
            "{{\"type\":\"https://iana.org/assignments/http-problem-types#quota-exceeded\",\"title\":\"Request cannot be satisfied as assigned quota has been exceeded\",\"status\":429,\"detail\":\"Too many requests for \\\"search-ip\\\": retry after {retry} s.\",\"retry-after\":{retry},\"violated-policies\":[\"search-ip\"]}}"
        )
    );

    // Minute before day, in order: hammering while refused does not burn the day.
    let capture = || {
        http.post(server.url("/captures"))
            .header("authorization", "Bearer ann")
            .send()
    };
    for _ in 0..10 {
        assert_eq!(capture().await.unwrap().status(), StatusCode::OK);
    }
    for _ in 0..20 {
        assert_eq!(
            capture().await.unwrap().status(),
            StatusCode::TOO_MANY_REQUESTS
        );
    }
    let day =
        Limit::fixed_window("captures-day", 100, std::time::Duration::from_secs(86_400)).unwrap();
    assert_eq!(
        store
            .peek(&day.key(Principal::personal(PrincipalKind::User, "ann")))
            .await
            .unwrap()
            .remaining(),
        90
    );

    // The model budget: two routes share a user's 50 calls a day; the job has its own cap.
    let curate = |path: &str| {
        http.post(server.url(path))
            .header("authorization", "Bearer bob")
            .send()
    };
    for i in 0..50 {
        let path = if i % 2 == 0 {
            "/curation/suggest"
        } else {
            "/curation/classify"
        };
        assert_eq!(curate(path).await.unwrap().status(), StatusCode::OK, "{i}");
    }
    let r = curate("/curation/classify").await.unwrap();
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(r.headers()["ratelimit-limit"], "50");
    // The API answers every refusal as problem details: the 429 above, and a 401 decided
    // in the handler (no bearer token) alike.
    assert_eq!(r.headers()["content-type"], "application/problem+json");
    let anonymous = http
        .post(server.url("/curation/suggest"))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(
        anonymous.headers()["content-type"],
        "application/problem+json"
    );
    assert_eq!(anonymous.headers()["www-authenticate"], "Bearer");
    let body = anonymous.text().await.unwrap();
    assert!(body.contains("\"code\":\"principal.missing\""), "{body}");
    let limiter = Limiter::new(store.clone());
    for _ in 0..20 {
        assert!(
            resolve_ingredients(&limiter, &model).await,
            "the job is not a user"
        );
    }
    let global = store
        .peek(&model.global().key(Principal::global()))
        .await
        .unwrap();
    assert_eq!(
        global.remaining(),
        2_000 - 70,
        "users and the job spend one ceiling"
    );
    assert_eq!(
        curate("/curation/suggest").await.unwrap().status(),
        StatusCode::TOO_MANY_REQUESTS
    );

    // CORS: the headers are readable by a browser app.
    let r = http
        .get(server.url("/products/123"))
        .header("authorization", "Bearer carol")
        .header("origin", "https://app.example")
        .send()
        .await
        .unwrap();
    let exposed = r.headers()["access-control-expose-headers"]
        .to_str()
        .unwrap()
        .to_ascii_lowercase();
    assert!(
        exposed.contains("ratelimit-remaining") && exposed.contains("retry-after"),
        "{exposed}"
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
async fn each_route_keeps_the_policy_written_beside_it() {
    let down = down_store();
    let server = Server::start(app_with_store(down, model_budget().unwrap()).unwrap())
        .await
        .unwrap();
    let http = client();
    let auth = "Bearer dana";
    for (method, path, want) in [
        ("GET", "/taxonomy", StatusCode::OK),
        ("GET", "/products/1", StatusCode::OK),
        ("POST", "/webhooks/billing", StatusCode::OK),
        ("POST", "/captures", StatusCode::SERVICE_UNAVAILABLE),
        ("POST", "/contributions", StatusCode::SERVICE_UNAVAILABLE),
        ("POST", "/support", StatusCode::SERVICE_UNAVAILABLE),
        ("POST", "/curation/suggest", StatusCode::SERVICE_UNAVAILABLE),
    ] {
        let m = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let r = http
            .request(m, server.url(path))
            .header("authorization", auth)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), want, "{path}");
    }
}

/// The plan: one quota per account per calendar month, from its billing day, charged by
/// every route and by the customer's catalogue sync; `GET /usage` shows it over TCP.
async fn plan(store: AnyStore) {
    use ratekeeper_core::calendar::{Anchor, Calendar, Period, Timestamp};
    use ratekeeper_examples::food_api::{Plans, app_with_plans, sync_catalogue};
    let anchor = Anchor::day(20).unwrap().at(8, 0).unwrap();
    let plans = Plans::new(20, [("erin", anchor)]).unwrap();
    let app = app_with_plans(store.clone(), model_budget().unwrap(), plans.clone()).unwrap();
    let server = Server::start(app).await.unwrap();
    let http = client();
    let bearer = |r: reqwest::RequestBuilder| r.header("authorization", "Bearer erin");
    for _ in 0..5 {
        let r = bearer(http.get(server.url("/search")))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK);
    }
    for _ in 0..2 {
        let r = bearer(http.post(server.url("/curation/suggest")))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK);
    }
    let limiter = Limiter::new(store.clone());
    assert!(sync_catalogue(&limiter, &plans, "erin", 3).await);
    let usage = || async {
        let r = bearer(http.get(server.url("/usage"))).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        serde_json::from_str::<serde_json::Value>(&r.text().await.unwrap()).unwrap()
    };
    let u = usage().await;
    assert_eq!(
        (u["quota"].as_u64(), u["used"].as_u64()),
        (Some(20), Some(10)),
        "{u}"
    );
    assert_eq!(u["remaining"], 10, "{u}");
    // Erin's month renews on the 20th at 08:00 UTC.
    let month = Calendar::new(Period::Month, "UTC")
        .unwrap()
        .anchored(anchor);
    let span = month.span(Timestamp::now());
    let renews: Timestamp = u["renews_at"].as_str().unwrap().parse().unwrap();
    assert_eq!(renews, span.end(), "{u}");
    let starts: Timestamp = u["period_start"].as_str().unwrap().parse().unwrap();
    assert_eq!(starts, span.start(), "{u}");

    // Used up by the sync: every route refuses, naming the plan, until the boundary.
    assert!(sync_catalogue(&limiter, &plans, "erin", 10).await);
    assert!(!sync_catalogue(&limiter, &plans, "erin", 1).await);
    let r = bearer(http.get(server.url("/search")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    let wait = i64::try_from(retry_after(&r)).unwrap();
    let to_end = span.end().as_second() - Timestamp::now().as_second();
    assert!(
        (to_end - 2..=to_end + 2).contains(&wait),
        "{wait} s, the month ends in {to_end} s"
    );
    let body = r.text().await.unwrap();
    assert!(body.contains("\"violated-policies\":[\"plan\"]"), "{body}");
    // Reading the usage charges nothing.
    let u = usage().await;
    assert_eq!(
        (u["used"].as_u64(), u["remaining"].as_u64()),
        (Some(20), Some(0)),
        "{u}"
    );
    // Another customer's plan is its own, from the 1st.
    let r = http
        .get(server.url("/usage"))
        .header("authorization", "Bearer gail")
        .send()
        .await
        .unwrap();
    let g: serde_json::Value = serde_json::from_str(&r.text().await.unwrap()).unwrap();
    assert_eq!(
        (g["used"].as_u64(), g["remaining"].as_u64()),
        (Some(0), Some(20)),
        "{g}"
    );
    let first = Calendar::new(Period::Month, "UTC")
        .unwrap()
        .span(Timestamp::now());
    assert_eq!(
        g["renews_at"]
            .as_str()
            .unwrap()
            .parse::<Timestamp>()
            .unwrap(),
        first.end()
    );
    // No bearer: 401, as every route of the API.
    let r = http.get(server.url("/usage")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn the_plan_is_charged_everywhere_and_usage_shows_it_on_memory() {
    plan(AnyStore::Memory(MemoryStore::new())).await;
}

#[tokio::test]
async fn the_plan_is_charged_everywhere_and_usage_shows_it_on_redis() {
    let server = RedisServer::start();
    plan(server.store()).await;
}
