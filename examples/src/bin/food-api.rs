//! `cargo run -p ratekeeper-examples --bin food-api` (`FOOD_BIND`, default 127.0.0.1:3003;
//! `REDIS_URL` to count in Redis).
//! `FOOD_METRICS=1`: Prometheus text at `/metrics` on `FOOD_METRICS_BIND` (default
//! `127.0.0.1:9003`).

use ratekeeper_examples::Binary;
use ratekeeper_examples::food_api::{app, serve};

#[tokio::main]
async fn main() {
    Binary::new("food-api", "FOOD", "127.0.0.1:3003")
        .metrics(9003)
        .run(app, serve)
        .await;
}
