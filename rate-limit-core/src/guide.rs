//! The guides of the core crate, each doctested where it stands. The layer's guides (keys,
//! costs, failure policies, answers, delays and bans, metrics) are in `ratekeeper_tower::guide`,
//! and getting started and the admin in `ratekeeper_axum::guide`.

#[doc = include_str!("../docs/limits.md")]
pub mod limits {}

// Its examples build Redis stores: doctested with the `redis` feature.
#[cfg(any(feature = "redis", not(doctest)))]
#[doc = include_str!("../docs/stores.md")]
pub mod stores {}

#[doc = include_str!("../docs/operating.md")]
pub mod operating {}

#[doc = include_str!("../docs/store-contract.md")]
pub mod store_contract {}
