//! The `simulate` demo: each algorithm stays within its documented bound on real traffic.

use ratekeeper_examples::simulate::{max_in_window, run};

#[test]
fn every_algorithm_keeps_its_bound() {
    let report = run().expect("valid limits");
    let by_name = |n: &str| report.algorithms.iter().position(|a| *a == n).unwrap();
    let sec = 1_000_000;
    // Exact log: never more than 10 in any rolling second.
    assert_eq!(report.max_rolling[by_name("sliding log")], 10);
    // Fixed window: 10 per aligned second, but 20 across the 3→4 boundary.
    let fixed = by_name("fixed window");
    assert!(report.rows.iter().all(|r| r.admitted[fixed] <= 10));
    assert_eq!(report.max_rolling[fixed], 20);
    // Approximate sliding window: at most 10 per aligned second, under 20 rolling.
    let sliding = by_name("sliding window");
    assert!(report.rows.iter().all(|r| r.admitted[sliding] <= 10));
    assert!(report.max_rolling[sliding] < 20);
    // Token bucket: capacity + refill × elapsed over any interval.
    let times = &report.admitted_at[by_name("token bucket")];
    for (i, &a) in times.iter().enumerate() {
        for &b in &times[i..] {
            let n = times.iter().filter(|&&t| t >= a && t <= b).count() as u64;
            assert!(n <= 10 + (b - a) * 10 / sec, "{n} in [{a}, {b}]");
        }
    }
    assert_eq!(max_in_window(&[0, 5, 10, 15], 10), 2);
    // The report renders every row.
    let text = report.to_string();
    assert_eq!(text.lines().count(), 3 + report.rows.len() + 1);
}
