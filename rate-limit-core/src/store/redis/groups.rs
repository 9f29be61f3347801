//! A chain's slot groups on a Cluster, as `check.rs` sends them: what each group charged,
//! kept to give it back if a later group refuses or fails, and the leases' grants.

use std::ops::Range;

use crate::chain::Check;
use crate::protocol::Decision;

/// A slot group already charged in this call, kept to refund it if a later group refuses
/// or fails.
pub(super) struct Charged {
    /// The group's checks.
    pub(super) range: Range<usize>,
    /// The server time it was charged at.
    pub(super) at: u64,
    /// Its arguments, as charged (a lease's grant included).
    pub(super) args: Vec<u64>,
}

/// Units a check's lease was granted in a call.
#[derive(Debug, Clone, Copy)]
pub(super) struct Granted {
    /// The check's position in the chain.
    pub(super) index: usize,
    pub(super) units: u64,
    /// The server time of the grant.
    pub(super) at: u64,
}

/// Reports the checks of groups given back as uncharged: what each charged (a lease's grant
/// too) is back.
pub(super) fn uncharge(
    decisions: &mut [Decision],
    charged: &[Charged],
    granted: &[Granted],
    checks: &[Check],
) {
    for c in charged {
        for (i, d) in decisions[c.range.clone()].iter_mut().enumerate() {
            let at = c.range.start + i;
            let grant = granted
                .iter()
                .find(|g| g.index == at)
                .map_or(0, |g| g.units);
            *d = d.plus_remaining(checks[at].cost().saturating_add(grant));
        }
    }
}
