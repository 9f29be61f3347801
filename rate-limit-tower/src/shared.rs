//! `Shared`: one layer's configuration and the decisions made from it, shared by the
//! layer, its services and their futures (no module of the three needs another's).

use std::sync::Arc;

use http::header::ACCESS_CONTROL_REQUEST_METHOD;
use http::{HeaderMap, Method, Response};
use ratekeeper_core::limiter::{Holding, Reservation, SlotKey};
use ratekeeper_core::{Answer, AnyStore, Chain, ChainMode, Check, FailurePolicy, Limiter};

use crate::access::Listed;
use crate::answer::{Answering, Ctx, Verdict};
use crate::headers::{self, RateLimitInfo, Record};
use crate::meters::Meters;
use crate::refusal::Refusal;
use crate::rule::{BanAnswer, InFlightRule, Rule, not_owned};

#[derive(Clone)]
pub(crate) struct Shared {
    pub(crate) limiter: Limiter<AnyStore>,
    pub(crate) rules: Vec<Rule>,
    /// Per rule, the earlier rule whose extractor is the same as its own
    /// ([`KeyExtractor::same_key_as`](crate::extract::KeyExtractor::same_key_as)): its
    /// principal is that rule's, extracted once.
    pub(crate) same_key: Vec<Option<usize>>,
    pub(crate) names: Vec<Arc<str>>,
    pub(crate) policy: FailurePolicy,
    pub(crate) mode: ChainMode,
    pub(crate) exact: Vec<String>,
    pub(crate) prefixes: Vec<String>,
    pub(crate) limit_preflights: bool,
    pub(crate) answering: Answering,
    /// Whether any rule counts by outcome (its requests keep a reservation).
    pub(crate) counted: bool,
    /// Allow and deny lists, checked before anything else.
    pub(crate) access: Option<crate::access::Access>,
    /// In-flight limits, taken before the rules are checked.
    pub(crate) in_flight: Vec<InFlightRule>,
    /// Requests held for a delayed limit (see [`RateLimitLayer::max_held`](crate::RateLimitLayer::max_held)).
    pub(crate) holding: Holding,
    /// Whether every admitted response carries [`RateLimitInfo`] (refusals always do).
    pub(crate) info_extension: bool,
    /// The layer's series (feature `metrics`), rebuilt with its configuration.
    pub(crate) meters: Arc<Meters>,
    /// The share of a quota left that counts as near the limit.
    pub(crate) near_limit: f64,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("rules", &self.rules)
            .finish_non_exhaustive()
    }
}

/// What a request's head asks of the store: nothing (an allow list passed it), or the
/// chain of checks and the in-flight slots [`Shared::plan`] filled in.
pub(crate) enum Plan {
    Pass,
    Check,
}

impl Shared {
    pub(crate) fn passes(&self, method: &Method, path: &str, headers: &HeaderMap) -> bool {
        (self.rules.is_empty() && self.in_flight.is_empty() && self.access.is_none())
            || self.exact.iter().any(|p| p == path)
            || self.answering.redirect_path.as_deref() == Some(path)
            || self.prefixes.iter().any(|p| path.starts_with(p.as_str()))
            || (!self.limit_preflights
                && method == Method::OPTIONS
                && headers.contains_key(ACCESS_CONTROL_REQUEST_METHOD))
    }

    /// What the response to a request with these headers needs to know of it.
    #[inline]
    pub(crate) fn ctx(&self, headers: &HeaderMap) -> Ctx {
        let record = self.info_extension || crate::nesting::under_another_layer();
        Ctx::of(headers, self.answering.redirect.is_some(), record)
    }

    /// What a request's head asks of the store: the access lists, then each rule's
    /// principal and cost (into `chain`), then each in-flight limit's (into `slots`); the
    /// first that refuses answers. Filled in place: a chain is too large to move around.
    #[inline(always)]
    #[allow(
        clippy::result_large_err,
        reason = "inlined into `call`: the refusal is built in place (see `Verdict`)"
    )]
    pub(crate) fn plan(
        &self,
        parts: &http::request::Parts,
        chain: &mut Chain,
        slots: &mut Vec<SlotKey>,
    ) -> Result<Plan, Refusal> {
        match self.listed(parts) {
            Listed::Neither => {}
            Listed::Allowed => return Ok(Plan::Pass),
            Listed::Unresolved(rejection) => return Err(rejection.into()),
            _ => return Err(Refusal::denied()),
        }
        for (rule, same) in self.rules.iter().zip(&self.same_key) {
            if let Some(earlier) = same.and_then(|j| chain.checks().get(j)) {
                let p = earlier.key().principal();
                if !rule.limit.may_name(p) {
                    return Err(not_owned(rule.limit.name(), p).into());
                }
                let key = rule.keyed(rule.limit.key_of(earlier.key()), parts);
                chain.push(Check::new(key, rule.cost_of(parts)));
                continue;
            }
            let p = rule.key.extract(parts)?;
            if !rule.limit.may_name(&p) {
                return Err(not_owned(rule.limit.name(), &p).into());
            }
            let key = rule.keyed(rule.limit.key(p), parts);
            chain.push(Check::new(key, rule.cost_of(parts)));
        }
        for rule in &self.in_flight {
            slots.push(rule.limit.slots(rule.key.extract(parts)?));
        }
        Ok(Plan::Check)
    }

    /// What the access lists say of a request (counted), `Neither` without lists.
    fn listed(&self, parts: &http::request::Parts) -> Listed {
        let Some(access) = &self.access else {
            return Listed::Neither;
        };
        let listed = access.check(parts);
        match listed {
            Listed::Allowed => self.meters.layer.listed(true),
            Listed::Denied => self.meters.layer.listed(false),
            _ => {}
        }
        listed
    }

    /// The verdict on the limiter's answer: go ahead with this record, or refuse.
    /// `seed` names the refused principal, for jitter (`Answering::jitter_seed`).
    pub(crate) fn decide(&self, answer: Answer, seed: u64) -> Verdict<Record> {
        if !self.answering.shadow
            && let Some((i, d)) = answer.decision().and_then(|d| d.denied_by())
            && d.is_ban()
            && self.rules.get(i).map(|r| r.ban) == Some(BanAnswer::Forbidden)
        {
            self.meters.refused(i, true, false);
            if let Some(d) = answer.decision() {
                crate::trace::refused(&self.names, d, false);
            }
            return Verdict::Refuse(Refusal::banned_forbidden());
        }
        if let Some(record) = self.admitted(&answer) {
            return Verdict::Proceed(record);
        }
        match self
            .answering
            .verdict(answer, &self.names, &self.meters, seed)
        {
            Verdict::Proceed(info) => Verdict::Proceed(info.into()),
            Verdict::Refuse(refusal) => Verdict::Refuse(refusal),
        }
    }

    /// The common case, a chain the store admitted: its record, its limits counted as
    /// allowed; `None` for any other answer ([`Shared::decide`] decides those).
    #[inline]
    pub(crate) fn admitted(&self, answer: &Answer) -> Option<Record> {
        let Answer::Store(d) = answer else {
            return None;
        };
        if !d.is_allowed() {
            return None;
        }
        self.meters.admitted(d);
        crate::trace::admitted(&self.names, d);
        Some(Record::admitted(&self.names, d))
    }

    /// The refusal of an in-flight limit whose slots are all held.
    pub(crate) fn in_flight_refusal(
        &self,
        j: usize,
        max: u64,
        retry_after: std::time::Duration,
    ) -> Refusal {
        if let Some(m) = self.meters.in_flight.get(j) {
            m.decided(crate::meters::Outcome::Limited);
        }
        Refusal::in_flight(Arc::clone(&self.in_flight[j].name), max, retry_after)
    }

    /// What the store's answer to `chain` tells the meters, when it failed: its kind and
    /// failure domain (the chain's first: a Cluster node's address, else `store`), and
    /// each rule's fallback policy.
    pub(crate) fn note_failure(&self, answer: &Answer, chain: &Chain) {
        #[cfg(feature = "metrics")]
        if let Some(reason) = answer.failure() {
            use ratekeeper_core::Store as _;
            let store = self.limiter.store();
            let domain = store
                .failure_domains(chain)
                .iter()
                .next()
                .and_then(|d| store.domain_name(d))
                .unwrap_or_else(|| "store".to_owned());
            self.meters.layer.store_error(reason.as_str(), domain);
            self.meters.failed(answer);
        }
        #[cfg(not(feature = "metrics"))]
        let _ = (answer, chain);
    }

    /// Adds the in-flight limits of the slots a request holds to its headers' view.
    pub(crate) fn with_slots(
        &self,
        record: Record,
        slots: &[ratekeeper_core::limiter::Slot],
    ) -> Record {
        if slots.is_empty() {
            return record;
        }
        let mut info = record.into_info(&self.names);
        for slot in slots {
            let limit = slot.key().in_flight();
            let rule = self
                .in_flight
                .iter()
                .find(|r| r.limit.name() == limit.name());
            let name = rule.map_or_else(|| Arc::from(limit.name()), |r| Arc::clone(&r.name));
            let max = limit.max();
            let status = headers::LimitStatus::concurrent(
                name,
                max,
                max.saturating_sub(u64::from(slot.in_use())),
                None,
            );
            match &mut info {
                Some(i) => i.push_in_flight(status),
                None => info = Some(RateLimitInfo::in_flight_only(status)),
            }
        }
        info.into()
    }

    /// What an admitted request reserved, when a rule counts by outcome.
    pub(crate) fn reservation(&self, answer: &Answer, chain: &Chain) -> Option<Reservation> {
        if !self.counted {
            return None;
        }
        answer.reservation(chain)
    }

    /// The part of `reservation` that `resp` does not count (its rules' [`CountWhen`]s say
    /// no); `None` when everything counts.
    pub(crate) fn not_counted<B>(
        &self,
        mut reservation: Reservation,
        resp: &Response<B>,
    ) -> Option<Reservation> {
        let (status, ext) = (resp.status(), resp.extensions());
        reservation.retain(|i, _| {
            let back = self
                .rules
                .get(i)
                .and_then(|r| r.count.as_ref())
                .is_some_and(|when| !when.counts(status, ext));
            if back && let Some(m) = self.meters.rules.get(i) {
                m.given_back();
            }
            back
        });
        (!reservation.is_empty()).then_some(reservation)
    }

    /// Adds this layer's view (merged with an inner layer's) and CORS exposure.
    pub(crate) fn decorate<B>(&self, resp: &mut Response<B>, record: Record, ctx: Ctx) {
        let style = self.answering.style;
        let inner = if resp.extensions().is_empty() {
            None
        } else {
            resp.extensions_mut().remove::<RateLimitInfo>()
        };
        // The common case: plainly admitted, nothing to merge, no one to read the record.
        if inner.is_none()
            && !ctx.record
            && record.write_fresh(
                style,
                resp.headers_mut(),
                &self.names,
                &self.answering.policy,
            )
        {
            self.expose(resp, ctx);
            return;
        }
        let fresh = inner.is_none();
        let merged = match (record.into_info(&self.names), inner) {
            (Some(mine), Some(theirs)) => Some(mine.merge(theirs)),
            (mine, theirs) => mine.or(theirs),
        };
        if let Some(info) = merged {
            if fresh {
                info.write_fresh(style, resp.headers_mut(), &self.answering.policy);
            } else {
                info.write(style, resp.headers_mut());
            }
            if ctx.record {
                resp.extensions_mut().insert(info);
            }
        }
        self.expose(resp, ctx);
    }

    /// CORS exposure of our headers, for a request with `Origin`.
    pub(crate) fn expose<B>(&self, resp: &mut Response<B>, ctx: Ctx) {
        if ctx.origin {
            headers::expose(resp.headers_mut());
        }
    }
}
