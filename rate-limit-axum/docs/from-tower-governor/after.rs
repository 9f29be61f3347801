// After: ratekeeper-axum. The same limit: per client, a burst of 5, then one every 2 s.
use std::net::SocketAddr;
use std::time::Duration;

use axum::body::Bytes;
use axum::http::Response;
use axum::{Router, routing::get};
use ratekeeper_axum::tower::Refusal;
use ratekeeper_axum::tower::extract::ClientIp;
use ratekeeper_axum::{Answering, ConfigError, Limit, RateLimitLayer, Rule};

pub fn app() -> Result<Router, ConfigError> {
    // A bucket of 5 that wins back 1 request every 2 s: burst_size(5) and per_second(2).
    let limit = Limit::token_bucket("api", 5, 1, Duration::from_secs(2))?;
    // The TCP peer. Behind proxies, name them, and the rightmost hop that is not one of
    // yours is the client: ClientIp::new().trusted_proxies(["10.0.0.0/8".parse()?]).
    let client = ClientIp::new();
    // Every refusal, typed: a limit's 429 with its wait, a missing key's 500, a deny
    // list's 403. The layer adds Retry-After (never 0) and the RateLimit fields.
    let answering = Answering::new().with_responder(|refusal: &Refusal| {
        let mut response = Response::new(Bytes::from_static(b"slow down"));
        *response.status_mut() = refusal.status();
        response
    });
    // RateLimit-Limit, -Remaining, -Reset and the IETF RateLimit-Policy and RateLimit
    // fields on every answer, by default.
    let layer = RateLimitLayer::in_memory()
        .rule(Rule::new(limit, client))
        .answering(answering);
    Ok(Router::new()
        .route("/api", get(|| async { "hello" }))
        .layer(layer))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
    // The peer address, for ClientIp.
    let service = app()?.into_make_service_with_connect_info::<SocketAddr>();
    axum::serve(listener, service).await?;
    Ok(())
}
