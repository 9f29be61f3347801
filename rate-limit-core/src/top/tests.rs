use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::{Top, TopSettings};
use crate::principal::Principal;

/// A digest for principal `i` (the keys' digests are SipHash outputs; any mix will do).
fn digest(i: u64) -> u64 {
    let mut z = i.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// xorshift64*: a seeded stream, the same every run.
struct Rng(u64);

impl Rng {
    fn unit(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        #[allow(clippy::cast_precision_loss)]
        let x = (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64;
        x / (1u64 << 53) as f64
    }
}

/// 10⁶ requests from 10⁵ principals, Zipf-distributed (s = 1): the sketch (128 counters)
/// finds the exact top 10 by use and by refusals, each true count within
/// `count - error ..= count`, and every error within the stated bound (2 × total ÷
/// capacity; one window here, so total ÷ capacity).
#[test]
fn a_zipf_flood_of_a_million_requests_finds_the_top_ten_within_the_bound() {
    const PRINCIPALS: usize = 100_000;
    const REQUESTS: usize = 1_000_000;
    let cdf: Vec<f64> = {
        #[allow(clippy::cast_precision_loss)]
        let w: Vec<f64> = (1..=PRINCIPALS).map(|r| 1.0 / r as f64).collect();
        let sum: f64 = w.iter().sum();
        w.iter()
            .scan(0.0, |acc, x| {
                *acc += x / sum;
                Some(*acc)
            })
            .collect()
    };
    let principals: Vec<Principal> = (0..PRINCIPALS)
        .map(|i| Principal::participant(format!("p{i}")))
        .collect();
    let t0 = Instant::now();
    let top = Top::new(TopSettings::new(128, Duration::from_secs(3_600)), t0);
    let mut rng = Rng(0x5eed);
    let (mut used, mut refused) = (HashMap::new(), HashMap::new());
    for n in 0..REQUESTS {
        let u = rng.unit();
        let i = cdf.partition_point(|&c| c < u).min(PRINCIPALS - 1);
        // Every third request of a principal is refused.
        let is_refused = n % 3 == 0;
        let (u, r) = if is_refused { (0, 1) } else { (1, 0) };
        top.record(digest(i as u64), &principals[i], u, r, t0);
        *(if is_refused { &mut refused } else { &mut used })
            .entry(principals[i].as_str().to_owned())
            .or_insert(0u64) += 1;
    }
    let report = top.report(10, t0);
    for (exact, found, total) in [
        (&used, &report.by_use, report.used),
        (&refused, &report.by_refusals, report.refused),
    ] {
        let mut truth: Vec<(&String, &u64)> = exact.iter().collect();
        truth.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let want: Vec<&str> = truth[..10].iter().map(|(p, _)| p.as_str()).collect();
        let mut got: Vec<&str> = found.iter().map(|h| h.principal().as_str()).collect();
        let mut want_sorted = want.clone();
        want_sorted.sort_unstable();
        got.sort_unstable();
        assert_eq!(got, want_sorted, "the top 10");
        assert_eq!(total, exact.values().sum::<u64>());
        let worst = found
            .iter()
            .map(|h| h.count() - exact[h.principal().as_str()])
            .max();
        println!(
            "total {total}, bound {}, worst overcount in the top 10 {worst:?}",
            total / 128
        );
        for h in found {
            let t = exact[h.principal().as_str()];
            assert!(
                h.count() - h.error() <= t && t <= h.count(),
                "{h:?} true {t}"
            );
            assert!(h.error() <= total / 128, "{h:?} over the bound");
        }
    }
}

/// A report covers the current window and the one before: a principal counted two
/// windows ago is gone; one counted in the previous window is still shown.
#[test]
fn a_report_covers_one_to_two_windows() {
    let t0 = Instant::now();
    let w = Duration::from_secs(60);
    let top = Top::new(TopSettings::new(8, w), t0);
    let (a, b) = (Principal::participant("a"), Principal::participant("b"));
    top.record(1, &a, 5, 0, t0);
    top.record(2, &b, 0, 3, t0 + w);
    let r = top.report(10, t0 + w + Duration::from_secs(1));
    assert_eq!(r.by_use[0].principal().as_str(), "p:a");
    assert_eq!((r.by_use[0].count(), r.by_use[0].error()), (5, 0));
    assert_eq!(r.by_refusals[0].count(), 3);
    assert_eq!((r.used, r.refused), (5, 3));
    let later = top.report(10, t0 + w * 2 + Duration::from_secs(2));
    assert!(later.by_use.is_empty(), "{later:?}");
    assert_eq!(later.by_refusals.len(), 1, "b, one window ago");
    assert!(top.report(10, t0 + w * 5).by_refusals.is_empty());
}
