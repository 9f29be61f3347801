use axum::{Router, routing::get};
use rate_limit_axum::client_ip;
use rate_limit_core::{ConfigError, FailurePolicy, Limit, MemoryStore, PrincipalKind};
use rate_limit_tower::extract::HeaderKey;
use rate_limit_tower::{Answering, RateLimitLayer, Rule};
use std::net::SocketAddr;
use std::time::Duration;

fn app() -> Result<Router, ConfigError> {
    let minute = Duration::from_secs(60);
    let store = MemoryStore::new(); // or a RedisStore: see "Redis" below
    let answering = Answering::new().redirect_browsers("/too-many-requests")?;
    // A bot guard on every route: the client IP is the unit of abuse here.
    let guard = RateLimitLayer::new(store.clone())
        .rule(
            Rule::new(Limit::sliding_window("global-ip", 1_200, minute)?, client_ip())
                .on_store_error(FailurePolicy::Memory),
        )
        .exempt("/healthz")
        .answering(answering.clone());
    // The poll is keyed on the player, not the pub's shared IP.
    let player = HeaderKey::new("x-participant-id".parse().unwrap(), PrincipalKind::Participant);
    let poll = RateLimitLayer::new(store)
        .rule(
            Rule::new(Limit::sliding_window("poll", 20, minute)?, player)
                .on_store_error(FailurePolicy::Open),
        )
        .answering(answering);
    Ok(Router::new()
        // route_layer: a wrong method (405) or path (404) spends nothing of the route's budget.
        .route("/api/poll", get(|| async { "{}" }).route_layer(poll))
        .route("/too-many-requests", get(|| async { "Slow down a little." }))
        .route("/healthz", get(|| async { "ok" }))
        .layer(guard))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    println!("listening on http://{}", listener.local_addr()?);
    // ClientIp needs the peer address: serve with connect info.
    let service = app()?.into_make_service_with_connect_info::<SocketAddr>();
    let server = axum::serve(listener, service);
    // A real server awaits `server` (add `.with_graceful_shutdown(..)` for Ctrl-C);
    // this example stops here so that it can run as a test.
    drop(server);
    Ok(())
}
