//! `cargo run --release -p ratekeeper-examples --bin bench-server` (see
//! `ratekeeper_examples::bench_server` for the environment).
//! `BENCH_METRICS=1`: Prometheus text at `/metrics` on `BENCH_METRICS_BIND` (default
//! `127.0.0.1:9900`).

use ratekeeper_examples::bench_server::{BenchConfig, app, serve};

#[tokio::main]
async fn main() {
    tracing_subscriber::fmt().init();
    if let Err(e) = ratekeeper_examples::metrics_from_env("BENCH", 9900).await {
        eprintln!("bench-server: {e}");
        std::process::exit(1);
    }
    ratekeeper_examples::verify_at_start().await;
    let router = BenchConfig::from_env()
        .and_then(|c| app(&c))
        .unwrap_or_else(|e| {
            eprintln!("bench-server: {e}");
            std::process::exit(2)
        });
    let bind = std::env::var("BENCH_BIND").unwrap_or_else(|_| "127.0.0.1:3900".to_owned());
    let listener = tokio::net::TcpListener::bind(&bind)
        .await
        .unwrap_or_else(|e| {
            eprintln!("bench-server: cannot listen on {bind}: {e}");
            std::process::exit(1)
        });
    println!(
        "listening on http://{}",
        listener.local_addr().map_or(bind, |a| a.to_string())
    );
    if let Err(e) = serve(listener, router).await {
        eprintln!("bench-server: {e}");
        std::process::exit(1);
    }
}
