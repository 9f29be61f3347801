//! `cargo run -p ratekeeper-examples --bin platform` (`PLATFORM_BIND`, default 127.0.0.1:3004;
//! `REDIS_URL` to count in Redis).
//! `PLATFORM_METRICS=1`: Prometheus text at `/metrics` on `PLATFORM_METRICS_BIND` (default
//! `127.0.0.1:9004`).

use ratekeeper_examples::platform::{app, serve};

#[tokio::main]
async fn main() {
    tracing_subscriber::fmt().init();
    if let Err(e) = ratekeeper_examples::metrics_from_env("PLATFORM", 9004).await {
        eprintln!("platform: {e}");
        std::process::exit(1);
    }
    ratekeeper_examples::verify_at_start().await;
    let router = app().unwrap_or_else(|e| {
        eprintln!("platform: {e}");
        std::process::exit(2)
    });
    let bind = std::env::var("PLATFORM_BIND").unwrap_or_else(|_| "127.0.0.1:3004".to_owned());
    let listener = tokio::net::TcpListener::bind(&bind)
        .await
        .unwrap_or_else(|e| {
            eprintln!("platform: cannot listen on {bind}: {e}");
            std::process::exit(1)
        });
    println!(
        "listening on http://{}",
        listener.local_addr().map_or(bind, |a| a.to_string())
    );
    if let Err(e) = serve(listener, router).await {
        eprintln!("platform: {e}");
        std::process::exit(1);
    }
}
