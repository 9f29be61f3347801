//! Coalescing: when no call is in flight in its lane, a check is sent at once; checks that
//! arrive while one is in flight ride the next call together, which leaves when that
//! call's answer arrives or as soon as it holds the maximum number of chains (full calls
//! are pipelined, so a slow network bounds latency, not throughput). No timer: a check
//! waits at most for the call ahead of it. A lane is the connection (standalone Redis,
//! Sentinel) or, on a Cluster, a hash slot: a script's keys must share one, so only chains
//! (slot groups) of one slot share a call.
//!
//! Each chain stays atomic and all-or-nothing on its own (the script runs the chains in
//! turn and a chain with bad arguments fails alone); what the batch shares is the call:
//! one round trip, one `TIME`, one `MGET`, one `SET` per key however many chains touch it.

use std::collections::HashMap;
use std::sync::Arc;

use redis::{Script, Value};
use tokio::sync::{mpsc, oneshot};

use super::conn::Conn;
use super::error::{bad_answer, refused_chain, store_error};
use super::script::{CHAIN_LUA, Grants, Invocation, ScriptMode, decode, head, push_chain};
use crate::protocol::Decision;
use crate::protocol::{StoreError, StoreErrorKind};

/// A chain's answer: the server time, its decisions, and what its leases were granted.
pub(super) type BatchAnswer = Result<(u64, Vec<Decision>, Grants), StoreError>;

struct Job {
    keys: Vec<String>,
    mode: ScriptMode,
    checks: Vec<u64>,
    reply: oneshot::Sender<BatchAnswer>,
}

/// Which calls a chain may share: on a Cluster its slot, else the one lane.
type Lane = Option<u16>;

enum Event {
    /// A chain to send.
    Job(Lane, Job),
    /// A call's answer arrived (and was handed out).
    Done(Lane),
}

#[derive(Default)]
struct LaneState {
    queue: Vec<Job>,
    in_flight: usize,
}

/// The sending side; the task that makes the calls ends when the store is dropped.
pub(super) struct Batcher {
    tx: mpsc::UnboundedSender<Event>,
    cluster: bool,
}

impl Batcher {
    /// Starts the task that sends calls of at most `max` chains (call inside a runtime).
    pub(super) fn start(conn: Arc<Conn>, slack_ms: u64, max: usize) -> Self {
        let cluster = conn.is_cluster();
        let (tx, rx) = mpsc::unbounded_channel();
        let calls = Calls {
            conn,
            script: Arc::new(Script::new(CHAIN_LUA)),
            slack_ms,
            done: tx.downgrade(),
        };
        tokio::spawn(drive(calls, rx, max.max(1)));
        Self { tx, cluster }
    }

    /// Runs one chain (`checks`: four numbers per check) in the next call.
    pub(super) async fn run(
        &self,
        keys: Vec<String>,
        mode: ScriptMode,
        checks: Vec<u64>,
    ) -> BatchAnswer {
        let (reply, answer) = oneshot::channel();
        let lane = if self.cluster {
            keys.first().map(|k| super::keys::hash_slot(k))
        } else {
            None
        };
        let job = Job {
            keys,
            mode,
            checks,
            reply,
        };
        self.tx.send(Event::Job(lane, job)).map_err(|_| gone())?;
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

/// A lane's hash: the slot itself (lanes are at most 16 384 slots and the one lane; no
/// client input picks them). The default SipHash cost ~200 instructions a lookup, three
/// lookups a chain.
#[derive(Default)]
struct LaneHasher(u64);

impl std::hash::Hasher for LaneHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8 | u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_u16(&mut self, n: u16) {
        self.0 = (self.0 ^ u64::from(n)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }

    fn write_usize(&mut self, n: usize) {
        self.0 = (self.0 ^ n as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

type Lanes = HashMap<Lane, LaneState, std::hash::BuildHasherDefault<LaneHasher>>;

async fn drive(calls: Calls, mut rx: mpsc::UnboundedReceiver<Event>, max: usize) {
    let mut lanes = Lanes::default();
    let mut touched: Vec<Lane> = Vec::new();
    while let Some(event) = rx.recv().await {
        let mut next = Some(event);
        // Everything that has arrived, then decide.
        while let Some(event) = next.take().or_else(|| rx.try_recv().ok()) {
            let lane = match event {
                Event::Job(lane, job) => {
                    lanes.entry(lane).or_default().queue.push(job);
                    lane
                }
                Event::Done(lane) => {
                    if let Some(l) = lanes.get_mut(&lane) {
                        l.in_flight -= 1;
                    }
                    lane
                }
            };
            if !touched.contains(&lane) {
                touched.push(lane);
            }
        }
        for lane in touched.drain(..) {
            let Some(state) = lanes.get_mut(&lane) else {
                continue;
            };
            while state.queue.len() >= max || (state.in_flight == 0 && !state.queue.is_empty()) {
                let n = state.queue.len().min(max);
                let mut jobs: Vec<Job> = state.queue.drain(..n).collect();
                // A caller that gave up (its timeout, a dropped request) is not sent: it
                // never ran.
                jobs.retain(|j| !j.reply.is_closed());
                let Some(done) = calls.done.upgrade() else {
                    return;
                };
                if jobs.is_empty() {
                    continue;
                }
                state.in_flight += 1;
                tokio::spawn(call(
                    calls.conn.clone(),
                    calls.script.clone(),
                    calls.slack_ms,
                    jobs,
                    Done(done, lane),
                ));
            }
            // An idle lane holds nothing: forget it (a Cluster has 16 384 slots).
            if state.in_flight == 0 && state.queue.is_empty() {
                lanes.remove(&lane);
            }
        }
    }
}

/// Says "done" however the call ends (a panic included), or partial calls of its lane
/// would wait for it forever.
struct Done(mpsc::UnboundedSender<Event>, Lane);

impl Drop for Done {
    fn drop(&mut self) {
        let _ = self.0.send(Event::Done(self.1));
    }
}

/// One call for `jobs`; hands each its answer, then says it is done.
async fn call(
    conn: Arc<Conn>,
    script: Arc<Script>,
    slack_ms: u64,
    mut jobs: Vec<Job>,
    _done: Done,
) {
    let mut keys = Vec::with_capacity(jobs.iter().map(|j| j.keys.len()).sum());
    for job in &mut jobs {
        keys.append(&mut job.keys);
    }
    let chains: Vec<(ScriptMode, &[u64])> = jobs.iter().map(|j| (j.mode, &j.checks[..])).collect();
    let answers = send(&conn, &script, slack_ms, &keys, &chains).await;
    drop(chains);
    for (job, answer) in jobs.into_iter().zip(answers) {
        let _ = job.reply.send(answer);
    }
}

/// Sends `chains` (each: its mode and four numbers per check; their keys one after another
/// in `keys`) in one call of the chain script: an answer per chain, in order. When the call
/// fails, each chain gets its error.
pub(super) async fn send(
    conn: &Conn,
    script: &Script,
    slack_ms: u64,
    keys: &[String],
    chains: &[(ScriptMode, &[u64])],
) -> Vec<BatchAnswer> {
    let then = chains.iter().map(|(_, checks)| 2 + checks.len()).sum();
    let mut args = head(slack_ms, chains.len(), then);
    for (mode, checks) in chains {
        push_chain(&mut args, *mode, checks);
    }
    let inv = Invocation {
        script,
        code: CHAIN_LUA,
        keys,
        args: &args,
    };
    let each = |e: &dyn Fn() -> StoreError| chains.iter().map(|_| Err(e())).collect();
    match conn.invoke::<Value>(&inv).await {
        Ok(v) => match decode(&v, chains.len()) {
            Ok((now, answers)) => answers
                .into_iter()
                .map(|a| a.map(|(ds, gs)| (now, ds, gs)).ok_or_else(refused_chain))
                .collect(),
            Err(_) => each(&bad_answer),
        },
        Err(e) => each(&|| store_error(e.clone())),
    }
}
