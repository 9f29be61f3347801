//! The fleet's changes as text, for a store that keeps text (Redis, a SQL table): one
//! encoder and one decoder, used by every such store and read back by every instance.
//!
//! An entry is a field and a value: `q:<limit>` → the quota, `o:<limit>:<principal>` →
//! the override's quota, `s:<name>` → the setting's value. A change is `<op>\n<field>`
//! and, for `set`, `\n<value>`: `set`, `del` (an override cleared) or `lift` (a ban lifted,
//! field `l:<ban>:<principal>`, no entry). Limit and setting names hold no `:` and no
//! newline (their alphabet), principals' renderings neither, so the first `:` after the
//! prefix ends a name and a value may hold anything.
//!
//! Text that does not decode (written by a newer release, or by hand) is a
//! [`StoreError`] of kind [`Corrupt`](StoreErrorKind::Corrupt): never applied, never a
//! panic.
//!
//! ```
//! use ratekeeper_core::Principal;
//! use ratekeeper_core::store::shared::{FleetChange, codec};
//!
//! let change = FleetChange::Override {
//!     limit: "poll".into(),
//!     principal: Principal::participant("vip"),
//!     quota: 40,
//! };
//! let text = codec::encode_change(&change);
//! assert_eq!(text, "set\no:poll:p:vip\n40");
//! assert_eq!(codec::decode_change(&text)?, change);
//! assert_eq!(codec::encode_entry(&change), Some(("o:poll:p:vip".into(), "40".into())));
//! assert!(codec::decode_entry("o:poll:p:vip", "forty").is_err());
//! # Ok::<(), ratekeeper_core::StoreError>(())
//! ```

use super::FleetChange;
use crate::principal::Principal;
use crate::protocol::{StoreError, StoreErrorKind};

/// What a change does to a store's entries: what a text store writes.
///
/// Used only by a store of your own that keeps a fleet's state as text entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Write {
    /// Sets the field to the value.
    Set(String, String),
    /// Removes the field.
    Remove(String),
    /// Changes no entry (a ban lifted).
    Nothing,
}

/// The field of the entry `change` sets or removes (`None`: a lifted ban, no entry).
pub fn entry_field(change: &FleetChange) -> Option<String> {
    match change {
        FleetChange::Quota { limit, .. } => Some(format!("q:{limit}")),
        FleetChange::Override {
            limit, principal, ..
        }
        | FleetChange::ClearOverride { limit, principal } => {
            Some(format!("o:{limit}:{}", principal.as_str()))
        }
        FleetChange::Setting { name, .. } => Some(format!("s:{name}")),
        FleetChange::LiftBan { .. } => None,
    }
}

/// What `change` writes to a store's entries.
pub fn write(change: &FleetChange) -> Write {
    match (entry_field(change), change) {
        (Some(f), FleetChange::Quota { quota, .. } | FleetChange::Override { quota, .. }) => {
            Write::Set(f, quota.to_string())
        }
        (Some(f), FleetChange::Setting { value, .. }) => Write::Set(f, value.clone()),
        (Some(f), _) => Write::Remove(f),
        (None, _) => Write::Nothing,
    }
}

/// An entry's field and value (`None` for a change that leaves no entry).
pub fn encode_entry(change: &FleetChange) -> Option<(String, String)> {
    match write(change) {
        Write::Set(f, v) => Some((f, v)),
        Write::Remove(_) | Write::Nothing => None,
    }
}

/// The entry a store holds as `field` and `value`.
pub fn decode_entry(field: &str, value: &str) -> Result<FleetChange, StoreError> {
    if let Some(name) = field.strip_prefix("s:") {
        return name_ok(name).map(|name| FleetChange::Setting {
            name,
            value: value.to_owned(),
        });
    }
    let quota: u64 = value.parse().map_err(|_| corrupt())?;
    if let Some(limit) = field.strip_prefix("q:") {
        return name_ok(limit).map(|limit| FleetChange::Quota { limit, quota });
    }
    let (limit, principal) = limit_and_principal(field.strip_prefix("o:").ok_or_else(corrupt)?)?;
    Ok(FleetChange::Override {
        limit,
        principal,
        quota,
    })
}

/// A change as one text (a store's log of changes).
pub fn encode_change(change: &FleetChange) -> String {
    match (change, write(change)) {
        (FleetChange::LiftBan { ban, principal }, _) => {
            format!("lift\nl:{ban}:{}", principal.as_str())
        }
        (_, Write::Set(f, v)) => format!("set\n{f}\n{v}"),
        (_, Write::Remove(f)) => format!("del\n{f}"),
        // Only a lifted ban writes nothing (the first arm).
        (_, Write::Nothing) => String::new(),
    }
}

/// A change from its text ([`encode_change`]).
pub fn decode_change(text: &str) -> Result<FleetChange, StoreError> {
    let (op, rest) = text.split_once('\n').ok_or_else(corrupt)?;
    match op {
        "set" => {
            let (field, value) = rest.split_once('\n').ok_or_else(corrupt)?;
            decode_entry(field, value)
        }
        "del" => {
            let (limit, principal) =
                limit_and_principal(rest.strip_prefix("o:").ok_or_else(corrupt)?)?;
            Ok(FleetChange::ClearOverride { limit, principal })
        }
        "lift" => {
            let (ban, principal) =
                limit_and_principal(rest.strip_prefix("l:").ok_or_else(corrupt)?)?;
            Ok(FleetChange::LiftBan { ban, principal })
        }
        _ => Err(corrupt()),
    }
}

/// `<limit>:<principal>`: the first `:` ends the limit's name.
fn limit_and_principal(text: &str) -> Result<(String, Principal), StoreError> {
    let (limit, who) = text.split_once(':').ok_or_else(corrupt)?;
    let principal = Principal::from_rendered(who).ok_or_else(corrupt)?;
    Ok((name_ok(limit)?, principal))
}

fn name_ok(name: &str) -> Result<String, StoreError> {
    crate::name::validate_name(name)
        .map(|()| name.to_owned())
        .map_err(|_| corrupt())
}

/// What a text that does not decode is.
pub fn corrupt() -> StoreError {
    StoreError::new(
        StoreErrorKind::Corrupt,
        "the fleet's state holds a change this release cannot read",
    )
}
