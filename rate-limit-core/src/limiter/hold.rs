//! Holding admitted requests for their delay: one queue per principal and limit.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use super::{Answer, Limiter};
use crate::chain::Chain;
use crate::store::Store;

/// Holds admitted requests for their [`Decision::delay`](crate::Decision::delay) (limits
/// made with [`Limit::delayed`](crate::Limit::delayed)), bounded:
///
/// - **One at a time per principal**: the held requests of one principal (of one limit)
///   are released in turn, each at least its delay after the one before, so parallel
///   attempts do not multiply the rate.
/// - **Caps**: at most [`Delay::held_at_most`](crate::Delay::held_at_most) of one principal
///   held at once, and at most `max_total` in all (per `Holding`: each layer and each
///   in-handler limiter has its own). A request over a cap is refused at once (429, with
///   the delay as its retry-after), and its units are given back: it never ran.
/// - **Cheap**: a held request is a timer in the runtime and an entry in a map while its
///   principal has requests held; no thread.
/// - **Disconnects**: a request whose future is dropped while held (the client left)
///   frees its place at once. Its units stay counted: it was admitted, and a client that
///   leaves does not learn the answer sooner by leaving.
///
/// Times are Tokio's, so tests can pause them. The queues are this process's: with `n`
/// instances behind a load balancer a principal's held requests are released up to `n`
/// times as often (the count, and so the delay, is the store's, shared by all).
#[derive(Clone)]
pub struct Holding {
    inner: Arc<Inner>,
}

struct Inner {
    queues: Mutex<HashMap<[u64; 2], Queue>>,
    total: AtomicUsize,
    max_total: usize,
}

#[derive(Debug)]
struct Queue {
    /// When the last request queued here is (or was) released.
    last: Instant,
    held: u32,
}

impl fmt::Debug for Holding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Holding")
            .field("held", &self.held())
            .field("max_total", &self.inner.max_total)
            .finish()
    }
}

impl Default for Holding {
    /// At most 10 000 requests held at once.
    fn default() -> Self {
        Self::new(10_000)
    }
}

/// A place in a queue, given up when dropped (released, or the request went away).
struct Place {
    inner: Arc<Inner>,
    digest: [u64; 2],
}

impl Drop for Place {
    fn drop(&mut self) {
        self.inner.total.fetch_sub(1, Ordering::Relaxed);
        let mut queues = self
            .inner
            .queues
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(q) = queues.get_mut(&self.digest) {
            q.held = q.held.saturating_sub(1);
            if q.held == 0 {
                queues.remove(&self.digest);
            }
        }
    }
}

impl Holding {
    /// At most `max_total` requests held at once, all principals together.
    pub fn new(max_total: usize) -> Self {
        Self {
            inner: Arc::new(Inner {
                queues: Mutex::new(HashMap::new()),
                total: AtomicUsize::new(0),
                max_total,
            }),
        }
    }

    /// How many requests are held now.
    pub fn held(&self) -> usize {
        self.inner.total.load(Ordering::Relaxed)
    }

    /// Holds an admitted `answer` for `chain` for its delay, then returns it with the
    /// delay it was held for ([`ChainDecision::delay`](crate::ChainDecision::delay)). An
    /// answer with no delay comes back at once, unchanged. A request over a cap comes
    /// back refused, its units given back through `limiter`.
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
        let now = Instant::now();
        let Some((place, release)) = self.enter(check.key().digest(), delay, at_most, now) else {
            if let Some(r) = answer.reservation(chain) {
                // Boxed: a store call's future is large, and a held request's future (what
                // each waiting request costs) should not carry its room while it waits.
                // A failed give-back keeps the units counted; the limiter logged it.
                let _ = Box::pin(limiter.give_back(r)).await;
            }
            return refuse(answer, chain, i, delay);
        };
        tokio::time::sleep_until(release).await;
        drop(place);
        set_delay(answer, i, release.saturating_duration_since(now))
    }

    fn enter(
        &self,
        digest: [u64; 2],
        delay: Duration,
        at_most: u32,
        now: Instant,
    ) -> Option<(Place, Instant)> {
        let mut queues = self
            .inner
            .queues
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if self.inner.total.load(Ordering::Relaxed) >= self.inner.max_total {
            return None;
        }
        let q = queues.entry(digest).or_insert(Queue { last: now, held: 0 });
        if q.held >= at_most {
            return None;
        }
        let release = q.last.max(now) + delay;
        q.last = release;
        q.held += 1;
        self.inner.total.fetch_add(1, Ordering::Relaxed);
        Some((
            Place {
                inner: Arc::clone(&self.inner),
                digest,
            },
            release,
        ))
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
