//! The fleet's runtime state as the stores hold it: a version and its entries, the changes
//! made to it, and the notices a shared store sends when it changes.

/// Every entry of the state, at one version.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct FleetState {
    /// Changes made so far (0: none).
    pub(crate) version: u64,
    /// Field and value, e.g. `q:poll` → `10`.
    pub(crate) entries: Vec<(String, String)>,
}

/// One change: the version goes up by one with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FleetChange<'a> {
    /// Sets an entry.
    Set(&'a str, &'a str),
    /// Removes an entry.
    Remove(&'a str),
    /// Changes no entry: something the store already holds (a ban lifted), told to every
    /// instance with the version.
    Event(&'a str),
}

/// A notice from the store's channel: a version was written (and, for an event, what
/// happened). Only a hint: a reader always reads the version from the state itself.
#[cfg(feature = "redis")]
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FleetNotice {
    pub(crate) version: u64,
    pub(crate) event: Option<String>,
}

#[cfg(feature = "redis")]
impl FleetNotice {
    /// `"<version>"` or `"<version> <event>"`; `None` for anything else.
    pub(crate) fn parse(text: &str) -> Option<Self> {
        let (v, event) = match text.split_once(' ') {
            Some((v, e)) => (v, Some(e.to_owned())),
            None => (text, None),
        };
        Some(Self {
            version: v.parse().ok()?,
            event,
        })
    }
}
