//! Setup problems with client IPs are logged once per extractor, never per request, and
//! never with the address.

use http::{Request, StatusCode};
use ratekeeper_core::testing::LogCapture;
use ratekeeper_tower::Rule;
use ratekeeper_tower::extract::ClientIp;

use crate::support::*;

fn count(name: &str) -> usize {
    LogCapture::global().count(name, "")
}

#[tokio::test]
async fn a_missing_peer_and_garbage_forwarding_are_each_logged_once() {
    LogCapture::global();
    let (layer, _) = fresh();
    let svc = app(&layer.rule(Rule::new(minute("logs-ip", 100), ClientIp::new())));
    for _ in 0..5 {
        let r = send(
            svc.clone(),
            Request::builder().uri("/").body(empty()).unwrap(),
        )
        .await;
        assert_eq!(r.status, StatusCode::INTERNAL_SERVER_ERROR);
    }
    assert_eq!(count("rate_limit.peer_missing"), 1);

    let (layer, _) = fresh();
    let proxy = ClientIp::new().trusted_proxies(["10.0.0.0/8".parse().unwrap()]);
    let svc = app(&layer.rule(Rule::new(minute("logs-xff", 100), proxy)));
    for i in 0..5 {
        let req = from("10.0.0.2:1")
            .header("x-forwarded-for", format!("198.51.100.{i}, not-an-address"))
            .body(empty())
            .unwrap();
        assert_eq!(send(svc.clone(), req).await.status, StatusCode::BAD_REQUEST);
    }
    assert_eq!(count("rate_limit.forwarded_invalid"), 1);
    for l in LogCapture::global()
        .lines()
        .iter()
        .filter(|l| l.starts_with("rate_limit."))
    {
        assert!(
            !l.contains("198.51.100") && !l.contains("not-an-address"),
            "client input logged: {l}"
        );
    }
}
