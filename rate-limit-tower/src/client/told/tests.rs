//! What each header says, form by form.
use super::*;

const HOUR: Duration = Duration::from_secs(3_600);

fn at(h: &[(&'static str, &str)], status: u16) -> Told {
    let mut headers = HeaderMap::new();
    for (k, v) in h {
        headers.insert(*k, v.parse().unwrap());
    }
    let now = UNIX_EPOCH + Duration::from_secs(784_111_777); // Sun, 06 Nov 1994 08:49:37 GMT
    told(
        StatusCode::from_u16(status).unwrap(),
        &headers,
        now,
        HOUR,
        &Refusals::default(),
    )
}

#[test]
fn retry_after_in_seconds_and_as_each_http_date_form() {
    let ten = Some(Duration::from_secs(10));
    assert_eq!(at(&[("retry-after", "10")], 429).wait, ten);
    for date in [
        "Sun, 06 Nov 1994 08:49:47 GMT",
        "Sunday, 06-Nov-94 08:49:47 GMT",
        "Sun Nov  6 08:49:47 1994",
    ] {
        assert_eq!(at(&[("retry-after", date)], 503).wait, ten, "{date}");
    }
    assert_eq!(
        at(&[("retry-after", "Sun, 06 Nov 1994 08:00:00 GMT")], 429).wait,
        Some(Duration::ZERO)
    );
    let week = at(&[("retry-after", "604800")], 429);
    assert_eq!(week.wait, Some(HOUR), "a week is held to the bound");
    for junk in ["-5", "soon", "1e9", "Sun, 32 Nov 1994 08:49:47 GMT", ""] {
        let t = at(&[("retry-after", junk)], 429);
        assert!(t.refused && t.wait.is_none(), "{junk:?}");
    }
}

#[test]
fn the_ietf_fields_give_the_strictest_rate_and_the_reset_of_an_empty_limit() {
    let t = at(
        &[
            (
                "ratelimit-policy",
                r#""hour";q=1000;w=3600, "burst";q=50;w=1, "odd, name";q=5;w=0"#,
            ),
            ("ratelimit", r#""burst";r=0;t=2, "hour";r=900;t=1800"#),
        ],
        200,
    );
    assert!(!t.refused);
    assert_eq!(t.allows, Some(1000.0 / 3600.0));
    assert_eq!(t.wait, Some(Duration::from_secs(2)));
    let t = at(&[("ratelimit-policy", r#""p";q=50"#)], 200);
    assert_eq!((t.allows, t.wait), (Some(50.0), None), "w defaults to 1");
}

#[test]
fn the_older_trios_with_a_window_a_delta_or_a_unix_reset() {
    let t = at(
        &[
            ("ratelimit-limit", "50, 50;w=1"),
            ("ratelimit-remaining", "0"),
            ("ratelimit-reset", "3"),
        ],
        200,
    );
    assert_eq!(
        (t.allows, t.wait),
        (Some(50.0), Some(Duration::from_secs(3)))
    );
    let t = at(
        &[
            ("x-ratelimit-limit", "5000"),
            ("x-ratelimit-remaining", "0"),
            ("x-ratelimit-reset", "784111837"),
        ],
        403,
    );
    assert_eq!(
        (t.allows, t.wait),
        (None, Some(Duration::from_secs(60))),
        "GitHub's Unix reset"
    );
    let t = at(
        &[
            ("x-ratelimit-remaining", "0"),
            ("x-ratelimit-reset", "99999999"),
        ],
        200,
    );
    assert_eq!(t.wait, Some(HOUR), "bounded");
}

#[test]
fn dates_and_resets_past_any_clock_are_far_and_held_to_the_bound() {
    let far = [
        ("retry-after", "Sun, 06 Nov 99999999999 08:49:47 GMT"),
        (
            "retry-after",
            "Sunday, 06-Nov-18446744073709551615 08:49:47 GMT",
        ),
        ("retry-after", "Sun Nov  6 08:49:47 18446744073709551615"),
        ("retry-after", "Fri, 31 Dec 9999999999999 23:59:60 GMT"),
        ("retry-after", "18446744073709551615"),
    ];
    for (name, v) in far {
        for status in [200, 429, 503, 403] {
            let t = at(&[(name, v)], status);
            if t.refused {
                assert_eq!(t.wait, Some(HOUR), "{v} on {status}");
            }
        }
    }
    for prefix in ["ratelimit-", "x-ratelimit-"] {
        let (r, q) = (format!("{prefix}remaining"), format!("{prefix}reset"));
        let mut headers = HeaderMap::new();
        headers.insert(
            http::HeaderName::from_bytes(r.as_bytes()).unwrap(),
            "0".parse().unwrap(),
        );
        headers.insert(
            http::HeaderName::from_bytes(q.as_bytes()).unwrap(),
            "18446744073709551615".parse().unwrap(),
        );
        let now = UNIX_EPOCH + Duration::from_secs(784_111_777);
        let t = told(StatusCode::OK, &headers, now, HOUR, &Refusals::default());
        assert_eq!(t.wait, Some(HOUR), "{prefix}");
    }
}

#[test]
fn a_403_that_says_how_long_to_wait_is_a_refusal_and_one_that_does_not_is_not() {
    let t = at(&[("retry-after", "5")], 403);
    assert!(t.refused);
    assert_eq!(t.wait, Some(Duration::from_secs(5)));
    let t = at(
        &[
            ("x-ratelimit-remaining", "0"),
            ("x-ratelimit-reset", "784111787"),
        ],
        403,
    );
    assert!(t.refused);
    assert_eq!(t.wait, Some(Duration::from_secs(10)));
    assert!(!at(&[], 403).refused, "a plain 403 is about permissions");
    assert!(!at(&[("x-ratelimit-remaining", "10")], 403).refused);
    let only_429 = Refusals {
        always: Statuses::of([StatusCode::TOO_MANY_REQUESTS]),
        when_told: Statuses::default(),
    };
    let mut headers = HeaderMap::new();
    headers.insert("retry-after", "5".parse().unwrap());
    let t = told(StatusCode::FORBIDDEN, &headers, UNIX_EPOCH, HOUR, &only_429);
    assert!(!t.refused, "statuses are configurable");
    let t = told(
        StatusCode::SERVICE_UNAVAILABLE,
        &headers,
        UNIX_EPOCH,
        HOUR,
        &only_429,
    );
    assert!(!t.refused);
}

#[test]
fn a_trio_without_a_window_allows_what_remains_until_its_reset() {
    // GitHub: 5000 an hour, 1800 left, the reset in 600 s.
    let t = at(
        &[
            ("x-ratelimit-limit", "5000"),
            ("x-ratelimit-remaining", "1800"),
            ("x-ratelimit-reset", "784112377"),
        ],
        200,
    );
    assert_eq!((t.refused, t.wait), (false, None));
    assert_eq!(t.allows, Some(3.0));
    let t = at(
        &[
            ("ratelimit-limit", "100, 100;w=60"),
            ("ratelimit-remaining", "1"),
            ("ratelimit-reset", "1"),
        ],
        200,
    );
    assert_eq!(t.allows, Some(100.0 / 60.0), "a stated window wins");
}

#[test]
fn grpc_resource_exhausted_with_its_pushback() {
    let t = at(
        &[("grpc-status", "8"), ("grpc-retry-pushback-ms", "1500")],
        200,
    );
    assert!(t.refused);
    assert_eq!(t.wait, Some(Duration::from_millis(1_500)));
    let t = at(&[("grpc-status", "0")], 200);
    assert!(!t.refused);
}
