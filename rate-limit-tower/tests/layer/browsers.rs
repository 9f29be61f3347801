//! Browsers, exempt paths, preflights and CORS exposure.

use http::{Method, StatusCode};
use ratekeeper_tower::extract::Global;
use ratekeeper_tower::{Answering, Rule};

use crate::support::*;

#[tokio::test]
async fn a_limited_browser_is_sent_to_the_page_which_is_never_limited() {
    let (layer, _) = fresh();
    let layer = layer.rule(Rule::new(minute("g", 1), Global)).answering(
        Answering::new()
            .redirect_browsers("/too-many-requests")
            .unwrap(),
    );
    let svc = app(&layer);
    let page = |path: &str| {
        from("1.2.3.4:5")
            .uri(path)
            .header("accept", "text/html,application/xhtml+xml;q=0.9")
            .body(empty())
            .unwrap()
    };
    assert_eq!(send(svc.clone(), page("/")).await.status, StatusCode::OK);
    let r = send(svc.clone(), page("/")).await;
    assert_eq!(r.status, StatusCode::SEE_OTHER);
    assert_eq!(r.header("location"), Some("/too-many-requests"));
    assert_eq!(r.header("retry-after"), Some("60"));
    // The page itself passes untouched, however often, with no headers.
    for _ in 0..5 {
        let r = send(svc.clone(), page("/too-many-requests")).await;
        assert_eq!(r.status, StatusCode::OK);
        assert!(r.header("ratelimit-limit").is_none());
    }
    // An API client gets the 429.
    let r = send(
        svc,
        from("1.2.3.4:5")
            .header("accept", "application/json")
            .body(empty())
            .unwrap(),
    )
    .await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);
}

#[tokio::test]
async fn exempt_paths_pass_exactly_and_by_prefix() {
    let (layer, _) = fresh();
    let layer = layer
        .rule(Rule::new(minute("g", 1), Global))
        .exempt("/healthz")
        .exempt_prefix("/static/");
    let svc = app(&layer);
    send(svc.clone(), from("1.2.3.4:5").body(empty()).unwrap()).await;
    for path in ["/healthz", "/static/app.js", "/static/"] {
        let r = send(
            svc.clone(),
            from("1.2.3.4:5").uri(path).body(empty()).unwrap(),
        )
        .await;
        assert_eq!(r.status, StatusCode::OK, "{path}");
    }
    for path in ["/healthz/x", "/healthzz", "/static"] {
        let r = send(
            svc.clone(),
            from("1.2.3.4:5").uri(path).body(empty()).unwrap(),
        )
        .await;
        assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS, "{path}");
    }
}

#[tokio::test]
async fn cors_preflights_pass_unless_told_otherwise() {
    let preflight = || {
        from("1.2.3.4:5")
            .method(Method::OPTIONS)
            .header("origin", "https://app.example")
            .header("access-control-request-method", "POST")
            .body(empty())
            .unwrap()
    };
    let (layer, _) = fresh();
    let svc = app(&layer.rule(Rule::new(minute("g", 1), Global)));
    for _ in 0..3 {
        assert_eq!(send(svc.clone(), preflight()).await.status, StatusCode::OK);
    }
    let (layer, _) = fresh();
    let svc = app(&layer
        .rule(Rule::new(minute("g", 1), Global))
        .limit_preflights(true));
    send(svc.clone(), preflight()).await;
    assert_eq!(
        send(svc, preflight()).await.status,
        StatusCode::TOO_MANY_REQUESTS
    );
}

#[tokio::test]
async fn requests_with_origin_get_the_headers_exposed() {
    let (layer, _) = fresh();
    let svc = app(&layer.rule(Rule::new(minute("g", 1), Global)));
    let with_origin = || {
        from("1.2.3.4:5")
            .header("origin", "https://app.example")
            .body(empty())
            .unwrap()
    };
    for status in [StatusCode::OK, StatusCode::TOO_MANY_REQUESTS] {
        let r = send(svc.clone(), with_origin()).await;
        assert_eq!(r.status, status);
        let exposed = r.header("access-control-expose-headers").unwrap();
        for name in ratekeeper_tower::EXPOSED_HEADERS {
            assert!(exposed.contains(name.as_str()), "{name} in {exposed}");
        }
        assert_eq!(r.header("vary"), Some("origin"));
    }
    let r = send(svc, from("1.2.3.4:5").body(empty()).unwrap()).await;
    assert!(r.header("access-control-expose-headers").is_none());
}
