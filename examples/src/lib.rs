//! The examples' shared code: each scenario is a library function here, so `tests/` can
//! run it in-process, and a thin binary in `src/bin/`.

pub mod ask_ai;
pub mod bench_server;
pub mod edge_fallback;
pub mod food_api;
pub mod platform;
pub mod quiz_night;
pub mod simulate;

use rate_limit_core::{AnyStore, ConfigError, MemoryStore, RedisStore};

/// The store the examples count in: Redis when `REDIS_URL` is set (connected lazily, so a
/// server starts while Redis is down), process memory otherwise. Announced.
pub fn store_from_env() -> Result<AnyStore, ConfigError> {
    let url = std::env::var("REDIS_URL").ok();
    store_for(url.as_deref())
}

/// The store for an optional Redis URL (blank: memory), announced with [`announce`].
pub fn store_for(redis_url: Option<&str>) -> Result<AnyStore, ConfigError> {
    let store = match redis_url {
        Some(url) if !url.trim().is_empty() => AnyStore::Redis(RedisStore::builder(url).build()?),
        _ => AnyStore::Memory(MemoryStore::new()),
    };
    announce(&store);
    Ok(store)
}

/// Says where a server counts (`memory`, `redis host:port`, `redis-cluster …`), never with a
/// password: a `rate_limit.example.store` event, which the example binaries print.
pub fn announce(store: &AnyStore) {
    tracing::info!(name: "rate_limit.example.store", store = %store.describe(), "counting in {}", store.describe());
}
