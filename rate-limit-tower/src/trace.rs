//! A decision's span, `rate_limit.decision` (target and name alike), with fields named
//! after the IETF fields: `policy` (the limit's name), `quota`, `window` and `remaining`
//! and `reset` (seconds), `decision` (`allowed`, `held`, `limited`, `shadow_limited`,
//! `banned`, `unavailable`) and `fail_open`. With `tracing-opentelemetry`, they are the
//! span's attributes, and the span a child of the request's. It is made only when a
//! subscriber wants it (INFO for that target): otherwise one cached check per request.
//! The limit shown is the one that decided: the refusing one, else the one closest to
//! its quota.

use std::sync::Arc;

use ratekeeper_core::{ChainDecision, Decision};

use crate::headers::window_and_reset;

macro_rules! wanted {
    () => {
        tracing::enabled!(target: "rate_limit.decision", tracing::Level::INFO)
    };
}

fn emit(name: &str, x: &Decision, decision: &'static str) {
    let (window, reset) = window_and_reset(x, None);
    let _span = tracing::info_span!(
        target: "rate_limit.decision",
        "rate_limit.decision",
        policy = name,
        quota = x.limit(),
        window,
        remaining = x.remaining(),
        reset,
        decision,
        fail_open = false,
    );
}

/// An admitted chain: its tightest limit, `held` when a limit held it.
#[inline]
pub(crate) fn admitted(names: &[Arc<str>], d: &ChainDecision) {
    if !wanted!() {
        return;
    }
    let all = d.decisions();
    // The smallest share left: remaining / limit, compared across multiplied.
    let tightest = all.iter().enumerate().min_by(|(_, a), (_, b)| {
        (u128::from(a.remaining()) * u128::from(b.limit()))
            .cmp(&(u128::from(b.remaining()) * u128::from(a.limit())))
    });
    if let Some((i, x)) = tightest {
        let held = all.iter().any(|x| !x.delay().is_zero());
        emit(
            names.get(i).map_or("", |n| n),
            x,
            if held { "held" } else { "allowed" },
        );
    }
}

/// A refused chain, by its refusing limit.
pub(crate) fn refused(names: &[Arc<str>], d: &ChainDecision, shadow: bool) {
    if !wanted!() {
        return;
    }
    if let Some((i, x)) = d.denied_by() {
        let decision = match (shadow, x.is_ban()) {
            (true, _) => "shadow_limited",
            (false, true) => "banned",
            (false, false) => "limited",
        };
        emit(names.get(i).map_or("", |n| n), x, decision);
    }
}

/// A failed store's answer: let through (`fail_open`) or 503.
pub(crate) fn failed(open: bool) {
    if !wanted!() {
        return;
    }
    let decision = if open { "allowed" } else { "unavailable" };
    let _span = tracing::info_span!(
        target: "rate_limit.decision",
        "rate_limit.decision",
        decision,
        fail_open = open,
    );
}
