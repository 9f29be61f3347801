//! food-api's plans: a quota per account per calendar month, renewed on each customer's
//! billing day, and `GET /usage`.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::State;
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use ratekeeper_core::calendar::{Anchor, Calendar, Period, Timestamp, Usage};
use ratekeeper_core::{
    AnyStore, Chain, Check, ConfigError, FailurePolicy, Key, Limit, Limiter, Principal,
    PrincipalKind, Store,
};
use ratekeeper_tower::extract::{Bearer, ClientIp, KeyExtractor};
use ratekeeper_tower::{Answering, RateLimitLayer, Rule};

use super::FoodState;

/// The plans: `quota` calls per account per calendar month (UTC), from each customer's
/// billing day (the 1st when it has none). Cheap to clone; clones share the limit.
#[derive(Debug, Clone)]
pub struct Plans {
    limit: Limit,
    /// Each customer's billing day, by its principal's rendering (what the layer names).
    billing: Arc<HashMap<String, Anchor>>,
}

impl Plans {
    /// `quota` calls a month; `billing`: accounts (bearer tokens) and the day and time
    /// their month starts (a day past a short month's end is its last day).
    pub fn new<'a>(
        quota: u64,
        billing: impl IntoIterator<Item = (&'a str, Anchor)>,
    ) -> Result<Self, ConfigError> {
        let month = Calendar::new(Period::Month, "UTC")?;
        let billing = billing
            .into_iter()
            .map(|(account, anchor)| (principal(account).as_str().to_owned(), anchor))
            .collect();
        Ok(Self {
            limit: Limit::calendar("plan", quota, month)?,
            billing: Arc::new(billing),
        })
    }

    /// 10 000 calls a month; a customer that pays on the 31st renews on each month's last
    /// day (the demo's billing records).
    pub fn standard() -> Result<Self, ConfigError> {
        Self::new(10_000, [("acme", Anchor::day(31)?.at(9, 0)?)])
    }

    /// The plan's limit (for a fleet's overrides: an upgraded customer).
    pub fn limit(&self) -> &Limit {
        &self.limit
    }

    /// An account's key: its plan, from its billing day.
    pub fn key(&self, account: &str) -> Key {
        self.key_for(principal(account))
    }

    /// The plan's key of the principal a bearer token named (as the layer's `Bearer`
    /// extractor named it), from its billing day.
    pub(super) fn key_for(&self, p: Principal) -> Key {
        let anchor = self.billing.get(p.as_str()).copied();
        let key = self.limit.key(p);
        match anchor {
            Some(a) => key.anchored(a),
            None => key,
        }
    }

    /// The rule charging the bearer's plan on a route, failing as the route does.
    pub(super) fn rule(&self, policy: FailurePolicy) -> Rule {
        let billing = Arc::clone(&self.billing);
        Rule::new(self.limit.clone(), Bearer::new())
            .anchor_from(move |p, _| billing.get(p.as_str()).copied())
            .on_store_error(policy)
    }
}

/// The principal a bearer token names (as the layer's `Bearer` names it).
fn principal(account: &str) -> Principal {
    Principal::personal(PrincipalKind::User, account)
}

/// A customer's catalogue sync, run in the background: charges the customer's plan one
/// call per product sent, all or nothing. Whether it may run.
pub async fn sync_catalogue(
    limiter: &Limiter<AnyStore>,
    plans: &Plans,
    account: &str,
    products: u64,
) -> bool {
    let mut chain = Chain::new();
    chain.push(Check::new(plans.key(account), products));
    limiter
        .check(&chain, FailurePolicy::Closed)
        .await
        .is_allowed()
}

/// `GET /usage`: the bearer's plan in the current period, read without charging it:
/// `{"plan","quota","used","remaining","period_start","renews_at"}` (instants in UTC).
pub(super) async fn usage(State(s): State<FoodState>, parts: Parts) -> Response {
    let key = match Bearer::new().extract(&parts) {
        Ok(p) => s.plans.key_for(p),
        Err(r) => return s.limiter.refuse(r.into(), &parts.headers).into_response(),
    };
    let state = match s.limiter.limiter().store().peek(&key).await {
        Ok(state) => state,
        Err(_) => {
            let body = "{\"type\":\"about:blank\",\"title\":\"Service Unavailable\",\"status\":503,\"detail\":\"The usage cannot be read now.\"}";
            return problem(StatusCode::SERVICE_UNAVAILABLE, body.to_owned());
        }
    };
    let Some(u) = Usage::new(&key, &state, Timestamp::now()) else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    let second = |t: Timestamp| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    let body = format!(
        "{{\"plan\":\"{}\",\"quota\":{},\"used\":{},\"remaining\":{},\"period_start\":\"{}\",\"renews_at\":\"{}\"}}",
        s.plans.limit.name(),
        u.quota(),
        u.used(),
        u.remaining(),
        second(u.period().start()),
        second(u.period().end())
    );
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response()
}

/// `GET /usage`'s own limits: 30 reads a minute per account, 300 per client IP (a read
/// costs the store one call, and the plan nothing).
pub(super) fn usage_layer(
    limiter: &Limiter,
    answering: &Answering,
    ip: &ClientIp,
) -> Result<RateLimitLayer, ConfigError> {
    let minute = std::time::Duration::from_secs(60);
    Ok(RateLimitLayer::new(limiter.clone())
        .answering(answering.clone())
        .rule(Rule::new(
            Limit::fixed_window("usage", 30, minute)?,
            Bearer::new(),
        ))
        .rule(Rule::new(
            Limit::fixed_window("usage-ip", 300, minute)?,
            ip.clone(),
        )))
}

fn problem(status: StatusCode, body: String) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/problem+json")],
        body,
    )
        .into_response()
}
