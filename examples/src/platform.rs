//! platform (scenario 001 of docs/ARCHITECTURE.md): one rate-limiting primitive, four consumers, each with
//! its own strategy and failure mode.
//!
//! | consumer | limits | strategy | store down |
//! |---|---|---|---|
//! | harvester (outbound) | the remote side's, learned | token bucket with AIMD, per scope, shared by every worker in the store ([`SharedPacer`]) | open: each worker falls back to its share of the last rate |
//! | login (`POST /login`) | 30 attempts / 15 min per IP, then 429; an IP refused 20 times within 15 min is banned for an hour; per account, failed attempts over 15 min: 5 at once, then held 1 s doubling to 8 s, one at a time, a line of 5 turning away only an address already in it | exact sliding window, a ban | closed: fail-open would open a guessing window |
//! | API keys (`GET /api/v1/things`, `x-api-key`) | bucket of 60 per key, +1/s | token bucket | open: a rate optimisation |
//! | messenger webhooks (`POST /messenger/{source}/{channel}`) | 300/min per IP, 1 000/min per source, 120/min per channel | sliding window | closed |
//!
//! A rejection of an application call is a 429 with `Retry-After`; to the harvester, the
//! same rejection is a signal to back off ([`Pace::Wait`]).

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use ratekeeper_axum::{HandlerLimiter, PathParam, RejectionResponse, client_ip};
use ratekeeper_core::pace::{Aimd, Pace, SharedPacer};
use ratekeeper_core::{
    AnyStore, Chain, ConfigError, Delay, FailurePolicy, Limit, Limiter, Principal, PrincipalKind,
};
use ratekeeper_tower::extract::{ClientIp, HeaderKey, KeyExtractor, key_fn};
use ratekeeper_tower::metrics::BansActive;
use ratekeeper_tower::{RateLimitLayer, Rule};

#[derive(Clone)]
struct PlatformState {
    limiter: HandlerLimiter,
    ip: ClientIp,
    login_ban: Limit,
    login_ip: Limit,
    login_account: Limit,
}

impl axum::extract::FromRef<PlatformState> for HandlerLimiter {
    fn from_ref(s: &PlatformState) -> Self {
        s.limiter.clone()
    }
}

async fn login(State(s): State<PlatformState>, parts: Parts, body: Bytes) -> Response {
    #[derive(serde::Deserialize)]
    struct Login {
        email: String,
        #[serde(default)]
        password: String,
    }
    let Ok(l) = serde_json::from_slice::<Login>(&body) else {
        return (
            StatusCode::BAD_REQUEST,
            "{\"error\":\"expected JSON {\\\"email\\\", \\\"password\\\"}\"}",
        )
            .into_response();
    };
    let ip = match s.ip.resolve(&parts) {
        Ok(ip) => ip,
        Err(r) => return RejectionResponse(r).into_response(),
    };
    let account = l.email.trim().to_lowercase();
    // Every attempt counts per IP; one refused by the IP limit never reaches the
    // account's, and counts towards the IP's ban. Per account only failures count:
    // reserved, given back when right.
    let chain = Chain::count_attempts()
        .check(&s.login_ban, Principal::ip(ip))
        .check(&s.login_ip, Principal::ip(ip))
        .check(
            &s.login_account,
            Principal::personal(PrincipalKind::User, &account),
        );
    let reserved = match s
        .limiter
        .reserve(&chain, FailurePolicy::Closed, &parts.headers)
        .await
    {
        Ok(r) => r,
        Err(refused) => return refused.into_response(),
    };
    if account == "demo@example.com" && l.password == "platform" {
        let admitted = reserved.give_back_only(|i, _| i == 2).await;
        (StatusCode::OK, admitted, "{\"ok\":true}").into_response()
    } else {
        (
            StatusCode::UNAUTHORIZED,
            reserved.keep(),
            "{\"error\":\"invalid credentials\"}",
        )
            .into_response()
    }
}

/// The platform's router over `store`.
pub fn app_with_store(store: AnyStore) -> Result<Router, ConfigError> {
    app_with_login_delay(store, Duration::from_secs(1))
}

/// The platform's router over `store`, with `first` as the hold of an account's 6th
/// failed login in 15 minutes (doubling per attempt to 8 × `first`; tests shorten it).
pub fn app_with_login_delay(store: AnyStore, first: Duration) -> Result<Router, ConfigError> {
    let limiter = Limiter::builder(store).name("platform").build()?;
    let (minute, quarter) = (Duration::from_secs(60), Duration::from_secs(900));
    let ip = client_ip();
    let api_keys = RateLimitLayer::new(limiter.clone()).rule(
        Rule::new(
            Limit::token_bucket("api-key", 60, 1, Duration::from_secs(1))?,
            HeaderKey::new(
                http::HeaderName::from_static("x-api-key"),
                PrincipalKind::ApiKey,
            )
            .personal()
            .unauthorized(http::HeaderValue::from_static("ApiKey")),
        )
        .on_store_error(FailurePolicy::Open),
    );
    let source = PathParam::new("source", PrincipalKind::custom("source")?);
    let source_for_channel = source.clone();
    let channel = PathParam::new("channel", PrincipalKind::custom("channel")?);
    let sc_kind = PrincipalKind::custom("source-channel")?;
    let messenger = RateLimitLayer::new(limiter.clone())
        .rule(Rule::new(
            Limit::sliding_window("messenger-ip", 300, minute)?,
            ip.clone(),
        ))
        .rule(Rule::new(
            Limit::sliding_window("messenger-source", 1_000, minute)?,
            source,
        ))
        .rule(Rule::new(
            Limit::sliding_window("messenger-channel", 120, minute)?,
            key_fn(move |p| {
                let s = source_for_channel.extract(p)?;
                let c = channel.extract(p)?;
                Ok(Principal::composite(
                    sc_kind.clone(),
                    [s.value(), c.value()],
                ))
            }),
        ));
    let login_ban = Limit::ban("login-ip-ban", 20, quarter, Duration::from_secs(3_600))?;
    // With `/metrics` on, `rate_limit_bans_active{limit="login-ip-ban"}` read from the
    // store every 30 s.
    if std::env::var("PLATFORM_METRICS").as_deref() == Ok("1") {
        let gauge = BansActive::new(limiter.store(), [login_ban.clone()]);
        tokio::spawn(gauge.run(Duration::from_secs(30)));
    }
    let state = PlatformState {
        limiter: HandlerLimiter::new(limiter),
        ip,
        // An IP that keeps trying after its 30 attempts: banned for an hour, on every
        // instance (the refusals are counted in the store).
        login_ban,
        login_ip: Limit::sliding_log("login-ip", 30, quarter)?,
        // Slowed, never locked: the quota is beyond what the holds let through.
        login_account: Limit::sliding_log("login-account", 1_000, quarter)?
            .delayed(Delay::doubling(5, first, first * 8)?.max_held(5)?)?,
    };
    Ok(Router::new()
        .route("/login", post(login))
        .route(
            "/api/v1/things",
            get(|| async { "{\"things\":[]}" }).route_layer(api_keys),
        )
        .route(
            "/messenger/{source}/{channel}",
            post(|| async { "{\"ok\":true}" }).route_layer(messenger),
        )
        .with_state(state))
}

/// The router on Redis (`REDIS_URL`) or in memory.
pub fn app() -> Result<Router, ConfigError> {
    let store = crate::store_from_env()?;
    app_with_store(store)
}

/// What a harvest call got back from the remote side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Remote {
    /// 2xx.
    Ok,
    /// 429 or 503, with the remote side's `Retry-After` if it sent one.
    Refused(Option<Duration>),
}

/// The harvester's loop for one scope on one worker: asks the shared pacer, waits when
/// told, calls, and feeds the answer back. `sleep` and `call` are the caller's (a real
/// client, or a simulation). Returns how many calls were made.
pub async fn harvest<S, SF, C, CF>(
    pacer: &SharedPacer,
    scope: &str,
    calls: usize,
    mut sleep: S,
    mut call: C,
) -> usize
where
    S: FnMut(Duration) -> SF,
    SF: std::future::Future<Output = ()>,
    C: FnMut() -> CF,
    CF: std::future::Future<Output = Remote>,
{
    let mut made = 0;
    while made < calls {
        match pacer.acquire(scope).await {
            Pace::Wait(d) => sleep(d).await,
            Pace::Go => {
                made += 1;
                match call().await {
                    Remote::Ok => pacer.success(scope),
                    Remote::Refused(retry) => pacer.rejected(scope, retry).await,
                }
            }
        }
    }
    made
}

/// What [`harvest_http`] got back.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Harvest {
    /// Answered 2xx.
    pub ok: usize,
    /// Refused by the remote side (429, 503).
    pub refused: usize,
    /// Not made: the wait for a slot passed its bound, or the connection failed.
    pub failed: usize,
}

/// The harvester over HTTP: `calls` GETs of `url` through reqwest under the client pacing
/// layer ([`PaceLayer`](ratekeeper_tower::client::PaceLayer)) on `pacer`, one scope per
/// host. The layer takes each call's slot from the shared pacer and learns from every
/// answer what the remote side says (its `RateLimit-Policy`, an empty limit's reset, a
/// refusal's `Retry-After`), so every worker on the store stays under the remote limit.
pub async fn harvest_http(pacer: SharedPacer, url: &str, calls: usize) -> Harvest {
    use tower::{Service, ServiceBuilder, ServiceExt};
    let http = reqwest::Client::new();
    let raw = tower::service_fn(move |req: http::Request<String>| {
        let http = http.clone();
        async move {
            let req = reqwest::Request::try_from(req)?;
            Ok::<_, reqwest::Error>(http::Response::from(http.execute(req).await?))
        }
    });
    let mut client = ServiceBuilder::new()
        .layer(ratekeeper_tower::client::PaceLayer::new(pacer))
        .service(raw);
    let mut got = Harvest::default();
    for _ in 0..calls {
        let Ok(req) = http::Request::get(url).body(String::new()) else {
            got.failed += 1;
            continue;
        };
        let answer = match client.ready().await {
            Ok(c) => c.call(req).await,
            Err(e) => Err(e),
        };
        match answer.map(|a| a.status()) {
            Ok(s) if s.is_success() => got.ok += 1,
            Ok(_) => got.refused += 1,
            Err(_) => got.failed += 1,
        }
    }
    got
}

/// One harvester worker over `store`: start slow, add one call per second per quiet
/// second, halve on a refusal. Every worker made over the same store (every process on
/// one Redis) shares each scope's rate.
pub fn harvester(store: AnyStore) -> Result<SharedPacer, ConfigError> {
    SharedPacer::new(
        store,
        "harvest",
        Aimd {
            initial: 1.0,
            increase: 1.0,
            decrease: 0.5,
            ..Aimd::default()
        },
    )
}

/// Serves `app` on `listener`.
pub async fn serve(listener: tokio::net::TcpListener, app: Router) -> std::io::Result<()> {
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .await
}
