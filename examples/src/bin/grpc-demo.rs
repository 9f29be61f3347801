//! `cargo run -p ratekeeper-examples --bin grpc-demo` (`GRPC_BIND`, default
//! `127.0.0.1:3005`; `REDIS_URL` to count in Redis): `demo.Quiz/Answer` over gRPC and
//! `POST /answers` over HTTP, one budget of 5 a minute per `x-participant-id`.

use ratekeeper_examples::grpc_demo::{app, serve};

#[tokio::main]
async fn main() {
    tracing_subscriber::fmt().init();
    ratekeeper_examples::verify_at_start().await;
    let router = app().unwrap_or_else(|e| {
        eprintln!("grpc-demo: {e}");
        std::process::exit(2)
    });
    let bind = std::env::var("GRPC_BIND").unwrap_or_else(|_| "127.0.0.1:3005".to_owned());
    let listener = tokio::net::TcpListener::bind(&bind)
        .await
        .unwrap_or_else(|e| {
            eprintln!("grpc-demo: cannot listen on {bind}: {e}");
            std::process::exit(1)
        });
    println!(
        "listening on http://{} (gRPC and HTTP)",
        listener.local_addr().map_or(bind, |a| a.to_string())
    );
    if let Err(e) = serve(listener, router).await {
        eprintln!("grpc-demo: {e}");
        std::process::exit(1);
    }
}
