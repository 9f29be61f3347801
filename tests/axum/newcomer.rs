//! The first of a newcomer's three services, written from the guides with `ratekeeper-axum`
//! alone (feature `redis`), as a user would: `POST /orders` limited by two keys on Redis,
//! the client's IP by a layer and the API key in the handler, where the body says what the
//! order costs (one unit per item). The other two are the ws guide's chat (`ws::bearer`)
//! and the client guide's paced worker (its first doctest). The release's public API was
//! checked against all three: see the CHANGELOG's 0.1.0.

use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use ratekeeper_axum::core::{AnyStore, Chain, Principal, RedisStore};
use ratekeeper_axum::{
    ConfigError, FailurePolicy, HandlerLimiter, Limit, Limiter, RateLimitLayer, Rule, client_ip,
};
use ratekeeper_tests::redis::RedisServer;
use ratekeeper_tests::{Server, client, retry_after};
use serde::Deserialize;

#[derive(Deserialize)]
struct Order {
    items: Vec<String>,
}

#[derive(Clone)]
struct Api {
    limiter: HandlerLimiter,
    items_per_key: Limit,
}

fn app(redis_url: &str) -> Result<Router, ConfigError> {
    let store = AnyStore::Redis(RedisStore::builder(redis_url).build()?);
    let limiter = Limiter::new(store);
    let minute = Duration::from_secs(60);
    // Exact logs: a count a minute ago never leaks into this one (an approximate sliding
    // window weighs the last minute in, and its refusal may wait up to two minutes).
    // First key: 8 orders a minute per client IP, checked before the body is read.
    let per_ip = RateLimitLayer::new(limiter.clone()).rule(Rule::new(
        Limit::sliding_log("orders-ip", 8, minute)?,
        client_ip(),
    ));
    // Second key: 10 items a minute per API key, charged by the order's size.
    let api = Api {
        limiter: HandlerLimiter::new(limiter),
        items_per_key: Limit::sliding_log("order-items", 10, minute)?,
    };
    Ok(Router::new()
        .route("/orders", post(order).route_layer(per_ip))
        .with_state(api))
}

async fn order(State(api): State<Api>, headers: HeaderMap, Json(order): Json<Order>) -> Response {
    let Some(key) = headers.get("x-api-key") else {
        return (StatusCode::UNAUTHORIZED, "an x-api-key header, please").into_response();
    };
    let items = order.items.len() as u64;
    // An API key is a secret: `Principal::api_key` hashes it before it becomes a key.
    let chain = Chain::new().check_cost(
        &api.items_per_key,
        Principal::api_key(key.as_bytes()),
        items.max(1),
    );
    match api.limiter.check(&chain, FailurePolicy::Closed).await {
        Ok(admitted) => (admitted, format!("{items} items ordered")).into_response(),
        Err(refused) => refused.into_response(),
    }
}

#[tokio::test]
async fn an_api_with_two_keys_on_redis_charges_each_order_by_its_items() {
    let redis = RedisServer::start();
    let server = Server::start(app(&redis.url()).unwrap()).await.unwrap();
    let http = client();
    let post = |key: &'static str, items: usize| {
        let body = format!(r#"{{"items":{:?}}}"#, vec!["tea"; items]);
        http.post(server.url("/orders"))
            .header("x-api-key", key)
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    // Three orders of three items: 9 of the key's 10.
    for _ in 0..3 {
        let r = post("key-a", 3).await.unwrap();
        assert_eq!(r.status(), StatusCode::OK);
    }
    // Two more items do not fit: refused with the wait, and nothing spent.
    let r = post("key-a", 2).await.unwrap();
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!((1..=60).contains(&retry_after(&r)));
    // The answer names both limits the request met, the layer's and the handler's.
    assert_eq!(
        r.headers()["ratelimit-policy"],
        r#""orders-ip";q=8;w=60, "order-items";q=10;w=60"#
    );
    // One still fits: the refused order spent nothing of the key's budget.
    let r = post("key-a", 1).await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.text().await.unwrap(), "1 items ordered");
    // Another key has its own budget, but the address is the first key: 5 orders so far
    // (every request the layer let through, the refused one too), 8 a minute.
    for _ in 0..3 {
        assert_eq!(post("key-b", 1).await.unwrap().status(), StatusCode::OK);
    }
    let r = post("key-c", 1).await.unwrap();
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(r.headers()["ratelimit-policy"], r#""orders-ip";q=8;w=60"#);
    // Both budgets are in the server's Redis, and neither key's text is in a key's name.
    let keys = redis.cli(&["--scan"]);
    assert!(
        keys.contains("order-items") && keys.contains("orders-ip"),
        "{keys}"
    );
    assert!(!keys.contains("key-a") && !keys.contains("key-b"), "{keys}");
}
