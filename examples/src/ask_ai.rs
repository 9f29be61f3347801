//! ask-ai (scenario 000 of docs/ARCHITECTURE.md): a docs platform's limits, from repository lookups to
//! "Ask AI everywhere".
//!
//! | limit | principal | max | window | store down |
//! |---|---|---|---|---|
//! | `github` (repository lookups) | org | 60 | 1 hour | allow |
//! | `docs-run` | org | 10 | 1 day | allow |
//! | `page-retry` | org | 50 | 1 day | allow |
//! | `publish` | org | 50 | 1 day | allow |
//! | `docs-update` (AI updates after a push, by a background job) | org | 15 | 1 day | allow |
//! | `ask-burst` | visitor | 20 | 1 minute | 503 |
//! | `ask` | project + visitor | 15 | 1 day | 503 |
//! | `ask-site` | project | 500 | 1 day | 503 |
//! | `ask-all` | everybody | 5 000 | 1 day | 503 |
//!
//! Fixed windows: a day is the UTC day, an hour starts on the hour.
//!
//! **The four Ask AI limits are one chain in one round trip, in order, all or nothing — not
//! charged all at once like the original pipeline of `INCR`s.** With the pipeline, a bot
//! refused by its own burst limit still increments the site's and everybody's daily
//! counters with every refused request, so one client can use up `ask-all` and lock Ask AI
//! for the whole world. In order, a refused request touches nothing.
//!
//! The visitor is `cf-connecting-ip`, which Cloudflare sets and a client cannot change
//! (trust it only behind Cloudflare); IPv6 is grouped by /64, since one person usually
//! owns a whole /64. Without the header (local development) the visitor is `local`.
//!
//! Signed-in actions fail open (a known account can do little harm in a few minutes);
//! Ask AI fails closed with 503, since nothing else keeps its cost in check.

use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use ratekeeper_axum::PathParam;
use ratekeeper_core::store::Dedupe;
use ratekeeper_core::{
    AnyStore, Chain, ConfigError, FailurePolicy, Limit, Limiter, Principal, PrincipalKind,
};
use ratekeeper_tower::extract::{Global, KeyExtractor, Rejection, key_fn};
use ratekeeper_tower::{RateLimitLayer, Rule};
use serde_json::json;

/// The limits, each written once.
#[derive(Debug, Clone)]
pub struct AskLimits {
    /// Repository lookups per org.
    pub github: Limit,
    /// Docs runs per org.
    pub docs_run: Limit,
    /// Page retries per org.
    pub page_retry: Limit,
    /// Publishes per org.
    pub publish: Limit,
    /// AI updates after a push, per org (written by the background job).
    pub docs_update: Limit,
    /// Ask AI, per visitor per minute.
    pub ask_burst: Limit,
    /// Ask AI, per project and visitor per day.
    pub ask: Limit,
    /// Ask AI, per project per day.
    pub ask_site: Limit,
    /// Ask AI, everybody per day.
    pub ask_all: Limit,
}

impl AskLimits {
    /// The table above.
    pub fn new() -> Result<Self, ConfigError> {
        let (minute, hour, day) = (
            Duration::from_secs(60),
            Duration::from_secs(3_600),
            Duration::from_secs(86_400),
        );
        Ok(Self {
            github: Limit::fixed_window("github", 60, hour)?,
            docs_run: Limit::fixed_window("docs-run", 10, day)?,
            page_retry: Limit::fixed_window("page-retry", 50, day)?,
            publish: Limit::fixed_window("publish", 50, day)?,
            docs_update: Limit::fixed_window("docs-update", 15, day)?,
            ask_burst: Limit::fixed_window("ask-burst", 20, minute)?,
            ask: Limit::fixed_window("ask", 15, day)?,
            ask_site: Limit::fixed_window("ask-site", 500, day)?,
            ask_all: Limit::fixed_window("ask-all", 5_000, day)?,
        })
    }
}

/// The org principal, as the routes and the background job both name it.
pub fn org(name: &str) -> Result<Principal, ConfigError> {
    Ok(Principal::new(PrincipalKind::custom("org")?, name))
}

/// The visitor: `cf-connecting-ip` grouped by /64, or `local` without it.
pub fn visitor(headers: &HeaderMap) -> Result<Principal, Rejection> {
    match headers.get("cf-connecting-ip") {
        None => Ok(Principal::new(PrincipalKind::Ip, "local")),
        Some(v) => v
            .to_str()
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .map(Principal::ip)
            .ok_or_else(|| {
                Rejection::invalid("visitor.invalid", "cf-connecting-ip is not an address")
            }),
    }
}

/// The background job: after a push with AI work to do, count one AI update for the org
/// under the same key the routes would use. Logs and allows when the store is down.
/// Returns whether the update may run.
pub async fn ai_update_after_push(
    limiter: &Limiter<AnyStore>,
    limits: &AskLimits,
    org_name: &str,
    pages_changed: u32,
) -> Result<bool, ConfigError> {
    if pages_changed == 0 {
        return Ok(false); // no AI work, nothing counted
    }
    let chain = Chain::new().check(&limits.docs_update, org(org_name)?);
    Ok(limiter
        .check(&chain, FailurePolicy::Open)
        .await
        .is_allowed())
}

#[derive(Clone)]
struct AskState {
    limiter: Limiter<AnyStore>,
    store: AnyStore,
    limits: AskLimits,
}

fn ok(body: serde_json::Value) -> Response {
    axum::Json(body).into_response()
}

async fn ask(Path(project): Path<String>, body: Bytes) -> Response {
    #[derive(serde::Deserialize)]
    struct Q {
        question: String,
    }
    match serde_json::from_slice::<Q>(&body) {
        Ok(q) if !q.question.trim().is_empty() => {
            ok(json!({ "project": project, "answer": "See the Getting started page." }))
        }
        _ => (
            StatusCode::BAD_REQUEST,
            axum::Json(json!({ "error": "expected JSON {\"question\"}" })),
        )
            .into_response(),
    }
}

async fn push(State(s): State<AskState>, Path(org_name): Path<String>, body: Bytes) -> Response {
    let changed = serde_json::from_slice::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| v["changed_pages"].as_u64())
        .unwrap_or(0);
    let (limiter, limits) = (s.limiter.clone(), s.limits.clone());
    // The work happens in the background, as a queued task would.
    tokio::spawn(async move {
        let _ = ai_update_after_push(
            &limiter,
            &limits,
            &org_name,
            u32::try_from(changed).unwrap_or(u32::MAX),
        )
        .await;
    });
    (StatusCode::ACCEPTED, axum::Json(json!({ "queued": true }))).into_response()
}

async fn github_webhook(State(s): State<AskState>, headers: HeaderMap) -> Response {
    let Some(id) = headers
        .get("x-github-delivery")
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty())
    else {
        return (
            StatusCode::BAD_REQUEST,
            axum::Json(json!({ "error": "x-github-delivery is required" })),
        )
            .into_response();
    };
    match s.store.first_seen(id, Duration::from_secs(86_400)).await {
        Ok(false) => ok(json!({ "duplicate": true })),
        _ => ok(json!({ "processed": true })),
    }
}

/// The example's router over `store`.
pub fn app_with_store(store: AnyStore) -> Result<Router, ConfigError> {
    let limiter = Limiter::builder(store.clone()).name("ask-ai").build()?;
    let limits = AskLimits::new()?;
    let org_key = || -> Result<PathParam, ConfigError> {
        Ok(PathParam::new("org", PrincipalKind::custom("org")?))
    };
    let signed_in = |limit: &Limit| -> Result<RateLimitLayer, ConfigError> {
        Ok(RateLimitLayer::new(limiter.clone())
            .rule(Rule::new(limit.clone(), org_key()?).on_store_error(FailurePolicy::Open)))
    };
    let project_kind = PrincipalKind::custom("project")?;
    let pv_kind = PrincipalKind::custom("project-visitor")?;
    let project = PathParam::new("project", project_kind);
    let project_for_pair = project.clone();
    let ask_layer = RateLimitLayer::new(limiter.clone())
        .rule(Rule::new(
            limits.ask_burst.clone(),
            key_fn(|p| visitor(&p.headers)),
        ))
        .rule(Rule::new(
            limits.ask.clone(),
            key_fn(move |p| {
                let v = visitor(&p.headers)?;
                let proj = project_for_pair.extract(p)?;
                Ok(Principal::composite(
                    pv_kind.clone(),
                    [proj.value(), v.value()],
                ))
            }),
        ))
        .rule(Rule::new(limits.ask_site.clone(), project))
        .rule(Rule::new(limits.ask_all.clone(), Global));
    let state = AskState {
        limiter: limiter.clone(),
        store,
        limits: limits.clone(),
    };
    Ok(Router::new()
        .route(
            "/orgs/{org}/repos/lookup",
            get(|| async { "{\"repos\":[]}" }).route_layer(signed_in(&limits.github)?),
        )
        .route(
            "/orgs/{org}/docs-runs",
            post(|| async { "{\"started\":true}" }).route_layer(signed_in(&limits.docs_run)?),
        )
        .route(
            "/orgs/{org}/page-retries",
            post(|| async { "{\"retried\":true}" }).route_layer(signed_in(&limits.page_retry)?),
        )
        .route(
            "/orgs/{org}/publishes",
            post(|| async { "{\"published\":true}" }).route_layer(signed_in(&limits.publish)?),
        )
        .route("/orgs/{org}/push", post(push))
        .route("/projects/{project}/ask", post(ask).route_layer(ask_layer))
        .route("/webhooks/github", post(github_webhook))
        .with_state(state))
}

/// The router on Redis (`REDIS_URL`) or in memory.
pub fn app() -> Result<Router, ConfigError> {
    let store = crate::store_from_env()?;
    app_with_store(store)
}

/// Serves `app` on `listener`.
pub async fn serve(listener: tokio::net::TcpListener, app: Router) -> std::io::Result<()> {
    crate::serve::serve(listener, app).await
}
