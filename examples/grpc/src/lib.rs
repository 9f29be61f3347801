//! grpc-demo: one port, HTTP/1.1 and plaintext HTTP/2 alike, serving a gRPC service and an
//! HTTP route under one budget: `demo.Quiz/Answer` (unary) and `POST /answers` share 5 a
//! minute per `x-participant-id` (gRPC metadata or HTTP header); `demo.Quiz/Watch`
//! (server streaming) holds one in-flight slot per participant until the stream ends or
//! the client cancels it.
//!
//! The messages are written by hand with `prost` (no `.proto` to compile, no `protoc`):
//!
//! ```text
//! package demo;
//! service Quiz {
//!   rpc Answer (AnswerRequest) returns (AnswerReply);
//!   rpc Watch (WatchRequest) returns (stream Tick);
//! }
//! message AnswerRequest {}
//! message AnswerReply {}
//! message WatchRequest { uint32 count = 1; uint32 every_ms = 2; }
//! message Tick { uint32 n = 1; }
//! ```

use std::convert::Infallible;
use std::future::{Ready, ready};
use std::net::SocketAddr;
use std::pin::Pin;
use std::time::Duration;

use axum::Router;
use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use axum::routing::{post, post_service};
use ratekeeper_core::{
    AnyStore, ConfigError, FailurePolicy, InFlight, Limit, Limiter, PrincipalKind,
};
use ratekeeper_tower::extract::HeaderKey;
use ratekeeper_tower::{InFlightRule, RateLimitLayer, Rule};
use tokio::net::TcpListener;
use tonic::codegen::tokio_stream::Stream;
use tonic_prost::ProstCodec;

/// The unary method's path.
pub const ANSWER: &str = "/demo.Quiz/Answer";
/// The server-streaming method's path.
pub const WATCH: &str = "/demo.Quiz/Watch";

/// `demo.AnswerRequest`.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct AnswerRequest {}

/// `demo.AnswerReply`.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct AnswerReply {}

/// `demo.WatchRequest`: `count` ticks, one every `every_ms`.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct WatchRequest {
    /// How many ticks.
    #[prost(uint32, tag = "1")]
    pub count: u32,
    /// Milliseconds between ticks.
    #[prost(uint32, tag = "2")]
    pub every_ms: u32,
}

/// `demo.Tick`.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct Tick {
    /// The tick's number, from 1.
    #[prost(uint32, tag = "1")]
    pub n: u32,
}

#[derive(Clone, Copy)]
struct AnswerSvc;

impl tonic::server::UnaryService<AnswerRequest> for AnswerSvc {
    type Response = AnswerReply;
    type Future = Ready<Result<tonic::Response<AnswerReply>, tonic::Status>>;

    fn call(&mut self, _: tonic::Request<AnswerRequest>) -> Self::Future {
        ready(Ok(tonic::Response::new(AnswerReply {})))
    }
}

type Ticks = Pin<Box<dyn Stream<Item = Result<Tick, tonic::Status>> + Send>>;

#[derive(Clone, Copy)]
struct WatchSvc;

impl tonic::server::ServerStreamingService<WatchRequest> for WatchSvc {
    type Response = Tick;
    type ResponseStream = Ticks;
    type Future = Ready<Result<tonic::Response<Ticks>, tonic::Status>>;

    fn call(&mut self, req: tonic::Request<WatchRequest>) -> Self::Future {
        let WatchRequest { count, every_ms } = req.into_inner();
        let every = Duration::from_millis(u64::from(every_ms.clamp(1, 10_000)));
        let ticks = futures_util::stream::unfold(0u32, move |n| async move {
            if n >= count.min(100_000) {
                return None;
            }
            tokio::time::sleep(every).await;
            Some((Ok(Tick { n: n + 1 }), n + 1))
        });
        ready(Ok(tonic::Response::new(Box::pin(ticks) as Ticks)))
    }
}

/// The unary method as a service function (for routers of your own).
pub async fn answer(req: Request) -> Result<Response, Infallible> {
    let codec = ProstCodec::<AnswerReply, AnswerRequest>::default();
    let resp = tonic::server::Grpc::new(codec).unary(AnswerSvc, req).await;
    Ok(resp.map(axum::body::Body::new))
}

async fn watch(req: Request) -> Result<Response, Infallible> {
    let codec = ProstCodec::<Tick, WatchRequest>::default();
    let resp = tonic::server::Grpc::new(codec)
        .server_streaming(WatchSvc, req)
        .await;
    Ok(resp.map(axum::body::Body::new))
}

fn participant() -> HeaderKey {
    HeaderKey::new(
        http::HeaderName::from_static("x-participant-id"),
        PrincipalKind::Participant,
    )
}

/// The demo over `store`: the answers' budget fails closed (a gRPC `UNAVAILABLE` with a
/// retry hint while the store is down).
pub fn app_with_store(store: AnyStore) -> Result<Router, ConfigError> {
    let limiter = Limiter::new(store);
    let answers = RateLimitLayer::new(limiter.clone()).rule(
        Rule::new(
            Limit::fixed_window("answers", 5, Duration::from_secs(60))?,
            participant(),
        )
        .on_store_error(FailurePolicy::Closed),
    );
    let watchers = RateLimitLayer::new(limiter).in_flight(InFlightRule::new(
        InFlight::new("watchers", 1, Duration::from_secs(30))?,
        participant(),
    ));
    // The limit on the routes' methods (`MethodRouter::route_layer`): a wrong method is
    // answered 405 and spends nothing of the budget.
    let shared_budget = Router::new()
        .route(
            "/answers",
            post(|| async { "{\"ok\":true}".into_response() }).route_layer(answers.clone()),
        )
        .route(
            ANSWER,
            post_service(tower::service_fn(answer)).route_layer(answers),
        );
    let streams = Router::new()
        .route_service(WATCH, tower::service_fn(watch))
        .route_layer(watchers);
    Ok(shared_budget.merge(streams))
}

/// The demo on Redis (`REDIS_URL`) or in memory.
pub fn app() -> Result<Router, ConfigError> {
    let store = ratekeeper_examples::store_from_env()?;
    app_with_store(store)
}

/// Serves `app` on `listener`, HTTP/1.1 and plaintext HTTP/2 (gRPC) on the one port.
pub async fn serve(listener: TcpListener, app: Router) -> std::io::Result<()> {
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .await
}
