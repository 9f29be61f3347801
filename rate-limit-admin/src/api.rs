//! The JSON API: every handler checks the bearer token first, before it reads a body or
//! touches the store.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use ratekeeper_axum::core::{ConfigError, Limit, Principal, Store};
use ratekeeper_axum::tower::access::List;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::Admin;
use crate::auth::{audit, error};
use crate::shared::{AccessBody, ListBody, ListError};

type Answer = Result<Response, Response>;

fn unknown_limit() -> Response {
    error(
        StatusCode::NOT_FOUND,
        "admin.unknown_limit",
        "No limit of that name.",
    )
}

fn principal(text: &str) -> Result<Principal, Response> {
    Principal::from_rendered(text).ok_or_else(|| {
        error(
            StatusCode::BAD_REQUEST,
            "admin.principal_invalid",
            "A principal is written as it renders: ip:203.0.113.7, p:alice, k:~<hash>.",
        )
    })
}

fn config(e: &ConfigError) -> Response {
    error(StatusCode::BAD_REQUEST, e.code(), &e.to_string())
}

fn store_down(e: &impl std::fmt::Display) -> Response {
    error(
        StatusCode::SERVICE_UNAVAILABLE,
        "admin.store_unavailable",
        &format!("The store did not answer: {e}"),
    )
}

fn body<T: for<'de> Deserialize<'de>>(bytes: &Bytes) -> Result<T, Response> {
    serde_json::from_slice(bytes).map_err(|e| {
        error(
            StatusCode::BAD_REQUEST,
            "admin.body_invalid",
            &format!("The body is not the JSON this route takes: {e}"),
        )
    })
}

pub(crate) fn limit_json(l: &Limit) -> Value {
    let overrides: Vec<Value> = l
        .overrides()
        .into_iter()
        .map(|(p, q)| json!({ "principal": p, "quota": q }))
        .collect();
    json!({
        "name": l.name(),
        "algorithm": l.kind().as_str(),
        "quota": l.quota(),
        "window_seconds": l.window().as_secs_f64(),
        "overrides": overrides,
        "heavy_hitters_tracked": l.heavy_hitters(0).is_some(),
    })
}

impl Admin {
    fn find(&self, name: &str) -> Result<&Limit, Response> {
        self.limit(name).ok_or_else(unknown_limit)
    }
}

pub(crate) async fn limits(State(a): State<Admin>, h: HeaderMap) -> Answer {
    a.bearer(&h)?;
    let all: Vec<Value> = a.inner.limits.iter().map(limit_json).collect();
    let mut out = json!({ "limits": all });
    if let Some(f) = a.fleet_json() {
        out["fleet"] = f;
    }
    Ok(Json(out).into_response())
}

/// A change made through the fleet: its error as the API answers it.
fn fleet_error(e: &ratekeeper_axum::core::fleet::FleetError) -> Response {
    match e {
        ratekeeper_axum::core::fleet::FleetError::Config(c) => config(c),
        other => store_down(other),
    }
}

#[derive(Deserialize)]
struct Quota {
    quota: u64,
}

pub(crate) async fn set_quota(
    State(a): State<Admin>,
    h: HeaderMap,
    Path(name): Path<String>,
    b: Bytes,
) -> Answer {
    let who = a.writer(&h)?;
    let limit = a.find(&name)?;
    let q: Quota = body(&b)?;
    match &a.inner.fleet {
        Some(f) => {
            f.set_quota(&name, q.quota)
                .await
                .map_err(|e| fleet_error(&e))?;
        }
        None => limit.set_quota(q.quota).map_err(|e| config(&e))?,
    }
    audit(&who, "set_quota", &name, "", &q.quota.to_string());
    Ok(Json(limit_json(limit)).into_response())
}

pub(crate) async fn set_override(
    State(a): State<Admin>,
    h: HeaderMap,
    Path((name, who_text)): Path<(String, String)>,
    b: Bytes,
) -> Answer {
    let who = a.writer(&h)?;
    let limit = a.find(&name)?;
    let p = principal(&who_text)?;
    let q: Quota = body(&b)?;
    match &a.inner.fleet {
        Some(f) => {
            f.set_override(&name, &p, q.quota)
                .await
                .map_err(|e| fleet_error(&e))?;
        }
        None => limit.set_override(&p, q.quota).map_err(|e| config(&e))?,
    }
    audit(
        &who,
        "set_override",
        &name,
        p.as_str(),
        &q.quota.to_string(),
    );
    Ok(Json(limit_json(limit)).into_response())
}

pub(crate) async fn clear_override(
    State(a): State<Admin>,
    h: HeaderMap,
    Path((name, who_text)): Path<(String, String)>,
) -> Answer {
    let who = a.writer(&h)?;
    let limit = a.find(&name)?;
    let p = principal(&who_text)?;
    match &a.inner.fleet {
        Some(f) => {
            f.clear_override(&name, &p)
                .await
                .map_err(|e| fleet_error(&e))?;
        }
        None => limit.clear_override(&p),
    }
    audit(&who, "clear_override", &name, p.as_str(), "");
    Ok(Json(limit_json(limit)).into_response())
}

pub(crate) async fn peek(
    State(a): State<Admin>,
    h: HeaderMap,
    Path((name, who_text)): Path<(String, String)>,
) -> Answer {
    a.bearer(&h)?;
    let limit = a.find(&name)?;
    let p = principal(&who_text)?;
    let s = a
        .inner
        .store
        .peek(&limit.key(p.clone()))
        .await
        .map_err(|e| store_down(&e))?;
    Ok(Json(json!({
        "limit": name,
        "principal": p.as_str(),
        "quota": s.limit(),
        "remaining": s.remaining(),
        "reset_seconds": s.reset_after().as_secs_f64(),
        "banned": s.is_banned(),
        "retry_after_seconds": s.retry_after().map(|d| d.as_secs_f64()),
    }))
    .into_response())
}

/// Resets a principal's state under a limit in the store (a ban's: lifts it).
async fn reset_key(a: &Admin, h: &HeaderMap, name: &str, who_text: &str, action: &str) -> Answer {
    let who = a.writer(h)?;
    let limit = a.find(name)?;
    let p = principal(who_text)?;
    a.reset_principal(limit, &p)
        .await
        .map_err(|e| fleet_error(&e))?;
    audit(&who, action, name, p.as_str(), "");
    Ok(StatusCode::NO_CONTENT.into_response())
}

pub(crate) async fn reset(
    State(a): State<Admin>,
    h: HeaderMap,
    Path((name, who)): Path<(String, String)>,
) -> Answer {
    reset_key(&a, &h, &name, &who, "reset").await
}

pub(crate) async fn lift(
    State(a): State<Admin>,
    h: HeaderMap,
    Path((name, who)): Path<(String, String)>,
) -> Answer {
    reset_key(&a, &h, &name, &who, "lift_ban").await
}

#[derive(Deserialize)]
pub(crate) struct TopQuery {
    n: Option<usize>,
}

pub(crate) async fn top(
    State(a): State<Admin>,
    h: HeaderMap,
    Path(name): Path<String>,
    Query(q): Query<TopQuery>,
) -> Answer {
    a.bearer(&h)?;
    let limit = a.find(&name)?;
    let n = q.n.unwrap_or(10).min(100);
    Ok(Json(a.top_value(limit, n).await).into_response())
}

/// Every ban in force, by ban limit.
pub(crate) async fn bans_json(a: &Admin) -> Result<Vec<Value>, Response> {
    let mut out = Vec::new();
    for l in a.inner.limits.iter().filter(|l| l.ban_duration().is_some()) {
        for b in a.inner.store.bans(l).await.map_err(|e| store_down(&e))? {
            out.push(json!({
                "limit": l.name(),
                "principal": b.principal().as_str(),
                "remaining_seconds": b.remaining().as_secs_f64(),
            }));
        }
    }
    Ok(out)
}

pub(crate) async fn bans(State(a): State<Admin>, h: HeaderMap) -> Answer {
    a.bearer(&h)?;
    Ok(Json(json!({ "bans": bans_json(&a).await? })).into_response())
}

fn no_lists() -> Response {
    error(
        StatusCode::NOT_FOUND,
        "admin.no_access_lists",
        "No access lists were given to the admin.",
    )
}

fn list_json(l: &List) -> Value {
    json!({
        "addresses": l.addresses().collect::<Vec<_>>(),
        "principals": l.principals(),
    })
}

pub(crate) async fn access(State(a): State<Admin>, h: HeaderMap) -> Answer {
    a.bearer(&h)?;
    let access = a.inner.access.as_ref().ok_or_else(no_lists)?;
    let (allow, deny) = access.lists();
    Ok(Json(json!({ "allow": list_json(&allow), "deny": list_json(&deny) })).into_response())
}

fn to_list(b: &ListBody) -> Result<List, Response> {
    b.to_list()
        .map_err(|ListError(code, why)| error(StatusCode::BAD_REQUEST, code, &why))
}

pub(crate) async fn set_access(State(a): State<Admin>, h: HeaderMap, b: Bytes) -> Answer {
    let who = a.writer(&h)?;
    let access = a.inner.access.as_ref().ok_or_else(no_lists)?;
    let lists: AccessBody = body(&b)?;
    let (allow, deny) = (to_list(&lists.allow)?, to_list(&lists.deny)?);
    let summary = format!("allow {} deny {}", allow.len(), deny.len());
    a.replace_access(access, &lists, (allow, deny))
        .await
        .map_err(|e| fleet_error(&e))?;
    audit(&who, "replace_access_lists", "access-list", "", &summary);
    let (allow, deny) = access.lists();
    Ok(Json(json!({ "allow": list_json(&allow), "deny": list_json(&deny) })).into_response())
}
