//! Fixed and sliding windows keep a key per window (`<name>:<window number>`, its count an
//! integer): a check names the candidate windows' keys and the server's `TIME` picks among
//! them in the script, so the instance's clock only names candidates and never decides a
//! window. The instance's estimate of the server's clock comes from the server's own
//! answers (each carries its time).

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use super::script::{FIXED, SLIDING};

/// The instance's estimate of the server's clock: its own clock plus the offset the last
/// answer showed.
#[derive(Debug, Default)]
pub(super) struct ServerClock {
    /// The server's time minus this instance's, in microseconds, as last seen.
    skew_us: AtomicI64,
}

/// This instance's clock, in microseconds since the Unix epoch.
pub(super) fn local_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

impl ServerClock {
    /// The server's time now, as estimated (microseconds).
    pub(super) fn estimate(&self, local: u64) -> u64 {
        local.saturating_add_signed(self.skew_us.load(Ordering::Relaxed))
    }

    /// Learns the offset from an answer: the server read `server` between `sent` and
    /// `received` on this clock (taken as the midpoint).
    pub(super) fn observe(&self, server: u64, sent: u64, received: u64) {
        let mid = sent / 2 + received / 2;
        let skew = i64::try_from(i128::from(server) - i128::from(mid)).unwrap_or(0);
        self.skew_us.store(skew, Ordering::Relaxed);
    }
}

/// The first window a check names at the estimate `t`: the window of `t - w / 4`, so a
/// server whose clock runs up to a quarter window behind the estimate, or up to three
/// quarters ahead, finds its window among the keys. `chain.lua` computes the same.
pub(super) fn first_window(t: u64, w: u64) -> i64 {
    let w = i128::from(w.max(1));
    let at = i128::from(t) - w / 4;
    i64::try_from(at.div_euclid(w)).unwrap_or(0)
}

/// Appends the keys the script reads for checks of `names` (one base name per check) and
/// `checks` (four numbers per check: the algorithm's code first, the window third): a fixed
/// window's two windows, a sliding window's three, any other check's one name.
pub(super) fn expand(names: &[String], checks: &[u64], t: u64, out: &mut Vec<String>) {
    for (name, check) in names.iter().zip(checks.chunks_exact(4)) {
        let Some((w, sliding)) = window(check) else {
            out.push(name.clone());
            continue;
        };
        let first = first_window(t, w);
        let from = if sliding { first - 1 } else { first };
        for win in from..=first + 1 {
            out.push(window_key(name, win));
        }
    }
}

/// Appends the keys a refund of `check` (its four numbers), charged at the server time
/// `at`, changes: the window charged (a sliding window's next one too, which holds a copy
/// of its count once made), or the name itself for any other check.
pub(super) fn charged(name: &str, check: &[u64], at: u64, out: &mut Vec<String>) {
    let Some((w, sliding)) = window(check) else {
        out.push(name.to_owned());
        return;
    };
    let win = i64::try_from(at / w).unwrap_or(i64::MAX - 1);
    out.push(window_key(name, win));
    if sliding {
        out.push(window_key(name, win + 1));
    }
}

/// The keys that may hold a check's state at the estimate `t`: for a window (`check`'s
/// four numbers), the window before the estimate's through the two after it.
pub(super) fn around(name: &str, check: &[u64], t: u64) -> Vec<String> {
    let Some((w, _)) = window(check) else {
        return vec![name.to_owned()];
    };
    let first = first_window(t, w);
    (first - 1..=first + 2)
        .map(|win| window_key(name, win))
        .collect()
}

/// `<name>:<window>`: the key of one window of a fixed or sliding window.
pub(super) fn window_key(name: &str, window: i64) -> String {
    use std::fmt::Write as _;
    let mut s = String::with_capacity(name.len() + 12);
    s.push_str(name);
    s.push(':');
    let _ = write!(s, "{window}");
    s
}

/// A check's window (µs, at least 1) and whether it slides, when `check` (its four numbers)
/// is a fixed or sliding window's.
pub(super) fn window(check: &[u64]) -> Option<(u64, bool)> {
    match (check.first().map(|c| c & 0xf), check.get(2)) {
        (Some(FIXED), Some(&w)) => Some((w.max(1), false)),
        (Some(SLIDING), Some(&w)) => Some((w.max(1), true)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_candidates_cover_a_quarter_window_behind_and_three_quarters_ahead() {
        let w = 1_000_000;
        // An estimate 0.1 s into window 1 000 names windows 999 and 1 000 (the server may
        // be up to a quarter window behind, in 999); 0.3 s in, 1 000 and 1 001.
        let t = 1_000 * w + 100_000;
        assert_eq!(first_window(t, w), 999);
        let t = 1_000 * w + 300_000;
        assert_eq!(first_window(t, w), 1_000);
        let mut out = Vec::new();
        expand(
            &["a".into(), "b".into(), "c".into()],
            &[1, 10, w, 1, 2, 10, w, 1, 4, 10, 5, 1],
            t,
            &mut out,
        );
        assert_eq!(
            out,
            ["a:1000", "a:1001", "b:999", "b:1000", "b:1001", "c"].map(String::from)
        );
        assert_eq!(window(&[2, 0, 5, 0]), Some((5, true)));
        assert_eq!(window(&[3, 0, 5, 0]), None);
        let mut refund = Vec::new();
        charged("a", &[2, 10, w, 1], 1_000 * w + 5, &mut refund);
        charged("c", &[4, 10, 5, 1], 1_000 * w + 5, &mut refund);
        assert_eq!(refund, ["a:1000", "a:1001", "c"].map(String::from));
        assert_eq!(around("a", &[1, 10, w, 0], t).len(), 4);
    }

    #[test]
    fn the_offset_is_learned_from_the_midpoint() {
        let c = ServerClock::default();
        assert_eq!(c.estimate(1_000), 1_000);
        c.observe(5_000, 1_000, 1_200);
        assert_eq!(c.estimate(2_000), 5_900);
        c.observe(500, 1_000, 1_000);
        assert_eq!(c.estimate(2_000), 1_500);
    }
}
