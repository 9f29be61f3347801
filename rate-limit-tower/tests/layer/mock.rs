//! The service's mechanics against a mock inner service (`tower-test`): `poll_ready` only
//! forwards the inner service's readiness, and a call that must wait for the store takes
//! the service that was polled ready and leaves a fresh clone in its place.

use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use ratekeeper_core::store::BoxStore;
use ratekeeper_core::testing::FaultyStore;
use ratekeeper_tower::extract::Global;
use ratekeeper_tower::{RateLimit, ResponseBody, Rule};
use tower::Service;
use tower_test::mock;

use crate::support::*;

type Mock = mock::Mock<Request<Body>, Response<ResponseBody<Body>>>;

fn ready(svc: &mut RateLimit<Mock>) -> bool {
    let mut cx = Context::from_waker(Waker::noop());
    matches!(svc.poll_ready(&mut cx), Poll::Ready(Ok(())))
}

#[tokio::test]
async fn poll_ready_forwards_backpressure_and_the_ready_service_serves_the_call() {
    let (inner, mut handle) = mock::pair::<Request<Body>, Response<ResponseBody<Body>>>();
    // A store that answers only asynchronously: the call goes through the waiting path.
    let layer = RateLimit::<Mock>::layer(ratekeeper_core::Limiter::new(BoxStore::new(
        FaultyStore::new(),
    )))
    .rule(Rule::new(minute("mock", 1), Global));
    let mut svc = tower::Layer::layer(&layer, inner);

    // The inner service is not ready: neither is the limiter, and it never is on its own.
    handle.allow(0);
    assert!(!ready(&mut svc));
    handle.allow(1);
    assert!(ready(&mut svc));

    // The call runs on the service that was polled ready, although the store answers
    // later; the clone left behind must be polled ready again (the mock panics otherwise).
    let call = tokio::spawn(svc.call(Request::new(Full::new(Bytes::new()))));
    let (req, send) = handle
        .next_request()
        .await
        .expect("the request reaches the inner service");
    assert_eq!(req.uri(), "/");
    send.send_response(Response::new(ResponseBody::new(Full::new(
        Bytes::from_static(b"inner"),
    ))));
    let resp = call.await.unwrap().unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.headers()["ratelimit-remaining"], "0");

    // The next call is refused by the limiter: it answers 429 itself, the inner service
    // sees nothing, and the readiness it granted is not spent.
    handle.allow(1);
    assert!(ready(&mut svc));
    let resp = svc
        .call(Request::new(Full::new(Bytes::new())))
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(handle.poll_request().is_pending());

    // The wrappers tower-http's services have.
    let _: &Mock = svc.get_ref();
    let _: &mut Mock = svc.get_mut();
    let _: Mock = svc.into_inner();
}
