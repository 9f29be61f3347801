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
/// server starts while Redis is down), process memory otherwise.
pub fn store_from_env() -> Result<AnyStore, ConfigError> {
    Ok(match std::env::var("REDIS_URL") {
        Ok(url) if !url.trim().is_empty() => AnyStore::Redis(RedisStore::builder(url).build()?),
        _ => AnyStore::Memory(MemoryStore::new()),
    })
}
