//! `cargo run -p ratekeeper-examples --bin platform` (`PLATFORM_BIND`, default 127.0.0.1:3004;
//! `REDIS_URL` to count in Redis).
//! `PLATFORM_METRICS=1`: Prometheus text at `/metrics` on `PLATFORM_METRICS_BIND` (default
//! `127.0.0.1:9004`).

use ratekeeper_examples::Binary;
use ratekeeper_examples::platform::{app, serve};

#[tokio::main]
async fn main() {
    Binary::new("platform", "PLATFORM", "127.0.0.1:3004")
        .metrics(9004)
        .run(app, serve)
        .await;
}
