//! `cargo run -p ratekeeper-example-grpc --bin grpc-demo` (`GRPC_BIND`, default
//! `127.0.0.1:3005`; `REDIS_URL` to count in Redis): `demo.Quiz/Answer` over gRPC and
//! `POST /answers` over HTTP, one budget of 5 a minute per `x-participant-id`.

use ratekeeper_example_grpc::{app, serve};
use ratekeeper_examples::Binary;

#[tokio::main]
async fn main() {
    Binary::new("grpc-demo", "GRPC", "127.0.0.1:3005")
        .listening(" (gRPC and HTTP)")
        .run(app, serve)
        .await;
}
