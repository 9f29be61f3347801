//! What an upstream sends is arbitrary: no header, byte or number makes the reading panic,
//! and no wait is longer than the bound (256 cases by default; `PROPTEST_CASES` for more).

use proptest::prelude::*;

use super::*;

/// The names the reading looks at.
const NAMES: [&str; 13] = [
    "retry-after",
    "grpc-status",
    "grpc-retry-pushback-ms",
    "grpc-status-details-bin",
    "ratelimit-policy",
    "ratelimit",
    "ratelimit-limit",
    "ratelimit-remaining",
    "ratelimit-reset",
    "x-ratelimit-limit",
    "x-ratelimit-remaining",
    "x-ratelimit-reset",
    "content-type",
];

/// A value: arbitrary bytes, a number of any size, or an HTTP date in any year and form.
fn value() -> impl Strategy<Value = Vec<u8>> {
    let days = ["Sun", "Monday", "Tue"];
    let months = ["Jan", "Feb", "Nov", "Dec", "Xyz"];
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..64),
        any::<u64>().prop_map(|n| n.to_string().into_bytes()),
        any::<i128>().prop_map(|n| n.to_string().into_bytes()),
        (
            0..3usize,
            0..5usize,
            any::<u64>(),
            0..40u64,
            0..70u64,
            0..3usize
        )
            .prop_map(move |(d, m, year, day, sec, form)| {
                let (d, m) = (days[d], months[m]);
                match form {
                    0 => format!("{d}, {day:02} {m} {year} 23:59:{sec:02} GMT"),
                    1 => format!("{d}, {day:02}-{m}-{year} 23:59:{sec:02} GMT"),
                    _ => format!("{d} {m} {day:>2} 23:59:{sec:02} {year}"),
                }
                .into_bytes()
            }),
        (any::<u64>(), any::<u64>(), any::<u64>()).prop_map(|(q, w, r)| {
            format!(r#""p";q={q};w={w}, "b";r={r};t={q}, {q};w={w}"#).into_bytes()
        }),
    ]
}

fn answer() -> impl Strategy<Value = (u16, HeaderMap)> {
    let header = (0..NAMES.len(), value());
    (100..1000u16, proptest::collection::vec(header, 0..8)).prop_map(|(status, hs)| {
        let mut headers = HeaderMap::new();
        for (i, v) in hs {
            if let Ok(v) = http::HeaderValue::from_bytes(&v) {
                headers.append(NAMES[i], v);
            }
        }
        (status, headers)
    })
}

proptest! {
    #[test]
    fn no_answer_panics_or_waits_past_the_bound(
        (status, headers) in answer(),
        now in any::<u64>(),
        bound in any::<u64>(),
        always in proptest::collection::vec(100..1000u16, 0..4),
    ) {
        let status = StatusCode::from_u16(status).unwrap();
        let now = UNIX_EPOCH.checked_add(Duration::from_secs(now)).unwrap_or(UNIX_EPOCH);
        let bound = Duration::from_millis(bound);
        let refusals = Refusals {
            always: Statuses::of(always.into_iter().filter_map(|c| StatusCode::from_u16(c).ok())),
            ..Refusals::default()
        };
        let t = told(status, &headers, now, bound, &refusals);
        prop_assert!(t.wait.is_none_or(|w| w <= bound), "{t:?} past {bound:?}");
        prop_assert!(t.allows.is_none_or(|a| a.is_finite() && a > 0.0), "{t:?}");
    }
}
