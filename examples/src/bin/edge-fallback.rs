//! `EDGE_STORE=slow cargo run -p ratekeeper-examples --bin edge-fallback`, then
//! `curl -i localhost:3001/api/items` and watch one `rate_limit.fallback` line.
//! `EDGE_METRICS=1`: Prometheus text at `/metrics` on `EDGE_METRICS_BIND` (default
//! `127.0.0.1:9001`).

use ratekeeper_examples::Binary;
use ratekeeper_examples::edge_fallback::{EdgeStore, app, serve};

#[tokio::main]
async fn main() {
    Binary::new("edge-fallback", "EDGE", "127.0.0.1:3001")
        .metrics(9001)
        .run(|| app(&EdgeStore::from_env()), serve)
        .await;
}
