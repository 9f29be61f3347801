//! gRPC through the same layer, over TCP with a real tonic client and a real HTTP client,
//! on the memory store and a real `redis-server`: grpc-demo's unary method and HTTP route
//! share one budget (5 calls mixed across protocols, then `RESOURCE_EXHAUSTED` with a
//! `RetryInfo` and the HTTP route's 429); Redis stopped under a closed policy is
//! `UNAVAILABLE`; a missing principal is `INVALID_ARGUMENT`; a server-streaming call holds
//! its in-flight slot until the client cancels it.

use std::time::Duration;

use http::uri::PathAndQuery;
use ratekeeper_core::{AnyStore, MemoryStore};
use ratekeeper_example_grpc::{
    ANSWER, AnswerReply, AnswerRequest, Tick, WATCH, WatchRequest, app_with_store,
};
use ratekeeper_tests::redis::RedisServer;
use ratekeeper_tests::{Server, client};
use tonic::Code;
use tonic::transport::Channel;
use tonic_prost::ProstCodec;
use tonic_types::StatusExt;

async fn channel(s: &Server) -> tonic::client::Grpc<Channel> {
    channel_to(s.addr()).await
}

async fn channel_to(addr: std::net::SocketAddr) -> tonic::client::Grpc<Channel> {
    let ch = Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    tonic::client::Grpc::new(ch)
}

fn with_participant<T>(msg: T, who: Option<&str>) -> tonic::Request<T> {
    let mut r = tonic::Request::new(msg);
    if let Some(w) = who {
        r.metadata_mut()
            .insert("x-participant-id", w.parse().unwrap());
    }
    r
}

async fn grpc_answer(
    g: &mut tonic::client::Grpc<Channel>,
    who: Option<&str>,
) -> Result<(), tonic::Status> {
    g.ready().await.unwrap();
    let codec = ProstCodec::<AnswerRequest, AnswerReply>::default();
    g.unary(
        with_participant(AnswerRequest {}, who),
        PathAndQuery::from_static(ANSWER),
        codec,
    )
    .await
    .map(|_| ())
}

/// The next call, refused with `RESOURCE_EXHAUSTED` by the limit `limit`.
async fn refused_by(g: &mut tonic::client::Grpc<Channel>, limit: &str) {
    let refused = grpc_answer(g, None).await.unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    let policy = refused.metadata().get("ratelimit-policy").unwrap();
    assert!(policy.to_str().unwrap().contains(limit), "{policy:?}");
}

async fn http_answer(s: &Server, who: &str) -> reqwest::Response {
    client()
        .post(s.url("/answers"))
        .header("x-participant-id", who)
        .send()
        .await
        .unwrap()
}

async fn one_budget_across_protocols(store: AnyStore) {
    let s = Server::start(app_with_store(store).unwrap()).await.unwrap();
    let mut g = channel(&s).await;
    // 5 mixed: gRPC, HTTP, gRPC, HTTP, gRPC.
    for i in 0..5 {
        if i % 2 == 0 {
            grpc_answer(&mut g, Some("alice")).await.unwrap();
        } else {
            assert_eq!(http_answer(&s, "alice").await.status(), 200);
        }
    }
    let refused = grpc_answer(&mut g, Some("alice")).await.unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    let retry = refused.get_details_retry_info().expect("a RetryInfo");
    let wait = retry.retry_delay.expect("a delay");
    assert!(
        wait > Duration::ZERO && wait <= Duration::from_secs(60),
        "{wait:?}"
    );
    let md = refused.metadata();
    assert!(
        md.get("ratelimit-policy").is_some(),
        "the fields as metadata: {md:?}"
    );
    assert!(
        refused.message().contains("rate limit exceeded"),
        "{}",
        refused.message()
    );
    let http = http_answer(&s, "alice").await;
    assert_eq!(http.status(), 429);
    assert!(
        http.headers().get("grpc-status").is_none(),
        "HTTP answered as HTTP"
    );
    // Another participant has a budget of its own; an allowed call carries the fields.
    g.ready().await.unwrap();
    let codec = ProstCodec::<AnswerRequest, AnswerReply>::default();
    let ok = g
        .unary(
            with_participant(AnswerRequest {}, Some("bob")),
            PathAndQuery::from_static(ANSWER),
            codec,
        )
        .await
        .unwrap();
    assert!(
        ok.metadata().get("ratelimit").is_some(),
        "{:?}",
        ok.metadata()
    );
    // No participant: the extractor's 400, as INVALID_ARGUMENT (no JSON, no redirect).
    let missing = grpc_answer(&mut g, None).await.unwrap_err();
    assert_eq!(missing.code(), Code::InvalidArgument, "{missing:?}");
    assert!(
        missing.message().contains("principal.missing"),
        "{}",
        missing.message()
    );
}

#[tokio::test]
async fn one_budget_across_grpc_and_http_on_memory() {
    one_budget_across_protocols(AnyStore::Memory(MemoryStore::new())).await;
}

#[tokio::test]
async fn one_budget_across_grpc_and_http_on_redis() {
    let redis = RedisServer::start();
    one_budget_across_protocols(redis.store()).await;
}

/// Redis stopped: the answers' closed policy is `UNAVAILABLE`, with a retry hint.
/// A wrong method on a limited route (GET on `/answers` or on the gRPC method's path) is
/// 405 and spends nothing: the participant still has its five answers.
#[tokio::test]
async fn a_wrong_method_spends_nothing() {
    let s = Server::start(app_with_store(AnyStore::Memory(MemoryStore::new())).unwrap())
        .await
        .unwrap();
    for path in ["/answers", ANSWER] {
        for _ in 0..6 {
            let r = client()
                .get(s.url(path))
                .header("x-participant-id", "dora")
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 405, "GET {path}");
        }
    }
    let mut answered = Vec::new();
    for _ in 0..6 {
        answered.push(http_answer(&s, "dora").await.status().as_u16());
    }
    assert_eq!(answered, [200, 200, 200, 200, 200, 429]);
}

#[tokio::test]
async fn a_stopped_redis_is_unavailable_with_a_retry_hint() {
    let mut redis = RedisServer::start();
    let s = Server::start(app_with_store(redis.store()).unwrap())
        .await
        .unwrap();
    let mut g = channel(&s).await;
    grpc_answer(&mut g, Some("carol")).await.unwrap();
    redis.kill();
    let down = grpc_answer(&mut g, Some("carol")).await.unwrap_err();
    assert_eq!(down.code(), Code::Unavailable, "{down:?}");
    let delay = down
        .get_details_retry_info()
        .and_then(|r| r.retry_delay)
        .expect("a RetryInfo");
    // The same wait for gRPC's own retry policy, in milliseconds.
    let pushback: u64 = down
        .metadata()
        .get("grpc-retry-pushback-ms")
        .expect("grpc-retry-pushback-ms")
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(pushback, delay.as_secs() * 1_000, "{down:?}");
    assert_eq!(http_answer(&s, "carol").await.status(), 503);
}

async fn watch(
    g: &mut tonic::client::Grpc<Channel>,
    who: &str,
) -> Result<tonic::Streaming<Tick>, tonic::Status> {
    g.ready().await.unwrap();
    let codec = ProstCodec::<WatchRequest, Tick>::default();
    let req = with_participant(
        WatchRequest {
            count: 1_000,
            every_ms: 20,
        },
        Some(who),
    );
    g.server_streaming(req, PathAndQuery::from_static(WATCH), codec)
        .await
        .map(tonic::Response::into_inner)
}

/// A server-streaming call holds its slot while it streams; a second is refused; the first,
/// cancelled by the client, gives its slot back.
async fn a_cancelled_stream_frees_its_slot(store: AnyStore) {
    let s = Server::start(app_with_store(store).unwrap()).await.unwrap();
    let mut g = channel(&s).await;
    let mut first = watch(&mut g, "dave").await.unwrap();
    assert_eq!(first.message().await.unwrap().map(|t| t.n), Some(1));
    let second = watch(&mut g, "dave")
        .await
        .expect_err("one stream at a time");
    assert_eq!(second.code(), Code::ResourceExhausted, "{second:?}");
    assert!(
        watch(&mut g, "erin").await.is_ok(),
        "another participant's slot"
    );
    drop(first);
    let mut freed = false;
    for _ in 0..100 {
        if let Ok(mut again) = watch(&mut g, "dave").await {
            assert_eq!(again.message().await.unwrap().map(|t| t.n), Some(1));
            freed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(freed, "the cancelled stream's slot came back");
}

#[tokio::test]
async fn a_cancelled_stream_frees_its_slot_on_memory() {
    a_cancelled_stream_frees_its_slot(AnyStore::Memory(MemoryStore::new())).await;
}

#[tokio::test]
async fn a_cancelled_stream_frees_its_slot_on_redis() {
    let redis = RedisServer::start();
    a_cancelled_stream_frees_its_slot(redis.store()).await;
}

/// The method path is a key part: `RouteTemplate` names a gRPC method as it names a route
/// (here alone: one call per method a minute).
#[tokio::test]
async fn the_method_path_is_a_key_part() {
    let per_method =
        ratekeeper_tower::RateLimitLayer::in_memory().rule(ratekeeper_tower::Rule::new(
            ratekeeper_core::Limit::fixed_window("per-method", 1, Duration::from_secs(60)).unwrap(),
            ratekeeper_axum::RouteTemplate,
        ));
    let app = axum::Router::new()
        .route_service(ANSWER, tower::service_fn(ratekeeper_example_grpc::answer))
        .route_layer(per_method);
    let s = Server::start(app).await.unwrap();
    let mut g = channel(&s).await;
    grpc_answer(&mut g, None).await.unwrap();
    refused_by(&mut g, "per-method").await;
}

/// `demo.Quiz` as tonic's own server wants a service: named, over tonic's body.
#[derive(Clone, Copy)]
struct Quiz;

impl tonic::server::NamedService for Quiz {
    const NAME: &'static str = "demo.Quiz";
}

impl tower::Service<http::Request<tonic::body::Body>> for Quiz {
    type Response = http::Response<tonic::body::Body>;
    type Error = std::convert::Infallible;
    type Future = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<Self::Response, Self::Error>> + Send>,
    >;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<tonic::body::Body>) -> Self::Future {
        Box::pin(async move {
            let resp = ratekeeper_example_grpc::answer(req.map(axum::body::Body::new)).await?;
            Ok(resp.map(tonic::body::Body::new))
        })
    }
}

/// Under tonic's own `transport::Server`, `ClientIp` names the client from tonic's
/// `TcpConnectInfo` (its `peer_source`, as the README shows): two calls a minute per
/// address, then `RESOURCE_EXHAUSTED`.
#[tokio::test]
async fn under_tonics_own_server_the_client_ip_is_the_connections() {
    let layer = ratekeeper_tower::RateLimitLayer::in_memory().rule(ratekeeper_tower::Rule::new(
        ratekeeper_core::Limit::fixed_window("per-ip-grpc", 2, Duration::from_secs(60)).unwrap(),
        ratekeeper_tower::extract::ClientIp::new().peer_source(|ext| {
            ext.get::<tonic::transport::server::TcpConnectInfo>()
                .and_then(tonic::transport::server::TcpConnectInfo::remote_addr)
                .map(|a| a.ip())
        }),
    ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(
        tonic::transport::Server::builder()
            // The layer answers in its inner service's body type: tonic's body, wrapped.
            .layer(tower::ServiceBuilder::new().layer(layer).map_response(
                |r: http::Response<tonic::body::Body>| r.map(ratekeeper_tower::ResponseBody::new),
            ))
            .add_service(Quiz)
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
    );
    let mut g = channel_to(addr).await;
    grpc_answer(&mut g, None).await.unwrap();
    grpc_answer(&mut g, None).await.unwrap();
    refused_by(&mut g, "per-ip-grpc").await;
    server.abort();
}
