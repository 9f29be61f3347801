//! A tiny single-key harness over `step`, for unit and property tests.

use super::*;

#[derive(Debug)]
pub(crate) struct Cell {
    pub(crate) params: Params,
    pub(crate) state: State,
}

impl Cell {
    pub(crate) fn new(params: Params) -> Self {
        Self {
            params,
            state: State::fresh(params),
        }
    }

    pub(crate) fn check(&mut self, now: u64, cost: u64, charge: Charge) -> Decision {
        let s = step(self.params, &self.state, now, cost, charge);
        if let Some(next) = s.next {
            self.state = next;
        }
        s.decision
    }

    /// Counts `n` refusals (a ban's).
    pub(crate) fn count(&mut self, now: u64, n: u64) {
        let fresh = State::fresh(self.params);
        let state = if self.state.fits(self.params) {
            &self.state
        } else {
            &fresh
        };
        if let Some(next) = ban_refusals(self.params, state, now, n) {
            self.state = next;
        }
    }

    /// Runs a check on a copy: what would happen, without changing anything.
    pub(crate) fn probe(&self, now: u64, cost: u64) -> Decision {
        step(self.params, &self.state, now, cost, Charge::IfFits).decision
    }
}
