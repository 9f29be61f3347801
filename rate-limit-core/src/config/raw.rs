//! The TOML file as read, before it is checked.

use std::collections::BTreeMap;

use serde::Deserialize;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFile {
    #[serde(default)]
    pub(super) store: Option<RawStore>,
    #[serde(default)]
    pub(super) limits: BTreeMap<String, RawLimit>,
    #[serde(default)]
    pub(super) access: RawAccess,
    #[serde(default)]
    pub(super) in_flight: BTreeMap<String, RawInFlight>,
}

/// `[in_flight.NAME]`: an in-flight limit.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawInFlight {
    pub(super) max: u64,
    pub(super) ttl: String,
}

/// `delay = { .. }` of a limit.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDelay {
    pub(super) after: u64,
    pub(super) first: String,
    pub(super) max: String,
    pub(super) growth: Option<String>,
    pub(super) max_held: Option<u64>,
}

/// `[access]`: allow and deny lists of CIDRs and IP addresses.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAccess {
    #[serde(default)]
    pub(super) allow: Vec<String>,
    #[serde(default)]
    pub(super) deny: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawStore {
    pub(super) kind: Option<String>,
    pub(super) url: Option<String>,
    pub(super) nodes: Option<Vec<String>>,
    pub(super) prefix: Option<String>,
    pub(super) timeout: Option<String>,
    pub(super) cooldown: Option<String>,
    pub(super) max_keys: Option<usize>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLimit {
    pub(super) algorithm: String,
    pub(super) quota: Option<u64>,
    pub(super) window: Option<String>,
    pub(super) capacity: Option<u64>,
    pub(super) refill: Option<u64>,
    pub(super) period: Option<String>,
    pub(super) zone: Option<String>,
    pub(super) anchor: Option<String>,
    pub(super) after: Option<u64>,
    pub(super) within: Option<String>,
    pub(super) duration: Option<String>,
    pub(super) on_store_error: Option<String>,
    pub(super) lease: Option<RawLease>,
    pub(super) delay: Option<RawDelay>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLease {
    pub(super) max_slice: u64,
    pub(super) lifetime: String,
}
