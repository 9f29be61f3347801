//! Client IPs cannot be forged: only trusted proxies are believed, and only their hops.

use http::StatusCode;
use ratekeeper_tower::Rule;
use ratekeeper_tower::extract::{ClientIp, ForwardedSource};

use crate::support::*;

fn trusted() -> ClientIp {
    ClientIp::new().trusted_proxies(["10.0.0.0/8".parse().unwrap()])
}

#[tokio::test]
async fn rotating_the_leftmost_hop_never_changes_the_key_but_the_rightmost_does() {
    let (layer, _) = fresh();
    let svc = app(&layer.rule(Rule::new(minute("ip", 3), trusted())));
    let via_proxy = |xff: &str| {
        from("10.0.0.2:443")
            .header("x-forwarded-for", xff)
            .body(empty())
            .unwrap()
    };
    for i in 0..3 {
        let r = send(svc.clone(), via_proxy(&format!("6.6.6.{i}, 203.0.113.7"))).await;
        assert_eq!(r.status, StatusCode::OK);
    }
    let r = send(svc.clone(), via_proxy("7.7.7.7, 203.0.113.7")).await;
    assert_eq!(
        r.status,
        StatusCode::TOO_MANY_REQUESTS,
        "a forged leftmost entry bought nothing"
    );
    let r = send(svc, via_proxy("6.6.6.1, 203.0.113.8")).await;
    assert_eq!(r.status, StatusCode::OK, "a different client");
}

#[tokio::test]
async fn from_an_untrusted_peer_every_forwarding_header_is_ignored() {
    for source in [
        ForwardedSource::XForwardedFor,
        ForwardedSource::Forwarded,
        ForwardedSource::Header("x-real-ip".parse().unwrap()),
    ] {
        let (layer, _) = fresh();
        let svc = app(&layer.rule(Rule::new(minute("ip", 1), trusted().source(source.clone()))));
        // An attacker names the victim's IP in every header.
        let forged = |peer: &str| {
            from(peer)
                .header("x-forwarded-for", "198.51.100.1")
                .header("forwarded", "for=198.51.100.1")
                .header("x-real-ip", "198.51.100.1")
                .body(empty())
                .unwrap()
        };
        assert_eq!(
            send(svc.clone(), forged("203.0.113.66:1")).await.status,
            StatusCode::OK
        );
        assert_eq!(
            send(svc.clone(), forged("203.0.113.66:2")).await.status,
            StatusCode::TOO_MANY_REQUESTS
        );
        // The victim is not locked out.
        let victim = from("198.51.100.1:9").body(empty()).unwrap();
        assert_eq!(send(svc, victim).await.status, StatusCode::OK, "{source:?}");
    }
}

#[tokio::test]
async fn ipv6_shares_a_key_per_64_and_mapped_ipv4_is_ipv4() {
    let (layer, _) = fresh();
    let svc = app(&layer.rule(Rule::new(minute("ip", 2), ClientIp::new())));
    let r = |peer: &str| from(peer).body(empty()).unwrap();
    assert_eq!(
        send(svc.clone(), r("[2001:db8:0:1::1]:1")).await.status,
        StatusCode::OK
    );
    assert_eq!(
        send(svc.clone(), r("[2001:db8:0:1:ffff::9]:1"))
            .await
            .status,
        StatusCode::OK
    );
    assert_eq!(
        send(svc.clone(), r("[2001:db8:0:1:1234::]:1")).await.status,
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(
        send(svc.clone(), r("[2001:db8:0:2::1]:1")).await.status,
        StatusCode::OK,
        "the next /64"
    );
    assert_eq!(
        send(svc.clone(), r("1.2.3.4:1")).await.status,
        StatusCode::OK
    );
    assert_eq!(
        send(svc.clone(), r("[::ffff:1.2.3.4]:1")).await.status,
        StatusCode::OK
    );
    assert_eq!(
        send(svc, r("1.2.3.4:2")).await.status,
        StatusCode::TOO_MANY_REQUESTS
    );
}

#[tokio::test]
async fn garbage_from_a_trusted_proxy_is_a_400_never_the_proxy_or_a_5xx() {
    let (layer, _) = fresh();
    let svc = app(&layer.rule(Rule::new(minute("ip", 100), trusted())));
    for xff in [
        &b"garbage"[..],
        b"1.2.3.4, nonsense",
        b"",
        b",,,",
        &[0xff, 0xfe],
        &vec![b'9'; 300 * 1024],
    ] {
        let req = from("10.0.0.2:1")
            .header(
                "x-forwarded-for",
                http::HeaderValue::from_bytes(xff).unwrap(),
            )
            .body(empty())
            .unwrap();
        let r = send(svc.clone(), req).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST);
        assert!(
            r.body.contains("\"code\":\"ip.forwarded_invalid\""),
            "{}",
            r.body
        );
        assert!(r.body.len() < 200, "the header is never echoed back");
    }
    // An absent header is the proxy's own request: the proxy is the client.
    let req = from("10.0.0.2:1").body(empty()).unwrap();
    assert_eq!(send(svc, req).await.status, StatusCode::OK);
}
