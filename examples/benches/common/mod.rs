//! What the HTTP benches share: the servers compared.

use std::sync::Arc;

use axum::Router;
use governor::middleware::StateInformationMiddleware;
use rate_limit_examples::bench_server::{BenchConfig, app, bare_app};
use tower_governor::GovernorLayer;
use tower_governor::governor::GovernorConfigBuilder;
use tower_governor::key_extractor::KeyExtractor;

/// tower_governor's key: the `x-key` header, as ours.
#[derive(Clone)]
pub(crate) struct XKey;

impl KeyExtractor for XKey {
    type Key = String;

    fn extract<T>(&self, req: &http::Request<T>) -> Result<String, tower_governor::GovernorError> {
        req.headers()
            .get("x-key")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
            .ok_or(tower_governor::GovernorError::UnableToExtractKey)
    }
}

/// A server in the comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Peer {
    /// axum without a limiter.
    Bare,
    /// `bench-server`'s app: this crate's layer on the memory store, token bucket.
    Ours,
    /// tower_governor with its headers on.
    Governor,
}

impl Peer {
    /// All three, in the order they alternate.
    pub(crate) const ALL: [Peer; 3] = [Peer::Bare, Peer::Ours, Peer::Governor];

    /// The short name used on the command line and in output.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Peer::Bare => "bare",
            Peer::Ours => "ours",
            Peer::Governor => "governor",
        }
    }

    /// The peer named `s`.
    #[allow(dead_code)] // used by one bench of the two
    pub(crate) fn parse(s: &str) -> Option<Peer> {
        Peer::ALL.into_iter().find(|p| p.name() == s)
    }

    /// The app: allowing everything, or with one key's quota of one per hour (`refused`).
    pub(crate) fn router(self, refused: bool) -> Router {
        match self {
            Peer::Bare => bare_app(),
            Peer::Ours => app(&if refused {
                BenchConfig {
                    limit: 1,
                    window_ms: 3_600_000,
                    ..BenchConfig::default()
                }
            } else {
                BenchConfig::default()
            })
            .expect("valid bench config"),
            Peer::Governor => {
                let mut b = GovernorConfigBuilder::default().key_extractor(XKey);
                if refused {
                    b.per_second(3_600).burst_size(1);
                } else {
                    b.per_nanosecond(1).burst_size(u32::MAX);
                }
                let conf: tower_governor::governor::GovernorConfig<
                    XKey,
                    StateInformationMiddleware,
                > = b.use_headers().finish().expect("valid governor config");
                bare_app().layer(GovernorLayer::new(Arc::new(conf)))
            }
        }
    }
}
