//! What the API and the page do through the fleet when the admin has one
//! ([`AdminBuilder::fleet`](super::AdminBuilder::fleet)): lift bans and reset counts for
//! every instance, keep the access lists in the fleet's settings, report the version this
//! instance applied, and show the heavy hitters merged over every instance.

use std::time::{SystemTime, UNIX_EPOCH};

use ratekeeper_axum::core::fleet::{Fleet, FleetError};
use ratekeeper_axum::core::top::{HeavyHitters, Hitter};
use ratekeeper_axum::core::{Limit, Principal, Store};
use ratekeeper_axum::tower::access::{Access, List};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::Admin;

/// The fleet setting that holds the access lists.
pub(crate) const ACCESS_SETTING: &str = "access";

/// One list as the API reads and writes it.
#[derive(Deserialize, Serialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListBody {
    #[serde(default)]
    pub(crate) addresses: Vec<String>,
    #[serde(default)]
    pub(crate) principals: Vec<String>,
}

/// Both lists.
#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AccessBody {
    #[serde(default)]
    pub(crate) allow: ListBody,
    #[serde(default)]
    pub(crate) deny: ListBody,
}

/// Why a list was refused: the code and message the API answers with.
pub(crate) struct ListError(pub(crate) &'static str, pub(crate) String);

impl ListBody {
    pub(crate) fn to_list(&self) -> Result<List, ListError> {
        let ps = self
            .principals
            .iter()
            .map(|p| {
                Principal::from_rendered(p).ok_or_else(|| {
                    ListError(
                        "admin.principal_invalid",
                        "A principal is written as it renders: ip:203.0.113.7, p:alice, k:~<hash>."
                            .into(),
                    )
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(List::parse(&self.addresses)
            .map_err(|e| ListError(e.code(), e.to_string()))?
            .with_principals(ps))
    }
}

/// Keeps `access` as the fleet's setting says, from now on.
pub(crate) fn follow_access(fleet: &Fleet, access: &Access) {
    let access = access.clone();
    fleet.watch_setting(ACCESS_SETTING, move |text| {
        let Some(text) = text else { return };
        // Written by an admin that checked it; one that does not parse is left unapplied.
        let parsed = serde_json::from_str::<AccessBody>(text)
            .ok()
            .and_then(|b| Some((b.allow.to_list().ok()?, b.deny.to_list().ok()?)));
        match parsed {
            Some((allow, deny)) => access.replace(allow, deny),
            None => tracing::warn!(
                target: "rate_limit.admin",
                "the fleet's access lists do not parse: the lists in force are kept"
            ),
        }
    });
}

impl Admin {
    /// Resets `p`'s state under `limit` (a ban's: lifts it) for every instance: through
    /// the fleet when it runs the limit (others drop a refusal they cached), else in the
    /// store.
    pub(crate) async fn reset_principal(
        &self,
        limit: &Limit,
        p: &Principal,
    ) -> Result<(), FleetError> {
        match &self.inner.fleet {
            Some(f) if f.limit(limit.name()).is_ok() => {
                f.lift_ban(limit.name(), p).await.map(|_| ())
            }
            _ => self
                .inner
                .store
                .reset(&limit.key(p.clone()))
                .await
                .map_err(FleetError::Store),
        }
    }

    /// Replaces the access lists: through the fleet's setting for every instance when there
    /// is a fleet, else here.
    pub(crate) async fn replace_access(
        &self,
        access: &Access,
        body: &AccessBody,
        (allow, deny): (List, List),
    ) -> Result<(), FleetError> {
        match &self.inner.fleet {
            Some(f) => {
                let text = serde_json::to_string(body).unwrap_or_default();
                f.set_setting(ACCESS_SETTING, &text).await.map(|_| ())
            }
            None => {
                access.replace(allow, deny);
                Ok(())
            }
        }
    }

    /// The version this instance applied, when, the last read's error, whether notices
    /// arrive, and its name; `None` without a fleet.
    pub(crate) fn fleet_json(&self) -> Option<Value> {
        let f = self.inner.fleet.as_ref()?;
        let applied = f.applied();
        let at = applied
            .at
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map(|d| d.as_secs());
        Some(json!({
            "instance": f.instance(),
            "version": applied.version,
            "applied_at": at,
            "error": applied.error,
            "listening": applied.listening,
        }))
    }

    /// `limit`'s heavy hitters: merged over the fleet when there is one (and the store
    /// answers; else this instance's, saying why), else this instance's.
    pub(crate) async fn top_value(&self, limit: &Limit, n: usize) -> Value {
        let local = || limit.heavy_hitters(n);
        let (report, scope, instances, error) = match &self.inner.fleet {
            Some(f) if f.limit(limit.name()).is_ok() => {
                match f.heavy_hitters(limit.name(), n).await {
                    Ok(Some(m)) => {
                        let now = SystemTime::now();
                        let who: Vec<Value> = m
                            .instances
                            .iter()
                            .map(|c| {
                                let age = c.published.map(|t| {
                                    now.duration_since(t).unwrap_or_default().as_secs_f64()
                                });
                                json!({ "instance": c.instance, "published_seconds_ago": age })
                            })
                            .collect();
                        (Some(m.report), "fleet", Some(who), None)
                    }
                    Ok(None) => (None, "fleet", None, None),
                    Err(e) => (local(), "instance", None, Some(e.to_string())),
                }
            }
            _ => (local(), "instance", None, None),
        };
        let mut v = match report {
            Some(t) => report_json(limit.name(), &t),
            None => json!({ "limit": limit.name(), "tracked": false }),
        };
        v["scope"] = json!(scope);
        if let Some(who) = instances {
            v["instances"] = Value::from(who);
        }
        if let Some(e) = error {
            v["fleet_error"] = json!(e);
        }
        v
    }
}

/// A report as the API answers it: each count with its bounds (`guaranteed` ..= `count`
/// holds the truth), and a hitter `stands_out` only when it surely used more than any
/// principal not listed.
fn report_json(name: &str, t: &HeavyHitters) -> Value {
    let list = |v: &[Hitter], unlisted: u64| -> Value {
        let hitters: Vec<Value> = v
            .iter()
            .map(|h| {
                json!({
                    "principal": h.principal().as_str(),
                    "count": h.count(),
                    "error": h.error(),
                    "guaranteed": h.guaranteed(),
                    "stands_out": HeavyHitters::stands_out(h, unlisted),
                })
            })
            .collect();
        Value::from(hitters)
    };
    let apart =
        |v: &[Hitter], unlisted: u64| v.iter().any(|h| HeavyHitters::stands_out(h, unlisted));
    json!({
        "limit": name,
        "tracked": true,
        "by_use": list(&t.by_use, t.unlisted_use),
        "by_refusals": list(&t.by_refusals, t.unlisted_refusals),
        "unlisted_use_at_most": t.unlisted_use,
        "unlisted_refusals_at_most": t.unlisted_refusals,
        "by_use_tells_apart": apart(&t.by_use, t.unlisted_use),
        "by_refusals_tells_apart": apart(&t.by_refusals, t.unlisted_refusals),
        "used": t.used,
        "refused": t.refused,
        "span_seconds": t.span.as_secs_f64(),
        "capacity": t.capacity,
    })
}
