//! The examples' shared code: each scenario is a library function here, so `tests/` can
//! run it in-process, and a thin binary in `src/bin/`.

pub mod ask_ai;
pub mod bench_server;
pub mod edge_fallback;
pub mod food_api;
mod main_helper;
pub mod platform;
pub mod quiz_night;
pub mod serve;
pub mod simulate;
/// Where an example counts, from the environment: the library's own
/// ([`AnyStore::from_env`]).
pub use main_helper::Binary;
pub use ratekeeper_core::store::StoreEnv;

use ratekeeper_core::store::{Verified, VerifyError};
use ratekeeper_core::{AnyStore, ConfigError};

/// The store the examples count in, from `REDIS_URL`, `REDIS_CLUSTER` or `REDIS_SENTINEL`
/// (see [`StoreEnv`]); process memory when none is set. Announced.
pub fn store_from_env() -> Result<AnyStore, ConfigError> {
    let store = AnyStore::from_env()?;
    announce(&store);
    Ok(store)
}

/// Says where a server counts (`memory`, `redis host:port`, `redis-cluster …`), never with a
/// password: a `rate_limit.example.store` event, which the example binaries print.
pub fn announce(store: &AnyStore) {
    tracing::info!(name: "rate_limit.example.store", target: "rate_limit.example.store", store = %store.describe(), "counting in {}", store.describe());
}

/// The check at start of every example server: when the environment names a Redis store
/// (see [`StoreEnv`]), a connection of its own runs `RedisStore::verify` and the result is
/// logged, `rate_limit.example.verified` (the server, the eviction policy) or
/// `rate_limit.example.unverified` (the error's code and what it says). The server starts
/// either way: each request then follows its rule's failure policy. `None`: the store is
/// process memory, or the environment is invalid (the app says why when it builds).
pub async fn verify_at_start() -> Option<Result<Verified, VerifyError>> {
    verify_env(&StoreEnv::from_env().ok()?).await
}

/// [`verify_at_start`] for the store `env` names.
pub async fn verify_env(env: &StoreEnv) -> Option<Result<Verified, VerifyError>> {
    let AnyStore::Redis(store) = env.build().ok()? else {
        return None;
    };
    let found = store.verify().await;
    match &found {
        Ok(v) => tracing::info!(
            name: "rate_limit.example.verified",
            target: "rate_limit.example.verified",
            server = %v.server.as_ref().map_or_else(|| "not told (INFO refused)".to_owned(), ToString::to_string),
            eviction = ?v.eviction_policies,
            fleet_missing = ?v.fleet_missing,
            "the Redis store is ready"
        ),
        Err(e) => tracing::error!(
            name: "rate_limit.example.unverified",
            target: "rate_limit.example.unverified",
            code = e.code(),
            "the Redis store cannot work as set up: {e}"
        ),
    }
    Some(found)
}

/// Serves the process's metrics as Prometheus text at `GET /metrics`, on a listener of its
/// own, when `{prefix}_METRICS=1`: at `{prefix}_METRICS_BIND`, default `127.0.0.1:{port}`.
/// It installs the process's `metrics` recorder (Prometheus), so every layer's series
/// (see `ratekeeper_tower::metrics`) appear there. Its own listener keeps it out of the
/// limits, and off the public port. `Ok(None)`: not asked for.
///
/// # Errors
///
/// The address cannot be bound, or another recorder is installed already.
pub async fn metrics_from_env(
    prefix: &str,
    port: u16,
) -> Result<Option<std::net::SocketAddr>, String> {
    if std::env::var(format!("{prefix}_METRICS")).as_deref() != Ok("1") {
        return Ok(None);
    }
    let var = format!("{prefix}_METRICS_BIND");
    let bind = std::env::var(&var).unwrap_or_else(|_| format!("127.0.0.1:{port}"));
    let handle = metrics_exporter_prometheus::PrometheusBuilder::new()
        .install_recorder()
        .map_err(|e| format!("metrics: {e}"))?;
    let listener = tokio::net::TcpListener::bind(&bind)
        .await
        .map_err(|e| format!("{var}: cannot listen on {bind}: {e}"))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let router = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let text = handle.render();
            async move {
                (
                    [(http::header::CONTENT_TYPE, "text/plain; version=0.0.4")],
                    text,
                )
            }
        }),
    );
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    println!("metrics on http://{addr}/metrics");
    Ok(Some(addr))
}
