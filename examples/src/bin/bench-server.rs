//! `cargo run --release -p ratekeeper-examples --bin bench-server` (see
//! `ratekeeper_examples::bench_server` for the environment).
//! `BENCH_METRICS=1`: Prometheus text at `/metrics` on `BENCH_METRICS_BIND` (default
//! `127.0.0.1:9900`).

use ratekeeper_examples::Binary;
use ratekeeper_examples::bench_server::{BenchConfig, app, serve};

#[tokio::main]
async fn main() {
    Binary::new("bench-server", "BENCH", "127.0.0.1:3900")
        .metrics(9900)
        .run(|| BenchConfig::from_env().and_then(|c| app(&c)), serve)
        .await;
}
