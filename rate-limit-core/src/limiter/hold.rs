//! Holding admitted requests for their delay: one line per principal and limit.

use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use super::line::{Full, Lines};
use super::{Answer, Limiter};
use crate::chain::Chain;
use crate::protocol::Reservation;
use crate::protocol::Store;

/// Holds admitted requests for their [`Decision::delay`](crate::Decision::delay) (limits
/// made with [`Limit::delayed`](crate::Limit::delayed)), bounded:
///
/// - **One at a time per principal**: the held requests of one principal (of one limit)
///   wait in one line, first come first served, and are released in turn, each its delay
///   after the one released before it (or after its own arrival, if later), so parallel
///   attempts do not multiply the rate.
/// - **Nobody's line is closed to a newcomer**: at most
///   [`Delay::held_at_most`](crate::Delay::held_at_most) wait in a line *from one source*
///   once the line holds that many — the source being the request's other checks in the
///   chain (the client IP, in a sign-in chain of IP then account). A source with nothing
///   in the line always joins it; one that already waits in a full line is refused at
///   once (429, the delay as its retry-after, its units given back). So an attacker who
///   keeps attempts waiting on a victim's account can make the victim *wait* — at most one
///   delay for each attempt ahead of it, `held_at_most` plus one per other address the
///   attacker has waiting — but never refuse the victim's attempt. A chain with no other
///   check has one source: its line's cap refuses everybody past it.
/// - **Total cap**: at most `max_total` held at once, all lines together (per `Holding`:
///   each layer and each in-handler limiter has its own). Over it a request is refused at
///   once as above. Size it below the process's open-file limit: each held request is an
///   open connection.
/// - **Cheap**: a held request is a timer in the runtime and an entry in a line while its
///   principal has requests held; no thread.
/// - **Disconnects**: a request whose future is dropped while held (the client left before
///   the handler ran) leaves its line at once and **gives its units back**: it learnt
///   nothing, so it counts for nothing, and nobody behind it waits for it.
///
/// Times are Tokio's, so tests can pause them. The lines are this process's: with `n`
/// instances behind a load balancer a principal's held requests are released up to `n`
/// times as often (the count, and so the delay, is the store's, shared by all).
#[derive(Clone)]
pub struct Holding {
    lines: Arc<Lines>,
}

impl fmt::Debug for Holding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Holding")
            .field("held", &self.held())
            .field("max_total", &self.lines.max_total)
            .finish()
    }
}

impl Default for Holding {
    /// At most [`default_max_held`] requests held at once: a quarter of the process's
    /// open-file limit.
    fn default() -> Self {
        Self::new(default_max_held())
    }
}

/// The default cap on requests held at once by one [`Holding`]: a quarter of the process's
/// soft open-file limit (`ulimit -n`), between 64 and 10 000 — 256 under the common 1 024.
///
/// A held request is an open connection (a file descriptor) and its buffers (the request's
/// own state is about 2.6 KB: BENCHMARKS.md), so the cap sizes both: a quarter of the descriptors
/// leaves the rest for the connections being answered, the store's and the listener's
/// accept, which pauses on `EMFILE` when none is left and then slows every route. Raise
/// the open-file limit (and this cap with `max_held`) for a server that holds more. Where
/// the limit cannot be read (not Linux), 1 024 is assumed.
pub fn default_max_held() -> usize {
    (open_file_limit().unwrap_or(1_024) / 4).clamp(64, 10_000)
}

/// The soft open-file limit, from `/proc/self/limits`.
fn open_file_limit() -> Option<usize> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    match line["Max open files".len()..].split_whitespace().next()? {
        "unlimited" => Some(usize::MAX),
        n => n.parse().ok(),
    }
}

impl Holding {
    /// At most `max_total` requests held at once, all principals together.
    pub fn new(max_total: usize) -> Self {
        Self {
            lines: Arc::new(Lines::new(max_total)),
        }
    }

    /// How many requests are held now.
    pub fn held(&self) -> usize {
        self.lines.held()
    }

    /// Holds an admitted `answer` for `chain` for its delay, then returns it with the
    /// delay it was held for ([`ChainDecision::delay`](crate::ChainDecision::delay)). An
    /// answer with no delay comes back at once, unchanged. A request over a cap comes
    /// back refused, its units given back through `limiter`; so does one dropped while
    /// held (on the Tokio runtime, as it can no longer wait).
    pub async fn hold<S: Store>(
        &self,
        limiter: &Limiter<S>,
        chain: &Chain,
        answer: Answer,
    ) -> Answer {
        let Some((i, delay)) = longest_delay(&answer) else {
            return answer;
        };
        let Some(check) = chain.checks().get(i) else {
            return answer;
        };
        let at_most = check.key().limit().delay().map_or(1, |d| d.held_at_most());
        let at_most = u32::try_from(at_most).unwrap_or(u32::MAX);
        let source = source(chain, i);
        let entered = tokio::time::Instant::now();
        let place = match self
            .lines
            .enter(check.key().digest(), source, delay, at_most)
        {
            Ok(place) => place,
            Err(Full::Total | Full::Line) => {
                if let Some(r) = answer.reservation(chain) {
                    // Boxed: a store call's future is large, and a held request's future
                    // (what each waiting request costs) should not carry its room while it
                    // waits. A failed give-back keeps the units counted; the limiter
                    // logged it.
                    let _ = Box::pin(limiter.give_back(r)).await;
                }
                return refuse(answer, chain, i, delay);
            }
        };
        let unanswered = Unanswered {
            give_back: answer.reservation(chain).map(|r| (limiter.clone(), r)),
        };
        let release = place.released().await;
        unanswered.disarm();
        drop(place);
        set_delay(answer, i, release.saturating_duration_since(entered))
    }
}

/// Where a request comes from, as far as its chain tells: the digest of its checks other
/// than the held one (`0` when there is none).
fn source(chain: &Chain, held: usize) -> u64 {
    chain
        .checks()
        .iter()
        .enumerate()
        .filter(|&(j, _)| j != held)
        .fold(0, |acc, (_, c)| {
            let [a, b] = c.key().digest();
            acc.rotate_left(17) ^ a ^ b.rotate_left(29)
        })
}

/// A held request's units, given back if it goes away before it is released.
struct Unanswered<S: Store> {
    give_back: Option<(Limiter<S>, Reservation)>,
}

impl<S: Store> Unanswered<S> {
    fn disarm(mut self) {
        self.give_back = None;
    }
}

impl<S: Store> Drop for Unanswered<S> {
    fn drop(&mut self) {
        let Some((limiter, reservation)) = self.give_back.take() else {
            return;
        };
        // A failure keeps the units counted; the limiter has logged it.
        let mut give = Box::pin(async move {
            let _ = limiter.give_back(reservation).await;
        });
        // The memory store answers at once; anything else finishes on the runtime.
        if give
            .as_mut()
            .poll(&mut Context::from_waker(std::task::Waker::noop()))
            == Poll::Ready(())
        {
            return;
        }
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(give);
        }
    }
}

/// The check with the longest delay of an admitted answer, if any.
fn longest_delay(answer: &Answer) -> Option<(usize, Duration)> {
    let d = answer.decision().filter(|d| d.is_allowed())?;
    d.decisions()
        .iter()
        .enumerate()
        .map(|(i, d)| (i, d.delay()))
        .filter(|(_, d)| !d.is_zero())
        .max_by_key(|&(_, d)| d)
}

fn map_decision(
    answer: Answer,
    f: impl FnOnce(crate::ChainDecision) -> crate::ChainDecision,
) -> Answer {
    match answer {
        Answer::Store(d) => Answer::Store(f(d)),
        Answer::Memory { decision, reason } => Answer::Memory {
            decision: f(decision),
            reason,
        },
        other => other,
    }
}

fn refuse(answer: Answer, chain: &Chain, i: usize, retry: Duration) -> Answer {
    map_decision(answer, |d| d.refused_by(chain, i, retry))
}

fn set_delay(answer: Answer, i: usize, held: Duration) -> Answer {
    map_decision(answer, |mut d| {
        for (j, x) in d.decisions_mut().iter_mut().enumerate() {
            *x = x.with_delay(if j == i { held } else { Duration::ZERO });
        }
        d
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_cap_is_a_quarter_of_the_open_file_limit() {
        let limit = open_file_limit().expect("Linux has /proc/self/limits");
        assert_eq!(default_max_held(), (limit / 4).clamp(64, 10_000));
        assert_eq!(Holding::default().lines.max_total, default_max_held());
    }
}
