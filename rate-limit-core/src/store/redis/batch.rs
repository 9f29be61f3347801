//! Coalescing on one connection (standalone Redis, Sentinel): when no call is in flight, a
//! check is sent at once; checks that arrive while one is in flight ride the next call
//! together, which leaves when that call's answer arrives or as soon as it holds the
//! maximum number of chains (full calls are pipelined, so a slow network bounds latency,
//! not throughput). No timer: a check waits at most for the call ahead of it.
//!
//! Each chain stays atomic and all-or-nothing on its own (the script runs the chains in
//! turn and a chain with bad arguments fails alone); what the batch shares is the call:
//! one round trip, one `TIME`, one `MGET`, one `SET` per key however many chains touch it.

use std::sync::Arc;

use redis::{Script, Value};
use tokio::sync::{mpsc, oneshot};

use super::conn::Conn;
use super::error::{bad_answer, refused_chain, store_error};
use super::script::{CHAIN_LUA, Invocation, Mode, decode, head, push_chain};
use crate::decision::Decision;
use crate::store::{StoreError, StoreErrorKind};

/// A chain's answer: the server time and its decisions.
pub(super) type Answer = Result<(u64, Vec<Decision>), StoreError>;

struct Job {
    keys: Vec<String>,
    mode: Mode,
    checks: Vec<u64>,
    reply: oneshot::Sender<Answer>,
}

enum Event {
    /// A chain to send.
    Job(Job),
    /// A call's answer arrived (and was handed out).
    Done,
}

/// The sending side; the task that makes the calls ends when the store is dropped.
pub(super) struct Batcher {
    tx: mpsc::UnboundedSender<Event>,
}

impl Batcher {
    /// Starts the task that sends calls of at most `max` chains (call inside a runtime).
    pub(super) fn start(conn: Arc<Conn>, slack_ms: u64, max: usize) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let calls = Calls {
            conn,
            script: Arc::new(Script::new(CHAIN_LUA)),
            slack_ms,
            done: tx.downgrade(),
        };
        tokio::spawn(drive(calls, rx, max.max(1)));
        Self { tx }
    }

    /// Runs one chain (`checks`: four numbers per check) in the next call.
    pub(super) async fn run(&self, keys: Vec<String>, mode: Mode, checks: Vec<u64>) -> Answer {
        let (reply, answer) = oneshot::channel();
        let job = Job {
            keys,
            mode,
            checks,
            reply,
        };
        self.tx.send(Event::Job(job)).map_err(|_| gone())?;
        answer.await.map_err(|_| gone())?
    }
}

/// The task is gone (its runtime shut down): nothing was sent.
fn gone() -> StoreError {
    StoreError::new(
        StoreErrorKind::NotExecuted,
        "redis: the store's connection task has stopped",
    )
}

/// What a call needs. `done` is weak so that the channel closes when the store is dropped.
struct Calls {
    conn: Arc<Conn>,
    script: Arc<Script>,
    slack_ms: u64,
    done: mpsc::WeakUnboundedSender<Event>,
}

async fn drive(calls: Calls, mut rx: mpsc::UnboundedReceiver<Event>, max: usize) {
    let mut queue: Vec<Job> = Vec::new();
    let mut in_flight = 0usize;
    while let Some(event) = rx.recv().await {
        let mut next = Some(event);
        // Everything that has arrived, then decide.
        while let Some(event) = next.take().or_else(|| rx.try_recv().ok()) {
            match event {
                Event::Job(job) => queue.push(job),
                Event::Done => in_flight -= 1,
            }
        }
        while queue.len() >= max || (in_flight == 0 && !queue.is_empty()) {
            let mut jobs: Vec<Job> = queue.drain(..queue.len().min(max)).collect();
            // A caller that gave up (its timeout, a dropped request) is not sent: it never ran.
            jobs.retain(|j| !j.reply.is_closed());
            let Some(done) = calls.done.upgrade() else {
                return;
            };
            if jobs.is_empty() {
                continue;
            }
            in_flight += 1;
            tokio::spawn(call(
                calls.conn.clone(),
                calls.script.clone(),
                calls.slack_ms,
                jobs,
                done,
            ));
        }
    }
}

/// One call for `jobs`; hands each its answer, then says it is done.
async fn call(
    conn: Arc<Conn>,
    script: Arc<Script>,
    slack_ms: u64,
    mut jobs: Vec<Job>,
    done: mpsc::UnboundedSender<Event>,
) {
    // Says "done" however the call ends (a panic included), or partial calls would wait
    // for it forever.
    struct Done(mpsc::UnboundedSender<Event>);
    impl Drop for Done {
        fn drop(&mut self) {
            let _ = self.0.send(Event::Done);
        }
    }
    let _done = Done(done);
    let mut keys = Vec::with_capacity(jobs.iter().map(|j| j.keys.len()).sum());
    let mut args = head(slack_ms, jobs.len());
    for job in &mut jobs {
        keys.append(&mut job.keys);
        push_chain(&mut args, job.mode, &job.checks);
    }
    let inv = Invocation {
        script: &script,
        code: CHAIN_LUA,
        keys: &keys,
        args: &args,
    };
    match conn.invoke::<Value>(&inv).await {
        Ok(v) => match decode(&v, jobs.len()) {
            Ok((now, answers)) => {
                for (job, answer) in jobs.into_iter().zip(answers) {
                    let answer = answer.map(|ds| (now, ds)).ok_or_else(refused_chain);
                    let _ = job.reply.send(answer);
                }
            }
            Err(_) => jobs.into_iter().for_each(|j| {
                let _ = j.reply.send(Err(bad_answer()));
            }),
        },
        Err(e) => jobs.into_iter().for_each(|j| {
            let _ = j.reply.send(Err(store_error(e.clone())));
        }),
    }
}
