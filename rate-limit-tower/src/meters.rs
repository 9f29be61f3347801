//! What the layer counts, through the `metrics` facade (feature `metrics`; no exporter is
//! forced on the application). [`crate::metrics`] documents every series.
//!
//! Every key is built once, when the layer is built, and each series' handle is asked of
//! the recorder once (`series.rs`): a request builds no label and allocates nothing.
//! Labels come from bounded sets — limit names, outcomes, policies, error kinds, store
//! kinds and failure domains (a Cluster's nodes) — never a principal, a key or anything a
//! client sent.

use std::collections::HashMap;
use std::sync::Arc;
#[cfg(feature = "metrics")]
use std::time::Duration;

use ratekeeper_core::limiter::Slot;
use ratekeeper_core::{Answer, AnyStore, ChainDecision};

/// What happened to a request, as the `outcome` label of `rate_limit_decisions_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Allowed = 0,
    Limited = 1,
    ShadowLimited = 2,
    Held = 3,
    Banned = 4,
}

#[cfg(feature = "metrics")]
impl Outcome {
    const ALL: [Self; 5] = [
        Self::Allowed,
        Self::Limited,
        Self::ShadowLimited,
        Self::Held,
        Self::Banned,
    ];

    const fn as_str(self) -> &'static str {
        match self {
            Self::Allowed => "allowed",
            Self::Limited => "limited",
            Self::ShadowLimited => "shadow_limited",
            Self::Held => "held",
            Self::Banned => "banned",
        }
    }
}

/// The share of a quota left at or under which an admitted request counts as near its
/// limit, unless the layer says otherwise.
pub(crate) const DEFAULT_NEAR_LIMIT: f64 = 0.2;

/// The label an access list's decisions carry as their `limit`.
#[cfg(feature = "metrics")]
pub(crate) const ACCESS_LIST: &str = "access-list";

#[cfg(feature = "metrics")]
pub(crate) mod bans;
#[cfg(feature = "metrics")]
pub(crate) mod fleet;
#[cfg(feature = "metrics")]
mod series;

#[cfg(feature = "metrics")]
mod on {
    use metrics::{Counter, Gauge, Histogram, Key, Label};

    use super::series::Series;
    use super::{ACCESS_LIST, Arc, Duration, Outcome};

    fn key(name: &'static str, labels: Vec<Label>) -> Key {
        Key::from_parts(name, labels)
    }

    fn limit(name: &Arc<str>) -> Label {
        Label::new("limit", Arc::clone(name))
    }

    /// `name{limit="…"}`.
    fn of<H>(name: &'static str, limit_name: &Arc<str>) -> Series<H> {
        Series::new(key(name, vec![limit(limit_name)]))
    }

    /// One limit's series.
    #[derive(Debug)]
    pub(crate) struct LimitMeter {
        decisions: [Series<Counter>; 5],
        near_limit: Series<Counter>,
        given_back: Series<Counter>,
        fallbacks: [Series<Counter>; 3],
        held_now: Series<Gauge>,
        in_flight_now: Series<Gauge>,
    }

    impl LimitMeter {
        pub(crate) fn new(name: &Arc<str>) -> Self {
            let outcome = |o: Outcome| {
                let labels = vec![limit(name), Label::new("outcome", o.as_str())];
                Series::new(key("rate_limit_decisions_total", labels))
            };
            let policy = |p: &'static str| {
                let labels = vec![limit(name), Label::new("policy", p)];
                Series::new(key("rate_limit_fallbacks_total", labels))
            };
            Self {
                decisions: Outcome::ALL.map(outcome),
                near_limit: of("rate_limit_near_limit_total", name),
                given_back: of("rate_limit_given_back_total", name),
                fallbacks: [policy("open"), policy("closed"), policy("memory")],
                held_now: of("rate_limit_held", name),
                in_flight_now: of("rate_limit_in_flight", name),
            }
        }

        pub(crate) fn decided(&self, outcome: Outcome) {
            self.decisions[outcome as usize].increment();
        }

        pub(crate) fn near_limit(&self) {
            self.near_limit.increment();
        }

        pub(crate) fn given_back(&self) {
            self.given_back.increment();
        }

        /// A store failure answered by `policy` (0 open, 1 closed, 2 memory).
        pub(crate) fn fell_back(&self, policy: usize) {
            self.fallbacks[policy].increment();
        }

        pub(crate) fn held(&self, by: f64) {
            self.held_now.add(by);
        }

        pub(crate) fn in_flight(&self, by: f64) {
            self.in_flight_now.add(by);
        }
    }

    /// The layer's series that belong to no one limit.
    #[derive(Debug)]
    pub(crate) struct LayerMeter {
        listed: [Series<Counter>; 2],
        latency: Series<Histogram>,
    }

    impl LayerMeter {
        pub(crate) fn new(store: &'static str) -> Self {
            let listed = |o: &'static str| {
                let labels = vec![Label::new("limit", ACCESS_LIST), Label::new("outcome", o)];
                Series::new(key("rate_limit_decisions_total", labels))
            };
            let store = vec![Label::new("store", store)];
            Self {
                listed: [listed("allowed_by_list"), listed("denied_by_list")],
                latency: Series::new(key("rate_limit_store_seconds", store)),
            }
        }

        /// An access list's decision: allowed (`true`) or denied.
        pub(crate) fn listed(&self, allowed: bool) {
            self.listed[usize::from(!allowed)].increment();
        }

        pub(crate) fn latency(&self, d: Duration) {
            self.latency.record(d.as_secs_f64());
        }

        /// A store error of `kind` in the failure domain `domain` (a node's address, or
        /// `store`): rare, so its key is built here.
        pub(crate) fn store_error(&self, kind: &'static str, domain: String) {
            let labels = vec![Label::new("kind", kind), Label::new("domain", domain)];
            super::series::count(&key("rate_limit_store_errors_total", labels));
        }
    }
}

#[cfg(not(feature = "metrics"))]
mod on {
    use super::{Arc, Outcome};

    #[derive(Debug)]
    pub(crate) struct LimitMeter;

    impl LimitMeter {
        pub(crate) fn new(_: &Arc<str>) -> Self {
            Self
        }
        pub(crate) fn decided(&self, _: Outcome) {}
        pub(crate) fn near_limit(&self) {}
        pub(crate) fn given_back(&self) {}
        pub(crate) fn held(&self, _: f64) {}
        pub(crate) fn in_flight(&self, _: f64) {}
    }

    #[derive(Debug)]
    pub(crate) struct LayerMeter;

    impl LayerMeter {
        pub(crate) fn new(_: &'static str) -> Self {
            Self
        }
        pub(crate) fn listed(&self, _: bool) {}
    }
}

pub(crate) use on::{LayerMeter, LimitMeter};

/// The series of chains whose verdicts are made outside a layer (a handler's own chains,
/// [`Answering::verdict_for`](crate::Answering::verdict_for)), by their limits' names:
/// built at a chain's first verdict and kept, so a later one builds no key. The names
/// are the operator's limits, in the orders the handlers chain them: a bounded set.
#[derive(Debug, Default)]
pub(crate) struct ByNames(std::sync::Mutex<HashMap<Names, Arc<Meters>>>);

/// A chain's limit names, in order.
type Names = Box<[Arc<str>]>;

impl ByNames {
    pub(crate) fn get(&self, names: &[Arc<str>]) -> Arc<Meters> {
        let mut map = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(m) = map.get(names) {
            return Arc::clone(m);
        }
        let m = Arc::new(Meters::for_names(names));
        map.insert(names.into(), Arc::clone(&m));
        m
    }
}

/// A request held now (see [`Meters::holding`]).
pub(crate) struct HeldNow<'a> {
    meter: Option<&'a LimitMeter>,
}

impl Drop for HeldNow<'_> {
    fn drop(&mut self) {
        if let Some(m) = self.meter {
            m.held(-1.0);
        }
    }
}

/// Every series of one layer: one [`LimitMeter`] per rule (in the rules' order), one per
/// in-flight rule, and the layer's own.
#[derive(Debug)]
pub(crate) struct Meters {
    pub(crate) rules: Box<[LimitMeter]>,
    pub(crate) in_flight: Box<[LimitMeter]>,
    pub(crate) layer: LayerMeter,
    /// The share of a quota left at or under which an admission is near its limit.
    pub(crate) near: f64,
    /// Whether the store is remote (its calls are timed).
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    pub(crate) remote: bool,
}

impl Meters {
    /// No rules yet.
    pub(crate) fn empty() -> Self {
        Self {
            rules: Box::new([]),
            in_flight: Box::new([]),
            layer: LayerMeter::new("memory"),
            near: DEFAULT_NEAR_LIMIT,
            remote: false,
        }
    }

    /// The series of a chain's limits, for a verdict made outside a layer (kept by
    /// [`ByNames`]).
    fn for_names(rules: &[Arc<str>]) -> Self {
        Self {
            rules: rules.iter().map(LimitMeter::new).collect(),
            ..Self::empty()
        }
    }

    pub(crate) fn new(
        rules: &[Arc<str>],
        in_flight: &[Arc<str>],
        store: &AnyStore,
        near: f64,
    ) -> Self {
        let kind = store.kind();
        Self {
            rules: rules.iter().map(LimitMeter::new).collect(),
            in_flight: in_flight.iter().map(LimitMeter::new).collect(),
            layer: LayerMeter::new(kind),
            near,
            remote: kind != "memory",
        }
    }

    /// An admitted chain: each limit allowed (or held, where it held the request), and
    /// near its limit where what is left is at most the near share of its quota.
    #[inline]
    pub(crate) fn admitted(&self, d: &ChainDecision) {
        for (meter, x) in self.rules.iter().zip(d.decisions()) {
            if x.delay().is_zero() {
                meter.decided(Outcome::Allowed);
            } else {
                meter.decided(Outcome::Held);
            }
            #[allow(clippy::cast_precision_loss)]
            if !x.is_ban() && (x.remaining() as f64) <= self.near * (x.limit() as f64) {
                meter.near_limit();
            }
        }
    }

    /// A refusal by rule `i`: banned when its limit is a ban.
    pub(crate) fn refused(&self, i: usize, ban: bool, shadow: bool) {
        if let Some(m) = self.rules.get(i) {
            m.decided(match (shadow, ban) {
                (true, _) => Outcome::ShadowLimited,
                (false, true) => Outcome::Banned,
                (false, false) => Outcome::Limited,
            });
        }
    }

    /// `rate_limit_held` for the limit that holds `answer` (the first with a delay), up
    /// until the guard drops: the hold ended, or the request went away while held.
    pub(crate) fn holding(&self, answer: &Answer) -> HeldNow<'_> {
        let meter = answer
            .decision()
            .and_then(|d| d.decisions().iter().position(|x| !x.delay().is_zero()))
            .and_then(|i| self.rules.get(i));
        if let Some(m) = meter {
            m.held(1.0);
        }
        HeldNow { meter }
    }

    /// A slot taken for in-flight rule `j`: counted allowed, and in `rate_limit_in_flight`
    /// until it is released.
    pub(crate) fn slot_taken(this: &Arc<Self>, j: usize, slot: Slot) -> Slot {
        let Some(m) = this.in_flight.get(j) else {
            return slot;
        };
        m.decided(Outcome::Allowed);
        if cfg!(not(feature = "metrics")) {
            return slot;
        }
        m.in_flight(1.0);
        let meters = Arc::clone(this);
        slot.on_release(move || meters.in_flight[j].in_flight(-1.0))
    }

    /// A failed store's answer under `answer`'s policy, for every rule of the chain.
    #[cfg(feature = "metrics")]
    pub(crate) fn failed(&self, answer: &Answer) {
        let policy = match answer {
            Answer::Open(_) => 0,
            Answer::Memory { .. } => 2,
            _ => 1,
        };
        for m in self.rules.iter() {
            m.fell_back(policy);
        }
    }
}
