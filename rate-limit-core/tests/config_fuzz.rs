//! Property-based fuzzing of configuration files (feature `config`), with two oracles:
//! files rendered from a generated model (store kinds, URLs, durations in every unit with
//! padding, limit names that need quoting, all four algorithms, policies) parse back to the
//! model exactly; and the same files with bytes inserted, deleted or replaced never panic,
//! and fail, if they fail, with one of the documented error codes. CI runs proptest's
//! default case count; `scripts/fuzz.sh` runs millions.
#![cfg(feature = "config")]

use std::time::Duration;

use proptest::prelude::*;
use ratekeeper_core::FailurePolicy;
use ratekeeper_core::Limit;
use ratekeeper_core::config::{Config, StoreKind};

#[derive(Debug, Clone)]
enum Algo {
    Window(&'static str, u64, (u64, &'static str)),
    Bucket(u64, u64, (u64, &'static str)),
}

#[derive(Debug, Clone)]
struct LimitModel {
    name: String,
    algo: Algo,
    policy: Option<&'static str>,
}

#[derive(Debug, Clone)]
struct Model {
    store: StoreKind,
    timeout: Option<(u64, &'static str)>,
    cooldown: Option<(u64, &'static str)>,
    limits: Vec<LimitModel>,
    pad: &'static str,
}

fn unit_us(unit: &str) -> u64 {
    match unit {
        "ms" => 1_000,
        "s" => 1_000_000,
        "m" => 60_000_000,
        "h" => 3_600_000_000,
        _ => 86_400_000_000,
    }
}

fn duration() -> impl Strategy<Value = (u64, &'static str)> {
    prop_oneof![
        (1u64..100_000, Just("ms")),
        (1u64..86_400, Just("s")),
        (1u64..1_440, Just("m")),
        (1u64..24, Just("h")),
        (1u64..2, Just("d")),
    ]
}

fn url() -> impl Strategy<Value = String> {
    (
        prop::sample::select(vec!["redis", "rediss"]),
        prop::sample::select(vec!["127.0.0.1", "10.0.0.7", "redis.internal", "[::1]"]),
        1u16..,
    )
        .prop_map(|(scheme, host, port)| format!("{scheme}://{host}:{port}/"))
}

fn store() -> impl Strategy<Value = StoreKind> {
    prop_oneof![
        proptest::option::of(1usize..10_000_000)
            .prop_map(|max_keys| StoreKind::Memory { max_keys }),
        url().prop_map(|url| StoreKind::Redis { url }),
        prop::collection::vec(url(), 1..4).prop_map(|nodes| StoreKind::Cluster { nodes }),
    ]
}

fn algo() -> impl Strategy<Value = Algo> {
    prop_oneof![
        (
            prop::sample::select(vec!["fixed_window", "sliding_window", "sliding_log"]),
            1u64..1_000_000,
            duration()
        )
            .prop_map(|(a, q, w)| Algo::Window(a, q, w)),
        (1u64..1_000_000, 1u64..1_000, duration()).prop_map(|(c, r, p)| Algo::Bucket(c, r, p)),
    ]
}

fn model() -> impl Strategy<Value = Model> {
    (
        store(),
        proptest::option::of(duration()),
        proptest::option::of(duration()),
        prop::collection::btree_map(
            "[A-Za-z0-9._-]{1,32}",
            (
                algo(),
                proptest::option::of(prop::sample::select(vec!["closed", "memory", "open"])),
            ),
            0..5,
        ),
        prop::sample::select(vec!["", " "]),
    )
        .prop_map(|(store, timeout, cooldown, limits, pad)| Model {
            store,
            timeout,
            cooldown,
            limits: limits
                .into_iter()
                .map(|(name, (algo, policy))| LimitModel { name, algo, policy })
                .collect(),
            pad,
        })
}

fn render(m: &Model) -> String {
    let d = |(n, u): (u64, &str)| format!("\"{}{n}{u}{}\"", m.pad, m.pad);
    let mut out = String::new();
    out.push_str("[store]\n");
    match &m.store {
        StoreKind::Memory { max_keys } => {
            out.push_str("kind = \"memory\"\n");
            if let Some(k) = max_keys {
                out.push_str(&format!("max_keys = {k}\n"));
            }
        }
        StoreKind::Redis { url } => out.push_str(&format!("kind = \"redis\"\nurl = \"{url}\"\n")),
        StoreKind::Cluster { nodes } => {
            let list: Vec<String> = nodes.iter().map(|n| format!("\"{n}\"")).collect();
            out.push_str(&format!(
                "kind = \"cluster\"\nnodes = [{}]\n",
                list.join(", ")
            ));
        }
        other => panic!("no model for {other:?}"),
    }
    if let Some(t) = m.timeout {
        out.push_str(&format!("timeout = {}\n", d(t)));
    }
    if let Some(c) = m.cooldown {
        out.push_str(&format!("cooldown = {}\n", d(c)));
    }
    for l in &m.limits {
        // Quoted: names may hold `.`, which a bare TOML key may not.
        out.push_str(&format!("\n[limits.\"{}\"]\n", l.name));
        match l.algo {
            Algo::Window(a, q, w) => out.push_str(&format!(
                "algorithm = \"{a}\"\nquota = {q}\nwindow = {}\n",
                d(w)
            )),
            Algo::Bucket(c, r, p) => out.push_str(&format!(
                "algorithm = \"token_bucket\"\ncapacity = {c}\nrefill = {r}\nperiod = {}\n",
                d(p)
            )),
        }
        if let Some(p) = l.policy {
            out.push_str(&format!("on_store_error = \"{p}\"\n"));
        }
    }
    out
}

const CODES: [&str; 11] = [
    "config.invalid",
    "rate_limits.store_invalid",
    "redis.url_invalid",
    "limit.name_invalid",
    "limit.algorithm_invalid",
    "limit.quota_zero",
    "limit.window_invalid",
    "limit.rate_too_high",
    "limit.overflow",
    "policy.invalid",
    "store.invalid",
];

proptest! {
    #[test]
    fn rendered_files_parse_back_to_the_model(m in model()) {
        let text = render(&m);
        // Outside the documented domain, refused with `limit.overflow` naming the limit: an
        // approximate sliding window whose quota × window (µs) passes 2⁵², and a bucket
        // that would take longer than MAX_SPAN to refill.
        let max_span = u64::try_from(Limit::MAX_SPAN.as_micros()).unwrap();
        let overflowing = m.limits.iter().any(|l| match l.algo {
            Algo::Window("sliding_window", q, (n, u)) => q * n * unit_us(u) > Limit::MAX_SLIDING_PRODUCT,
            Algo::Bucket(c, r, (n, u)) => c * (n * unit_us(u)).div_ceil(r) > max_span,
            Algo::Window(..) => false,
        });
        if overflowing {
            let e = Config::from_toml(&text).unwrap_err();
            prop_assert_eq!(e.code(), "limit.overflow");
            prop_assert!(e.field().starts_with("limits."), "{}", e.field());
            return Ok(());
        }
        let c = Config::from_toml(&text).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        prop_assert_eq!(c.store_kind(), &m.store);
        for l in &m.limits {
            let got = c.limit(&l.name).unwrap();
            prop_assert_eq!(got.name(), l.name.as_str());
            let (quota, window_us) = match l.algo {
                Algo::Window(_, q, (n, u)) => (q, n * unit_us(u)),
                // The window of a bucket: capacity × the refill interval, rounded up to µs.
                Algo::Bucket(c, r, (n, u)) => (c, c * (n * unit_us(u)).div_ceil(r)),
            };
            prop_assert_eq!(got.quota(), quota, "{}", text);
            prop_assert_eq!(got.window(), Duration::from_micros(window_us), "{}", text);
            let policy = match l.policy {
                None | Some("closed") => FailurePolicy::Closed,
                Some("memory") => FailurePolicy::Memory,
                _ => FailurePolicy::Open,
            };
            prop_assert_eq!(c.policy(&l.name).unwrap(), policy);
        }
        prop_assert_eq!(
            c.limit("no-such-limit-defined").unwrap_err().code(),
            "rule.unknown_limit"
        );
    }

    #[test]
    fn damaged_files_never_panic_and_fail_with_a_documented_code(
        m in model(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), 0u8..3, any::<u8>()), 1..4),
    ) {
        let mut bytes = render(&m).into_bytes();
        for (at, op, b) in edits {
            let i = at.index(bytes.len() + 1);
            match op {
                0 => bytes.insert(i, b),
                1 if i < bytes.len() => {
                    bytes.remove(i);
                }
                _ if i < bytes.len() => bytes[i] = b,
                _ => bytes.push(b),
            }
        }
        let text = String::from_utf8_lossy(&bytes);
        if let Err(e) = Config::from_toml(&text) {
            prop_assert!(CODES.contains(&e.code()), "{}: {}", e.code(), e);
            prop_assert!(!e.field().is_empty());
        }
    }
}
