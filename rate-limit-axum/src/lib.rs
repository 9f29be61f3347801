//! Rate limiting for axum.
//!
//! axum extractors as keys and an in-handler limiter arrive with a later release; today this
//! crate re-exports the Tower crate so that dependents can already name one path.

pub use rate_limit_tower as tower;
