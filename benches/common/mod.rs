//! What the HTTP benches share: the servers compared.

#[allow(dead_code)] // used by one bench of the two
pub(crate) mod cpu;

use std::sync::Arc;

use axum::Router;
use governor::middleware::StateInformationMiddleware;
use ratekeeper_examples::bench_server::{BenchConfig, app, bare_app};
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
    /// axum with a layer that does nothing (`MapResponseLayer` of the identity): what any
    /// Tower layer costs through `Router::layer`, the floor for every limiter.
    Noop,
    /// `bench-server`'s app: this crate's layer on the memory store, token bucket.
    Ours,
    /// tower_governor with its headers on.
    Governor,
    /// `bench-server`'s app on a Redis store (a `redis-server` the bench starts).
    Redis,
    /// The same with the limit leased (as bench-server's `BENCH_LEASE=1`: slices of up to
    /// 1 000 for 50 ms; `BENCH_LEASE=<n>`: up to `n`).
    RedisLease,
}

impl Peer {
    /// Every peer, in the order they alternate.
    pub(crate) const ALL: [Peer; 6] = [
        Peer::Bare,
        Peer::Noop,
        Peer::Ours,
        Peer::Governor,
        Peer::Redis,
        Peer::RedisLease,
    ];

    /// Whether it counts in Redis.
    pub(crate) fn on_redis(self) -> bool {
        matches!(self, Peer::Redis | Peer::RedisLease)
    }

    /// The short name used on the command line and in output.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Peer::Bare => "bare",
            Peer::Noop => "noop-layer",
            Peer::Ours => "ours",
            Peer::Governor => "governor",
            Peer::Redis => "ours-redis",
            Peer::RedisLease => "ours-redis-lease",
        }
    }

    /// The peer named `s`.
    #[allow(dead_code)] // used by one bench of the two
    pub(crate) fn parse(s: &str) -> Option<Peer> {
        Peer::ALL.into_iter().find(|p| p.name() == s)
    }

    /// The app: allowing everything, or with one key's quota of one per hour (`refused`).
    /// `Redis` counts in the Redis at `redis_url`. Its routes are built once, as
    /// `axum::serve` builds them (`with_state(())`): a `Router` called without it builds
    /// each handler's route, and re-applies each layer, on every request.
    pub(crate) fn router(self, refused: bool, redis_url: Option<&str>) -> Router {
        self.router_per_request(refused, redis_url).with_state(())
    }

    fn router_per_request(self, refused: bool, redis_url: Option<&str>) -> Router {
        let ours = |redis_url: Option<&str>, lease: u64| {
            let env = BenchConfig::from_env().unwrap_or_default();
            let cfg = BenchConfig {
                store: redis_url.map_or(ratekeeper_examples::StoreEnv::Memory, |u| {
                    ratekeeper_examples::StoreEnv::Redis(u.to_owned())
                }),
                lease,
                // The header style and the number of rules, as bench-server reads them.
                headers: env.headers,
                rules: env.rules,
                heavy_hitters: env.heavy_hitters,
                ..BenchConfig::default()
            };
            app(&if refused {
                BenchConfig {
                    limit: 1,
                    window_ms: 3_600_000,
                    ..cfg
                }
            } else {
                cfg
            })
            .expect("valid bench config")
        };
        match self {
            Peer::Bare => bare_app(),
            Peer::Noop => bare_app().layer(tower::util::MapResponseLayer::new(
                |r: axum::response::Response| r,
            )),
            Peer::Ours => ours(None, 0),
            Peer::Redis => ours(Some(redis_url.expect("a Redis for the Redis peer")), 0),
            Peer::RedisLease => ours(
                Some(redis_url.expect("a Redis for the Redis peer")),
                match std::env::var("BENCH_LEASE")
                    .ok()
                    .and_then(|v| v.parse().ok())
                {
                    None | Some(0 | 1) => 1_000,
                    Some(n) => n,
                },
            ),
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
