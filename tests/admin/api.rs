//! The admin API over TCP (the page: `page.rs`), on the memory store and a real
//! `redis-server`: heavy hitters, quotas, overrides, peeks, resets, bans, access lists;
//! tokens (missing, wrong, read-only) on every write route, without a store call; the
//! page's login, session cookie, CSRF token and `Origin` check.

use std::time::Duration;

use axum::Router;
use axum::routing::post;
use ratekeeper_admin::{Admin, AdminBuilder, Role};
use ratekeeper_core::store::BoxStore;
use ratekeeper_core::testing::{FaultyStore, LogCapture};
use ratekeeper_core::{AnyStore, Limit, Limiter, MemoryStore, Principal, PrincipalKind};
use ratekeeper_tests::redis::{RedisCluster, RedisServer};
use ratekeeper_tests::{Server, client};
use ratekeeper_tower::access::Access;
use ratekeeper_tower::extract::{ClientIp, HeaderKey};
use ratekeeper_tower::{RateLimitLayer, Rule};
use reqwest::{Method, StatusCode};
use serde_json::Value;

/// An API key's rendering: its hash.
pub(crate) fn k(key: &str) -> String {
    Principal::api_key(key).as_str().to_owned()
}

pub(crate) const OPS: &str = "ops-token-0123456789abcdef-0123456789abcdef";
pub(crate) const VIEWER: &str = "viewer-token-0123456789abcdef-0123456789abcdef";

/// `/answers`, limited per `x-api-key` (hashed): a ban (2 refusals in a minute ban for a
/// minute) before 3 answers a minute; access lists by client IP. The admin at `/admin`.
pub(crate) fn app(store: AnyStore) -> (Router, Limit) {
    app_with(store, |a| a)
}

/// [`app`], its admin built through `tune`.
pub(crate) fn app_with(
    store: AnyStore,
    tune: impl FnOnce(AdminBuilder) -> AdminBuilder,
) -> (Router, Limit) {
    let limiter = Limiter::builder(store).heavy_hitters().build().unwrap();
    let who = || HeaderKey::new("x-api-key".parse().unwrap(), PrincipalKind::ApiKey);
    let minute = Duration::from_secs(60);
    let answers = Limit::fixed_window("answers", 3, minute).unwrap();
    let layer = RateLimitLayer::new(limiter)
        .access(Access::new(ClientIp::new()))
        .rule(Rule::new(
            Limit::ban("answer-ban", 2, minute, minute).unwrap(),
            who(),
        ))
        .rule(Rule::new(answers.clone(), who()));
    let admin = tune(
        Admin::builder()
            .token("ops", OPS, Role::ReadWrite)
            .token("viewer", VIEWER, Role::ReadOnly)
            .layer(&layer)
            .insecure_cookie(),
    )
    .build()
    .unwrap();
    let app = Router::new()
        .route("/answers", post(|| async { "ok" }))
        .layer(layer)
        .merge(admin.router());
    (app, answers)
}

pub(crate) async fn answer(s: &Server, who: &str) -> u16 {
    let r = client()
        .post(s.url("/answers"))
        .header("x-api-key", who)
        .send()
        .await
        .unwrap();
    let st = r.status().as_u16();
    if st == 400 || st == 500 {
        panic!("{}", r.text().await.unwrap());
    }
    st
}

pub(crate) async fn answers(s: &Server, who: &str, n: usize) -> Vec<u16> {
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(answer(s, who).await);
    }
    out
}

/// An API call with `token`: its status and its JSON (`Null` when there is none).
pub(crate) async fn call(
    s: &Server,
    method: Method,
    path: &str,
    token: Option<&str>,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut r = client().request(method, s.url(&format!("/admin/api{path}")));
    if let Some(t) = token {
        r = r.bearer_auth(t);
    }
    if let Some(b) = body {
        r = r
            .header("content-type", "application/json")
            .body(b.to_string());
    }
    let resp = r.send().await.unwrap();
    let status = resp.status();
    let text = resp.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// A form's body, `application/x-www-form-urlencoded`.
pub(crate) fn form(fields: &[(&str, String)]) -> String {
    let enc = |s: &str| {
        s.bytes()
            .map(|b| {
                if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                    (b as char).to_string()
                } else {
                    format!("%{b:02X}")
                }
            })
            .collect::<String>()
    };
    fields
        .iter()
        .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
        .collect::<Vec<_>>()
        .join("&")
}

async fn admin_api_end_to_end(store: AnyStore) {
    let logs = LogCapture::global();
    let (app, answers_limit) = app(store);
    let s = Server::start(app).await.unwrap();
    assert_eq!(answers(&s, "alice", 5).await, [200, 200, 200, 429, 429]);
    assert_eq!(answers(&s, "bob", 2).await, [200, 200]);

    // Limits, readable with the read-only token.
    let (st, limits) = call(&s, Method::GET, "/limits", Some(VIEWER), None).await;
    assert_eq!(st, 200, "{limits}");
    let names: Vec<&str> = limits["limits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["answer-ban", "answers"]);
    assert_eq!(limits["limits"][1]["quota"], 3);
    assert_eq!(limits["limits"][1]["heavy_hitters_tracked"], true);

    // Heavy hitters: alice first by use (3) and by refusals (2); bob second by use.
    let (_, top) = call(
        &s,
        Method::GET,
        "/limits/answers/top?n=5",
        Some(VIEWER),
        None,
    )
    .await;
    assert_eq!(top["by_use"][0]["principal"], k("alice"), "{top}");
    assert_eq!(top["by_use"][0]["count"], 3);
    assert_eq!(top["by_use"][1]["principal"], k("bob"));
    assert_eq!(top["by_refusals"][0]["principal"], k("alice"));
    assert_eq!(top["by_refusals"][0]["count"], 2);
    assert!(
        !top.to_string().contains("alice"),
        "API keys shown hashed: {top}"
    );

    // Two refusals banned alice; the peek shows it; the ban is listed, then lifted.
    let (_, peek) = call(
        &s,
        Method::GET,
        &format!("/limits/answer-ban/principals/{}", k("alice")),
        Some(VIEWER),
        None,
    )
    .await;
    assert_eq!(peek["banned"], true, "{peek}");
    let (_, bans) = call(&s, Method::GET, "/bans", Some(VIEWER), None).await;
    assert_eq!(bans["bans"][0]["principal"], k("alice"), "{bans}");
    assert_eq!(bans["bans"].as_array().unwrap().len(), 1);
    let (st, _) = call(
        &s,
        Method::DELETE,
        &format!("/bans/answer-ban/{}", k("alice")),
        Some(OPS),
        None,
    )
    .await;
    assert_eq!(st, 204);
    let (_, bans) = call(&s, Method::GET, "/bans", Some(VIEWER), None).await;
    assert!(bans["bans"].as_array().unwrap().is_empty(), "{bans}");

    // Quota raised to 5: alice (3 used) gets 2 more; reset, she gets 5.
    let (st, l) = call(
        &s,
        Method::PUT,
        "/limits/answers/quota",
        Some(OPS),
        Some(serde_json::json!({"quota": 5})),
    )
    .await;
    assert_eq!((st, l["quota"].as_u64()), (StatusCode::OK, Some(5)));
    assert_eq!(answers_limit.quota(), 5, "the layer's limit itself");
    assert_eq!(answers(&s, "alice", 3).await, [200, 200, 429]);
    let (_, peek) = call(
        &s,
        Method::GET,
        &format!("/limits/answers/principals/{}", k("alice")),
        Some(VIEWER),
        None,
    )
    .await;
    assert_eq!(
        (peek["remaining"].as_u64(), peek["quota"].as_u64()),
        (Some(0), Some(5)),
        "{peek}"
    );
    let (st, _) = call(
        &s,
        Method::DELETE,
        &format!("/limits/answers/principals/{}", k("alice")),
        Some(OPS),
        None,
    )
    .await;
    assert_eq!(st, 204);
    let (_, peek) = call(
        &s,
        Method::GET,
        &format!("/limits/answers/principals/{}", k("alice")),
        Some(VIEWER),
        None,
    )
    .await;
    assert_eq!(peek["remaining"].as_u64(), Some(5), "{peek}");

    // An override: bob (2 used) to 2, then refused; removed, he has 3 left of 5.
    let (st, l) = call(
        &s,
        Method::PUT,
        &format!("/limits/answers/overrides/{}", k("bob")),
        Some(OPS),
        Some(serde_json::json!({"quota": 2})),
    )
    .await;
    assert_eq!(st, 200, "{l}");
    assert_eq!(l["overrides"][0]["principal"], k("bob"));
    assert_eq!(answer(&s, "bob").await, 429);
    let (_, l) = call(
        &s,
        Method::DELETE,
        &format!("/limits/answers/overrides/{}", k("bob")),
        Some(OPS),
        None,
    )
    .await;
    assert!(l["overrides"].as_array().unwrap().is_empty());
    assert_eq!(answer(&s, "bob").await, 200);

    // Access lists: read, replaced (the test client's own address denied: 403), restored.
    let deny_me = serde_json::json!({"deny": {"addresses": ["127.0.0.0/8"]}});
    let (st, lists) = call(&s, Method::PUT, "/access", Some(OPS), Some(deny_me)).await;
    assert_eq!(st, 200, "{lists}");
    assert_eq!(lists["deny"]["addresses"][0], "127.0.0.0/8");
    assert_eq!(answer(&s, "carol").await, 403);
    let (st, _) = call(
        &s,
        Method::PUT,
        "/access",
        Some(OPS),
        Some(serde_json::json!({})),
    )
    .await;
    assert_eq!(st, 200);
    let (_, lists) = call(&s, Method::GET, "/access", Some(VIEWER), None).await;
    assert!(lists["deny"]["addresses"].as_array().unwrap().is_empty());
    assert_eq!(answer(&s, "carol").await, 200);

    // Bad input: clear 4xx with stable codes.
    let (st, e) = call(
        &s,
        Method::PUT,
        "/limits/answers/quota",
        Some(OPS),
        Some(serde_json::json!({"quota": 0})),
    )
    .await;
    assert_eq!(
        (st, e["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("limit.quota_zero"))
    );
    let (st, e) = call(&s, Method::GET, "/limits/nope/top", Some(VIEWER), None).await;
    assert_eq!(
        (st, e["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("admin.unknown_limit"))
    );
    let (st, e) = call(
        &s,
        Method::GET,
        "/limits/answers/principals/not-a-principal",
        Some(VIEWER),
        None,
    )
    .await;
    assert_eq!(
        (st, e["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("admin.principal_invalid"))
    );

    // Every change is in the audit log, by token name, never the token.
    for action in [
        "lift_ban",
        "set_quota",
        "reset",
        "set_override",
        "clear_override",
        "replace_access_lists",
    ] {
        assert!(
            logs.count("rate_limit.admin_change", &format!("action=\"{action}\"")) > 0,
            "{action}"
        );
    }
    assert!(logs.count("rate_limit.admin_change", "token=\"ops\"") >= 6);
    assert!(!logs.contains(OPS) && !logs.contains(VIEWER));
}

#[tokio::test]
async fn the_admin_api_on_memory() {
    admin_api_end_to_end(AnyStore::Memory(MemoryStore::new())).await;
}

#[tokio::test]
async fn the_admin_api_on_redis() {
    let redis = RedisServer::start();
    admin_api_end_to_end(redis.store()).await;
}

#[tokio::test]
async fn the_admin_api_on_a_cluster() {
    let cluster = RedisCluster::start();
    admin_api_end_to_end(cluster.store()).await;
}

/// Every route refuses a missing or wrong token (401), every write route a read-only one
/// (403), and none of them calls the store.
#[tokio::test]
async fn tokens_are_checked_on_every_route_before_any_store_call() {
    let faulty = FaultyStore::new();
    // More wrong tokens than one address may send in a minute (the lockout has a test of
    // its own).
    let (app, _) = app_with(AnyStore::Boxed(BoxStore::new(faulty.clone())), |a| {
        a.auth_failures(1_000, Duration::from_secs(60))
    });
    let s = Server::start(app).await.unwrap();
    let quota = Some(serde_json::json!({"quota": 1}));
    let writes = [
        (Method::PUT, "/limits/answers/quota", quota.clone()),
        (
            Method::PUT,
            &format!("/limits/answers/overrides/{}", k("bob")),
            quota,
        ),
        (
            Method::DELETE,
            &format!("/limits/answers/overrides/{}", k("bob")),
            None,
        ),
        (Method::DELETE, "/limits/answers/principals/p:bob", None),
        (Method::DELETE, "/bans/answer-ban/p:bob", None),
        (Method::PUT, "/access", Some(serde_json::json!({}))),
    ];
    let reads = [
        "/limits",
        "/limits/answers/top",
        "/limits/answers/principals/p:bob",
        "/bans",
        "/access",
    ];
    for (m, path, body) in &writes {
        for (token, want) in [
            (None, 401),
            (Some("wrong-token-0123456789abcdef"), 401),
            (Some(VIEWER), 403),
        ] {
            let (st, e) = call(&s, m.clone(), path, token, body.clone()).await;
            assert_eq!(st.as_u16(), want, "{m} {path} with {token:?}: {e}");
            let code = if want == 401 {
                "admin.unauthorized"
            } else {
                "admin.read_only"
            };
            assert_eq!(e["code"], code);
        }
    }
    for path in reads {
        for token in [None, Some("Bearer"), Some(OPS.trim_end_matches('f'))] {
            let (st, _) = call(&s, Method::GET, path, token, None).await;
            assert_eq!(st, 401, "{path} with {token:?}");
        }
    }
    let bare = client()
        .get(s.url("/admin/api/limits"))
        .header("authorization", OPS)
        .send()
        .await
        .unwrap();
    assert_eq!(bare.status(), 401, "not a bearer token");
    assert_eq!(
        bare.headers()["www-authenticate"],
        "Bearer realm=\"rate-limit admin\""
    );
    assert_eq!(faulty.calls(), 0, "no refused call reached the store");

    for (builder, why) in [
        (
            Admin::builder().layer(&RateLimitLayer::in_memory()),
            "no token",
        ),
        (
            Admin::builder()
                .token("ops", "short", Role::ReadWrite)
                .layer(&RateLimitLayer::in_memory()),
            "a short token",
        ),
        (
            Admin::builder().token("ops", OPS, Role::ReadWrite),
            "no store",
        ),
    ] {
        let e = builder.build().expect_err(why);
        assert_eq!(e.code(), "admin.invalid", "{why}");
        assert!(!e.to_string().contains(OPS));
    }
}
