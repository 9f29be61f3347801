//! axum end to end: extractors as keys, route_layer with Router::layer, the in-handler
//! limiter. Real TCP listeners, a real HTTP client.

#![allow(clippy::too_many_lines, reason = "a test reads top to bottom")]

mod governor;
mod newcomer;
mod rest;

use std::time::Duration;

use axum::extract::State;
use axum::routing::{get, post};
use axum::{Json, Router};
use ratekeeper_axum::{Admitted, HandlerLimiter, PathParam, Refused, RouteTemplate, client_ip};
use ratekeeper_core::{
    AnyStore, Chain, Check, FailurePolicy, Limit, Limiter, MemoryStore, Principal, PrincipalKind,
};
use ratekeeper_tests::{Server, client, retry_after};
use ratekeeper_tower::{RateLimitLayer, Rule};
use reqwest::StatusCode;

const MINUTE: Duration = Duration::from_secs(60);

fn game_kind() -> PrincipalKind {
    PrincipalKind::custom("game").unwrap()
}

#[tokio::test]
async fn path_params_route_templates_and_the_peer_key_requests() {
    let per_game = RateLimitLayer::in_memory().rule(Rule::new(
        Limit::fixed_window("per-game", 2, MINUTE).unwrap(),
        PathParam::new("game", game_kind()),
    ));
    let per_route = RateLimitLayer::in_memory().rule(Rule::new(
        Limit::fixed_window("per-route", 3, MINUTE).unwrap(),
        RouteTemplate,
    ));
    let per_ip = RateLimitLayer::in_memory().rule(Rule::new(
        Limit::fixed_window("per-ip", 100, MINUTE).unwrap(),
        client_ip(),
    ));
    // route_layer covers the routes added before it: /reports/{id} only.
    let app = Router::new()
        .route("/reports/{id}", get(|| async { "report" }))
        .route_layer(per_route)
        .route(
            "/games/{game}",
            get(|| async { "game" }).route_layer(per_game),
        )
        .layer(per_ip);
    let server = Server::start(app).await.unwrap();
    let http = client();
    let get = |p: &str| http.get(server.url(p)).send();
    // One budget per game: the path parameter is the key (percent-decoded).
    assert_eq!(
        get("/games/quiz%201").await.unwrap().status(),
        StatusCode::OK
    );
    assert_eq!(get("/games/quiz 1").await.unwrap().status(), StatusCode::OK);
    let r = get("/games/quiz%201").await.unwrap();
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(get("/games/other").await.unwrap().status(), StatusCode::OK);
    // One budget per route template, whichever id: /reports/{id} had none so far.
    for id in ["a", "b", "c"] {
        assert_eq!(
            get(&format!("/reports/{id}")).await.unwrap().status(),
            StatusCode::OK
        );
    }
    let r = get("/reports/d").await.unwrap();
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(r.headers()["ratelimit-limit"], "3");
    // The global IP guard (Router::layer) counted every request, from ConnectInfo.
    let policy = r.headers()["ratelimit"].to_str().unwrap().to_owned();
    assert!(
        policy.contains("\"per-ip\";r=92"),
        "8 requests so far: {policy}"
    );
}

#[derive(Clone)]
struct AppLimits {
    limiter: HandlerLimiter,
    per_ip: Limit,
    per_account: Limit,
    tokens: Limit,
}

impl axum::extract::FromRef<AppLimits> for HandlerLimiter {
    fn from_ref(app: &AppLimits) -> Self {
        app.limiter.clone()
    }
}

#[derive(serde::Deserialize)]
struct SignInBody {
    email: String,
}

async fn sign_in(
    State(app): State<AppLimits>,
    limiter: HandlerLimiter,
    peer: axum::extract::ConnectInfo<std::net::SocketAddr>,
    Json(body): Json<SignInBody>,
) -> Result<(Admitted, &'static str), Refused> {
    // The IP and the account, known only from the body, in ONE chain: one store call.
    let chain = Chain::new()
        .check(&app.per_ip, Principal::ip(peer.0.ip()))
        .check(
            &app.per_account,
            Principal::personal(PrincipalKind::User, body.email.to_lowercase()),
        );
    let admitted = limiter.check(&chain, FailurePolicy::Closed).await?;
    Ok((admitted, "signed in"))
}

async fn ask(
    State(app): State<AppLimits>,
    limiter: HandlerLimiter,
) -> Result<(Admitted, String), Refused> {
    let user = Principal::user("asker");
    // Check that there is room for at least one token, then charge what the call used.
    let admitted = limiter
        .check(
            &Chain::new().check_cost(&app.tokens, user.clone(), 1),
            FailurePolicy::Closed,
        )
        .await?;
    let used = 2_500; // the model's reported token count
    let _ = limiter
        .charge(
            &Check::new(app.tokens.key(user), used),
            FailurePolicy::Closed,
        )
        .await;
    Ok((admitted, format!("answered with {used} tokens")))
}

#[tokio::test]
async fn the_in_handler_limiter_checks_a_chain_from_the_body_and_charges_after_the_work() {
    let store = AnyStore::Memory(MemoryStore::new());
    let app = AppLimits {
        limiter: HandlerLimiter::new(Limiter::new(store)),
        per_ip: Limit::sliding_log("sign-in-ip", 20, Duration::from_secs(900)).unwrap(),
        per_account: Limit::sliding_log("sign-in-account", 2, Duration::from_secs(900)).unwrap(),
        tokens: Limit::token_bucket("llm-tokens", 1_000, 1_000, MINUTE).unwrap(),
    };
    let router = Router::new()
        .route("/auth/sign-in", post(sign_in))
        .route("/api/ask", post(ask))
        .with_state(app);
    let server = Server::start(router).await.unwrap();
    let http = client();
    let sign = |email: &str| {
        http.post(server.url("/auth/sign-in"))
            .header("content-type", "application/json")
            .body(format!("{{\"email\":\"{email}\"}}"))
            .send()
    };
    for _ in 0..2 {
        let r = sign("Ann@Example.com").await.unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        assert!(r.headers().contains_key("ratelimit-policy"));
    }
    // The account is limited whatever the case of its address; the layer's answer.
    let r = sign("ann@example.com").await.unwrap();
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(r.headers().contains_key("retry-after"));
    assert_eq!(r.headers()["ratelimit-limit"], "2");
    let body = r.text().await.unwrap();
    assert!(body.contains("\"limit\":\"sign-in-account\""), "{body}");
    assert_eq!(
        sign("bob@example.com").await.unwrap().status(),
        StatusCode::OK
    );

    // A post-hoc charge overdraws: the first call goes through, the next waits.
    let r = http.post(server.url("/api/ask")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.text().await.unwrap(), "answered with 2500 tokens");
    let r = http.post(server.url("/api/ask")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    let wait: u64 = retry_after(&r);
    assert!((60..=61).contains(&wait), "debt of one full bucket: {wait}");
}

#[derive(Clone)]
struct BudgetApp {
    limiter: HandlerLimiter,
    budget: ratekeeper_core::budget::Budget,
}

impl axum::extract::FromRef<BudgetApp> for HandlerLimiter {
    fn from_ref(app: &BudgetApp) -> Self {
        app.limiter.clone()
    }
}

async fn spend(
    State(app): State<BudgetApp>,
    limiter: HandlerLimiter,
    headers: axum::http::HeaderMap,
) -> Result<(Admitted, &'static str), Refused> {
    let user = headers["x-user"].to_str().unwrap_or("anon").to_owned();
    let chain = app
        .budget
        .chain(&ratekeeper_core::budget::Spender::user(user), 100);
    Ok((limiter.check(&chain, FailurePolicy::Closed).await?, "spent"))
}

#[tokio::test]
async fn two_routes_and_a_job_share_one_budget() {
    use ratekeeper_core::Store;
    use ratekeeper_core::budget::{Budget, Spender};
    // Per user 300, per job 600, in all 1 000 model tokens a day; each call costs 100.
    let budget = Budget::daily("model", 300, 600, 1_000).unwrap();
    let store = AnyStore::Memory(MemoryStore::new());
    let limiter = Limiter::new(store.clone());
    let app = BudgetApp {
        limiter: HandlerLimiter::new(limiter.clone()),
        budget: budget.clone(),
    };
    let router = Router::new()
        .route("/api/capture", post(spend))
        .route("/api/contribute", post(spend))
        .with_state(app);
    let server = Server::start(router).await.unwrap();
    let http = client();
    let call = |path: &str, user: &str| http.post(server.url(path)).header("x-user", user).send();
    let global_key = budget.global().key(Principal::global());
    let global = || store.peek(&global_key);

    // Ann spends on both routes: her own cap (3 calls) holds across them.
    assert_eq!(
        call("/api/capture", "ann").await.unwrap().status(),
        StatusCode::OK
    );
    assert_eq!(
        call("/api/contribute", "ann").await.unwrap().status(),
        StatusCode::OK
    );
    assert_eq!(
        call("/api/capture", "ann").await.unwrap().status(),
        StatusCode::OK
    );
    assert_eq!(
        global().await.unwrap().remaining(),
        700,
        "every allowed call counted"
    );
    // Over her own cap: refused, and the shared budget is untouched.
    for _ in 0..5 {
        let r = call("/api/contribute", "ann").await.unwrap();
        assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(r.headers()["ratelimit-limit"], "300");
    }
    assert_eq!(global().await.unwrap().remaining(), 700);

    // A background job spends the same budget through the same limiter, under its own
    // cap: users' caps do not apply to it.
    let job = Spender::job("resolve-ingredients");
    let mut job_ok = 0;
    for _ in 0..6 {
        let d = limiter
            .check(&budget.chain(&job, 100), FailurePolicy::Open)
            .await;
        job_ok += u32::from(d.is_allowed());
    }
    assert_eq!(job_ok, 6, "the job's cap is its own");
    assert_eq!(global().await.unwrap().remaining(), 100);
    // One more call from anyone exhausts the ceiling; then nobody gets through.
    assert_eq!(
        call("/api/capture", "bob").await.unwrap().status(),
        StatusCode::OK
    );
    let r = call("/api/contribute", "carol").await.unwrap();
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        r.headers()["ratelimit-limit"],
        "1000",
        "the ceiling refused"
    );
    let d = limiter
        .check(&budget.chain(&job, 100), FailurePolicy::Open)
        .await;
    assert!(!d.is_allowed());
    // Raising the ceiling in its one place lets everyone through again.
    budget.global().set_quota(2_000).unwrap();
    assert_eq!(
        call("/api/contribute", "carol").await.unwrap().status(),
        StatusCode::OK
    );
}

/// The in-handler limiter bans only principals the requester controls, as the layer does:
/// a ban of an account anyone can type in is the operator's 500; of the client IP, a ban.
#[tokio::test]
async fn the_in_handler_limiter_refuses_to_ban_an_account() {
    async fn attempt(
        State(limiter): State<HandlerLimiter>,
        headers: axum::http::HeaderMap,
    ) -> Result<(Admitted, &'static str), Refused> {
        let ban = Limit::ban("handler-ban", 1, MINUTE, MINUTE).unwrap();
        let once = Limit::fixed_window("handler-once", 1, MINUTE).unwrap();
        let who = if headers.contains_key("x-as-account") {
            Principal::user("ann")
        } else {
            Principal::ip("198.51.100.7".parse().unwrap())
        };
        let chain = Chain::new().check(&ban, who.clone()).check(&once, who);
        Ok((limiter.check(&chain, FailurePolicy::Closed).await?, "ok"))
    }
    let limiter = HandlerLimiter::new(Limiter::new(AnyStore::Memory(MemoryStore::new())));
    let app = Router::new()
        .route("/attempt", post(attempt))
        .with_state(limiter);
    let server = Server::start(app).await.unwrap();
    let http = client();
    let r = http
        .post(server.url("/attempt"))
        .header("x-as-account", "1")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::INTERNAL_SERVER_ERROR);
    assert!(r.text().await.unwrap().contains("ban.principal_not_owned"));
    let mut seen = Vec::new();
    for _ in 0..3 {
        let r = http.post(server.url("/attempt")).send().await.unwrap();
        let policy = r.headers()["ratelimit-policy"].to_str().unwrap().to_owned();
        seen.push((r.status().as_u16(), policy));
    }
    // Admitted; refused by the limit (the ban's one refusal); then banned for the minute.
    assert_eq!(seen[0].0, 200);
    assert!(!seen[0].1.contains("handler-ban"), "{seen:?}");
    assert_eq!(seen[1].0, 429);
    assert!(seen[1].1.starts_with("\"handler-once\""), "{seen:?}");
    assert_eq!(seen[2].0, 429);
    assert!(seen[2].1.starts_with("\"handler-ban\""), "{seen:?}");
}

/// The in-handler limiter taken as an extractor knows the request it answers: its one
/// `check` sends a refused browser to the friendly page (with the wait), answers an API
/// client with JSON and a gRPC call with its status, as the layer would.
#[tokio::test]
async fn the_in_handler_check_answers_each_client_in_its_own_form() {
    #[derive(Clone)]
    struct App {
        limiter: HandlerLimiter,
        once: Limit,
    }
    impl axum::extract::FromRef<App> for HandlerLimiter {
        fn from_ref(app: &App) -> Self {
            app.limiter.clone()
        }
    }
    async fn work(
        State(app): State<App>,
        limiter: HandlerLimiter,
    ) -> Result<(Admitted, &'static str), Refused> {
        let chain = Chain::new().check(&app.once, Principal::user("u"));
        Ok((limiter.check(&chain, FailurePolicy::Closed).await?, "done"))
    }
    let answering = ratekeeper_tower::Answering::new()
        .redirect_browsers("/slow-down?wait={retry_after}")
        .unwrap();
    let app = App {
        limiter: HandlerLimiter::new(Limiter::new(MemoryStore::new())).answering(answering),
        once: Limit::fixed_window("once", 1, MINUTE).unwrap(),
    };
    let router = Router::new().route("/work", post(work)).with_state(app);
    let server = Server::start(router).await.unwrap();
    let http = client();
    let send = |accept: &str, content_type: &str| {
        http.post(server.url("/work"))
            .header("accept", accept)
            .header("content-type", content_type)
            .send()
    };
    assert_eq!(send("*/*", "text/plain").await.unwrap().status(), 200);
    let browser = send("text/html,*/*;q=0.8", "text/plain").await.unwrap();
    assert_eq!(browser.status(), StatusCode::SEE_OTHER);
    let wait = retry_after(&browser);
    assert_eq!(
        browser.headers()["location"],
        format!("/slow-down?wait={wait}").as_str()
    );
    let api = send("application/json", "application/json").await.unwrap();
    assert_eq!(api.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(
        api.text()
            .await
            .unwrap()
            .contains("\"code\":\"limit.exceeded\"")
    );
    let grpc = send("*/*", "application/grpc").await.unwrap();
    assert_eq!(grpc.status(), StatusCode::OK);
    assert_eq!(grpc.headers()["grpc-status"], "8");
}
