//! Configuration: every field, every error code.

#![allow(clippy::too_many_lines, reason = "a test reads top to bottom")]

use super::*;

fn err(text: &str) -> ConfigError {
    Config::from_toml(text).unwrap_err()
}

const GOOD: &str = r#"
    [store]
    timeout = "250ms"
    cooldown = "2s"

    [limits.poll]
    algorithm = "sliding_window"
    quota = 20
    window = "60s"
    on_store_error = "open"
    lease = { max_slice = 4, lifetime = "20ms" }

    [limits.host]
    algorithm = "token_bucket"
    capacity = 10
    refill = 2
    period = "1s"
"#;

#[test]
fn a_good_file_builds_limits_policies_and_a_limiter() {
    let c = Config::from_toml(GOOD).unwrap();
    assert_eq!(c.store_kind(), &StoreKind::Memory { max_keys: None });
    let poll = c.limit("poll").unwrap();
    assert_eq!((poll.quota(), poll.window()), (20, Duration::from_secs(60)));
    assert_eq!(poll.lease(), Some((4, Duration::from_millis(20))));
    assert_eq!(c.limit("host").unwrap().lease(), None);
    assert_eq!(c.policy("poll").unwrap(), FailurePolicy::Open);
    assert_eq!(
        c.policy("host").unwrap(),
        FailurePolicy::Closed,
        "closed by default"
    );
    assert_eq!(c.limit("host").unwrap().window(), Duration::from_secs(5));
    let limiter = c.limiter().unwrap();
    assert_eq!(limiter.timeout(), Duration::from_millis(250));
    // Every call hands out the same shared limit: runtime changes reach every route.
    c.limit("poll").unwrap().set_quota(5).unwrap();
    assert_eq!(c.limit("poll").unwrap().quota(), 5);
    // A default in code, overridden from the file; an unconfigured one stays.
    let code = Limit::sliding_window("poll", 99, Duration::from_secs(10)).unwrap();
    assert_eq!(c.limit_or(code).unwrap().quota(), 5);
    let other = Limit::fixed_window("other", 7, Duration::from_secs(1)).unwrap();
    assert_eq!(c.limit_or(other).unwrap().quota(), 7);
}

#[test]
fn each_error_code_from_a_bad_file() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "[limits.a]\nalgorithm = \"sliding_log\"\nquota = 10\nwindow = \"1m\"\ndelay = { after = 10, first = \"1s\", max = \"8s\" }",
            "limit.delay_invalid",
            "limits.a.delay.after",
        ),
        (
            "[limits.a]\nalgorithm = \"sliding_log\"\nquota = 10\nwindow = \"1m\"\ndelay = { after = 5, first = \"1s\", max = \"8s\", growth = \"cubic\" }",
            "limit.delay_invalid",
            "limits.a.delay.growth",
        ),
        (
            "[limits.b]\nalgorithm = \"ban\"\nafter = 0\nwithin = \"10m\"\nduration = \"1h\"",
            "limit.quota_zero",
            "limits.b.after",
        ),
        (
            "[limits.b]\nalgorithm = \"ban\"\nafter = 5\nwithin = \"10m\"",
            "config.invalid",
            "limits.b.duration",
        ),
        (
            "[in_flight.exports]\nmax = 0\nttl = \"30s\"",
            "limit.in_flight_invalid",
            "in_flight.exports.max",
        ),
        (
            "[access]\nallow = [\"10.0.0.0/8\", \"10.0.0.0/33\"]",
            "access.entry_invalid",
            "access.allow[1]",
        ),
        (
            "[access]\ndeny = [\"example.com\"]",
            "access.entry_invalid",
            "access.deny[0]",
        ),
        (
            "[access]\ndeny = [\"::1/129\"]",
            "access.entry_invalid",
            "access.deny[0]",
        ),
        (
            "[store]\nkind = \"mongodb\"",
            "rate_limits.store_invalid",
            "store.kind",
        ),
        (
            "[store]\nkind = \"redis\"",
            "rate_limits.store_invalid",
            "store.url",
        ),
        (
            "[store]\nkind = \"redis\"\nurl = \"http://x\"",
            "redis.url_invalid",
            "store.url",
        ),
        (
            "[store]\nkind = \"cluster\"\nnodes = [\"redis://a:1/\", \"nope\"]",
            "redis.url_invalid",
            "store.nodes[1]",
        ),
        (
            "[limits.p]\nalgorithm = \"fixed_window\"\nquota = 5\nwindow = \"0s\"",
            "limit.window_invalid",
            "limits.p.window",
        ),
        (
            "[limits.p]\nalgorithm = \"fixed_window\"\nquota = 5\nwindow = \"5 parsecs\"",
            "limit.window_invalid",
            "limits.p.window",
        ),
        (
            "[limits.p]\nalgorithm = \"fixed_window\"\nquota = 0\nwindow = \"1m\"",
            "limit.quota_zero",
            "limits.p.quota",
        ),
        (
            "[limits.\"a b\"]\nalgorithm = \"fixed_window\"\nquota = 1\nwindow = \"1m\"",
            "limit.name_invalid",
            "limits.a b",
        ),
        (
            "[limits.\"q\\\"x\"]\nalgorithm = \"fixed_window\"\nquota = 1\nwindow = \"1m\"",
            "limit.name_invalid",
            "limits.q\"x",
        ),
        (
            "[limits.p]\nalgorithm = \"leaky\"\nquota = 1\nwindow = \"1m\"",
            "limit.algorithm_invalid",
            "limits.p.algorithm",
        ),
        (
            "[limits.p]\nalgorithm = \"fixed_window\"\nquota = 1\nwindow = \"1m\"\non_store_error = \"maybe\"",
            "policy.invalid",
            "limits.p.on_store_error",
        ),
        (
            "[limits.p]\nalgorithm = \"fixed_window\"\nwindow = \"1m\"",
            "config.invalid",
            "limits.p.quota",
        ),
        (
            "[limits.p]\nalgorithm = \"fixed_window\"\nquota = 1\nwindow = \"1m\"\nqouta = 2",
            "config.invalid",
            "file",
        ),
        ("this is not toml", "config.invalid", "file"),
        (
            "[limits.p]\nalgorithm = \"sliding_window\"\nquota = 100000\nwindow = \"1d\"",
            "limit.overflow",
            "limits.p.quota",
        ),
        (
            "[limits.p]\nalgorithm = \"token_bucket\"\ncapacity = 5\nrefill = 2000000\nperiod = \"1s\"",
            "limit.rate_too_high",
            "limits.p.refill",
        ),
        (
            "[limits.p]\nalgorithm = \"fixed_window\"\nquota = 5\nwindow = \"1s\"\nlease = { max_slice = 6, lifetime = \"50ms\" }",
            "limit.lease_invalid",
            "limits.p.lease.max_slice",
        ),
        (
            "[limits.p]\nalgorithm = \"fixed_window\"\nquota = 5\nwindow = \"1s\"\nlease = { max_slice = 2, lifetime = \"1s\" }",
            "limit.lease_invalid",
            "limits.p.lease.lifetime",
        ),
        (
            "[limits.p]\nalgorithm = \"fixed_window\"\nquota = 5\nwindow = \"1s\"\nlease = { max_slice = 2, lifetime = \"soon\" }",
            "limit.window_invalid",
            "limits.p.lease.lifetime",
        ),
        (
            "[limits.p]\nalgorithm = \"fixed_window\"\nquota = 5\nwindow = \"1s\"\nlease = { max_slice = 2 }",
            "config.invalid",
            "file",
        ),
    ];
    for (text, code, field) in cases {
        let e = err(text);
        assert_eq!((e.code(), e.field()), (*code, *field), "{text}\n{e}");
        assert!(
            e.to_string().contains(field),
            "the message names the field: {e}"
        );
    }
    let c = Config::from_toml(GOOD).unwrap();
    let e = c.limit("answers").unwrap_err();
    assert_eq!(
        (e.code(), e.field()),
        ("rule.unknown_limit", "limits.answers")
    );
}

#[test]
fn access_lists_come_from_the_access_table() {
    let c = Config::from_toml(
        "[access]\nallow = [\"10.0.0.0/8\", \"::1\"]\ndeny = [\"203.0.113.0/24\"]",
    )
    .unwrap();
    let (allow, deny) = c.access_lists();
    assert_eq!(allow, ["10.0.0.0/8", "::1"]);
    assert_eq!(deny, ["203.0.113.0/24"]);
    let none = Config::from_toml("").unwrap();
    assert!(none.access_lists().0.is_empty() && none.access_lists().1.is_empty());
}

#[test]
fn delays_and_in_flight_limits_come_from_the_file() {
    let c = Config::from_toml(
        r#"
        [limits.account]
        algorithm = "sliding_log"
        quota = 1000
        window = "15m"
        delay = { after = 5, first = "1s", max = "8s", max_held = 3 }

        [limits.slow]
        algorithm = "fixed_window"
        quota = 100
        window = "1m"
        delay = { after = 10, first = "100ms", max = "1s", growth = "linear" }

        [limits.ban]
        algorithm = "ban"
        after = 5
        within = "10m"
        duration = "1h"

        [in_flight.exports]
        max = 2
        ttl = "30s"
        "#,
    )
    .unwrap();
    let ban = c.limit("ban").unwrap();
    assert_eq!(ban.kind(), crate::AlgorithmKind::Ban);
    assert_eq!(
        (ban.quota(), ban.window(), ban.ban_duration()),
        (
            5,
            Duration::from_secs(600),
            Some(Duration::from_secs(3_600))
        )
    );
    let d = c.limit("account").unwrap().delay().unwrap();
    assert_eq!((d.after(), d.held_at_most()), (5, 3));
    assert_eq!(d.for_count(8), Duration::from_secs(4));
    let l = c.limit("slow").unwrap().delay().unwrap();
    assert_eq!(l.for_count(13), Duration::from_millis(300));
    let f = c.in_flight("exports").unwrap();
    assert_eq!((f.max(), f.ttl()), (2, Duration::from_secs(30)));
    assert_eq!(
        c.in_flight("nope").unwrap_err().code(),
        "rule.unknown_limit"
    );
}

#[cfg(feature = "calendar")]
#[test]
fn calendar_quotas_come_from_the_file_and_each_bad_value_has_its_code() {
    use crate::calendar::{Anchor, Period};
    let c = Config::from_toml(
        r#"
        [limits.plan]
        algorithm = "calendar"
        quota = 10000
        period = "month"
        zone = "Europe/Berlin"
        anchor = "15 09:00"

        [limits.daily]
        algorithm = "calendar"
        quota = 500
        period = "day"
        "#,
    )
    .unwrap();
    let plan = c.limit("plan").unwrap();
    assert_eq!(
        (plan.kind(), plan.quota()),
        (crate::AlgorithmKind::Calendar, 10_000)
    );
    let cal = plan.calendar_of().unwrap();
    assert_eq!(cal.period(), Period::Month);
    assert_eq!(cal.anchor(), "15 09:00".parse::<Anchor>().unwrap());
    assert_eq!(cal.zone().iana_name(), Some("Europe/Berlin"));
    let daily = c.limit("daily").unwrap();
    assert_eq!(daily.window(), Duration::from_secs(86_400));
    let head = "[limits.p]\nalgorithm = \"calendar\"\nquota = 5\n";
    for (rest, code, field) in [
        (
            "period = \"fortnight\"",
            "calendar.period_invalid",
            "limits.p.period",
        ),
        (
            "period = \"week:someday\"",
            "calendar.period_invalid",
            "limits.p.period",
        ),
        (
            "period = \"day\"\nzone = \"Mars/Olympus\"",
            "calendar.zone_unknown",
            "limits.p.zone",
        ),
        (
            "period = \"day\"\nzone = \"+19:00\"",
            "calendar.zone_unknown",
            "limits.p.zone",
        ),
        (
            "period = \"month\"\nanchor = \"32\"",
            "calendar.anchor_invalid",
            "limits.p.anchor",
        ),
        (
            "period = \"month\"\nanchor = \"15 25:00\"",
            "calendar.anchor_invalid",
            "limits.p.anchor",
        ),
        ("zone = \"UTC\"", "config.invalid", "limits.p.period"),
    ] {
        let text = format!("{head}{rest}");
        let e = err(&text);
        assert_eq!((e.code(), e.field()), (code, field), "{text}\n{e}");
    }
    // A zone or an anchor belongs to a calendar quota only.
    let e =
        err("[limits.p]\nalgorithm = \"fixed_window\"\nquota = 5\nwindow = \"1m\"\nzone = \"UTC\"");
    assert_eq!((e.code(), e.field()), ("config.invalid", "limits.p.zone"));
    // A calendar quota is never leased.
    let e = err(&format!(
        "{head}period = \"day\"\nlease = {{ max_slice = 2, lifetime = \"50ms\" }}"
    ));
    assert_eq!(e.code(), "limit.lease_invalid", "{e}");
}
