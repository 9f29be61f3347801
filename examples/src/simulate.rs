//! `simulate`: every algorithm through the same bursty traffic, on a simulated clock.
//!
//! One client sends a scripted second-by-second pattern (an opening burst, steady traffic,
//! a burst straddling a window boundary, a flood, a lull) against four limits of "10 per
//! second": a fixed window, the approximate sliding window, the exact sliding log, and a
//! token bucket of 10 refilled at 10 per second. The report shows what each admitted per
//! second, and the most each admitted in any rolling second.

use std::fmt;
use std::time::Duration;

use ratekeeper_core::clock::FakeClock;
use ratekeeper_core::{Chain, ConfigError, Limit, MemoryStore, Principal};

/// Where the simulation starts: a whole second, so windows align with the printed rows.
pub const START_MICROS: u64 = 1_800_000_000_000_000;
const SECOND: u64 = 1_000_000;

/// What happened in one simulated second.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimulatedRow {
    /// The second, from 0.
    pub second: u64,
    /// What the pattern says happens in it.
    pub label: &'static str,
    /// Requests sent.
    pub offered: u64,
    /// Requests admitted, per algorithm, in [`Report::algorithms`] order.
    pub admitted: Vec<u64>,
}

/// The simulation's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// The algorithms' names.
    pub algorithms: Vec<&'static str>,
    /// One row per second.
    pub rows: Vec<SimulatedRow>,
    /// The most each algorithm admitted in any rolling one-second interval.
    pub max_rolling: Vec<u64>,
    /// The admission times (µs from the start) of each algorithm.
    pub admitted_at: Vec<Vec<u64>>,
}

/// The traffic: `(second, label, arrival offsets in µs from the start)`.
pub fn traffic() -> Vec<(u64, &'static str, Vec<u64>)> {
    let spread = |second: u64, n: u64, from: u64, to: u64| -> Vec<u64> {
        (0..n)
            .map(|i| second * SECOND + from + (to - from) * i / n.max(1))
            .collect()
    };
    vec![
        (0, "burst of 30 in 100 ms", spread(0, 30, 0, 100_000)),
        (1, "steady 8/s", spread(1, 8, 0, SECOND)),
        (2, "steady 8/s", spread(2, 8, 0, SECOND)),
        (3, "30 in the last 200 ms", spread(3, 30, 800_000, SECOND)),
        (4, "30 in the first 200 ms", spread(4, 30, 0, 200_000)),
        (5, "steady 15/s", spread(5, 15, 0, SECOND)),
        (6, "steady 15/s", spread(6, 15, 0, SECOND)),
        (7, "flood of 100", spread(7, 100, 0, SECOND)),
        (8, "quiet", Vec::new()),
        (9, "burst of 30 in 100 ms", spread(9, 30, 0, 100_000)),
    ]
}

/// The four limits, all "10 per second".
pub fn limits() -> Result<Vec<Limit>, ConfigError> {
    let second = Duration::from_secs(1);
    Ok(vec![
        Limit::fixed_window("fixed", 10, second)?,
        Limit::sliding_window("sliding", 10, second)?,
        Limit::sliding_log("log", 10, second)?,
        Limit::token_bucket("bucket", 10, 10, second)?,
    ])
}

/// Runs the simulation.
pub fn run() -> Result<Report, ConfigError> {
    let limits = limits()?;
    let clock = FakeClock::at_micros(START_MICROS);
    let store = MemoryStore::builder().clock(clock.clone()).build()?;
    let client = Principal::user("client");
    let chains: Vec<Chain> = limits
        .iter()
        .map(|l| Chain::new().check(l, client.clone()))
        .collect();
    let mut admitted_at = vec![Vec::new(); limits.len()];
    let mut rows = Vec::new();
    for (second, label, arrivals) in traffic() {
        let mut admitted = vec![0; limits.len()];
        for &t in &arrivals {
            clock.set_micros(START_MICROS + t);
            for (i, chain) in chains.iter().enumerate() {
                if store.check_now(chain).is_allowed() {
                    admitted[i] += 1;
                    admitted_at[i].push(t);
                }
            }
        }
        rows.push(SimulatedRow {
            second,
            label,
            offered: arrivals.len() as u64,
            admitted,
        });
    }
    let max_rolling = admitted_at
        .iter()
        .map(|times| max_in_window(times, SECOND))
        .collect();
    Ok(Report {
        algorithms: limits
            .iter()
            .map(|l| match l.name() {
                "fixed" => "fixed window",
                "sliding" => "sliding window",
                "log" => "sliding log",
                _ => "token bucket",
            })
            .collect(),
        rows,
        max_rolling,
        admitted_at,
    })
}

/// The most timestamps (sorted) within any half-open interval `[t, t + w)`.
pub fn max_in_window(times: &[u64], w: u64) -> u64 {
    let mut best = 0;
    let mut lo = 0;
    for hi in 0..times.len() {
        while times[hi] - times[lo] >= w {
            lo += 1;
        }
        best = best.max(hi - lo + 1);
    }
    best as u64
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "Every limit is \"10 per second\"; the client follows one script."
        )?;
        writeln!(f)?;
        write!(f, "{:>6}  {:<24}{:>8}", "second", "traffic", "sent")?;
        for a in &self.algorithms {
            write!(f, "{a:>16}")?;
        }
        writeln!(f)?;
        for r in &self.rows {
            write!(f, "{:>6}  {:<24}{:>8}", r.second, r.label, r.offered)?;
            for a in &r.admitted {
                write!(f, "{a:>16}")?;
            }
            writeln!(f)?;
        }
        write!(f, "{:>6}  {:<24}{:>8}", "", "most in any rolling 1 s", "")?;
        for m in &self.max_rolling {
            write!(f, "{m:>16}")?;
        }
        writeln!(f)
    }
}
