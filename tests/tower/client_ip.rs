//! The tower crate's own `ClientIp::new()` under axum, as its docs show it: axum puts the
//! peer in `ConnectInfo<SocketAddr>`, which `ClientIp` reads (feature `axum`, on with
//! ratekeeper-axum). Before #24 this router answered 500 ("no peer address").

use axum::Router;
use axum::routing::get;
use ratekeeper_core::Limit;
use ratekeeper_tests::{Server, client};
use ratekeeper_tower::extract::ClientIp;
use ratekeeper_tower::{RateLimitLayer, Rule};
use reqwest::StatusCode;
use std::time::Duration;

#[tokio::test]
async fn the_tower_crates_client_ip_reads_axums_connect_info() {
    let limit = Limit::fixed_window("tower-ip", 2, Duration::from_secs(60)).unwrap();
    let app: Router = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(RateLimitLayer::in_memory().rule(Rule::new(limit, ClientIp::new())));
    let server = Server::start(app).await.unwrap();
    let http = client();
    let mut statuses = Vec::new();
    for _ in 0..3 {
        let r = http.get(server.url("/")).send().await.unwrap();
        statuses.push(r.status());
    }
    assert_eq!(
        statuses,
        [
            StatusCode::OK,
            StatusCode::OK,
            StatusCode::TOO_MANY_REQUESTS
        ]
    );
}
