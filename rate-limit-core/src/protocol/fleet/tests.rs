//! The codec: every change round-trips, and no text panics the decoder.

use proptest::prelude::*;

use super::FleetChange;
use super::codec::{decode_change, decode_entry, encode_change, encode_entry};
use crate::principal::Principal;

fn name() -> impl Strategy<Value = String> {
    "[A-Za-z0-9._-]{1,64}"
}

fn principal() -> impl Strategy<Value = Principal> {
    "[A-Za-z0-9._-]{1,40}".prop_map(Principal::participant)
}

fn change() -> impl Strategy<Value = FleetChange> {
    prop_oneof![
        (name(), 1..=u64::from(u32::MAX))
            .prop_map(|(limit, quota)| FleetChange::Quota { limit, quota }),
        (name(), principal(), 1..=u64::from(u32::MAX)).prop_map(|(limit, principal, quota)| {
            FleetChange::Override {
                limit,
                principal,
                quota,
            }
        }),
        (name(), principal())
            .prop_map(|(limit, principal)| FleetChange::ClearOverride { limit, principal }),
        (name(), any::<String>()).prop_map(|(name, value)| FleetChange::Setting { name, value }),
        (name(), principal()).prop_map(|(ban, principal)| FleetChange::LiftBan { ban, principal }),
    ]
}

proptest! {
    #[test]
    fn every_change_round_trips(c in change()) {
        prop_assert_eq!(decode_change(&encode_change(&c)).unwrap(), c.clone());
        if let Some((field, value)) = encode_entry(&c) {
            prop_assert_eq!(decode_entry(&field, &value).unwrap(), c);
        }
    }

    #[test]
    fn no_text_panics_the_decoder(text in any::<String>(), field in any::<String>()) {
        let _ = decode_change(&text);
        let _ = decode_entry(&field, &text);
    }
}
