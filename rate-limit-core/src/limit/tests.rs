use super::*;

fn code<T: fmt::Debug>(r: Result<T, ConfigError>) -> &'static str {
    r.unwrap_err().code()
}

const MIN: Duration = Duration::from_secs(60);

#[test]
fn quota_zero() {
    assert_eq!(code(Limit::fixed_window("a", 0, MIN)), "limit.quota_zero");
    assert_eq!(
        code(Limit::token_bucket("a", 0, 1, MIN)),
        "limit.quota_zero"
    );
    assert_eq!(
        code(Limit::token_bucket("a", 1, 0, MIN)),
        "limit.quota_zero"
    );
}

#[test]
fn window_invalid() {
    assert_eq!(
        code(Limit::sliding_window("a", 1, Duration::ZERO)),
        "limit.window_invalid"
    );
    assert_eq!(
        code(Limit::sliding_log("a", 1, Duration::from_micros(999))),
        "limit.window_invalid"
    );
    assert_eq!(
        code(Limit::token_bucket("a", 1, 1, Duration::from_micros(10))),
        "limit.window_invalid"
    );
    assert!(Limit::fixed_window("a", 1, Duration::from_millis(1)).is_ok());
}

#[test]
fn rate_too_high() {
    // 10^9 per second is the ceiling for windows.
    assert!(Limit::fixed_window("a", 1_000_000, Duration::from_millis(1)).is_ok());
    assert_eq!(
        code(Limit::fixed_window(
            "a",
            1_000_001,
            Duration::from_millis(1)
        )),
        "limit.rate_too_high"
    );
    // A bucket refills at most one token per microsecond.
    assert!(Limit::token_bucket("a", 10, 1_000_000, Duration::from_secs(1)).is_ok());
    assert_eq!(
        code(Limit::token_bucket(
            "a",
            10,
            1_000_001,
            Duration::from_secs(1)
        )),
        "limit.rate_too_high"
    );
}

#[test]
fn overflow() {
    assert_eq!(
        code(Limit::fixed_window("a", u64::from(u32::MAX) + 1, MAX_SPAN)),
        "limit.overflow"
    );
    assert_eq!(
        code(Limit::fixed_window(
            "a",
            5,
            MAX_SPAN + Duration::from_secs(1)
        )),
        "limit.overflow"
    );
    assert_eq!(
        code(Limit::token_bucket(
            "a",
            u64::from(u32::MAX),
            1,
            Duration::from_secs(86_400)
        )),
        "limit.overflow"
    );
    assert_eq!(
        code(Limit::fixed_window("a", u64::MAX, Duration::MAX)),
        "limit.overflow"
    );
}

#[test]
fn name_invalid() {
    for bad in ["", "a:b", "a b", "{x}", "é", &"n".repeat(65)] {
        assert_eq!(
            code(Limit::fixed_window(bad, 1, MIN)),
            "limit.name_invalid",
            "{bad:?}"
        );
    }
    assert!(Limit::fixed_window("ask-ai_burst.v2", 1, MIN).is_ok());
}

#[test]
fn runtime_changes_are_seen_by_every_clone_and_never_torn() {
    let l = Limit::fixed_window("rt", 10, Duration::from_secs(60)).unwrap();
    let clone = l.clone();
    l.set_quota(3).unwrap();
    assert_eq!(
        (clone.quota(), clone.window(), clone.version()),
        (3, Duration::from_secs(60), 1)
    );
    assert_eq!(l.set_quota(0).unwrap_err().code(), "limit.quota_zero");
    let other = Limit::fixed_window("rt", 7, Duration::from_secs(5)).unwrap();
    l.set_from(&other).unwrap();
    assert_eq!((clone.quota(), clone.window()), (7, Duration::from_secs(5)));
    let bucket = Limit::token_bucket("rt", 1, 1, Duration::from_secs(1)).unwrap();
    assert_eq!(
        l.set_from(&bucket).unwrap_err().code(),
        "limit.algorithm_changed"
    );
    // A writer flips between two parameter sets; readers only ever see one of them.
    let a = Limit::sliding_window("a", 5, Duration::from_millis(5)).unwrap();
    let b = Limit::sliding_window("a", 9, Duration::from_millis(9)).unwrap();
    // The oracle is captured before the threads start: `live` shares its settings with
    // `a` (clones share them), so `a.params()` flips with every write.
    let (pa, pb) = (a.params(), b.params());
    let live = a.clone();
    std::thread::scope(|s| {
        s.spawn(|| {
            for i in 0..20_000 {
                live.set_from(if i % 2 == 0 { &b } else { &a }).unwrap();
            }
        });
        for _ in 0..2 {
            s.spawn(|| {
                for _ in 0..50_000 {
                    let p = live.params();
                    assert!(p == pa || p == pb, "torn read: {p:?}");
                }
            });
        }
    });
}

#[test]
fn bans_validate_and_keep_their_three_parameters() {
    let s = Duration::from_secs;
    let ban = Limit::ban("b", 5, s(600), s(3_600)).unwrap();
    assert_eq!(
        (ban.kind(), ban.quota(), ban.window(), ban.ban_duration()),
        (AlgorithmKind::Ban, 5, s(600), Some(s(3_600)))
    );
    assert_eq!(code(Limit::ban("b", 0, s(1), s(1))), "limit.quota_zero");
    assert_eq!(
        code(Limit::ban("b", MAX_BAN_AFTER + 1, s(1), s(1))),
        "limit.overflow"
    );
    assert_eq!(
        code(Limit::ban("b", 1, Duration::ZERO, s(1))),
        "limit.window_invalid"
    );
    assert_eq!(
        code(Limit::ban("b", 1, s(1), MAX_SPAN * 2)),
        "limit.overflow"
    );
    // Exact by design: no lease, no delay.
    assert_eq!(
        code(ban.clone().leased(2, Duration::from_millis(50))),
        "limit.lease_invalid"
    );
    assert_eq!(
        code(ban.clone().delayed(Delay::doubling(1, s(1), s(2)).unwrap())),
        "limit.delay_invalid"
    );
    // A running ban's threshold changes; its window and length stay.
    ban.set_quota(8).unwrap();
    assert_eq!(
        (ban.quota(), ban.window(), ban.ban_duration()),
        (8, s(600), Some(s(3_600)))
    );
    assert_eq!(
        Limit::fixed_window("f", 1, s(1)).unwrap().ban_duration(),
        None
    );
}

#[test]
fn bucket_interval_rounds_up() {
    let l = Limit::token_bucket("b", 3, 3, Duration::from_micros(1_000_000)).unwrap();
    assert_eq!(
        l.params(),
        Params::Bucket {
            capacity: 3,
            interval: 333_334
        }
    );
}

#[test]
fn equality_is_what_was_written_and_sameness_is_one_live_limit() {
    let a = Limit::fixed_window("a", 10, MIN).unwrap();
    let written_alike = Limit::fixed_window("a", 10, MIN).unwrap();
    assert_eq!(a, written_alike);
    assert!(!a.same(&written_alike), "two limits, two live states");
    assert!(a.same(&a.clone()));
    // A run-time change moves neither: equality is about what was written.
    a.set_quota(3).unwrap();
    assert_eq!(a.quota(), 3);
    assert_eq!(a, written_alike);
    // What was written differently differs: the quota, the window, the algorithm, the name,
    // a lease.
    for other in [
        Limit::fixed_window("a", 11, MIN).unwrap(),
        Limit::fixed_window("a", 10, MIN * 2).unwrap(),
        Limit::sliding_window("a", 10, MIN).unwrap(),
        Limit::fixed_window("b", 10, MIN).unwrap(),
        Limit::fixed_window("a", 10, MIN)
            .unwrap()
            .leased(2, Duration::from_millis(20))
            .unwrap(),
    ] {
        assert_ne!(a, other, "{other:?}");
    }
}

#[tokio::test]
async fn heavy_hitter_settings_are_the_limits_and_cannot_change_once_tracked() {
    use crate::top::TopSettings;
    use crate::{Chain, FailurePolicy, Limiter, MemoryStore, Principal};
    let wide = TopSettings::new(512, Duration::from_secs(600));
    let limit = Limit::fixed_window("hh", 100, MIN)
        .unwrap()
        .heavy_hitter_settings(wide)
        .unwrap();
    assert_eq!(limit.top_settings(), wide);
    // Two limiters tracking the one limit count into its one sketch, of its one shape.
    let (one, two) = (
        Limiter::builder(MemoryStore::new())
            .heavy_hitters()
            .build()
            .unwrap(),
        Limiter::builder(MemoryStore::new())
            .heavy_hitters()
            .build()
            .unwrap(),
    );
    let chain = Chain::new().check(&limit, Principal::user("ada"));
    for limiter in [&one, &two] {
        assert!(
            limiter
                .check(&chain, FailurePolicy::Closed)
                .await
                .is_allowed()
        );
    }
    let report = limit.heavy_hitters(5).expect("tracked");
    assert_eq!(report.by_use[0].count(), 2, "{report:?}");
    assert_eq!(report.capacity, 512);
    // Settings given once it is tracked are refused, never silently ignored; the same
    // settings again are no change.
    let narrow = TopSettings::new(8, Duration::from_secs(60));
    let late = limit.clone().heavy_hitter_settings(narrow).unwrap_err();
    assert_eq!(late.code(), "limit.top_settings_late");
    assert!(limit.clone().heavy_hitter_settings(wide).is_ok());
    assert_eq!(limit.top_settings(), wide);
}
