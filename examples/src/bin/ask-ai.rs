//! `cargo run -p ratekeeper-examples --bin ask-ai` (`ASK_BIND`, default 127.0.0.1:3002;
//! `REDIS_URL` to count in Redis).
//! `ASK_METRICS=1`: Prometheus text at `/metrics` on `ASK_METRICS_BIND` (default
//! `127.0.0.1:9002`).

use ratekeeper_examples::Binary;
use ratekeeper_examples::ask_ai::{app, serve};

#[tokio::main]
async fn main() {
    Binary::new("ask-ai", "ASK", "127.0.0.1:3002")
        .metrics(9002)
        .run(app, serve)
        .await;
}
