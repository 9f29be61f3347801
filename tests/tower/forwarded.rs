//! A byte the client writes into `X-Forwarded-For` never turns it into the trusted proxy:
//! hops are read from the raw bytes, right to left, and a header that names no usable client
//! is a 400 — never the proxy's own address, which sits on allow lists.

use std::time::Duration;

use axum::Router;
use axum::routing::get;
use ratekeeper_core::Limit;
use ratekeeper_tests::{Server, client, connect_info_peer};
use ratekeeper_tower::access::{Access, List};
use ratekeeper_tower::extract::ClientIp;
use ratekeeper_tower::{RateLimitLayer, Rule};
use reqwest::StatusCode;
use reqwest::header::HeaderValue;

#[tokio::test]
async fn a_byte_left_of_the_client_never_makes_the_client_the_allowed_proxy() {
    let ip = ClientIp::new()
        .peer_source(connect_info_peer)
        .trusted_proxies(["127.0.0.0/8".parse().unwrap()]);
    // The proxy itself is allowed (its health checks), one address is denied.
    let access = Access::new(ip.clone())
        .allow(List::parse(&["127.0.0.1"]).unwrap())
        .deny(List::parse(&["203.0.113.66"]).unwrap());
    let layer = RateLimitLayer::in_memory()
        .rule(Rule::new(
            Limit::fixed_window("xff-ip", 2, Duration::from_secs(3_600)).unwrap(),
            ip,
        ))
        .access(access);
    let app = Router::new().route("/", get(|| async { "ok" }).route_layer(layer));
    let server = Server::start(app).await.unwrap();
    let http = client();
    let send = |xff: Option<&[u8]>| {
        let mut req = http.get(server.url("/"));
        if let Some(v) = xff {
            req = req.header("x-forwarded-for", HeaderValue::from_bytes(v).unwrap());
        }
        req.send()
    };
    // The client uses up its limit.
    for _ in 0..2 {
        let r = send(Some(b"198.51.100.7")).await.unwrap();
        assert_eq!(r.status(), StatusCode::OK);
    }
    // Bytes the client wrote left of the entry the proxy appended change nothing.
    for line in [
        &b"\x80, 198.51.100.7"[..],
        b"\xff\xfe\"; for=, 198.51.100.7",
        b"garbage,,198.51.100.7",
        b"127.0.0.1, 198.51.100.7",
    ] {
        let r = send(Some(line)).await.unwrap();
        assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS, "{line:?}");
        assert!(r.headers().contains_key("ratelimit-limit"), "{line:?}");
    }
    // The denied address stays denied behind the same bytes.
    let r = send(Some(b"\x80, 203.0.113.66")).await.unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    // Where the client should be stands nothing usable: 400, never the allowed proxy.
    for line in [&b"\x80"[..], b"198.51.100.7\x80", b"unknown", b"", b" , "] {
        let r = send(Some(line)).await.unwrap();
        assert_eq!(r.status(), StatusCode::BAD_REQUEST, "{line:?}");
        let body = r.text().await.unwrap();
        assert!(body.contains("ip.forwarded_invalid"), "{body}");
    }
    // No header at all: the proxy's own request, allowed, with no limit.
    for _ in 0..5 {
        let r = send(None).await.unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        assert!(r.headers().get("ratelimit-limit").is_none());
    }
}
