//! gRPC end to end, with a real tonic client: a package of its own, so that only these
//! tests build tonic and prost (`cargo test -p ratekeeper-tests-grpc`).

mod demo;
mod refusals;
