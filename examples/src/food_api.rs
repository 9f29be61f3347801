//! food-api (scenario 004 of docs/ARCHITECTURE.md): two keys on every route, the failure policy chosen
//! route by route, a shared model budget, honest headers for browsers.
//!
//! Every guarded route checks the account first, then the client IP with a larger budget:
//! accounts are free, so the IP limit keeps account cycling from making the first limit
//! decorative, and it is sized well above one person so a café's shared address is fine.
//!
//! | route | account (bearer) | client IP | store down, and why |
//! |---|---|---|---|
//! | `GET /products/{code}` | 120 / min | 600 / min | allow: a cached read |
//! | `GET /search` | 60 / min | 300 / min | allow |
//! | `GET /taxonomy` | 30 / min | 300 / min | allow: the same for everybody |
//! | `POST /captures` (label OCR) | 10 / min, then 100 / day | 50 / min | 503: spends money |
//! | `POST /contributions` | 20 / min | 100 / min | 503: writes data |
//! | `POST /support` | 5 / hour | 20 / hour | 503: writes data |
//! | `POST /webhooks/billing` | — | 600 / min | allow: a dropped payment event is worse than a duplicate |
//! | `POST /curation/suggest`, `/curation/classify` | model budget: 50 / day per user | — | 503: spends money |
//! | `GET /usage` | 30 / min | 300 / min | 503: the store is the answer |
//!
//! **The plan** (beyond the scenario's design document): each account (its bearer token,
//! the API key a customer is sold) has a quota per calendar month, 10 000 calls renewed
//! on its billing day ([`Plans`]): every guarded route above charges it after its own
//! limits, the curation routes with the model budget, and the customer's catalogue sync
//! (a background job, [`sync_catalogue`]) by the products it sends. `GET /usage` shows
//! what the current period used, what is left and when it renews.
//!
//! The minute limit is checked before the day limit, in order: a client hammering the
//! route while refused by the minute limit does not burn its daily allowance. The model
//! budget (50 calls a day per user, 1 000 per job, 2 000 in all) is one [`Budget`] shared
//! by the two curation routes and the `resolve-ingredients` background job, whose
//! principal is the job — never a made-up user. Headers are exposed to CORS. Refusals are
//! RFC 9457 problem details (`application/problem+json`, the IETF draft's `quota-exceeded`
//! type with `violated-policies`), as an API that answers every error that way would.

use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use ratekeeper_axum::{HandlerLimiter, client_ip};
use ratekeeper_core::budget::{Budget, Spender};
use ratekeeper_core::{AnyStore, Check, ConfigError, FailurePolicy, Limit, Limiter};
use ratekeeper_tower::extract::{Bearer, ClientIp, KeyExtractor};
use ratekeeper_tower::{Answering, EXPOSED_HEADERS, ProblemResponder, RateLimitLayer, Rule};
use tower_http::cors::{Any, CorsLayer};

mod plan;

pub use plan::{Plans, sync_catalogue};

#[derive(Clone)]
struct FoodState {
    limiter: HandlerLimiter,
    model: Budget,
    plans: Plans,
}

impl axum::extract::FromRef<FoodState> for HandlerLimiter {
    fn from_ref(s: &FoodState) -> Self {
        s.limiter.clone()
    }
}

/// The shared model budget: 50 calls a day per user, 1 000 per job, 2 000 in all.
pub fn model_budget() -> Result<Budget, ConfigError> {
    Budget::daily("model", 50, 1_000, 2_000)
}

/// The background job that resolves ingredients: spends the model budget as itself.
pub async fn resolve_ingredients(limiter: &Limiter<AnyStore>, budget: &Budget) -> bool {
    let chain = budget.chain(&Spender::job("resolve-ingredients"), 1);
    limiter
        .check(&chain, FailurePolicy::Closed)
        .await
        .is_allowed()
}

async fn curate(State(s): State<FoodState>, parts: Parts) -> Response {
    let (user, plan) = match Bearer::new().extract(&parts) {
        Ok(p) => (p.value().to_owned(), s.plans.key_for(p)),
        // Answered as the limiter answers: problem details.
        Err(r) => return s.limiter.refuse(r.into(), &parts.headers).into_response(),
    };
    let mut chain = s.model.chain(&Spender::user(user), 1);
    chain.push(Check::new(plan, 1));
    match s
        .limiter
        .check_for(&chain, FailurePolicy::Closed, &parts.headers)
        .await
    {
        Ok(admitted) => (admitted, "{\"suggestions\":[]}").into_response(),
        Err(refused) => refused.into_response(),
    }
}

/// The example's router over `store`, with its model budget (shared with the job) and the
/// standard plans ([`Plans::standard`]).
pub fn app_with_store(store: AnyStore, model: Budget) -> Result<Router, ConfigError> {
    app_with_plans(store, model, Plans::standard()?)
}

/// The example's router over `store`, with its model budget and `plans` (shared with the
/// catalogue sync).
pub fn app_with_plans(store: AnyStore, model: Budget, plans: Plans) -> Result<Router, ConfigError> {
    let limiter = Limiter::builder(store).name("food-api").build()?;
    let [minute, hour, day] = [60, 3_600, 86_400].map(Duration::from_secs);
    let ip: ClientIp = client_ip();
    let answering = Answering::new().with_responder(ProblemResponder);
    // The failure policy is chosen here, at each route, next to its limits.
    let two_keys = |name: &str,
                    account: u64,
                    per_ip: u64,
                    window: Duration,
                    policy: FailurePolicy|
     -> Result<RateLimitLayer, ConfigError> {
        Ok(RateLimitLayer::new(limiter.clone())
            .answering(answering.clone())
            .rule(
                Rule::new(Limit::fixed_window(name, account, window)?, Bearer::new())
                    .on_store_error(policy),
            )
            .rule(
                Rule::new(
                    Limit::fixed_window(&format!("{name}-ip"), per_ip, window)?,
                    ip.clone(),
                )
                .on_store_error(policy),
            )
            .rule(plans.rule(policy)))
    };
    let products = two_keys("products", 120, 600, minute, FailurePolicy::Open)?;
    let search = two_keys("search", 60, 300, minute, FailurePolicy::Open)?;
    let taxonomy = two_keys("taxonomy", 30, 300, minute, FailurePolicy::Open)?;
    let contributions = two_keys("contributions", 20, 100, minute, FailurePolicy::Closed)?;
    let support = two_keys("support", 5, 20, hour, FailurePolicy::Closed)?;
    let captures = captures(&limiter, &answering, &ip, minute, day)?;
    let captures = captures.rule(plans.rule(FailurePolicy::Closed));
    let usage = plan::usage_layer(&limiter, &answering, &ip)?;
    let webhooks = webhooks(&limiter, &answering, ip)?;
    let state = FoodState {
        limiter: HandlerLimiter::new(limiter).answering(answering),
        model,
        plans,
    };
    Ok(Router::new()
        .route(
            "/products/{code}",
            get(|| async { "{\"name\":\"oat milk\"}" }).route_layer(products),
        )
        .route(
            "/search",
            get(|| async { "{\"results\":[]}" }).route_layer(search),
        )
        .route(
            "/taxonomy",
            get(|| async { "{\"ingredients\":[]}" }).route_layer(taxonomy),
        )
        .route(
            "/captures",
            post(|| async { "{\"text\":\"oats, water\"}" }).route_layer(captures),
        )
        .route(
            "/contributions",
            post(|| async { "{\"saved\":true}" }).route_layer(contributions),
        )
        .route(
            "/support",
            post(|| async { "{\"ticket\":1}" }).route_layer(support),
        )
        .route(
            "/webhooks/billing",
            post(|| async { "{\"ok\":true}" }).route_layer(webhooks),
        )
        .route("/usage", get(plan::usage).route_layer(usage))
        .route("/curation/suggest", post(curate))
        .route("/curation/classify", post(curate))
        .with_state(state)
        .layer(
            CorsLayer::new()
                .allow_origin(Any)
                .expose_headers(EXPOSED_HEADERS),
        ))
}

/// Billing webhooks: per IP only (the payment provider's), and let through when the store
/// is down (a dropped payment event is worse than a duplicate).
fn webhooks(
    limiter: &Limiter,
    answering: &Answering,
    ip: ClientIp,
) -> Result<RateLimitLayer, ConfigError> {
    let minute = Duration::from_secs(60);
    Ok(RateLimitLayer::new(limiter.clone())
        .answering(answering.clone())
        .rule(
            Rule::new(Limit::fixed_window("webhooks-ip", 600, minute)?, ip)
                .on_store_error(FailurePolicy::Open),
        ))
}

/// Photo captures: per account a minute and a day, and per IP; a dead store refuses (503).
fn captures(
    limiter: &Limiter,
    answering: &Answering,
    ip: &ClientIp,
    minute: Duration,
    day: Duration,
) -> Result<RateLimitLayer, ConfigError> {
    Ok(RateLimitLayer::new(limiter.clone())
        .answering(answering.clone())
        .rule(Rule::new(
            Limit::fixed_window("captures", 10, minute)?,
            Bearer::new(),
        ))
        .rule(Rule::new(
            Limit::fixed_window("captures-day", 100, day)?,
            Bearer::new(),
        ))
        .rule(Rule::new(
            Limit::fixed_window("captures-ip", 50, minute)?,
            ip.clone(),
        )))
}

/// The router on Redis (`REDIS_URL`) or in memory.
pub fn app() -> Result<Router, ConfigError> {
    let store = crate::store_from_env()?;
    app_with_store(store, model_budget()?)
}

/// Serves `app` on `listener`.
pub async fn serve(listener: tokio::net::TcpListener, app: Router) -> std::io::Result<()> {
    crate::serve::serve(listener, app).await
}
