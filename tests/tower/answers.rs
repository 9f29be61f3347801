//! What a refusal tells the client: a jittered `Retry-After` (spread, never early, the
//! same for one client) and problem details naming the type, the policy and the wait.

use std::time::Duration;

use axum::Router;
use axum::routing::get;
use ratekeeper_core::{Limit, PrincipalKind};
use ratekeeper_tests::{Server, client, retry_after};
use ratekeeper_tower::extract::HeaderKey;
use ratekeeper_tower::{Answering, RateLimitLayer, Rule};
use reqwest::StatusCode;

#[tokio::test]
async fn jittered_retry_after_is_spread_never_early_and_the_same_for_one_client() {
    let app = |answering: Answering| {
        let layer = RateLimitLayer::in_memory()
            .rule(Rule::new(
                Limit::fixed_window("hourly", 1, Duration::from_secs(3_600)).unwrap(),
                HeaderKey::new("x-key".parse().unwrap(), PrincipalKind::User),
            ))
            .answering(answering);
        Router::new().route("/", get(|| async { "ok" }).route_layer(layer))
    };
    let jittered = Server::start(app(Answering::new().jitter(Duration::from_secs(30))))
        .await
        .unwrap();
    let plain = Server::start(app(Answering::new())).await.unwrap();
    let http = client();
    // (Retry-After, the true reset from the `RateLimit` field) of a refused request.
    let refused = |server: &Server, key: String| {
        let req = http.get(server.url("/")).header("x-key", key);
        async move {
            let r = req.send().await.unwrap();
            assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
            let retry: u64 = retry_after(&r);
            let field = r.headers()["ratelimit"].to_str().unwrap().to_owned();
            let t: u64 = field.rsplit("t=").next().unwrap().parse().unwrap();
            let body = r.text().await.unwrap();
            assert!(
                body.ends_with(&format!("\"retry_after\":{retry}}}")),
                "{body}"
            );
            (retry, t)
        }
    };
    let mut extras = Vec::new();
    for i in 0..200 {
        let key = format!("client-{i}");
        let ok = http.get(jittered.url("/")).header("x-key", &key).send();
        assert_eq!(ok.await.unwrap().status(), StatusCode::OK);
        let (retry, t) = refused(&jittered, key.clone()).await;
        assert!(
            retry >= t,
            "never earlier than the true wait: {retry} < {t}"
        );
        assert!(retry <= t + 30, "at most 30 s more: {retry} vs {t}");
        let (again, t2) = refused(&jittered, key).await;
        assert_eq!(again - t2, retry - t, "one client is told the same");
        extras.push(retry - t);
    }
    extras.sort_unstable();
    extras.dedup();
    assert!(extras.len() >= 20, "spread over the range: {extras:?}");
    // Off by default: the true wait.
    let ok = http.get(plain.url("/")).header("x-key", "a").send();
    assert_eq!(ok.await.unwrap().status(), StatusCode::OK);
    let (retry, t) = refused(&plain, "a".to_owned()).await;
    assert_eq!(retry, t);
}

/// Problem details: `application/problem+json` with the IETF draft's `quota-exceeded`
/// type; a cost that can never fit has no `retry-after`.
#[tokio::test]
async fn problem_details_name_the_type_the_violated_policy_and_the_wait() {
    use ratekeeper_tower::ProblemResponder;

    // Two per minute; a request costs `cost`.
    let layer = |name: &str, cost: u64| {
        RateLimitLayer::in_memory()
            .rule(
                Rule::new(
                    Limit::fixed_window(name, 2, Duration::from_secs(60)).unwrap(),
                    HeaderKey::new("x-key".parse().unwrap(), PrincipalKind::User),
                )
                .cost(cost),
            )
            .answering(Answering::new().with_responder(ProblemResponder))
    };
    let (layer, big) = (layer("uploads", 1), layer("bulk", 3));
    let server = Server::start(
        Router::new()
            .route("/", get(|| async { "ok" }).route_layer(layer))
            .route("/bulk", get(|| async { "ok" }).route_layer(big)),
    )
    .await
    .unwrap();
    let http = client();
    let get = |path: &str| http.get(server.url(path)).header("x-key", "k").send();
    for _ in 0..2 {
        assert_eq!(get("/").await.unwrap().status(), StatusCode::OK);
    }
    let r = get("/").await.unwrap();
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(r.headers()["content-type"], "application/problem+json");
    let retry = r.headers()["retry-after"].to_str().unwrap().to_owned();
    assert_eq!(
        r.text().await.unwrap(),
        format!(
            "{{\"type\":\"https://iana.org/assignments/http-problem-types#quota-exceeded\",\"title\":\"Request cannot be satisfied as assigned quota has been exceeded\",\"status\":429,\"detail\":\"Too many requests for \\\"uploads\\\": retry after {retry} s.\",\"retry-after\":{retry},\"violated-policies\":[\"uploads\"]}}"
        )
    );
    let r = get("/bulk").await.unwrap();
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(r.headers().get("retry-after").is_none());
    let body = r.text().await.unwrap();
    assert!(!body.contains("retry-after"), "{body}");
    assert!(body.contains("\"violated-policies\":[\"bulk\"]"), "{body}");
}
