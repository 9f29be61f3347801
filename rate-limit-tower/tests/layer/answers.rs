//! Allowed and refused answers, headers, styles, shadow mode, two layers.

use http::StatusCode;
use ratekeeper_core::{ChainMode, Outcome};
use ratekeeper_tower::extract::Global;
use ratekeeper_tower::{Answering, HeaderStyle, RateLimitLayer, Rule};
use tower::Layer;

use crate::support::*;

#[tokio::test]
async fn allowed_responses_carry_every_header_of_the_tightest_limit() {
    let (layer, _) = fresh();
    let layer = layer
        .rule(Rule::new(minute("per-player", 3), participant()))
        .rule(Rule::new(minute("everyone", 100), Global))
        .info_extension(true);
    let svc = app(&layer);
    let r = send(
        svc.clone(),
        from("1.2.3.4:5")
            .header("x-participant-id", "p1")
            .body(empty())
            .unwrap(),
    )
    .await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.body, "ok");
    assert_eq!(r.header("ratelimit-limit"), Some("3"));
    assert_eq!(r.header("ratelimit-remaining"), Some("2"));
    assert_eq!(r.header("ratelimit-reset"), Some("60"));
    assert_eq!(
        r.header("ratelimit-policy"),
        Some("\"per-player\";q=3;w=60, \"everyone\";q=100;w=60")
    );
    assert_eq!(
        r.header("ratelimit"),
        Some("\"per-player\";r=2;t=60, \"everyone\";r=99;t=60")
    );
    assert!(r.header("retry-after").is_none());
    let info = r.info.unwrap();
    assert!(info.is_allowed());
    assert_eq!(info.headline().name(), "per-player");
}

#[tokio::test]
async fn an_admitted_response_carries_the_record_only_when_asked_and_a_refusal_always() {
    let (layer, _) = fresh();
    let layer = layer.rule(Rule::new(minute("per-player", 1), participant()));
    let svc = app(&layer);
    let req = || player("p1");
    let r = send(svc.clone(), req()).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.header("ratelimit-remaining"), Some("0"));
    assert!(
        r.info.is_none(),
        "not asked: no record on an admitted response"
    );
    let r = send(svc, req()).await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);
    assert!(!r.info.unwrap().is_allowed(), "a refusal always carries it");
}

#[tokio::test]
async fn the_cached_policy_follows_a_quota_changed_at_run_time() {
    let (layer, _) = fresh();
    let limit = minute("per-player", 5);
    let layer = layer.rule(Rule::new(limit.clone(), participant()));
    let svc = app(&layer);
    let req = player;
    let r = send(svc.clone(), req("a")).await;
    assert_eq!(
        r.header("ratelimit-policy"),
        Some("\"per-player\";q=5;w=60")
    );
    let r = send(svc.clone(), req("b")).await;
    assert_eq!(
        r.header("ratelimit-policy"),
        Some("\"per-player\";q=5;w=60")
    );
    limit.set_quota(9).unwrap();
    let r = send(svc.clone(), req("c")).await;
    assert_eq!(
        r.header("ratelimit-policy"),
        Some("\"per-player\";q=9;w=60")
    );
    assert_eq!(r.header("ratelimit"), Some("\"per-player\";r=8;t=60"));
    limit.set_quota(5).unwrap();
    let r = send(svc, req("d")).await;
    assert_eq!(
        r.header("ratelimit-policy"),
        Some("\"per-player\";q=5;w=60")
    );
}

#[tokio::test]
async fn refused_requests_get_429_json_and_a_whole_second_retry_after() {
    let (layer, clock) = fresh();
    let layer = layer.rule(Rule::new(minute("per-player", 2), participant()));
    let svc = app(&layer);
    let req = || player("p1");
    for _ in 0..2 {
        assert_eq!(send(svc.clone(), req()).await.status, StatusCode::OK);
    }
    clock.advance_micros(500); // 59.9995 s left in the window
    let r = send(svc.clone(), req()).await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(r.header("retry-after"), Some("60"), "rounded up");
    assert_eq!(r.header("ratelimit-remaining"), Some("0"));
    assert_eq!(r.header("ratelimit-reset"), Some("60"));
    assert_eq!(r.header("ratelimit"), Some("\"per-player\";r=0;t=60"));
    assert!(
        r.body
            .contains("\"error\":\"Too many requests. Please slow down.\""),
        "{}",
        r.body
    );
    assert!(r.body.contains("\"retry_after\":60"));
    let info = r.info.unwrap();
    assert_eq!(info.denied_by().unwrap().outcome(), Outcome::Denied);
    // Another participant is not affected.
    let other = from("1.2.3.4:5")
        .header("x-participant-id", "p2")
        .body(empty())
        .unwrap();
    assert_eq!(send(svc, other).await.status, StatusCode::OK);
}

#[tokio::test]
async fn retry_after_is_never_zero() {
    let (layer, clock) = fresh();
    let layer = layer.rule(Rule::new(minute("tiny", 1), Global));
    let svc = app(&layer);
    send(svc.clone(), from("1.2.3.4:5").body(empty()).unwrap()).await;
    clock.advance(std::time::Duration::from_micros(59_999_999)); // 1 µs left
    let r = send(svc, from("1.2.3.4:5").body(empty()).unwrap()).await;
    assert_eq!(r.header("retry-after"), Some("1"));
}

#[tokio::test]
async fn a_denial_by_the_second_rule_describes_the_second_rule() {
    let (layer, _) = fresh();
    let layer = layer
        .rule(Rule::new(minute("loose", 100), Global))
        .rule(Rule::new(minute("strict", 1), participant()));
    let svc = app(&layer);
    let req = || player("p");
    send(svc.clone(), req()).await;
    let r = send(svc, req()).await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(r.header("ratelimit-limit"), Some("1"));
    assert!(r.body.contains("\"limit\":\"strict\""));
    // In order, all or nothing: the refused request did not charge "loose".
    assert_eq!(
        r.header("ratelimit"),
        Some("\"loose\";r=99;t=60, \"strict\";r=0;t=60")
    );
}

#[tokio::test]
async fn header_styles() {
    for (style, trio, ietf) in [
        (HeaderStyle::Both, true, true),
        (HeaderStyle::Trio, true, false),
        (HeaderStyle::Ietf, false, true),
        (HeaderStyle::None, false, false),
    ] {
        let (layer, _) = fresh();
        let layer = layer
            .rule(Rule::new(minute("s", 1), Global))
            .answering(Answering::new().headers(style));
        let svc = app(&layer);
        for expected in [StatusCode::OK, StatusCode::TOO_MANY_REQUESTS] {
            let r = send(svc.clone(), from("1.2.3.4:5").body(empty()).unwrap()).await;
            assert_eq!(r.status, expected);
            assert_eq!(r.header("ratelimit-limit").is_some(), trio, "{style:?}");
            assert_eq!(r.header("ratelimit-policy").is_some(), ietf, "{style:?}");
            assert_eq!(r.header("ratelimit").is_some(), ietf, "{style:?}");
            assert_eq!(
                r.header("retry-after").is_some(),
                expected == StatusCode::TOO_MANY_REQUESTS
            );
        }
    }
}

#[tokio::test]
async fn shadow_mode_lets_through_and_still_tells() {
    let (layer, _) = fresh();
    let layer = layer
        .rule(Rule::new(minute("trial", 1), Global))
        .answering(Answering::new().shadow(true))
        .info_extension(true);
    let svc = app(&layer);
    send(svc.clone(), from("1.2.3.4:5").body(empty()).unwrap()).await;
    let r = send(svc, from("1.2.3.4:5").body(empty()).unwrap()).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.header("ratelimit-remaining"), Some("0"));
    let info = r.info.unwrap();
    assert!(info.is_allowed() && info.would_have_been_limited());
}

#[tokio::test]
async fn two_layers_describe_the_more_restrictive_limit() {
    let (route, _) = fresh();
    let route = route.rule(Rule::new(minute("route", 3), participant()));
    let (global, _) = fresh();
    let global = global
        .rule(Rule::new(minute("global", 1_000), Global))
        .info_extension(true);
    // The global guard outside, the route's rules inside.
    let svc = global.layer(app(&route));
    let req = || player("p");
    let r = send(svc.clone(), req()).await;
    assert_eq!(
        r.header("ratelimit-limit"),
        Some("3"),
        "the route's tighter limit, though the global layer ran last"
    );
    assert_eq!(
        r.header("ratelimit-policy"),
        Some("\"global\";q=1000;w=60, \"route\";q=3;w=60")
    );
    assert_eq!(r.info.unwrap().limits().len(), 2);
    // And the other way round: a nearly exhausted global guard wins over a fresh route.
    let (route, _) = fresh();
    let route = route.rule(Rule::new(minute("route", 50), participant()));
    let (global, _) = fresh();
    let global = global.rule(Rule::new(minute("global", 2), Global));
    let svc = global.layer(app(&route));
    let r = send(svc.clone(), req()).await;
    assert_eq!(r.header("ratelimit-limit"), Some("2"));
    assert_eq!(r.header("ratelimit-remaining"), Some("1"));
    // The inner layer's refusal is the headline.
    let (route, _) = fresh();
    let route = route.rule(Rule::new(minute("route", 1), participant()));
    let (global, _) = fresh();
    let global = global.rule(Rule::new(minute("global", 1_000), Global));
    let svc = global.layer(app(&route));
    send(svc.clone(), req()).await;
    let r = send(svc, req()).await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(r.header("ratelimit-limit"), Some("1"));
}

#[tokio::test]
async fn charge_all_mode_counts_the_refused_request_everywhere() {
    let (layer, _) = fresh();
    let layer = layer
        .rule(Rule::new(minute("loose", 100), Global))
        .rule(Rule::new(minute("strict", 1), Global))
        .chain_mode(ChainMode::ChargeAll);
    let svc = app(&layer);
    send(svc.clone(), from("1.2.3.4:5").body(empty()).unwrap()).await;
    let r = send(svc, from("1.2.3.4:5").body(empty()).unwrap()).await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);
    assert!(r.header("ratelimit").unwrap().starts_with("\"loose\";r=98"));
}

#[tokio::test]
async fn costs_weigh_requests() {
    let (layer, _) = fresh();
    let layer = layer.rule(Rule::new(minute("bulk", 10), Global).cost(4));
    let svc = app(&layer);
    let codes: Vec<u16> = {
        let mut v = Vec::new();
        for _ in 0..3 {
            v.push(
                send(svc.clone(), from("1.2.3.4:5").body(empty()).unwrap())
                    .await
                    .status
                    .as_u16(),
            );
        }
        v
    };
    assert_eq!(codes, [200, 200, 429]);
    let (layer, _) = fresh();
    let layer = layer.rule(Rule::new(minute("bulk", 10), Global).cost(11));
    let r = send(app(&layer), from("1.2.3.4:5").body(empty()).unwrap()).await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);
    assert!(
        r.header("retry-after").is_none(),
        "waiting cannot help a cost over the quota"
    );
}

#[test]
fn public_types_are_send_and_sync() {
    assert_send_sync::<RateLimitLayer>();
    assert_send_sync::<LayeredApp>();
    assert_send_sync::<ratekeeper_tower::RateLimitInfo>();
    let (layer, _) = fresh();
    let mut svc = app(&layer.rule(Rule::new(minute("x", 1), Global)));
    let fut = tower::Service::call(&mut svc, from("1.2.3.4:5").body(empty()).unwrap());
    assert_send(&fut);
}

#[tokio::test]
async fn lowering_a_quota_at_run_time_takes_effect_on_the_next_request_everywhere() {
    let (layer, _) = fresh();
    let limit = minute("tunable", 10);
    let layer = layer.rule(Rule::new(limit.clone(), Global));
    let (a, b) = (app(&layer), app(&layer.clone()));
    for _ in 0..3 {
        let r = send(a.clone(), from("1.2.3.4:5").body(empty()).unwrap()).await;
        assert_eq!(r.header("ratelimit-limit"), Some("10"));
    }
    // An operator lowers the quota through the handle; no restart, no rebuild.
    limit.set_quota(3).unwrap();
    let r = send(b.clone(), from("1.2.3.4:5").body(empty()).unwrap()).await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(r.header("ratelimit-limit"), Some("3"));
    limit.set_quota(5).unwrap();
    let r = send(a, from("1.2.3.4:5").body(empty()).unwrap()).await;
    assert_eq!(
        (r.status, r.header("ratelimit-remaining")),
        (StatusCode::OK, Some("1"))
    );
}
