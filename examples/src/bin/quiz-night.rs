//! The quiz-night server: `cargo run --release -p ratekeeper-examples --bin quiz-night`.
//!
//! `QUIZ_BIND` (default `127.0.0.1:3000`), `REDIS_URL` (unset: in-memory),
//! `QUIZ_TRUSTED_PROXIES` (comma-separated CIDRs), `QUIZ_METRICS=1` (Prometheus text at
//! `/metrics` on `QUIZ_METRICS_BIND`, default `127.0.0.1:9000`), `QUIZ_ADMIN_TOKEN` (the admin
//! API and page at `/admin`; `QUIZ_ADMIN_INSECURE_COOKIE=1` over plain HTTP).

use ratekeeper_examples::Binary;
use ratekeeper_examples::quiz_night::{QuizConfig, app, serve};

#[tokio::main]
async fn main() {
    let app = || {
        let cfg = QuizConfig::from_env().map_err(|e| e.to_string())?;
        app(&cfg).map_err(|e| e.to_string())
    };
    Binary::new("quiz-night", "QUIZ", "127.0.0.1:3000")
        .metrics(9000)
        .run(app, serve)
        .await;
}
