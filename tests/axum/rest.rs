//! The getting-started guide's REST shape over TCP: two methods on one path, a rule each
//! (`get(..).route_layer(..).merge(post(..).route_layer(..))`): a `GET` spends only the
//! read budget, a `POST` only the write one, a `PUT` (405) neither.

use std::time::Duration;

use axum::Router;
use axum::routing::{get, post};
use ratekeeper_axum::{Limit, RateLimitLayer, Rule, client_ip};
use ratekeeper_tests::{Server, client};

#[tokio::test]
async fn two_methods_on_one_path_spend_their_own_budgets() {
    let minute = Duration::from_secs(60);
    let reads = RateLimitLayer::in_memory().rule(Rule::new(
        Limit::sliding_window("orders-read", 2, minute).unwrap(),
        client_ip(),
    ));
    let writes = RateLimitLayer::in_memory().rule(Rule::new(
        Limit::sliding_window("orders-write", 1, minute).unwrap(),
        client_ip(),
    ));
    let app: Router = Router::new().route(
        "/orders",
        get(|| async { "[]" })
            .route_layer(reads)
            .merge(post(|| async { "created" }).route_layer(writes)),
    );
    let s = Server::start(app).await.unwrap();
    let http = client();
    let url = s.url("/orders");
    let mut seen = Vec::new();
    for _ in 0..3 {
        seen.push(http.put(&url).send().await.unwrap().status().as_u16());
    }
    for _ in 0..3 {
        seen.push(http.get(&url).send().await.unwrap().status().as_u16());
    }
    for _ in 0..2 {
        seen.push(http.post(&url).send().await.unwrap().status().as_u16());
    }
    assert_eq!(seen, [405, 405, 405, 200, 200, 429, 200, 429]);
}
