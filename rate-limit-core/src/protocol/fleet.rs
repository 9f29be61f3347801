//! The fleet's runtime state as the stores hold it: a version and its entries.

/// Every entry of the state, at one version.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct FleetState {
    /// Changes made so far (0: none).
    pub(crate) version: u64,
    /// Field and value, e.g. `q:poll` → `10`.
    pub(crate) entries: Vec<(String, String)>,
}
