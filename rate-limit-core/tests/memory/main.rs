//! The in-memory store: exactness under real parallelism, chains, keys, the memory bound.

mod accuracy;
mod bound;
mod chains;
mod concurrency;
mod eviction;
mod fuzz;
mod keys;
mod support;
