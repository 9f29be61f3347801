use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use ratekeeper_core::clock::FakeClock;
use ratekeeper_core::{AnyStore, Limit, Limiter, MemoryStore};
use ratekeeper_tower::{RateLimit, RateLimitInfo, RateLimitLayer};
use tower::{Layer, Service, ServiceExt, service_fn};

/// A start on a day boundary far from zero, like a real epoch time.
pub(crate) const T0: u64 = 1_799_971_200_000_000;

pub(crate) type Body = Full<Bytes>;

/// The handler's response body: a boxed body, one the layer answers in ([`LimitBody`]).
///
/// [`LimitBody`]: ratekeeper_tower::LimitBody
pub(crate) type ResBody = http_body_util::combinators::UnsyncBoxBody<Bytes, Infallible>;

pub(crate) type LayeredApp = RateLimit<
    tower::util::ServiceFn<
        fn(Request<Body>) -> std::future::Ready<Result<Response<ResBody>, Infallible>>,
    >,
>;

fn ok(_: Request<Body>) -> std::future::Ready<Result<Response<ResBody>, Infallible>> {
    std::future::ready(Ok(Response::new(
        Full::new(Bytes::from_static(b"ok")).boxed_unsync(),
    )))
}

/// The layer around a handler that answers `ok`.
pub(crate) fn app(layer: &RateLimitLayer) -> LayeredApp {
    layer.layer(service_fn(ok as fn(_) -> _))
}

/// A memory store on a frozen clock, and a layer over it.
pub(crate) fn fresh() -> (RateLimitLayer, FakeClock) {
    let clock = FakeClock::at_micros(T0);
    let store = MemoryStore::builder().clock(clock.clone()).build().unwrap();
    (
        RateLimitLayer::new(Limiter::new(AnyStore::Memory(store))),
        clock,
    )
}

pub(crate) fn minute(name: &str, quota: u64) -> Limit {
    Limit::fixed_window(name, quota, Duration::from_secs(60)).unwrap()
}

/// A request from `peer`.
pub(crate) fn from(peer: &str) -> http::request::Builder {
    Request::builder()
        .uri("/api")
        .extension(peer.parse::<SocketAddr>().unwrap())
}

pub(crate) struct Reply {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) body: String,
    pub(crate) info: Option<RateLimitInfo>,
}

pub(crate) async fn send<S, B>(svc: S, req: Request<Body>) -> Reply
where
    S: Service<Request<Body>, Response = Response<B>, Error = Infallible>,
    B: http_body::Body,
    B::Error: std::fmt::Debug,
{
    let resp = svc.oneshot(req).await.unwrap();
    let (parts, body) = resp.into_parts();
    let bytes = body.collect().await.unwrap().to_bytes();
    Reply {
        status: parts.status,
        headers: parts.headers,
        body: String::from_utf8_lossy(&bytes).into_owned(),
        info: parts.extensions.get::<RateLimitInfo>().cloned(),
    }
}

/// A request from `1.2.3.4:5` by the participant `id` (`x-participant-id`).
pub(crate) fn player(id: &str) -> Request<Body> {
    from("1.2.3.4:5")
        .header("x-participant-id", id)
        .body(empty())
        .unwrap()
}

pub(crate) fn empty() -> Body {
    Full::new(Bytes::new())
}

impl Reply {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

pub(crate) fn assert_send_sync<T: Send + Sync>() {}
pub(crate) fn assert_send<T: Send>(_: &T) {}

/// `x-participant-id` as a participant.
pub(crate) fn participant() -> ratekeeper_tower::extract::HeaderKey {
    ratekeeper_tower::extract::HeaderKey::new(
        "x-participant-id".parse().unwrap(),
        ratekeeper_core::PrincipalKind::Participant,
    )
}
