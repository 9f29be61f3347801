//! The Redis path against the peers that do the same job, side by side in one process on
//! one `redis-server` of its own: ours (the Redis store), a minimal Lua script (`EVALSHA` of
//! `INCR` + `EXPIRE`, the same redis crate: the floor) and throttle-kit (GCRA on Redis).
//! limitador is not here yet: its Redis storages need its RocksDB feature to build.
//!
//! Five workloads, nothing refused, each a minute's quota of 1 000 000 over 10 000 uniform
//! keys: `one` fixed window; a `chain`, per user then per IP (10 000 users, 1 000
//! addresses, ten users each; 1 000 000 and 10 000 000 per 60 s); a `sliding` window; a
//! sliding `log`; a token `bucket`. Each against its minimal form on Redis (`minimal.rs`:
//! `INCR` + `EXPIRE`; for the chain the minimal all-or-nothing script, `GET` both, then
//! `INCR` + `EXPIRE` both; two counters; a sorted set; one GCRA value). throttle-kit (GCRA)
//! runs the fixed window, the chain and the bucket: for the chain it checks the user, then
//! the address (two calls, not all-or-nothing: a refusal by the address still charges the
//! user). Each case runs `SECS` seconds (default 20) at 1, 8 and 32
//! tasks, the peers interleaved, `REPS` repetitions (default 3); printed per case: checks/s, client CPU per
//! check (this process), Redis CPU per check (`/proc/PID/stat` of the server), p50/p99, and
//! commands per check (`INFO commandstats`, which also counts the commands a script runs
//! inside Redis); then each figure's median over the repetitions as a ratio to ours, with
//! the scatter (min–max of the ratios). A last run counts over-admission: a limit of 100,
//! 32 tasks, 10 keys: what each peer admitted per key.
//!
//! `cargo bench --manifest-path peers/Cargo.toml` runs `one` and `chain`; `WORKLOADS=` names
//! the ones to run (`one,chain,sliding,log,bucket`); run one a time to keep each run under
//! ten minutes (`SECS=5 REPS=1` for a quick look).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ratekeeper_core::{Chain, Limit, Principal, RedisStore, Store};
use ratekeeper_testkit::redis::RedisServer;

#[path = "minimal.rs"]
mod minimal;

/// What a run checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Workload {
    One,
    Chain,
    Sliding,
    Log,
    Bucket,
}

impl Workload {
    fn parse(name: &str) -> Self {
        match name.trim() {
            "one" => Self::One,
            "chain" => Self::Chain,
            "sliding" => Self::Sliding,
            "log" => Self::Log,
            "bucket" => Self::Bucket,
            other => panic!("WORKLOADS: no workload {other:?} (one, chain, sliding, log, bucket)"),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::One => "one",
            Self::Chain => "chain",
            Self::Sliding => "sliding",
            Self::Log => "log",
            Self::Bucket => "bucket",
        }
    }
}

const KEYS: u64 = 10_000;
const QUOTA: u64 = 1_000_000;
const WINDOW: u64 = 60;
/// The chain's second limit: per address, ten users to an address, ten times the quota.
const ADDRESSES: u64 = 1_000;

/// One peer, able to check a key once, or a user then their address.
#[derive(Clone)]
enum Peer {
    Ours(RedisStore, Limit, Limit),
    Floor(redis::aio::MultiplexedConnection, redis::Script, u64),
    ThrottleKit(
        Arc<throttle_kit::RedisBackend>,
        throttle_kit::Quota,
        throttle_kit::Quota,
    ),
}

/// The address of user `k` in the chain: 1 000 of them, ten users each.
fn address(k: u64) -> std::net::IpAddr {
    let a = k % ADDRESSES;
    std::net::IpAddr::from([10, 0, (a >> 8) as u8, a as u8])
}

/// A member unique to each request of the log's minimal form.
static MEMBER: AtomicU64 = AtomicU64::new(0);

impl Peer {
    /// One check of key `k` (in the chain: user `k`, then their address): whether it was
    /// admitted.
    async fn check(&self, k: u64, w: Workload) -> bool {
        match self {
            Self::Ours(store, limit, per_ip) => {
                let mut c = Chain::new().check(limit, Principal::user(format!("u{k}")));
                if w == Workload::Chain {
                    c = c.check(per_ip, Principal::ip(address(k)));
                }
                store.check(&c).await.is_ok_and(|d| d.is_allowed())
            }
            Self::Floor(con, script, quota) => {
                let mut con = con.clone();
                let mut call = script.prepare_invoke();
                match w {
                    Workload::One => call
                        .key(format!("floor:{{u{k}}}:w"))
                        .arg(*quota)
                        .arg(WINDOW),
                    Workload::Chain => call
                        .key(format!("floor:{{u{k}}}:w"))
                        .key(format!("floor:{{ip{}}}:w", k % ADDRESSES))
                        .arg(*quota)
                        .arg(*quota * 10)
                        .arg(WINDOW),
                    Workload::Sliding => {
                        let (cur, prev, weight) = minimal::windows(WINDOW);
                        call.key(format!("floor:{{u{k}}}:s:{cur}"))
                            .key(format!("floor:{{u{k}}}:s:{prev}"))
                            .arg(*quota)
                            .arg(weight)
                            .arg(WINDOW * 2)
                    }
                    Workload::Log => call
                        .key(format!("floor:{{u{k}}}:log"))
                        .arg(*quota)
                        .arg(WINDOW * 1_000_000)
                        .arg(MEMBER.fetch_add(1, Ordering::Relaxed)),
                    Workload::Bucket => {
                        let interval = WINDOW * 1_000_000 / *quota;
                        call.key(format!("floor:{{u{k}}}:b"))
                            .arg(interval)
                            .arg(interval * (*quota - 1))
                    }
                };
                let r: redis::RedisResult<i64> = call.invoke_async(&mut con).await;
                r.is_ok_and(|v| v == 1)
            }
            Self::ThrottleKit(b, q, per_ip) => {
                use throttle_kit::RateLimitBackend;
                let user = b.check(&format!("tk:u{k}"), q).await.allowed;
                if w != Workload::Chain || !user {
                    return user;
                }
                b.check(&format!("tk:ip{}", k % ADDRESSES), per_ip)
                    .await
                    .allowed
            }
        }
    }
}

async fn peers(url: &str, quota: u64, w: Workload) -> Vec<(&'static str, Peer)> {
    let window = Duration::from_secs(WINDOW);
    let limit = match w {
        Workload::One | Workload::Chain => Limit::fixed_window("peers", quota, window),
        Workload::Sliding => Limit::sliding_window("peers-sliding", quota, window),
        Workload::Log => Limit::sliding_log("peers-log", quota, window),
        Workload::Bucket => Limit::token_bucket("peers-bucket", quota, quota, window),
    }
    .unwrap();
    let per_ip = Limit::fixed_window("peers-ip", quota * 10, window).unwrap();
    let ours = RedisStore::builder(url).prefix("ours").build().unwrap();
    let client = redis::Client::open(url).unwrap();
    let con = client.get_multiplexed_async_connection().await.unwrap();
    let script = redis::Script::new(match w {
        Workload::One => minimal::FIXED,
        Workload::Chain => minimal::FIXED_CHAIN,
        Workload::Sliding => minimal::SLIDING,
        Workload::Log => minimal::LOG,
        Workload::Bucket => minimal::BUCKET,
    });
    let mut all = vec![
        ("ours", Peer::Ours(ours, limit, per_ip)),
        ("minimal Lua", Peer::Floor(con, script, quota)),
    ];
    if matches!(w, Workload::One | Workload::Chain | Workload::Bucket) {
        let tk = throttle_kit::RedisBackend::connect(url).await.unwrap();
        // GCRA: the whole window's quota as the burst, refilled over the window — at most
        // one a millisecond (throttle-kit's emission interval is whole milliseconds: a
        // shorter one is 0 and its script's `SET … PX 0` fails, which it answers by failing
        // open).
        let gcra = |quota: u64| {
            let interval = (window / u32::try_from(quota).unwrap()).max(Duration::from_millis(1));
            throttle_kit::Quota::from_parts(interval, u32::try_from(quota).unwrap())
        };
        all.push((
            "throttle-kit",
            Peer::ThrottleKit(Arc::new(tk), gcra(quota), gcra(quota * 10)),
        ));
    }
    all
}

/// This process's CPU time (user + system).
fn own_cpu() -> Duration {
    let ticks = std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|stat| {
            let rest = stat.rsplit_once(')')?.1.to_owned();
            let f: Vec<&str> = rest.split_whitespace().collect();
            Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
        })
        .unwrap_or(0);
    Duration::from_millis(ticks * 10)
}

#[derive(Debug, Clone, Copy, Default)]
struct Figures {
    per_sec: f64,
    client_us: f64,
    redis_us: f64,
    p50_us: f64,
    p99_us: f64,
    commands: f64,
}

/// `tasks` tasks checking uniform keys through `peer` for `secs` (in the chain: each user,
/// then their address).
async fn run(peer: &Peer, server: &RedisServer, tasks: usize, secs: f64, w: Workload) -> Figures {
    let stop = Arc::new(AtomicBool::new(false));
    let seed = Arc::new(AtomicU64::new(0x9e37_79b9_7f4a_7c15));
    let (cpu0, redis0, cmds0) = (own_cpu(), server.cpu_time(), commands(server));
    let t0 = Instant::now();
    let handles: Vec<_> = (0..tasks)
        .map(|_| {
            let (peer, stop, seed) = (peer.clone(), stop.clone(), seed.clone());
            tokio::spawn(async move {
                let mut lat = Vec::new();
                let mut x = seed.fetch_add(0x632b_e59b_d9b4_e019, Ordering::Relaxed) | 1;
                while !stop.load(Ordering::Relaxed) {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let t = Instant::now();
                    peer.check(x % KEYS, w).await;
                    lat.push(t.elapsed());
                }
                lat
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_secs_f64(secs)).await;
    stop.store(true, Ordering::Relaxed);
    let mut lat = Vec::new();
    for h in handles {
        lat.extend(h.await.unwrap());
    }
    let took = t0.elapsed().as_secs_f64();
    let n = lat.len().max(1) as f64;
    lat.sort_unstable();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    Figures {
        per_sec: n / took,
        client_us: us(own_cpu() - cpu0) / n,
        redis_us: us(server.cpu_time() - redis0) / n,
        p50_us: us(lat[lat.len() / 2]),
        p99_us: us(lat[lat.len() * 99 / 100]),
        commands: (commands(server) - cmds0) as f64 / n,
    }
}

fn commands(server: &RedisServer) -> u64 {
    server
        .command_stats()
        .iter()
        .filter(|(c, _)| c != "info")
        .map(|(_, n)| n)
        .sum()
}

fn median(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let secs: f64 = std::env::var("SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20.0);
    let reps: usize = std::env::var("REPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let server = RedisServer::start();
    // WORKLOADS=one,chain (the default), or any of one, chain, sliding, log, bucket.
    let workloads: Vec<Workload> = std::env::var("WORKLOADS")
        .unwrap_or_else(|_| "one,chain".into())
        .split(',')
        .map(Workload::parse)
        .collect();
    let mut all = HashMap::new();
    for &w in &workloads {
        all.insert(w, peers(&server.url(), QUOTA, w).await);
    }
    // Per (workload, peer, tasks): the figures of each repetition.
    let mut seen: HashMap<(Workload, &str, usize), Vec<Figures>> = HashMap::new();
    for rep in 0..reps {
        for &w in &workloads {
            let what = w.name();
            for tasks in [1, 8, 32] {
                for (name, peer) in &all[&w] {
                    let f = run(peer, &server, tasks, secs, w).await;
                    println!(
                        "rep {rep} {what:>7} {tasks:>2} tasks {name:>13}: {:>8.0} checks/s, client {:>5.1} µs, redis {:>5.1} µs, p50 {:>6.0} µs, p99 {:>6.0} µs, {:.2} commands/check",
                        f.per_sec, f.client_us, f.redis_us, f.p50_us, f.p99_us, f.commands
                    );
                    seen.entry((w, name, tasks)).or_default().push(f);
                }
            }
        }
    }
    println!("\nours ÷ each peer, median over {reps} repetitions (min–max):");
    for &w in &workloads {
        let what = w.name();
        for tasks in [1, 8, 32] {
            for (name, _) in all[&w].iter().skip(1) {
                let ratio = |pick: fn(&Figures) -> f64| {
                    let r: Vec<f64> = seen[&(w, "ours", tasks)]
                        .iter()
                        .zip(&seen[&(w, *name, tasks)])
                        .map(|(o, p)| pick(o) / pick(p))
                        .collect();
                    let (m, lo, hi) = median(r);
                    format!("{m:.2} ({lo:.2}–{hi:.2})")
                };
                println!(
                    "{what:>7} {tasks:>2} tasks ÷ {name:>13}: throughput {}, Redis CPU/check {}, client CPU/check {}, p50 {}",
                    ratio(|f| f.per_sec),
                    ratio(|f| f.redis_us),
                    ratio(|f| f.client_us),
                    ratio(|f| f.p50_us)
                );
            }
        }
    }
    // Over-admission: a limit of 100, 32 tasks, 10 keys, each task checking until every
    // key has refused it 20 times in a row.
    println!("\nover-admission: limit 100, 32 tasks, 10 keys; admitted per key:");
    let small = RedisServer::start();
    for (name, peer) in peers(&small.url(), 100, Workload::One).await {
        let admitted: Arc<Vec<AtomicU64>> = Arc::new((0..10).map(|_| AtomicU64::new(0)).collect());
        let handles: Vec<_> = (0..32)
            .map(|t| {
                let (peer, admitted) = (peer.clone(), admitted.clone());
                tokio::spawn(async move {
                    for i in 0..400u64 {
                        let k = (i + t) % 10;
                        if peer.check(1_000_000 + k, Workload::One).await {
                            admitted[k as usize].fetch_add(1, Ordering::Relaxed);
                        }
                    }
                })
            })
            .collect();
        for h in handles {
            h.await.unwrap();
        }
        let per_key: Vec<u64> = admitted.iter().map(|a| a.load(Ordering::Relaxed)).collect();
        println!("{name:>17}: {per_key:?}");
    }
}
