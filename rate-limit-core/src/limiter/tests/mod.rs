//! The limiter: time budget, retries, cool-down, failure policies, once-per-reason logs.

mod logs;
mod policy;
