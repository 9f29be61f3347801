//! Heavy hitters of a fleet: each instance's report as text for the store (bounded), and
//! the reports of several instances merged into one with its error bound.
//!
//! The merge adds each instance's bounds: a principal listed by an instance counts there
//! between its guaranteed count and its count; one not listed there, between nothing and
//! that instance's unlisted bound. So the merged count is an upper bound, count − error a
//! lower bound, and a principal spread thin over every instance (under each one's lists)
//! still ranks by what it surely used where it was listed.

use std::time::Duration;

use super::{HeavyHitters, Hitter};
use crate::principal::Principal;

/// The most principals of each list an instance publishes.
pub const SHARED: usize = 64;

/// What each report starts with (the format's version).
const MARK: &str = "top1";

impl HeavyHitters {
    /// This report as one text: a head line, then a line per principal (`u` by use, `r`
    /// by refusals): `count error principal`. Principals' renderings hold no space.
    pub(crate) fn to_text(&self) -> String {
        use std::fmt::Write as _;
        let mut out = format!(
            "{MARK} {} {} {} {} {} {}\n",
            self.span.as_millis(),
            self.capacity,
            self.used,
            self.refused,
            self.unlisted_use,
            self.unlisted_refusals
        );
        for (tag, list) in [("u", &self.by_use), ("r", &self.by_refusals)] {
            for h in list {
                let _ = writeln!(
                    out,
                    "{tag} {} {} {}",
                    h.count,
                    h.error,
                    h.principal.as_str()
                );
            }
        }
        out
    }

    /// A report written by [`to_text`](Self::to_text); `None` for anything else (another
    /// format, a line out of shape, an error above its count, more than [`SHARED`] a list).
    pub(crate) fn from_text(text: &str) -> Option<Self> {
        let mut lines = text.lines();
        let head: Vec<u64> = {
            let mut w = lines.next()?.split(' ');
            (w.next()? == MARK).then_some(())?;
            w.map(|n| n.parse().ok()).collect::<Option<_>>()?
        };
        let [
            span,
            capacity,
            used,
            refused,
            unlisted_use,
            unlisted_refusals,
        ] = head[..]
        else {
            return None;
        };
        let mut report = Self {
            by_use: Vec::new(),
            by_refusals: Vec::new(),
            unlisted_use,
            unlisted_refusals,
            used,
            refused,
            span: Duration::from_millis(span),
            capacity: usize::try_from(capacity).ok()?.max(1),
        };
        for line in lines {
            let mut w = line.splitn(4, ' ');
            let (tag, count, error, who) = (w.next()?, w.next()?, w.next()?, w.next()?);
            let (count, error): (u64, u64) = (count.parse().ok()?, error.parse().ok()?);
            let hitter = Hitter {
                principal: Principal::from_rendered(who)?,
                count,
                error: (error <= count).then_some(error)?,
            };
            let list = match tag {
                "u" => &mut report.by_use,
                "r" => &mut report.by_refusals,
                _ => return None,
            };
            (list.len() < SHARED).then_some(())?;
            list.push(hitter);
        }
        Some(report)
    }

    /// The reports of several instances as one: the `n` heaviest of each list over them
    /// all, totals added, the longest span, the smallest capacity (so the error bound
    /// `2 × total ÷ capacity` still holds).
    pub fn merge(reports: &[Self], n: usize) -> Self {
        let (by_use, unlisted_use) =
            merge_lists(reports.iter().map(|r| (&r.by_use[..], r.unlisted_use)), n);
        let (by_refusals, unlisted_refusals) = merge_lists(
            reports
                .iter()
                .map(|r| (&r.by_refusals[..], r.unlisted_refusals)),
            n,
        );
        Self {
            by_use,
            by_refusals,
            unlisted_use,
            unlisted_refusals,
            used: reports.iter().map(|r| r.used).sum(),
            refused: reports.iter().map(|r| r.refused).sum(),
            span: reports.iter().map(|r| r.span).max().unwrap_or_default(),
            capacity: reports.iter().map(|r| r.capacity).min().unwrap_or(1),
        }
    }
}

/// The `n` heaviest over lists, each with the most a principal it does not list may have.
fn merge_lists<'a>(
    lists: impl Iterator<Item = (&'a [Hitter], u64)> + Clone,
    n: usize,
) -> (Vec<Hitter>, u64) {
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for (list, _) in lists.clone() {
        for h in list {
            if !seen.insert(h.principal.as_str()) {
                continue;
            }
            let (mut hi, mut lo) = (0u64, 0u64);
            for (other, unlisted) in lists.clone() {
                match other.iter().find(|o| o.principal == h.principal) {
                    Some(o) => {
                        hi = hi.saturating_add(o.count);
                        lo = lo.saturating_add(o.guaranteed());
                    }
                    None => hi = hi.saturating_add(unlisted),
                }
            }
            out.push(Hitter {
                principal: h.principal.clone(),
                count: hi,
                error: hi - lo.min(hi),
            });
        }
    }
    out.sort_by(|x, y| {
        y.guaranteed()
            .cmp(&x.guaranteed())
            .then_with(|| y.count.cmp(&x.count))
            .then_with(|| x.principal.as_str().cmp(y.principal.as_str()))
    });
    let all_unlisted = lists.map(|(_, u)| u).fold(0u64, u64::saturating_add);
    let cut = out.iter().skip(n).map(|h| h.count).max().unwrap_or(0);
    out.truncate(n);
    (out, cut.max(all_unlisted))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hitter(who: &str, count: u64, error: u64) -> Hitter {
        Hitter {
            principal: Principal::participant(who),
            count,
            error,
        }
    }

    fn report(by_use: Vec<Hitter>, unlisted: u64) -> HeavyHitters {
        HeavyHitters {
            used: by_use.iter().map(|h| h.count).sum(),
            by_use,
            by_refusals: vec![hitter("r", 3, 0)],
            unlisted_use: unlisted,
            unlisted_refusals: 0,
            refused: 3,
            span: Duration::from_secs(90),
            capacity: 16,
        }
    }

    #[test]
    fn a_report_reads_back_as_it_was_written() {
        let r = report(vec![hitter("a", 10, 2), hitter("b", 5, 0)], 1);
        let back = HeavyHitters::from_text(&r.to_text()).unwrap();
        assert_eq!(back.to_text(), r.to_text());
        assert_eq!(back.by_use[0].principal().as_str(), "p:a");
        for bad in [
            "",
            "top2 1 1 1 1 1 1",
            "top1 1 1 1 1 1",
            "top1 1 1 1 1 1 1\nu 1 2 p:a",
        ] {
            assert!(HeavyHitters::from_text(bad).is_none(), "{bad:?}");
        }
        let long: String = (0..=SHARED).map(|i| format!("u 1 0 p:x{i}\n")).collect();
        assert!(HeavyHitters::from_text(&format!("top1 1 1 1 1 1 1\n{long}")).is_none());
    }

    #[test]
    fn a_principal_spread_over_instances_adds_up_and_others_carry_the_unlisted_bound() {
        let a = report(vec![hitter("flood", 40, 0), hitter("x", 9, 0)], 2);
        let b = report(vec![hitter("flood", 35, 5), hitter("y", 12, 0)], 3);
        let c = report(vec![hitter("flood", 30, 0)], 1);
        let m = HeavyHitters::merge(&[a, b, c], 3);
        let top = &m.by_use[0];
        assert_eq!(top.principal().as_str(), "p:flood");
        assert_eq!((top.count(), top.guaranteed()), (105, 100));
        // `y`: 12 on b, at most 2 on a and 1 on c.
        let y = m
            .by_use
            .iter()
            .find(|h| h.principal().as_str() == "p:y")
            .unwrap();
        assert_eq!((y.count(), y.guaranteed()), (15, 12));
        assert_eq!(m.unlisted_use, 6, "a principal none lists: 2 + 3 + 1");
        assert_eq!(m.used, 126);
        assert_eq!(m.by_refusals[0].count(), 9);
    }
}
