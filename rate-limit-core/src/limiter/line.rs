//! The lines of held requests: one per principal (of one limit), first come, first served.
//!
//! A request's release time is set when it reaches the head of its line, from the release
//! of the request actually released before it: `max(last release, its arrival) + its
//! delay`. A request that leaves while waiting (its client went away) therefore never
//! pushes back the ones behind it.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

/// Every line of one [`Holding`](super::Holding), and the count of requests in them.
pub(super) struct Lines {
    lines: Mutex<HashMap<[u64; 2], Line>>,
    total: AtomicUsize,
    pub(super) max_total: usize,
}

struct Line {
    /// When the last request of this line was released.
    last: Option<Instant>,
    /// Held requests, head first: (ticket, source).
    waiting: VecDeque<(u64, u64)>,
    /// Woken whenever the head changes.
    turn: Arc<Notify>,
    next_ticket: u64,
}

/// Why a request found no place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Full {
    /// Every place of the holding is taken.
    Total,
    /// The line is at its cap and this source already waits in it.
    Line,
}

/// A place in a line; leaves the line when dropped (released, or the request went away).
pub(super) struct Place {
    lines: Arc<Lines>,
    line: [u64; 2],
    ticket: u64,
    arrival: Instant,
    delay: Duration,
}

impl Lines {
    pub(super) fn new(max_total: usize) -> Self {
        Self {
            lines: Mutex::new(HashMap::new()),
            total: AtomicUsize::new(0),
            max_total,
        }
    }

    pub(super) fn held(&self) -> usize {
        self.total.load(Ordering::Relaxed)
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<[u64; 2], Line>> {
        self.lines.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Joins the line `line` as `source`. At or over `at_most` waiting, only a source with
    /// nothing in the line joins: the cap bounds what one source (an attacker's address)
    /// can put ahead of anybody else, and never turns anybody else away.
    pub(super) fn enter(
        self: &Arc<Self>,
        line: [u64; 2],
        source: u64,
        delay: Duration,
        at_most: u32,
    ) -> Result<Place, Full> {
        let mut lines = self.lock();
        if self.total.load(Ordering::Relaxed) >= self.max_total {
            return Err(Full::Total);
        }
        let l = lines.entry(line).or_insert_with(|| Line {
            last: None,
            waiting: VecDeque::new(),
            turn: Arc::new(Notify::new()),
            next_ticket: 0,
        });
        let full = l.waiting.len() >= usize::try_from(at_most).unwrap_or(usize::MAX);
        if full && l.waiting.iter().any(|&(_, s)| s == source) {
            return Err(Full::Line);
        }
        let ticket = l.next_ticket;
        l.next_ticket += 1;
        l.waiting.push_back((ticket, source));
        self.total.fetch_add(1, Ordering::Relaxed);
        Ok(Place {
            lines: Arc::clone(self),
            line,
            ticket,
            arrival: Instant::now(),
            delay,
        })
    }
}

impl Place {
    /// Waits for this place's turn, then for its delay after the last release; returns
    /// when it was released. The place stays in the line until dropped.
    pub(super) async fn released(&self) -> Instant {
        let release = loop {
            let turn = {
                let lines = self.lines.lock();
                let Some(l) = lines.get(&self.line) else {
                    // Unreachable while this place exists; released at once rather than
                    // held forever.
                    return Instant::now();
                };
                if l.waiting.front().map(|&(t, _)| t) == Some(self.ticket) {
                    break l.last.map_or(self.arrival, |last| last.max(self.arrival)) + self.delay;
                }
                Arc::clone(&l.turn)
            };
            let notified = turn.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            // The head may have moved between the lock and `enable`: look again.
            if self.is_head() {
                continue;
            }
            notified.await;
        };
        tokio::time::sleep_until(release).await;
        if let Some(l) = self.lines.lock().get_mut(&self.line) {
            l.last = Some(release);
        }
        release
    }

    fn is_head(&self) -> bool {
        self.lines
            .lock()
            .get(&self.line)
            .and_then(|l| l.waiting.front())
            .is_some_and(|&(t, _)| t == self.ticket)
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        self.lines.total.fetch_sub(1, Ordering::Relaxed);
        let mut lines = self.lines.lock();
        let Some(l) = lines.get_mut(&self.line) else {
            return;
        };
        let was_head = l.waiting.front().map(|&(t, _)| t) == Some(self.ticket);
        l.waiting.retain(|&(t, _)| t != self.ticket);
        if l.waiting.is_empty() {
            lines.remove(&self.line);
        } else if was_head {
            l.turn.notify_waiters();
        }
    }
}
