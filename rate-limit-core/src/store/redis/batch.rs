//! Coalescing: while fewer than [`IN_FLIGHT`] calls are in flight in its lane, a check is
//! sent at once; checks that arrive while that many are in flight ride the next call
//! together, which leaves when one of them answers or as soon as it holds the maximum
//! number of chains (full calls are pipelined, so a slow network bounds latency, not
//! throughput). No timer: a check waits at most for the calls ahead of it. A lane is the
//! connection (standalone Redis, Sentinel) or, on a Cluster, a hash slot: a script's keys
//! must share one, so only chains (slot groups) of one slot share a call.
//!
//! No task of its own to route through: a check that finds a place spawns its call at
//! once, and the call that ends sends the checks that queued behind it. Each call runs on
//! a task of its own on the runtime the store was built in: a caller that gives up once
//! its call has left (its timeout, a dropped request) still has it counted, and the
//! connection lives as long as that runtime, whichever runtime a caller is on. (Calls run
//! in the caller's task, or spawned on the caller's runtime, made the connection die with
//! whichever runtime first called: quiz-night's room test, whose server runtime stops,
//! then counted fewer answers than it admitted.)
//!
//! Each chain stays atomic and all-or-nothing on its own (the script runs the chains in
//! turn and a chain with bad arguments fails alone); what the batch shares is the call:
//! one round trip, one `TIME`, one `MGET`, one `SET` per key however many chains touch it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use redis::{Script, Value};
use tokio::sync::oneshot;

use super::conn::Conn;
use super::error::{bad_answer, refused_chain, store_error};
use super::periods::{self, Cal, Periods};
use super::script::{BUCKET, FIXED, LOG, PERIOD, SLIDING};
use super::script::{
    CHAIN_LUA, Grants, Invocation, ScriptMode, WINDOW_LUA, decode, head, push_chain,
};
use super::script::{ChainAnswer, Unanswered};
use super::windows::{ServerClock, local_us};
use crate::protocol::Decision;
use crate::protocol::{StoreError, StoreErrorKind};

/// A chain's answer: the server time, its decisions, and what its leases were granted.
pub(super) type BatchAnswer = Result<(u64, Vec<Decision>, Grants), StoreError>;

/// Calls a lane keeps in flight before checks wait to share the next: two, so that Redis
/// runs one call while the client sends the next and reads the last (with one, Redis sat
/// idle between calls; three made calls smaller for no more throughput). Single 5-second
/// runs of the peers' bench at 8 and 32 tasks: one 32 900 and 69 100 checks/s, two
/// 41 900 and 92 600, three 35 100 and 81 400 (BENCHMARKS.md).
pub(super) const IN_FLIGHT: usize = 2;

struct Job {
    keys: Vec<String>,
    mode: ScriptMode,
    checks: Vec<u64>,
    periods: Periods,
    reply: oneshot::Sender<BatchAnswer>,
}

/// Which calls a chain may share: on a Cluster its slot, else the one lane.
type Lane = Option<u16>;

#[derive(Default)]
struct LaneState {
    queue: Vec<Job>,
    in_flight: usize,
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

/// What every call of a store shares: the connection, the script and the lanes.
struct Shared {
    /// The runtime the store was built in: every call runs there, so the connection (made
    /// by the first call) lives as long as that runtime, whichever runtime a caller is on.
    /// Gone (shut down): a call is dropped unsent and its callers hear "not sent".
    rt: tokio::runtime::Handle,
    conn: Arc<Conn>,
    script: Script,
    window: Script,
    clock: Arc<ServerClock>,
    slack_ms: u64,
    max: usize,
    lanes: Mutex<Lanes>,
}

impl Shared {
    fn lanes(&self) -> MutexGuard<'_, Lanes> {
        // The lanes hold counts and queued jobs, each consistent after every statement.
        self.lanes.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The coalescing of one store: lanes under a lock, no task of its own. A check whose lane
/// has a place spawns its call at once; the call that ends sends what queued behind it.
pub(super) struct Batcher {
    shared: Arc<Shared>,
    cluster: bool,
}

impl Batcher {
    /// Calls of at most `max` chains, run on the current runtime (call inside one).
    pub(super) fn new(conn: Arc<Conn>, clock: Arc<ServerClock>, slack_ms: u64, max: usize) -> Self {
        let cluster = conn.is_cluster();
        let shared = Arc::new(Shared {
            rt: tokio::runtime::Handle::current(),
            conn,
            script: Script::new(CHAIN_LUA),
            window: Script::new(WINDOW_LUA),
            clock,
            slack_ms,
            max: max.max(1),
            lanes: Mutex::new(Lanes::default()),
        });
        Self { shared, cluster }
    }

    /// Runs one chain (`checks`: four numbers per check; `periods`: its calendar quotas)
    /// in the next call.
    pub(super) async fn run(
        &self,
        keys: Vec<String>,
        mode: ScriptMode,
        checks: Vec<u64>,
        periods: Periods,
    ) -> BatchAnswer {
        let lane = if self.cluster {
            keys.first().map(|k| super::keys::hash_slot(k))
        } else {
            None
        };
        let shared = &self.shared;
        let (answer, call) = enter(shared, lane, (keys, mode, checks, periods));
        if let Some(jobs) = call {
            spawn_call(shared, lane, jobs);
        }
        answer.await.map_err(|_| gone())?
    }
}

/// Queues a chain in its lane; returns where its answer will come, and the call to send
/// now if there is one: this chain alone when the lane has a place (counted in flight), or
/// the full call it completed.
fn enter(
    shared: &Shared,
    lane: Lane,
    (keys, mode, checks, periods): (Vec<String>, ScriptMode, Vec<u64>, Periods),
) -> (oneshot::Receiver<BatchAnswer>, Option<Vec<Job>>) {
    let (reply, answer) = oneshot::channel();
    let job = Job {
        keys,
        mode,
        checks,
        periods,
        reply,
    };
    let mut lanes = shared.lanes();
    let state = lanes.entry(lane).or_default();
    if state.in_flight < IN_FLIGHT && state.queue.is_empty() {
        state.in_flight += 1;
        return (answer, Some(vec![job]));
    }
    state.queue.push(job);
    // A full call leaves at once, however many are in flight.
    let full = (state.queue.len() >= shared.max).then(|| take(state, shared.max));
    (answer, full)
}

/// Takes the next call's jobs (at most `max`) off a lane's queue and counts the call in
/// flight. A caller that gave up (its timeout, a dropped request) is not sent: it never
/// ran.
fn take(state: &mut LaneState, max: usize) -> Vec<Job> {
    let n = state.queue.len().min(max);
    let mut jobs: Vec<Job> = state.queue.drain(..n).collect();
    jobs.retain(|j| !j.reply.is_closed());
    if !jobs.is_empty() {
        state.in_flight += 1;
    }
    jobs
}

/// Sends `jobs` (already counted in flight) in one call on a task of its own, on the
/// store's runtime. That runtime shut down, the task is dropped unsent: each job's caller
/// hears "not sent".
fn spawn_call(shared: &Arc<Shared>, lane: Lane, jobs: Vec<Job>) {
    if jobs.is_empty() {
        return;
    }
    let done = Done(shared.clone(), lane);
    drop(shared.rt.spawn(call(jobs, done)));
}

/// The task is gone (its runtime shut down): nothing was sent.
fn gone() -> StoreError {
    StoreError::new(
        StoreErrorKind::NotExecuted,
        "redis: the store's connection task has stopped",
    )
}

/// A call's place in its lane: given back however the call ends (a panic, a cancelled
/// caller), then the jobs queued behind it leave, or they would wait forever.
struct Done(Arc<Shared>, Lane);

impl Drop for Done {
    fn drop(&mut self) {
        let (shared, lane) = (&self.0, self.1);
        let mut next = Vec::new();
        {
            let mut lanes = shared.lanes();
            let Some(state) = lanes.get_mut(&lane) else {
                return;
            };
            state.in_flight = state.in_flight.saturating_sub(1);
            while state.in_flight < IN_FLIGHT && !state.queue.is_empty() {
                let jobs = take(state, shared.max);
                if !jobs.is_empty() {
                    next.push(jobs);
                }
            }
            // An idle lane holds nothing: forget it (a Cluster has 16 384 slots).
            if state.in_flight == 0 && state.queue.is_empty() {
                lanes.remove(&lane);
            }
        }
        for jobs in next {
            // Counted in flight by `take`; the spawned call's guard gives the place back.
            let done = Done(shared.clone(), lane);
            drop(shared.rt.spawn(call(jobs, done)));
        }
    }
}

/// One call for `jobs`; hands each its answer, then gives its place back (`done`, dropped
/// at the end).
async fn call(mut jobs: Vec<Job>, done: Done) {
    let shared = &done.0;
    let mut keys = Vec::with_capacity(jobs.iter().map(|j| j.keys.len()).sum());
    for job in &mut jobs {
        keys.append(&mut job.keys);
    }
    let chains: Vec<Sent<'_>> = jobs
        .iter()
        .map(|j| (j.mode, &j.checks[..], &j.periods[..]))
        .collect();
    let to = To {
        conn: &shared.conn,
        script: &shared.script,
        window: &shared.window,
        clock: &shared.clock,
        slack_ms: shared.slack_ms,
    };
    let answers = send(&to, &keys, &chains).await;
    drop(chains);
    for (job, answer) in jobs.into_iter().zip(answers) {
        let _ = job.reply.send(answer);
    }
}

/// Where a call goes: the connection, the chain script, and the estimate of the server's
/// clock that names the windows' keys.
pub(super) struct To<'a> {
    pub(super) conn: &'a Conn,
    pub(super) script: &'a Script,
    /// The fast script for the common shape (`window.lua`).
    pub(super) window: &'a Script,
    pub(super) clock: &'a ServerClock,
    pub(super) slack_ms: u64,
}

/// A chain as sent: its mode, four numbers per check, its calendar quotas.
pub(super) type Sent<'a> = (ScriptMode, &'a [u64], &'a [(usize, Cal)]);

/// Sends `chains` (each: its mode, four numbers per check and its calendar quotas; their
/// keys' names one after another in `keys`, one per check) in one call of the chain script: an answer per chain,
/// in order. When the call fails, each chain gets its error. A chain whose window the keys
/// did not name (the estimate of the server's clock was off by more than a quarter window)
/// is sent once more, named from the clock the answer showed.
pub(super) async fn send(to: &To<'_>, keys: &[String], chains: &[Sent<'_>]) -> Vec<BatchAnswer> {
    let (now, answers, seen) = match one_call(to, keys, chains, None).await {
        Ok(answered) => answered,
        Err(e) => return chains.iter().map(|_| Err(e.error())).collect(),
    };
    let moved = |a: &ChainAnswer| matches!(a, Err(Unanswered::Moved));
    if !answers.iter().any(moved) {
        return answers.into_iter().map(|a| finish(now, a)).collect();
    }
    // The moved chains again, with their keys: each chain's keys are one per check.
    let (mut again_keys, mut again) = (Vec::new(), Vec::new());
    let mut at = 0;
    for (chain, a) in chains.iter().zip(&answers) {
        let n = chain.1.len() / 4;
        if moved(a) {
            again_keys.extend_from_slice(&keys[at..at + n]);
            again.push(*chain);
        }
        at += n;
    }
    // Named from this server's own time (on a Cluster, nodes' clocks may differ).
    let mut second = match one_call(to, &again_keys, &again, Some((now, seen))).await {
        Ok((now, answers, _)) => answers.into_iter().map(|a| finish(now, a)).collect(),
        Err(e) => again.iter().map(|_| Err(e.error())).collect::<Vec<_>>(),
    }
    .into_iter();
    answers
        .into_iter()
        .map(|a| {
            if moved(&a) {
                second.next().unwrap_or_else(|| Err(bad_answer()))
            } else {
                finish(now, a)
            }
        })
        .collect()
}

/// A chain's answer as a caller takes it.
fn finish(now: u64, a: ChainAnswer) -> BatchAnswer {
    match a {
        Ok((ds, gs)) => Ok((now, ds, gs)),
        Err(Unanswered::Refused) => Err(refused_chain()),
        // Moved twice: the server's clock jumps faster than the answers can follow.
        Err(Unanswered::Moved) => Err(StoreError::new(
            StoreErrorKind::NotExecuted,
            "redis: the server's window was not among the keys named, twice (its clock moved)",
        )),
    }
}

/// One call of the chain script: the server's time, an answer per chain, and when (on this
/// instance's clock) the answer came. The keys of windows are named from the estimate of
/// the server's clock, which the answer corrects, or from `from`: a server's time and when
/// this instance saw it.
async fn one_call(
    to: &To<'_>,
    names: &[String],
    chains: &[Sent<'_>],
    from: Option<(u64, u64)>,
) -> Result<(u64, Vec<ChainAnswer>, u64), Failed> {
    let sent = local_us();
    let t = match from {
        Some((server, seen)) => server.saturating_add(sent.saturating_sub(seen)),
        None => to.clock.estimate(sent),
    };
    let mut keys = Vec::with_capacity(names.len() * 2);
    let then = chains.iter().map(|(_, checks, _)| 2 + checks.len()).sum();
    let mut args = head(to.slack_ms, chains.len(), t, then);
    let mut at = 0;
    for (mode, checks, periods) in chains {
        let n = checks.len() / 4;
        push_chain(&mut args, *mode, checks);
        let from = args.len() - checks.len();
        periods::name_keys(&names[at..at + n], &mut args[from..], periods, t, &mut keys);
        at += n;
    }
    let (script, code) = if chains
        .iter()
        .all(|(mode, checks, _)| common_shape(*mode, checks))
    {
        (to.window, WINDOW_LUA)
    } else {
        (to.script, CHAIN_LUA)
    };
    let inv = Invocation {
        script,
        code,
        keys: &keys,
        args: &args,
        doubles: true,
    };
    let v = to.conn.invoke::<Value>(&inv).await.map_err(Failed::Redis)?;
    let (now, answers) = decode(&v, chains.len()).map_err(|_| Failed::BadAnswer)?;
    let received = local_us();
    to.clock.observe(now, sent, received);
    Ok((now, answers, received))
}

/// Whether a chain is of the shape `window.lua` answers: in order, every check a fixed
/// window, a sliding window, a sliding log or a token bucket with a window or interval, or
/// a calendar quota (its numbers as `push_lease` made them: the candidates are written
/// later), no lease asked.
fn common_shape(mode: ScriptMode, checks: &[u64]) -> bool {
    mode == ScriptMode::InOrder
        && checks
            .chunks_exact(4)
            .all(|c| c[0] == PERIOD || (matches!(c[0], FIXED | SLIDING | LOG | BUCKET) && c[2] > 0))
}

/// Why a call answered no chain: the same error for each.
enum Failed {
    Redis(redis::RedisError),
    BadAnswer,
}

impl Failed {
    fn error(&self) -> StoreError {
        match self {
            Self::Redis(e) => store_error(e.clone()),
            Self::BadAnswer => bad_answer(),
        }
    }
}
