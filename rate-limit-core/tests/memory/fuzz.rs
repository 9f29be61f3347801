//! Property-based fuzzing of principal encoding, with the documented invariants as the
//! oracle: a rendering is `kind:value`, at most 96 bytes of `A-Z a-z 0-9 . _ - : ~ *`; two
//! principals are equal exactly when their kind and value are (no aliasing, whatever the
//! bytes: `:`, `{`, `}`, NUL, CR LF, non-UTF-8, long values); short safe values stay
//! literal; API keys, personal and keyed values are always hashed and never contain their
//! input. CI runs proptest's default case count; `scripts/fuzz.sh` runs millions.

use proptest::prelude::*;
use ratekeeper_core::{HashKey, Principal, PrincipalKind};

fn kind() -> impl Strategy<Value = PrincipalKind> {
    prop_oneof![
        Just(PrincipalKind::Participant),
        Just(PrincipalKind::User),
        Just(PrincipalKind::ApiKey),
        Just(PrincipalKind::Ip),
        Just(PrincipalKind::Job),
        "[a-z][a-z0-9.-]{0,31}".prop_map(|k| PrincipalKind::custom(&k).unwrap()),
    ]
}

/// Values a client can send: safe literals, near-literals, and hostile bytes.
fn value() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        "[A-Za-z0-9._-]{1,64}".prop_map(String::into_bytes),
        "[A-Za-z0-9._:{}~*-]{0,100}".prop_map(String::into_bytes),
        prop::collection::vec(any::<u8>(), 0..200),
    ]
}

fn well_formed(p: &Principal) -> Result<(), TestCaseError> {
    let s = p.as_str();
    prop_assert!(s.len() <= Principal::MAX_LEN, "{s}");
    prop_assert!(
        s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-:~*".contains(&b)),
        "{s}"
    );
    let tagless = !s.contains('{') && !s.contains('}');
    prop_assert!(tagless, "{}", s);
    Ok(())
}

proptest! {
    #[test]
    fn principals_never_alias_and_stay_bounded(
        (ka, va) in (kind(), value()),
        (kb, vb) in (kind(), value()),
    ) {
        let (a, b) = (Principal::new(ka.clone(), &va), Principal::new(kb.clone(), &vb));
        well_formed(&a)?;
        well_formed(&b)?;
        prop_assert_eq!(a == b, ka == kb && va == vb, "{} vs {}", a.as_str(), b.as_str());
        // Deterministic: the same input renders the same everywhere.
        let again = Principal::new(ka, &va);
        prop_assert_eq!(a.as_str(), again.as_str());
    }

    #[test]
    fn composites_never_alias(
        k in kind(),
        a in prop::collection::vec(value(), 1..4),
        b in prop::collection::vec(value(), 1..4),
    ) {
        let (pa, pb) = (Principal::composite(k.clone(), &a), Principal::composite(k, &b));
        well_formed(&pa)?;
        prop_assert_eq!(pa == pb, a == b, "{} vs {}", pa.as_str(), pb.as_str());
    }

    #[test]
    fn short_safe_values_stay_literal_and_secrets_never_do(
        v in "[A-Za-z0-9._-]{1,60}",
        k in kind(),
    ) {
        let literal = Principal::new(k.clone(), &v);
        if k == PrincipalKind::ApiKey {
            prop_assert!(!literal.as_str().contains(v.as_str()) || v.len() < 4);
        } else if literal.as_str().len() < Principal::MAX_LEN {
            prop_assert!(literal.as_str().ends_with(&format!(":{v}")), "{}", literal.as_str());
        }
        let key = HashKey::new([9u8; 32]).unwrap();
        for hashed in [
            Principal::api_key(&v),
            Principal::personal(k.clone(), &v),
            Principal::keyed(k, &key, &v),
        ] {
            well_formed(&hashed)?;
            prop_assert!(hashed.value().starts_with('~'), "{}", hashed.as_str());
            // A value of a few bytes can occur in a hex digest by chance.
            if v.len() >= 6 {
                prop_assert!(!hashed.as_str().contains(v.as_str()));
            }
        }
    }
}
