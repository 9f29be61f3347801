//! bench-server: `GET /` answers `ok`, limited per `x-key` header, for load generators.
//!
//! `BENCH_BIND` (default `127.0.0.1:3900`), `BENCH_ALGORITHM` (`token-bucket`,
//! `sliding-window`, `fixed-window`), `BENCH_LIMIT` (default 1 000 000: never reached),
//! `BENCH_WINDOW_MS` (default 1 000), `BENCH_LEASE` (unset or `0`: off; `1`: the limit is
//! leased in slices of up to 1 000 units for 50 ms — a hot key at 50 000 requests per
//! second spends that in 20 ms; a larger number: slices of up to that many), `REDIS_URL`
//! (unset: the memory store), `BENCH_HEADERS` (unset: the default headers, as a real
//! deployment sends them; `ietf`: the IETF pair only, `RateLimit-Policy` and `RateLimit`;
//! `trio`; `none`), `BENCH_RULES` (default 1: rules on the same key, each its own limit),
//! `BENCH_HEAVY_HITTERS=1` (the limiter tracks heavy hitters: the admin's cost per request).

use std::time::Duration;

use axum::Router;
use axum::routing::get;
use ratekeeper_core::{ConfigError, Limit, Limiter, PrincipalKind};
use ratekeeper_tower::extract::HeaderKey;
use ratekeeper_tower::{Answering, HeaderStyle, RateLimitLayer, Rule};

/// The server's settings.
#[derive(Debug, Clone)]
pub struct BenchConfig {
    /// `token-bucket`, `sliding-window` or `fixed-window`.
    pub algorithm: String,
    /// The quota (a bucket's capacity; it refills the same amount per window).
    pub limit: u64,
    /// The window, in milliseconds.
    pub window_ms: u64,
    /// The largest leased slice (0: no lease).
    pub lease: u64,
    /// Where to count (`REDIS_URL`, `REDIS_CLUSTER`, `REDIS_SENTINEL`; none: memory).
    pub store: crate::StoreEnv,
    /// The rate-limit headers sent (`BENCH_HEADERS`).
    pub headers: HeaderStyle,
    /// How many rules (`BENCH_RULES`, at least 1), each a limit of its own on the key.
    pub rules: usize,
    /// Heavy hitters tracked by the limiter (`BENCH_HEAVY_HITTERS=1`: the default
    /// settings), or not.
    pub heavy_hitters: Option<ratekeeper_core::top::TopSettings>,
}

impl Default for BenchConfig {
    fn default() -> Self {
        Self {
            algorithm: "token-bucket".to_owned(),
            limit: 1_000_000,
            window_ms: 1_000,
            lease: 0,
            store: crate::StoreEnv::Memory,
            headers: HeaderStyle::default(),
            rules: 1,
            heavy_hitters: None,
        }
    }
}

impl BenchConfig {
    /// From the environment (see the module docs); an error names conflicting store
    /// variables.
    pub fn from_env() -> Result<Self, ConfigError> {
        let d = Self::default();
        let num = |k: &str, v: u64| {
            std::env::var(k)
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(v)
        };
        Ok(Self {
            algorithm: std::env::var("BENCH_ALGORITHM").unwrap_or(d.algorithm),
            limit: num("BENCH_LIMIT", d.limit),
            window_ms: num("BENCH_WINDOW_MS", d.window_ms),
            lease: match num("BENCH_LEASE", d.lease) {
                1 => 1_000,
                n => n,
            },
            store: crate::StoreEnv::from_env()?,
            headers: match std::env::var("BENCH_HEADERS").as_deref() {
                Ok("ietf") => HeaderStyle::Ietf,
                Ok("trio") => HeaderStyle::Trio,
                Ok("none") => HeaderStyle::None,
                _ => d.headers,
            },
            rules: usize::try_from(num("BENCH_RULES", 1)).unwrap_or(1).max(1),
            heavy_hitters: (std::env::var("BENCH_HEAVY_HITTERS").as_deref() == Ok("1"))
                .then(ratekeeper_core::top::TopSettings::default),
        })
    }

    /// The limit these settings describe.
    pub fn limit(&self) -> Result<Limit, ConfigError> {
        self.limit_named("bench")
    }

    /// The limit these settings describe, under another name.
    fn limit_named(&self, name: &str) -> Result<Limit, ConfigError> {
        let w = Duration::from_millis(self.window_ms);
        let limit = match self.algorithm.as_str() {
            "sliding-window" => Limit::sliding_window(name, self.limit, w),
            "fixed-window" => Limit::fixed_window(name, self.limit, w),
            _ => Limit::token_bucket(
                name,
                self.limit.min(u64::from(u32::MAX)),
                self.limit.min(u64::from(u32::MAX)),
                w,
            ),
        }?;
        match self.lease {
            0 => Ok(limit),
            n => limit.leased(n.min(self.limit), Duration::from_millis(50)),
        }
    }
}

/// The limited app.
pub fn app(cfg: &BenchConfig) -> Result<Router, ConfigError> {
    let store = cfg.store.build()?;
    crate::announce(&store);
    let key = HeaderKey::new(
        http::HeaderName::from_static("x-key"),
        PrincipalKind::custom("key")?,
    );
    let mut limiter = Limiter::builder(store);
    let mut limit = cfg.limit()?;
    if let Some(settings) = cfg.heavy_hitters {
        limiter = limiter.heavy_hitters();
        limit = limit.heavy_hitter_settings(settings)?;
    }
    let mut layer = RateLimitLayer::new(limiter.build()?)
        .answering(Answering::new().headers(cfg.headers))
        .rule(Rule::new(limit, key.clone()));
    for i in 1..cfg.rules {
        layer = layer.rule(Rule::new(
            cfg.limit_named(&format!("bench-{i}"))?,
            key.clone(),
        ));
    }
    Ok(Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(layer))
}

/// The same app without a limiter: the baseline.
pub fn bare_app() -> Router {
    Router::new().route("/", get(|| async { "ok" }))
}

/// Serves `app` on `listener`.
pub async fn serve(listener: tokio::net::TcpListener, app: Router) -> std::io::Result<()> {
    crate::serve::serve(listener, app).await
}
