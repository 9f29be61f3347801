use axum::{Router, routing::get};
use ratekeeper_axum::{Answering, Limit, RateLimitLayer, Rule, client_ip};
use std::net::SocketAddr;
use std::time::Duration;

fn app() -> Result<Router, ratekeeper_axum::ConfigError> {
    let minute = Duration::from_secs(60);
    // Browsers are sent to a page; other clients get 429 with Retry-After.
    let answering = Answering::new().redirect_browsers("/too-many-requests")?;
    // A bot guard on every route, per client IP, counted in process memory.
    let guard = RateLimitLayer::in_memory()
        .rule(Rule::new(Limit::sliding_window("global-ip", 1_200, minute)?, client_ip()))
        .exempt("/healthz")
        .answering(answering.clone());
    // The poll: 20 a minute per client.
    let poll = RateLimitLayer::in_memory()
        .rule(Rule::new(Limit::sliding_window("poll", 20, minute)?, client_ip()))
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
    // client_ip() needs the peer address: serve with connect info.
    let service = app()?.into_make_service_with_connect_info::<SocketAddr>();
    let server = axum::serve(listener, service);
    // A real server awaits `server` (add `.with_graceful_shutdown(..)` for Ctrl-C);
    // this example stops here so that it can run as a test.
    drop(server);
    Ok(())
}
