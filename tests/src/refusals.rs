//! One route per kind of refusal the layer makes itself (400, 401, 403, 429, a held line's
//! 429, a ban's 403, 503), each with a layer of its own: the refusal tests over HTTP and
//! over gRPC (a package of their own, with tonic) ask the same routes.

use std::time::Duration;

use axum::Router;
use axum::routing::get;
use ratekeeper_core::{Delay, FailurePolicy, Limit, Limiter, PrincipalKind};
use ratekeeper_tower::access::{Access, List};
use ratekeeper_tower::extract::{Bearer, ClientIp, HeaderKey};
use ratekeeper_tower::{Answering, BanAnswer, RateLimitLayer, Rule};

use crate::connect_info_peer;

const MINUTE: Duration = Duration::from_secs(60);

/// One route per kind of refusal, each with a layer of its own, all answering `answering`.
pub fn app(answering: &Answering) -> Router {
    let ip = || ClientIp::new().peer_source(connect_info_peer);
    let key = || HeaderKey::new("x-key".parse().unwrap(), PrincipalKind::User);
    let layer = || RateLimitLayer::in_memory().answering(answering.clone());
    let ok = || get(|| async { "ok" }).post(|| async { "ok" });
    let limited = layer().rule(Rule::new(
        Limit::fixed_window("one", 1, MINUTE).unwrap(),
        key(),
    ));
    let denied = layer()
        .rule(Rule::new(
            Limit::fixed_window("d", 9, MINUTE).unwrap(),
            key(),
        ))
        .access(Access::new(ip()).deny(List::parse(&["127.0.0.0/8"]).unwrap()));
    let auth = layer().rule(Rule::new(
        Limit::fixed_window("b", 9, MINUTE).unwrap(),
        Bearer::new(),
    ));
    // One refusal within a minute bans the address for a minute, answered 403.
    let banned = layer()
        .rule(
            Rule::new(Limit::ban("ban", 1, MINUTE, MINUTE).unwrap(), ip())
                .ban_answer(BanAnswer::Forbidden),
        )
        .rule(Rule::new(
            Limit::fixed_window("once", 1, MINUTE).unwrap(),
            ip(),
        ));
    let down = RateLimitLayer::new(Limiter::new(crate::redis::down_store()))
        .answering(answering.clone())
        .rule(
            Rule::new(Limit::fixed_window("r", 9, MINUTE).unwrap(), key())
                .on_store_error(FailurePolicy::Closed),
        );
    // Held from the second request; no room to hold anyone.
    let delayed = Limit::sliding_log("held", 100, MINUTE)
        .unwrap()
        .delayed(Delay::doubling(1, Duration::from_secs(1), Duration::from_secs(8)).unwrap())
        .unwrap();
    let held = layer().rule(Rule::new(delayed, key())).max_held(0);
    Router::new()
        .route("/limited", ok().route_layer(limited))
        .route(
            "/missing",
            ok().route_layer(layer().rule(Rule::new(
                Limit::fixed_window("m", 9, MINUTE).unwrap(),
                key(),
            ))),
        )
        .route("/auth", ok().route_layer(auth))
        .route("/denied", ok().route_layer(denied))
        .route("/banned", ok().route_layer(banned))
        .route("/down", ok().route_layer(down))
        .route("/held", ok().route_layer(held))
}

/// How each route is refused: (path, requests before the refusal, status, code).
pub const CASES: [(&str, usize, u16, &str); 7] = [
    ("/missing", 0, 400, "principal.missing"),
    ("/auth", 0, 401, "principal.missing"),
    ("/denied", 0, 403, "access.denied"),
    ("/limited", 1, 429, "limit.exceeded"),
    ("/held", 1, 429, "delay.line_full"),
    ("/banned", 2, 403, "ban.active"),
    ("/down", 0, 503, "store.unavailable"),
];
