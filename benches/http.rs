//! HTTP load comparison, in one run: bare axum, the memory-store layer (`bench-server`'s
//! app) and tower_governor, alternating A B C for several rounds, on mostly allowed and on
//! all-refused traffic (one exhausted key).
//!
//! `cargo bench -p ratekeeper-benches --bench http`
//!
//! Each server runs on its own single-threaded runtime (one core); the load generator runs
//! on another (the other core): 32 keep-alive HTTP/1.1 connections, requests with an
//! `x-key` header from a pool of 10 000 keys (allowed) or one key (refused). Both limiters
//! send their rate-limit headers. Figures: median over rounds of requests per second, and
//! p50 / p99 latency.
//!
//! `HTTP_BENCH_ROUNDS=9` alternates nine rounds (default three), and each figure is the
//! median; the server thread's CPU per request is read from `/proc`.
//! `HTTP_BENCH_RATE=<req/s>` paces the connections (open loop, in millisecond bursts: the
//! timer's resolution) instead of sending as fast as answers come; with a Redis peer the
//! run ends with the median round trip of a `PING`.
//! `HTTP_BENCH_METRICS=1` installs a Prometheus recorder for the whole run.
//! `HTTP_BENCH_PEERS=ours,ours-redis` runs only those servers; `HTTP_BENCH_KEYS=1` puts every
//! allowed request on one key (a hot key: a global budget, one big tenant). `ours-redis-lease`
//! is `ours-redis` with the limit leased (bench-server's `BENCH_LEASE=1`: slices of up to
//! 1 000 units for 50 ms; `BENCH_LEASE=<n>` sets the largest slice).

#![allow(clippy::too_many_lines, reason = "a bench reads top to bottom")]

use ratekeeper_testkit::redis::RedisServer as Redis;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Empty};
use hyper::Request;
use hyper::body::Bytes;
use ratekeeper_examples::bench_server::serve;

mod common;
use common::Peer;
use common::cpu::ThreadCpu;

/// Keep-alive connections of the load generator (`HTTP_BENCH_CONNECTIONS` to change).
const CONNECTIONS: usize = 32;

const WARM: Duration = Duration::from_millis(500);
const MEASURE: Duration = Duration::from_secs(2);
/// Rounds of each peer, alternating (`HTTP_BENCH_ROUNDS` to change).
const ROUNDS: usize = 3;

/// A positive count from the environment variable `name`, or `default`.
fn env_count(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(default)
}

struct Running {
    addr: SocketAddr,
    /// The server thread's CPU clock.
    cpu: Option<ThreadCpu>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

fn start(kind: Peer, refused: bool, redis_url: Option<String>) -> Running {
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            addr_tx
                .send((listener.local_addr().unwrap(), ThreadCpu::current()))
                .unwrap();
            let app = kind.router(refused, redis_url.as_deref());
            tokio::select! {
                r = serve(listener, app) => r.unwrap(),
                _ = stopped => {}
            }
        });
    });
    let (addr, cpu) = addr_rx.recv().unwrap();
    Running {
        addr,
        cpu,
        stop: Some(stop),
        thread: Some(thread),
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

struct Figures {
    /// Every request sent, warm-up included.
    sent: u64,
    rps: f64,
    p50_us: u64,
    p99_us: u64,
    statuses: [u64; 2], // 2xx, 429
    /// The server thread's CPU per measured request, µs (`None` without `/proc`).
    cpu_us: Option<f64>,
}

fn load(addr: SocketAddr, refused: bool, cpu: Option<ThreadCpu>) -> Figures {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        // `HTTP_BENCH_KEYS=1`: every allowed request on one key (a hot key).
        let n = env_count("HTTP_BENCH_KEYS", 10_000);
        let keys: Arc<Vec<String>> = Arc::new(if refused {
            vec!["hot".to_owned()]
        } else {
            (0..n).map(|i| format!("key-{i:08}")).collect()
        });
        let start = Instant::now();
        let measure_from = start + WARM;
        let end = measure_from + MEASURE;
        // The server's CPU over the measured window only.
        let cpu_window = tokio::spawn(async move {
            let cpu = cpu?;
            tokio::time::sleep_until(measure_from.into()).await;
            let from = cpu.seconds()?;
            tokio::time::sleep_until(end.into()).await;
            Some(cpu.seconds()? - from)
        });
        let mut tasks = Vec::new();
        let connections = env_count("HTTP_BENCH_CONNECTIONS", CONNECTIONS);
        // `HTTP_BENCH_RATE=<req/s>`: open loop, each connection sending on a schedule.
        let every = pace(connections);
        for c in 0..connections {
            let keys = Arc::clone(&keys);
            tasks.push(tokio::spawn(async move {
                let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
                stream.set_nodelay(true).unwrap();
                let io = hyper_util::rt::TokioIo::new(stream);
                let (mut sender, conn) = hyper::client::conn::http1::handshake(io).await.unwrap();
                tokio::spawn(conn);
                let mut lat = Vec::with_capacity(100_000);
                let mut statuses = [0u64; 2];
                let mut sent = 0u64;
                let mut i = c * 7_919;
                // Connections start spread over one interval, not all at once.
                let mut due = every.map(|e| start + e.mul_f64(c as f64 / connections as f64));
                loop {
                    // Paced, a request leaves when due. Tokio's timer fires on whole
                    // milliseconds, so the requests due within one leave together, and the
                    // latency counts from when each left (at half load nothing lags behind;
                    // past the server's peak the rate itself is not kept).
                    if let (Some(d), Some(e)) = (due.as_mut(), every) {
                        tokio::time::sleep_until((*d).into()).await;
                        *d += e;
                    }
                    let t0 = Instant::now();
                    if t0 >= end {
                        break;
                    }
                    let key = &keys[i % keys.len()];
                    i += 1;
                    let req = Request::get("/")
                        .header("host", "bench")
                        .header("x-key", key.as_str())
                        .body(Empty::<Bytes>::new())
                        .unwrap();
                    sender.ready().await.unwrap();
                    let resp = sender.send_request(req).await.unwrap();
                    let status = resp.status();
                    let _ = resp.into_body().collect().await;
                    sent += 1;
                    if t0 >= measure_from {
                        lat.push(u32::try_from(t0.elapsed().as_micros()).unwrap_or(u32::MAX));
                        statuses[usize::from(status.as_u16() == 429)] += 1;
                    }
                }
                (lat, statuses, sent)
            }));
        }
        let mut lat = Vec::new();
        let mut statuses = [0u64; 2];
        let mut sent = 0;
        for t in tasks {
            let (l, s, n) = t.await.unwrap();
            sent += n;
            lat.extend(l);
            statuses[0] += s[0];
            statuses[1] += s[1];
        }
        let cpu_s = cpu_window.await.ok().flatten();
        lat.sort_unstable();
        let pct = |p: f64| u64::from(lat[((lat.len() as f64 - 1.0) * p) as usize]);
        Figures {
            sent,
            rps: lat.len() as f64 / MEASURE.as_secs_f64(),
            p50_us: pct(0.50),
            p99_us: pct(0.99),
            statuses,
            cpu_us: cpu_s.map(|s| s * 1e6 / lat.len() as f64),
        }
    })
}

/// With `HTTP_BENCH_RATE=<req/s>` (all connections together), the interval between two
/// requests of one connection; `None`: closed loop (each sends when the last answered).
fn pace(connections: usize) -> Option<Duration> {
    let rate: f64 = std::env::var("HTTP_BENCH_RATE").ok()?.parse().ok()?;
    (rate > 0.0).then(|| Duration::from_secs_f64(connections as f64 / rate))
}

/// The median round trip of a `PING` to `redis`, µs: what any Redis call adds at the least.
fn ping_p50(redis: &Redis) -> Option<f64> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .ok()?;
    rt.block_on(async {
        let client = redis::Client::open(redis.url()).ok()?;
        let mut conn = client.get_multiplexed_async_connection().await.ok()?;
        let mut lat = Vec::with_capacity(5_000);
        for _ in 0..5_000 {
            let t0 = Instant::now();
            let _: String = redis::cmd("PING").query_async(&mut conn).await.ok()?;
            lat.push(t0.elapsed().as_secs_f64() * 1e6);
        }
        Some(median(lat))
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// Script calls clients sent since the last reset (the script's inner GET/SET/TIME are
/// counted by Redis but are not round trips: only EVALSHA and EVAL count here).
fn script_calls(redis: &Redis) -> u64 {
    redis.command_calls("evalsha") + redis.command_calls("eval")
}

struct BenchRow {
    refused: bool,
    peer: Peer,
    rps: f64,
    p50: f64,
    p99: f64,
    statuses: [u64; 2],
    /// Redis commands per request sent (the Redis peer only).
    commands: Option<f64>,
    /// The server thread's CPU per request, µs (median over rounds).
    cpu_us: Option<f64>,
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else to parse.
    // `HTTP_BENCH_METRICS=1`: a Prometheus recorder for the whole run, as a service
    // exporting its metrics has (process-wide: compare ours with tower_governor within
    // a run, one run with it and one without).
    let _metrics = (std::env::var("HTTP_BENCH_METRICS").as_deref() == Ok("1")).then(|| {
        metrics_exporter_prometheus::PrometheusBuilder::new()
            .install_recorder()
            .expect("the only recorder")
    });
    // A redis-server of the bench's own on a free port (never the machine's 6379).
    let redis = Redis::try_start();
    if redis.is_none() {
        println!("redis-server not found: the Redis rows are left out");
    }
    // `HTTP_BENCH_PEERS=ours,ours-redis` runs only those (names as in the table).
    let only = std::env::var("HTTP_BENCH_PEERS").ok();
    let peers: Vec<Peer> = Peer::ALL
        .into_iter()
        .filter(|p| !p.on_redis() || redis.is_some())
        .filter(|p| {
            only.as_deref()
                .is_none_or(|o| o.split(',').any(|n| n == p.name()))
        })
        .collect();
    let mut table: Vec<BenchRow> = Vec::new();
    for refused in [false, true] {
        let mut rps = vec![Vec::new(); peers.len()];
        let mut p50 = vec![Vec::new(); peers.len()];
        let mut p99 = vec![Vec::new(); peers.len()];
        let mut st = vec![[0u64; 2]; peers.len()];
        let mut cpu = vec![Vec::new(); peers.len()];
        let (mut commands, mut sent) = (vec![0u64; peers.len()], vec![0u64; peers.len()]);
        for round in 0..env_count("HTTP_BENCH_ROUNDS", ROUNDS) {
            for (k, &peer) in peers.iter().enumerate() {
                let url = redis.as_ref().map(Redis::url);
                if let (true, Some(r)) = (peer.on_redis(), &redis) {
                    r.cli(&["FLUSHALL"]);
                    r.cli(&["CONFIG", "RESETSTAT"]);
                }
                let server = start(peer, refused, url);
                let f = load(server.addr, refused, server.cpu.clone());
                drop(server);
                if let (true, Some(r)) = (peer.on_redis(), &redis) {
                    commands[k] += script_calls(r);
                    sent[k] += f.sent;
                }
                println!(
                    "{} round {round} {}: {:.0} req/s, p50 {} µs, p99 {} µs, 2xx {} 429 {}, \
                     server CPU {} µs/req",
                    if refused { "refused" } else { "allowed" },
                    peer.name(),
                    f.rps,
                    f.p50_us,
                    f.p99_us,
                    f.statuses[0],
                    f.statuses[1],
                    f.cpu_us.map_or(String::from("-"), |c| format!("{c:.2}"))
                );
                cpu[k].extend(f.cpu_us);
                rps[k].push(f.rps);
                p50[k].push(f.p50_us as f64);
                p99[k].push(f.p99_us as f64);
                st[k][0] += f.statuses[0];
                st[k][1] += f.statuses[1];
            }
        }
        for (k, &peer) in peers.iter().enumerate() {
            table.push(BenchRow {
                refused,
                peer,
                rps: median(rps[k].clone()),
                p50: median(p50[k].clone()),
                p99: median(p99[k].clone()),
                statuses: st[k],
                cpu_us: (!cpu[k].is_empty()).then(|| median(cpu[k].clone())),
                commands: (peer.on_redis() && sent[k] > 0)
                    .then(|| commands[k] as f64 / sent[k] as f64),
            });
        }
    }
    println!();
    println!(
        "{:<9}{:<17}{:>10}{:>9}{:>9}{:>10}{:>10}{:>12}{:>10}",
        "traffic", "server", "req/s", "p50 µs", "p99 µs", "2xx", "429", "cmds/req", "CPU µs"
    );
    for r in &table {
        println!(
            "{:<9}{:<17}{:>10.0}{:>9}{:>9}{:>10}{:>10}{:>12}{:>10}",
            if r.refused { "refused" } else { "allowed" },
            r.peer.name(),
            r.rps,
            r.p50,
            r.p99,
            r.statuses[0],
            r.statuses[1],
            r.commands.map_or(String::from("-"), |c| format!("{c:.4}")),
            r.cpu_us.map_or(String::from("-"), |c| format!("{c:.2}"))
        );
    }
    let get = |refused: bool, peer: Peer| {
        table
            .iter()
            .find(|r| r.refused == refused && r.peer == peer)
            .map(|r| r.rps)
    };
    // (label, (refused, peer) ÷ (refused, peer)); a row whose peer did not run is skipped.
    let ratios = [
        (
            "allowed: ours ÷ bare axum",
            (false, Peer::Ours),
            (false, Peer::Bare),
        ),
        (
            "allowed: no-op layer ÷ bare axum",
            (false, Peer::Noop),
            (false, Peer::Bare),
        ),
        (
            "allowed: ours ÷ no-op layer",
            (false, Peer::Ours),
            (false, Peer::Noop),
        ),
        (
            "allowed: ours ÷ tower_governor",
            (false, Peer::Ours),
            (false, Peer::Governor),
        ),
        (
            "allowed: tower_governor ÷ bare axum",
            (false, Peer::Governor),
            (false, Peer::Bare),
        ),
        (
            "refused ÷ allowed, ours",
            (true, Peer::Ours),
            (false, Peer::Ours),
        ),
        (
            "refused ÷ allowed, tower_governor",
            (true, Peer::Governor),
            (false, Peer::Governor),
        ),
        (
            "allowed: ours on Redis ÷ ours in memory",
            (false, Peer::Redis),
            (false, Peer::Ours),
        ),
        (
            "refused: ours on Redis ÷ ours in memory",
            (true, Peer::Redis),
            (true, Peer::Ours),
        ),
        (
            "allowed: ours on Redis, leased ÷ ours in memory",
            (false, Peer::RedisLease),
            (false, Peer::Ours),
        ),
    ];
    println!();
    for (label, a, b) in ratios {
        if let (Some(a), Some(b)) = (get(a.0, a.1), get(b.0, b.1)) {
            println!("{label} = {:.3}", a / b);
        }
    }
    cpu_added(&table);
    if let Some(ping) = redis
        .as_ref()
        .filter(|_| peers.iter().any(|p| p.on_redis()))
        .and_then(ping_p50)
    {
        println!("PING p50 {ping:.0} µs (5 000 in a row, this run's redis-server)");
    }
    for r in table.iter().filter(|r| r.peer.on_redis()) {
        let mem = table
            .iter()
            .find(|m| m.refused == r.refused && m.peer == Peer::Ours);
        if let Some(m) = mem {
            println!(
                "{} {}: Redis adds p50 {:+.0} µs, p99 {:+.0} µs",
                if r.refused { "refused" } else { "allowed" },
                r.peer.name(),
                r.p50 - m.p50,
                r.p99 - m.p99
            );
        }
    }
    plot::write(&table);
}

/// The server CPU each limiter adds per request over bare axum, allowed and refused.
fn cpu_added(table: &[BenchRow]) {
    let cpu = |refused: bool, peer: Peer| {
        table
            .iter()
            .find(|r| r.refused == refused && r.peer == peer)
            .and_then(|r| r.cpu_us)
    };
    for refused in [false, true] {
        let Some(bare) = cpu(refused, Peer::Bare) else {
            continue;
        };
        let added = |peer| cpu(refused, peer).map(|c| c - bare);
        let traffic = if refused { "refused" } else { "allowed" };
        for peer in [Peer::Noop, Peer::Ours, Peer::Governor, Peer::Redis] {
            if let Some(a) = added(peer) {
                println!(
                    "{traffic}: server CPU {} adds over bare axum = {a:.2} µs/req",
                    peer.name()
                );
            }
        }
        if let (Some(o), Some(g)) = (added(Peer::Ours), added(Peer::Governor)) {
            println!("{traffic}: CPU added, ours ÷ tower_governor = {:.2}", o / g);
        }
    }
}

/// The plot: requests per second per server, allowed and refused traffic side by side.
#[path = "http/plot.rs"]
mod plot;
