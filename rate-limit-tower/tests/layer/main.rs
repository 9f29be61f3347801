//! The layer through `ServiceExt::oneshot`: every branch.

mod answers;
mod browsers;
mod concurrency;
mod extractors;
mod failures;
mod spoofing;
mod support;
