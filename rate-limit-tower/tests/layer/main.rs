//! The layer through `ServiceExt::oneshot`: every branch.

mod answers;
mod browsers;
mod concurrency;
mod extractors;
mod failures;
mod logs;
#[cfg(feature = "metrics")]
mod metrics;
mod mock;
mod spoofing;
mod support;
