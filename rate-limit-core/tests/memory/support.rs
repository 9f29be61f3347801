use std::time::Duration;

use ratekeeper_core::clock::FakeClock;
use ratekeeper_core::{Limit, MemoryStore};

/// A start on a day boundary far from zero, like a real epoch time.
pub(crate) const T0: u64 = 1_799_971_200_000_000;

pub(crate) fn store(clock: &FakeClock) -> MemoryStore {
    MemoryStore::builder().clock(clock.clone()).build().unwrap()
}

/// One limit of each algorithm, all admitting `quota` before the clock moves.
pub(crate) fn every_algorithm(prefix: &str, quota: u64) -> Vec<Limit> {
    let minute = Duration::from_secs(60);
    vec![
        Limit::fixed_window(&format!("{prefix}-fixed"), quota, minute).unwrap(),
        Limit::sliding_window(&format!("{prefix}-sliding"), quota, minute).unwrap(),
        Limit::sliding_log(&format!("{prefix}-log"), quota, minute).unwrap(),
        Limit::token_bucket(&format!("{prefix}-bucket"), quota, 1, minute).unwrap(),
    ]
}
