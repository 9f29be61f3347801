//! Units a store took from a slice leased to this process (the Redis store's leases):
//! they ride on a [`Receipt`](super::Receipt) and a [`Reservation`](super::Reservation),
//! so that a give-back returns them to the slice they came from.

use std::time::Instant;

use crate::limit::Params;

/// Units taken from a slice for a chain that may still be refused: committed or
/// released, never forgotten (its key's record is kept until then).
// Only the Redis store leases slices; the memory store never makes one.
#[cfg_attr(not(feature = "redis"), allow(dead_code))]
#[derive(Debug, Clone, Copy)]
pub(crate) struct LeasedUnits {
    pub(crate) digest: [u64; 2],
    pub(crate) part: u64,
    pub(crate) units: u64,
    /// The part's end and server time, and the parameters it was granted under: to put
    /// the units back where they came from even if the part is gone.
    pub(crate) ends: Instant,
    pub(crate) at: u64,
    pub(crate) params: Params,
}
