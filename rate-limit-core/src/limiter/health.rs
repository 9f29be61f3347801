//! Health per failure domain: the cool-down, and the once-per-episode logs.

use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};

use super::{FailureReason, Limiter};
use crate::protocol::{Domains, Store, StoreError};

/// A failure domain's health: when the cool-down ends, and which reasons were logged.
#[derive(Default)]
pub(super) struct Health {
    /// 0 while healthy; otherwise the end of the cool-down, in µs since `anchor`, plus 1.
    pub(super) down_until: AtomicU64,
    pub(super) down_reason: AtomicU8,
    /// The reasons logged in the current episode (0: no episode).
    logged: AtomicU8,
    /// 0, or the start of the current stretch of good answers in µs since `anchor`, plus 1.
    healthy_since: AtomicU64,
}

impl<S: Store> Limiter<S> {
    pub(super) fn now_us(&self) -> u64 {
        u64::try_from(self.inner.anchor.elapsed().as_micros()).unwrap_or(u64::MAX)
    }

    pub(super) fn health(&self, domain: u32) -> &Health {
        &self.inner.health[(domain % Domains::COUNT) as usize]
    }

    /// The reason of the last failure while the cool-down of any of `domains` lasts.
    pub(super) fn cooling_down(&self, domains: Domains) -> Option<FailureReason> {
        let mut now = None;
        domains.iter().find_map(|d| {
            let h = self.health(d);
            let until = h.down_until.load(Ordering::Acquire);
            if until == 0 || *now.get_or_insert_with(|| self.now_us()) + 1 >= until {
                return None;
            }
            Some(FailureReason::from_bits(
                h.down_reason.load(Ordering::Relaxed),
            ))
        })
    }

    pub(super) fn failed(
        &self,
        domains: Domains,
        reason: FailureReason,
        error: Option<&StoreError>,
    ) {
        for d in domains.iter() {
            self.failed_one(d, reason, error);
        }
    }

    fn failed_one(&self, domain: u32, reason: FailureReason, error: Option<&StoreError>) {
        let h = self.health(domain);
        h.healthy_since.store(0, Ordering::Relaxed);
        if !self.inner.cooldown.is_zero() {
            let cool = u64::try_from(self.inner.cooldown.as_micros()).unwrap_or(u64::MAX);
            h.down_reason.store(reason.bit(), Ordering::Relaxed);
            h.down_until.store(
                self.now_us().saturating_add(cool).saturating_add(1),
                Ordering::Release,
            );
        }
        let bit = reason.bit();
        if h.logged.fetch_or(bit, Ordering::AcqRel) & bit == 0 {
            let error = error
                .map(|e| e.kind().as_str())
                .unwrap_or("no answer in time");
            let timeout_ms = u64::try_from(self.inner.timeout.as_millis()).unwrap_or(u64::MAX);
            let message = "rate-limit store unavailable; each rule's failure policy applies";
            // A Cluster node's failure names the node; the rest of the store is unaffected.
            match self.inner.store.domain_name(domain) {
                Some(node) => tracing::warn!(
                    name: "rate_limit.fallback",
                    target: "rate_limit.fallback",
                    store = %self.inner.name,
                    reason = reason.as_str(),
                    error,
                    timeout_ms,
                    node = %node,
                    "{message}"
                ),
                None => tracing::warn!(
                    name: "rate_limit.fallback",
                    target: "rate_limit.fallback",
                    store = %self.inner.name,
                    reason = reason.as_str(),
                    error,
                    timeout_ms,
                    "{message}"
                ),
            }
        }
    }

    pub(super) fn recovered(&self, domains: Domains) {
        for d in domains.iter() {
            self.recovered_one(d);
        }
    }

    fn recovered_one(&self, domain: u32) {
        let h = self.health(domain);
        if h.down_until.load(Ordering::Relaxed) != 0 {
            h.down_until.store(0, Ordering::Release);
        }
        if h.logged.load(Ordering::Relaxed) == 0 {
            return;
        }
        // In an episode: it ends once the domain has answered for the quiet period.
        let now = self.now_us().saturating_add(1);
        let since = h.healthy_since.load(Ordering::Relaxed);
        if since == 0 {
            let _ = h
                .healthy_since
                .compare_exchange(0, now, Ordering::Relaxed, Ordering::Relaxed);
            if !self.inner.quiet.is_zero() {
                return;
            }
        }
        let quiet = u64::try_from(self.inner.quiet.as_micros()).unwrap_or(u64::MAX);
        let since = h.healthy_since.load(Ordering::Relaxed);
        if since != 0
            && now.saturating_sub(since) >= quiet
            && h.logged.swap(0, Ordering::AcqRel) != 0
        {
            h.healthy_since.store(0, Ordering::Relaxed);
            match self.inner.store.domain_name(domain) {
                Some(node) => tracing::info!(
                    name: "rate_limit.recovered",
                    target: "rate_limit.recovered",
                    store = %self.inner.name,
                    node = %node,
                    "rate-limit store answers again"
                ),
                None => tracing::info!(
                    name: "rate_limit.recovered",
                    target: "rate_limit.recovered",
                    store = %self.inner.name,
                    "rate-limit store answers again"
                ),
            }
        }
    }
}
