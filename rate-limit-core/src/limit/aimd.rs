//! AIMD settings: the parameters of an adaptive pacer (local or shared).

use std::time::Duration;

/// AIMD settings. Rates are calls per second.
///
/// You need it only to change how a pacer learns the limit of an upstream that states none:
/// where it starts, its bounds, how fast it climbs and how much a refusal cuts.
/// `Aimd::default()` suits most upstreams.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Aimd {
    /// The rate a new scope starts at.
    pub initial: f64,
    /// The rate never drops below this.
    pub min: f64,
    /// The rate never rises above this.
    pub max: f64,
    /// How much a period without rejections adds.
    pub increase: f64,
    /// What a rejection multiplies the rate by (between 0 and 1).
    pub decrease: f64,
    /// The period over which one additive step is earned (and at most one decrease).
    pub period: Duration,
}

impl Default for Aimd {
    fn default() -> Self {
        Self {
            initial: 1.0,
            min: 0.1,
            max: 1_000.0,
            increase: 1.0,
            decrease: 0.5,
            period: Duration::from_secs(1),
        }
    }
}
