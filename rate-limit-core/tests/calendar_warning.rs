//! A calendar quota counted in process memory is warned of once per limit (in a test
//! binary of its own: the capture is the process's one subscriber, installed before any
//! event of this kind is reached).

#![cfg(all(feature = "calendar", feature = "test-util"))]

use std::time::Duration;

use ratekeeper_core::calendar::{Calendar, Period};
use ratekeeper_core::testing::LogCapture;
use ratekeeper_core::{Chain, Limit, MemoryStore, Principal, Store};

#[tokio::test]
async fn a_calendar_quota_counted_in_memory_is_warned_of_once_per_limit() {
    let logs = LogCapture::global();
    let store = MemoryStore::new();
    let month = Calendar::new(Period::Month, "Europe/Berlin").unwrap();
    let plan = Limit::calendar("plan", 100, month).unwrap();
    let daily = Limit::calendar("daily", 50, Calendar::new(Period::Day, "UTC").unwrap()).unwrap();
    let second = Limit::fixed_window("second", 10, Duration::from_secs(1)).unwrap();
    for i in 0..5 {
        let p = Principal::user(format!("u{i}"));
        let chain = Chain::new()
            .check(&second, p.clone())
            .check(&daily, p.clone())
            .check(&plan, p);
        assert!(store.check(&chain).await.unwrap().is_allowed());
    }
    let name = "rate_limit.calendar_in_memory";
    assert_eq!(logs.count(name, "limit=\"plan\""), 1, "{:?}", logs.lines());
    assert_eq!(logs.count(name, "limit=\"daily\""), 1);
    assert_eq!(
        logs.count(name, ""),
        2,
        "a fixed window is not a calendar quota"
    );
}
