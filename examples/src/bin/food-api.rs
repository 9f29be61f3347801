//! `cargo run -p ratekeeper-examples --bin food-api` (`FOOD_BIND`, default 127.0.0.1:3003;
//! `REDIS_URL` to count in Redis).
//! `FOOD_METRICS=1`: Prometheus text at `/metrics` on `FOOD_METRICS_BIND` (default
//! `127.0.0.1:9003`).

use ratekeeper_examples::food_api::{app, serve};

#[tokio::main]
async fn main() {
    tracing_subscriber::fmt().init();
    if let Err(e) = ratekeeper_examples::metrics_from_env("FOOD", 9003).await {
        eprintln!("food-api: {e}");
        std::process::exit(1);
    }
    ratekeeper_examples::verify_at_start().await;
    let router = app().unwrap_or_else(|e| {
        eprintln!("food-api: {e}");
        std::process::exit(2)
    });
    let bind = std::env::var("FOOD_BIND").unwrap_or_else(|_| "127.0.0.1:3003".to_owned());
    let listener = tokio::net::TcpListener::bind(&bind)
        .await
        .unwrap_or_else(|e| {
            eprintln!("food-api: cannot listen on {bind}: {e}");
            std::process::exit(1)
        });
    println!(
        "listening on http://{}",
        listener.local_addr().map_or(bind, |a| a.to_string())
    );
    if let Err(e) = serve(listener, router).await {
        eprintln!("food-api: {e}");
        std::process::exit(1);
    }
}
