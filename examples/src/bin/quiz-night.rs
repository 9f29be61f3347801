//! The quiz-night server: `cargo run --release -p ratekeeper-examples --bin quiz-night`.
//!
//! `QUIZ_BIND` (default `127.0.0.1:3000`), `REDIS_URL` (unset: in-memory),
//! `QUIZ_TRUSTED_PROXIES` (comma-separated CIDRs), `QUIZ_METRICS=1` (Prometheus text at
//! `/metrics` on `QUIZ_METRICS_BIND`, default `127.0.0.1:9000`), `QUIZ_ADMIN_TOKEN` (the admin
//! API and page at `/admin`; `QUIZ_ADMIN_INSECURE_COOKIE=1` over plain HTTP).

use ratekeeper_examples::quiz_night::{QuizConfig, app, serve};

#[tokio::main]
async fn main() {
    tracing_subscriber::fmt().init();
    if let Err(e) = ratekeeper_examples::metrics_from_env("QUIZ", 9000).await {
        eprintln!("quiz-night: {e}");
        std::process::exit(1);
    }
    ratekeeper_examples::verify_at_start().await;
    let cfg = match QuizConfig::from_env() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("quiz-night: {e}");
            std::process::exit(2);
        }
    };
    let router = match app(&cfg) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("quiz-night: {e}");
            std::process::exit(2);
        }
    };
    let bind = std::env::var("QUIZ_BIND").unwrap_or_else(|_| "127.0.0.1:3000".to_owned());
    let listener = match tokio::net::TcpListener::bind(&bind).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("quiz-night: cannot listen on {bind}: {e}");
            std::process::exit(1);
        }
    };
    let addr = listener.local_addr().map_or(bind, |a| a.to_string());
    println!("listening on http://{addr}");
    if let Err(e) = serve(listener, router).await {
        eprintln!("quiz-night: {e}");
        std::process::exit(1);
    }
}
