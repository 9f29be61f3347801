//! `EDGE_STORE=slow cargo run -p ratekeeper-examples --bin edge-fallback`, then
//! `curl -i localhost:3001/api/items` and watch one `rate_limit.fallback` line.
//! `EDGE_METRICS=1`: Prometheus text at `/metrics` on `EDGE_METRICS_BIND` (default
//! `127.0.0.1:9001`).

use ratekeeper_examples::edge_fallback::{EdgeStore, app, serve};

#[tokio::main]
async fn main() {
    tracing_subscriber::fmt().init();
    if let Err(e) = ratekeeper_examples::metrics_from_env("EDGE", 9001).await {
        eprintln!("edge-fallback: {e}");
        std::process::exit(1);
    }
    ratekeeper_examples::verify_at_start().await;
    let router = app(&EdgeStore::from_env()).unwrap_or_else(|e| {
        eprintln!("edge-fallback: {e}");
        std::process::exit(2)
    });
    let bind = std::env::var("EDGE_BIND").unwrap_or_else(|_| "127.0.0.1:3001".to_owned());
    let listener = tokio::net::TcpListener::bind(&bind)
        .await
        .unwrap_or_else(|e| {
            eprintln!("edge-fallback: cannot listen on {bind}: {e}");
            std::process::exit(1)
        });
    println!(
        "listening on http://{}",
        listener.local_addr().map_or(bind, |a| a.to_string())
    );
    if let Err(e) = serve(listener, router).await {
        eprintln!("edge-fallback: {e}");
        std::process::exit(1);
    }
}
