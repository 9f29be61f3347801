//! Rate limiting for Tower services.
//!
//! The layer (`RateLimitLayer`), its key extractors, client-IP resolution and the
//! `RateLimit-*` headers arrive with the next release; today this crate re-exports the
//! core crate so that dependents can already name one path.

pub use rate_limit_core as core;
