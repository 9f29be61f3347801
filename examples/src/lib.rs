//! The examples' shared code: each scenario is a library function here, so `tests/` can
//! run it in-process, and a thin binary in `src/bin/`.

pub mod ask_ai;
pub mod bench_server;
pub mod edge_fallback;
pub mod food_api;
pub mod platform;
pub mod quiz_night;
pub mod simulate;
mod store_env;

pub use store_env::StoreEnv;

use rate_limit_core::{AnyStore, ConfigError};

/// The store the examples count in, from `REDIS_URL`, `REDIS_CLUSTER` or `REDIS_SENTINEL`
/// (see [`StoreEnv`]); process memory when none is set. Announced.
pub fn store_from_env() -> Result<AnyStore, ConfigError> {
    StoreEnv::from_env()?.build()
}

/// Says where a server counts (`memory`, `redis host:port`, `redis-cluster …`), never with a
/// password: a `rate_limit.example.store` event, which the example binaries print.
pub fn announce(store: &AnyStore) {
    tracing::info!(name: "rate_limit.example.store", store = %store.describe(), "counting in {}", store.describe());
}
