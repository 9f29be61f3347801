//! `cargo run -p ratekeeper-examples --bin ask-ai` (`ASK_BIND`, default 127.0.0.1:3002;
//! `REDIS_URL` to count in Redis).
//! `ASK_METRICS=1`: Prometheus text at `/metrics` on `ASK_METRICS_BIND` (default
//! `127.0.0.1:9002`).

use ratekeeper_examples::ask_ai::{app, serve};

#[tokio::main]
async fn main() {
    tracing_subscriber::fmt().init();
    if let Err(e) = ratekeeper_examples::metrics_from_env("ASK", 9002).await {
        eprintln!("ask-ai: {e}");
        std::process::exit(1);
    }
    ratekeeper_examples::verify_at_start().await;
    let router = app().unwrap_or_else(|e| {
        eprintln!("ask-ai: {e}");
        std::process::exit(2)
    });
    let bind = std::env::var("ASK_BIND").unwrap_or_else(|_| "127.0.0.1:3002".to_owned());
    let listener = tokio::net::TcpListener::bind(&bind)
        .await
        .unwrap_or_else(|e| {
            eprintln!("ask-ai: cannot listen on {bind}: {e}");
            std::process::exit(1)
        });
    println!(
        "listening on http://{}",
        listener.local_addr().map_or(bind, |a| a.to_string())
    );
    if let Err(e) = serve(listener, router).await {
        eprintln!("ask-ai: {e}");
        std::process::exit(1);
    }
}
