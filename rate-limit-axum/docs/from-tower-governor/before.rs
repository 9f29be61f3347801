// Before: tower_governor 0.8. Per client, a burst of 5, then one request every 2 s.
use std::net::SocketAddr;

use axum::body::Body;
use axum::http::Response;
use axum::{Router, routing::get};
use tower_governor::key_extractor::SmartIpKeyExtractor;
use tower_governor::{GovernorError, GovernorLayer, governor::GovernorConfigBuilder};

pub fn app() -> Router {
    let config = GovernorConfigBuilder::default()
        .per_second(2) // the time to win back ONE request: 2 s (not 2 a second)
        .burst_size(5)
        // X-Forwarded-For's leftmost hop, X-Real-IP or Forwarded, else the TCP peer
        .key_extractor(SmartIpKeyExtractor)
        // x-ratelimit-limit and x-ratelimit-remaining; x-ratelimit-after on a refusal
        .use_headers()
        .finish()
        .expect("a period and a burst above zero");
    let layer = GovernorLayer::new(config).error_handler(|error: GovernorError| {
        // A refusal (429, its wait in whole seconds) or a key it could not extract (500).
        let (parts, _) = error.into_response().into_parts();
        Response::from_parts(parts, Body::from("slow down"))
    });
    Router::new()
        .route("/api", get(|| async { "hello" }))
        .layer(layer)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
    // The peer address, for the key extractor.
    let service = app().into_make_service_with_connect_info::<SocketAddr>();
    axum::serve(listener, service).await?;
    Ok(())
}
