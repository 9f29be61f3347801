//! Keys: no collisions, no injection, bounded length, whatever the input.

use std::collections::HashSet;
use std::time::Duration;

use ratekeeper_core::clock::FakeClock;
use ratekeeper_core::{Chain, Limit, Principal, PrincipalKind, Store};

use crate::support::{T0, store};

fn nasty() -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = [
        "a:b",
        "a",
        "b:c",
        "a:b:c",
        "{tag}",
        "{",
        "}",
        "}{",
        "a}b{c",
        "\0",
        "a\0b",
        "\r\n",
        "\r\n*1\r\n$8\r\nFLUSHALL\r\n",
        "",
        " ",
        "~",
        "~abc",
        "*",
        "all",
        "all:*",
        "u:alice",
        "alice",
        "ALICE",
        "x.kind:v",
        "ip:1.2.3.4",
        "1.2.3.4",
        "é",
        "e\u{301}",
        "../../etc",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    v.push(vec![0xff, 0xfe]);
    v.push(vec![0xc3, 0x28]);
    v.push(vec![b'a'; 64]);
    v.push(vec![b'a'; 65]);
    v.push(vec![b'x'; 1 << 20]);
    v.push(vec![b'x'; (1 << 20) + 1]);
    v
}

#[test]
fn distinct_inputs_give_distinct_bounded_safe_keys() {
    let inputs = nasty();
    let mut seen = HashSet::new();
    for kind in [
        PrincipalKind::User,
        PrincipalKind::Participant,
        PrincipalKind::Job,
    ] {
        for raw in &inputs {
            let p = Principal::new(kind.clone(), raw);
            let text = p.as_str();
            assert!(text.len() <= Principal::MAX_LEN, "{} bytes", text.len());
            assert!(
                text.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._-:~*".contains(&b)),
                "unsafe byte in {text:?}"
            );
            assert!(!text.contains('{') && !text.contains('}'));
            assert_eq!(text.matches(':').count(), 1, "one separator: {text:?}");
            assert!(seen.insert(text.to_owned()), "collision: {text:?}");
        }
    }
}

#[test]
fn composite_parts_cannot_alias() {
    let k = PrincipalKind::custom("pair").unwrap();
    let a = Principal::composite(k.clone(), ["a:b", "c"]);
    let b = Principal::composite(k.clone(), ["a", "b:c"]);
    let c = Principal::composite(k.clone(), ["a", "b", "c"]);
    let d = Principal::composite(k.clone(), ["a:b:c"]);
    let all: HashSet<_> = [&a, &b, &c, &d]
        .iter()
        .map(|p| p.as_str().to_owned())
        .collect();
    assert_eq!(all.len(), 4);
    // A custom kind never aliases a built-in one.
    let user = PrincipalKind::custom("u").unwrap();
    assert_ne!(Principal::new(user, "x"), Principal::user("x"));
    // Long composites are hashed whole, and still bounded.
    let long = Principal::composite(k, ["a".repeat(64), "b".repeat(64)]);
    assert!(long.as_str().len() <= Principal::MAX_LEN);
    assert!(long.as_str().starts_with("x.pair:~"));
}

#[test]
fn personal_data_and_secrets_never_appear_in_keys() {
    let mail = Principal::personal(PrincipalKind::User, "ann@example.com");
    assert!(!mail.as_str().contains("ann") && !mail.as_str().contains("example"));
    let key = Principal::api_key("sk_live_abc123");
    assert!(!key.as_str().contains("sk_live"));
    // Hashing is stable across processes: a fixed input has a fixed rendering.
    assert_eq!(
        mail.as_str(),
        Principal::personal(PrincipalKind::User, "ann@example.com").as_str()
    );
    assert_eq!(
        Principal::user("a:b").as_str(),
        "u:~da933e0abc35b2de0fa168bc957230ac"
    );
}

#[tokio::test]
async fn keys_are_namespaced_by_limit_and_counted_apart() {
    let clock = FakeClock::at_micros(T0);
    let store = store(&clock);
    let minute = Duration::from_secs(60);
    let a = Limit::fixed_window("a", 1, minute).unwrap();
    let ab = Limit::fixed_window("a-b", 1, minute).unwrap();
    // Same principal text under different limits, and look-alike principals under one.
    for (limit, p) in [
        (&a, Principal::user("b")),
        (&ab, Principal::user("b")),
        (&a, Principal::user("b:")),
        (&a, Principal::user("b\0")),
        (&a, Principal::new(PrincipalKind::Participant, "b")),
        (&a, Principal::user(vec![b'b'; 1 << 20])),
    ] {
        let d = store.check(&Chain::new().check(limit, p)).await.unwrap();
        assert!(d.is_allowed(), "aliased another key");
    }
    assert_eq!(store.len(), 6);
}
