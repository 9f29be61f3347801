//! Header rendering: each family, against a reference parser.

use super::*;
use ratekeeper_core::{ChainDecision, Decision};

fn status(name: &str, remaining: u64, reset_us: u64, denied: bool) -> LimitStatus {
    let d = if denied {
        Decision::from_parts(
            Outcome::Denied,
            10,
            remaining,
            reset_us,
            reset_us,
            60_000_000,
        )
    } else {
        Decision::from_parts(Outcome::Allowed, 10, remaining, reset_us, 0, 60_000_000)
    };
    LimitStatus::new(name.into(), &d)
}

#[test]
fn ietf_fields_render_as_structured_lists() {
    let limits = vec![
        status("burst", 4, 1_500_000, false),
        status("daily", 99, 86_000_000_000, false),
    ];
    assert_eq!(
        policy_field(&limits).unwrap(),
        "\"burst\";q=10;w=60, \"daily\";q=10;w=60"
    );
    assert_eq!(
        ratelimit_field(&limits).unwrap(),
        "\"burst\";r=4;t=2, \"daily\";r=99;t=86000"
    );
    assert_eq!(policy_field(&[]), None);
}

#[test]
fn ietf_fields_parse_as_structured_lists_and_clamp_integers() {
    let mut huge = status("huge", 0, 1_000_000, false);
    huge.quota = u64::MAX;
    let info = RateLimitInfo {
        allowed: true,
        shadowed: false,
        headline: 0,
        limits: smallvec::smallvec![
            status("per-ip.v2", 4, 1_500_000, false),
            huge,
            status("bad\"name", 1, 1, false),
        ],
        held: std::time::Duration::ZERO,
    };
    let mut h = HeaderMap::new();
    info.write(HeaderStyle::Both, &mut h);
    for (name, keys) in [(RATELIMIT_POLICY, ["q", "w"]), (RATELIMIT, ["r", "t"])] {
        let list = sfv::Parser::new(h[&name].as_bytes())
            .parse::<sfv::List>()
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let names: Vec<String> = list
            .iter()
            .map(|m| match m {
                sfv::ListEntry::Item(i) => {
                    assert_eq!(
                        i.params.keys().map(|k| k.as_str()).collect::<Vec<_>>(),
                        keys
                    );
                    i.bare_item.as_string().unwrap().as_str().to_owned()
                }
                sfv::ListEntry::InnerList(_) => panic!("an inner list"),
            })
            .collect();
        assert_eq!(names, ["per-ip.v2", "huge"], "{name}");
    }
    assert_eq!(
        h[RATELIMIT_POLICY],
        "\"per-ip.v2\";q=10;w=60, \"huge\";q=999999999999999;w=60"
    );
    assert_eq!(h[RATELIMIT_LIMIT], "10");
    // Rewriting in another style replaces what was there and drops the rest.
    info.write(HeaderStyle::Trio, &mut h);
    assert!(h.get(RATELIMIT_POLICY).is_none() && h.get(RATELIMIT).is_none());
    info.write(HeaderStyle::None, &mut h);
    assert!(h.is_empty(), "{h:?}");
}

#[test]
fn trio_describes_the_tightest_limit_and_a_denial_its_denier() {
    let allowed = RateLimitInfo {
        allowed: true,
        shadowed: false,
        headline: 1,
        limits: smallvec::smallvec![
            status("a", 5, 1_000_000, false),
            status("b", 3, 2_000_000, false),
        ],
        held: std::time::Duration::ZERO,
    };
    let mut h = HeaderMap::new();
    allowed.write(HeaderStyle::Both, &mut h);
    assert_eq!(h[RATELIMIT_REMAINING], "3");
    assert_eq!(h[RATELIMIT_RESET], "2");
    // An outer layer with a looser limit keeps the inner, tighter one.
    let outer = RateLimitInfo {
        allowed: true,
        shadowed: false,
        headline: 0,
        limits: smallvec::smallvec![status("global", 900, 60_000_000, false)],
        held: std::time::Duration::ZERO,
    };
    let merged = outer.merge(allowed.clone());
    assert_eq!(merged.headline().name(), "b");
    assert_eq!(merged.limits().len(), 3);
    // A denial anywhere is the headline.
    let denied = RateLimitInfo {
        allowed: false,
        shadowed: false,
        headline: 0,
        limits: smallvec::smallvec![status("route", 7, 4_200_000, true)],
        held: std::time::Duration::ZERO,
    };
    let outer = RateLimitInfo {
        allowed: true,
        shadowed: false,
        headline: 0,
        limits: smallvec::smallvec![status("global", 0, 1_000_000, false)],
        held: std::time::Duration::ZERO,
    };
    let merged = outer.merge(denied);
    assert_eq!(merged.headline().name(), "route");
    assert!(!merged.is_allowed());
    let mut h = HeaderMap::new();
    merged.write(HeaderStyle::Trio, &mut h);
    assert_eq!(h[RATELIMIT_RESET], "5");
    assert!(h.get(RATELIMIT).is_none());
}

#[test]
fn exposure_adds_names_once_and_varies_on_origin() {
    let mut h = HeaderMap::new();
    h.insert(
        ACCESS_CONTROL_EXPOSE_HEADERS,
        HeaderValue::from_static("x-request-id, RateLimit"),
    );
    expose(&mut h);
    let v = h[ACCESS_CONTROL_EXPOSE_HEADERS]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(v.starts_with("x-request-id, ratelimit, retry-after"), "{v}");
    assert_eq!(v.matches("ratelimit-policy").count(), 1);
    expose(&mut h);
    assert_eq!(h.get_all(VARY).iter().count(), 1);
}

#[test]
fn seconds_round_up_and_retry_after_is_never_zero() {
    assert_eq!(ceil_secs(Duration::from_millis(1)), 1);
    assert_eq!(ceil_secs(Duration::from_secs(2)), 2);
    assert_eq!(retry_after(0), "1");
}

#[test]
fn a_held_request_reports_its_hold_once_however_often_written() {
    let mut held = RateLimitInfo {
        allowed: true,
        shadowed: false,
        headline: 0,
        limits: smallvec::smallvec![status("sign-in", 3, 60_000_000, false)],
        held: std::time::Duration::from_millis(1_500),
    };
    let mut headers = HeaderMap::new();
    held.write(HeaderStyle::Both, &mut headers);
    held.write(HeaderStyle::Both, &mut headers);
    let values: Vec<_> = headers.get_all("server-timing").iter().collect();
    assert_eq!(values, ["rate-limit-hold;dur=1500"]);
    assert_eq!(held.held(), std::time::Duration::from_millis(1_500));
    held.held = std::time::Duration::ZERO;
    let mut headers = HeaderMap::new();
    held.write(HeaderStyle::Both, &mut headers);
    assert!(headers.get("server-timing").is_none());
}

/// `RateLimit-Policy: "name";q=100;w=60, ...`
fn policy_field(limits: &[LimitStatus]) -> Option<HeaderValue> {
    fields::policy_value(limits)
}

/// `RateLimit: "name";r=50;t=30, ...`
fn ratelimit_field(limits: &[LimitStatus]) -> Option<HeaderValue> {
    fields::now_value(limits)
}

/// An admitted limit's inline record says what the full view says: the same headers, in
/// each style, and the same `RateLimitInfo` when something reads it.
#[test]
fn one_limits_record_writes_what_the_full_view_writes() {
    let names: Vec<Arc<str>> = vec!["per-player".into()];
    for reset_us in [0, 1, 1_500_000, 59_000_001] {
        let d = ChainDecision::one(Decision::from_parts(
            Outcome::Allowed,
            10,
            7,
            reset_us,
            0,
            60_000_000,
        ));
        let full = RateLimitInfo::from_chain(&names, &d).expect("a limit shown");
        let Record::One(one) = Record::admitted(&names, &d) else {
            panic!("one admitted limit is kept inline");
        };
        assert_eq!(Record::One(one).into_info(&names).as_ref(), Some(&full));
        for style in [HeaderStyle::Both, HeaderStyle::Ietf, HeaderStyle::Trio] {
            let policy = PolicyCache::default();
            let mut not_cached = HeaderMap::new();
            assert!(
                !one.write_fresh(style, &mut not_cached, &names[0], &policy),
                "nothing cached yet: the full view writes (and fills the cache)"
            );
            assert!(not_cached.is_empty());
            let mut expected = HeaderMap::new();
            full.write_fresh(style, &mut expected, &policy);
            let mut written = HeaderMap::new();
            assert!(one.write_fresh(style, &mut written, &names[0], &policy));
            assert_eq!(written, expected, "{style:?}, reset {reset_us} µs");
            // Another limit (or a changed quota) is not described by the cache.
            let other: Arc<str> = "other".into();
            assert!(!one.write_fresh(style, &mut HeaderMap::new(), &other, &policy));
        }
    }
}

/// Several plainly admitted limits are kept inline too, and write what the full view
/// writes, the headline (the least left) in the trio.
#[test]
fn several_limits_record_writes_what_the_full_view_writes() {
    let names: Vec<Arc<str>> = vec!["burst".into(), "hourly".into(), "daily".into()];
    let d = ChainDecision::new(vec![
        Decision::from_parts(Outcome::Allowed, 10, 7, 1_500_000, 0, 60_000_000),
        Decision::from_parts(Outcome::Allowed, 100, 3, 59_000_001, 0, 3_600_000_000),
        Decision::from_parts(Outcome::Allowed, 1_000, 900, 0, 0, 86_400_000_000),
    ]);
    let full = RateLimitInfo::from_chain(&names, &d).expect("limits shown");
    let record = Record::admitted(&names, &d);
    assert!(
        matches!(record, Record::Many { headline: 1, .. }),
        "{record:?}"
    );
    for style in [HeaderStyle::Both, HeaderStyle::Ietf, HeaderStyle::Trio] {
        let policy = PolicyCache::default();
        let mut not_cached = HeaderMap::new();
        assert!(!record.write_fresh(style, &mut not_cached, &names, &policy));
        assert!(not_cached.is_empty());
        let mut expected = HeaderMap::new();
        full.write_fresh(style, &mut expected, &policy);
        let mut written = HeaderMap::new();
        assert!(record.write_fresh(style, &mut written, &names, &policy));
        assert_eq!(written, expected, "{style:?}");
        // Other names, or fewer of them, are not what the cache describes.
        let other: Vec<Arc<str>> = vec!["burst".into(), "hourly".into(), "weekly".into()];
        assert!(!record.write_fresh(style, &mut HeaderMap::new(), &other, &policy));
    }
    assert_eq!(
        Record::admitted(&names, &d).into_info(&names).as_ref(),
        Some(&full)
    );
}

/// What is not plainly admitted keeps the full view.
#[test]
fn other_answers_keep_the_full_view() {
    let names: Vec<Arc<str>> = vec!["a".into(), "b".into()];
    let allowed = Decision::from_parts(Outcome::Allowed, 10, 7, 1_000_000, 0, 60_000_000);
    let denied = Decision::from_parts(Outcome::Denied, 10, 0, 1_000_000, 1_000_000, 60_000_000);
    let charged = ChainDecision::new(vec![allowed, denied]);
    assert!(matches!(
        Record::admitted(&names, &charged),
        Record::Full(_)
    ));
    let short = ChainDecision::new(vec![allowed, allowed]);
    assert!(matches!(
        Record::admitted(&names[..1], &short),
        Record::Full(_)
    ));
    let refused = ChainDecision::one(denied);
    assert!(matches!(
        Record::admitted(&names, &refused),
        Record::Full(_)
    ));
    assert!(Record::from(None).into_info(&names).is_none());
}

/// A cached policy value is kept once, in static memory: equal values share it.
#[test]
fn policy_values_are_interned_once() {
    let a = fields::interned(HeaderValue::from_static("\"interned-test\";q=7;w=9"));
    let b = fields::interned(HeaderValue::from_str("\"interned-test\";q=7;w=9").unwrap());
    assert_eq!(a, "\"interned-test\";q=7;w=9");
    assert_eq!(a.as_bytes().as_ptr(), b.as_bytes().as_ptr());
}
