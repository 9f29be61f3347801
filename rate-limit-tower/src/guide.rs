//! The guides of the Tower layer, each doctested where it stands. Limits, stores and
//! operating are in `ratekeeper_core::guide`; getting started and the admin in
//! `ratekeeper_axum::guide`.

#[doc = include_str!("../docs/keys.md")]
pub mod keys {}

#[doc = include_str!("../docs/costs.md")]
pub mod costs {}

#[doc = include_str!("../docs/failure.md")]
pub mod failure {}

#[doc = include_str!("../docs/answers.md")]
pub mod answers {}

#[doc = include_str!("../docs/controls.md")]
pub mod controls {}

#[doc = include_str!("../docs/client.md")]
pub mod client {}

// Its example reads the ban gauge: doctested with the `metrics` feature.
#[cfg(any(feature = "metrics", not(doctest)))]
#[doc = include_str!("../docs/metrics.md")]
pub mod metrics {}
