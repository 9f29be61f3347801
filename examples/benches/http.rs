//! HTTP load comparison, in one run: bare axum, the memory-store layer (`bench-server`'s
//! app) and tower_governor, alternating A B C for several rounds, on mostly allowed and on
//! all-refused traffic (one exhausted key).
//!
//! `cargo bench -p rate-limit-examples --bench http`
//!
//! Each server runs on its own single-threaded runtime (one core); the load generator runs
//! on another (the other core): 32 keep-alive HTTP/1.1 connections, requests with an
//! `x-key` header from a pool of 10 000 keys (allowed) or one key (refused). Both limiters
//! send their rate-limit headers. Figures: median over rounds of requests per second, and
//! p50 / p99 latency.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Empty};
use hyper::Request;
use hyper::body::Bytes;
use rate_limit_examples::bench_server::serve;

mod common;
use common::Peer;

const CONNECTIONS: usize = 32;
const WARM: Duration = Duration::from_millis(500);
const MEASURE: Duration = Duration::from_secs(2);
const ROUNDS: usize = 3;

struct Running {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

fn start(kind: Peer, refused: bool) -> Running {
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            addr_tx.send(listener.local_addr().unwrap()).unwrap();
            let app = kind.router(refused);
            tokio::select! {
                r = serve(listener, app) => r.unwrap(),
                _ = stopped => {}
            }
        });
    });
    Running {
        addr: addr_rx.recv().unwrap(),
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
    rps: f64,
    p50_us: u64,
    p99_us: u64,
    statuses: [u64; 2], // 2xx, 429
}

fn load(addr: SocketAddr, refused: bool) -> Figures {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let keys: Arc<Vec<String>> = Arc::new(if refused {
            vec!["hot".to_owned()]
        } else {
            (0..10_000).map(|i| format!("key-{i:08}")).collect()
        });
        let start = Instant::now();
        let measure_from = start + WARM;
        let end = measure_from + MEASURE;
        let mut tasks = Vec::new();
        for c in 0..CONNECTIONS {
            let keys = Arc::clone(&keys);
            tasks.push(tokio::spawn(async move {
                let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
                stream.set_nodelay(true).unwrap();
                let io = hyper_util::rt::TokioIo::new(stream);
                let (mut sender, conn) = hyper::client::conn::http1::handshake(io).await.unwrap();
                tokio::spawn(conn);
                let mut lat = Vec::with_capacity(100_000);
                let mut statuses = [0u64; 2];
                let mut i = c * 7_919;
                loop {
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
                    if t0 >= measure_from {
                        lat.push(u32::try_from(t0.elapsed().as_micros()).unwrap_or(u32::MAX));
                        statuses[usize::from(status.as_u16() == 429)] += 1;
                    }
                }
                (lat, statuses)
            }));
        }
        let mut lat = Vec::new();
        let mut statuses = [0u64; 2];
        for t in tasks {
            let (l, s) = t.await.unwrap();
            lat.extend(l);
            statuses[0] += s[0];
            statuses[1] += s[1];
        }
        lat.sort_unstable();
        let pct = |p: f64| u64::from(lat[((lat.len() as f64 - 1.0) * p) as usize]);
        Figures {
            rps: lat.len() as f64 / MEASURE.as_secs_f64(),
            p50_us: pct(0.50),
            p99_us: pct(0.99),
            statuses,
        }
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else to parse.
    let kinds = Peer::ALL;
    let mut table: Vec<(bool, Peer, f64, u64, u64, [u64; 2])> = Vec::new();
    for refused in [false, true] {
        let mut rps = vec![Vec::new(); 3];
        let mut p50 = vec![Vec::new(); 3];
        let mut p99 = vec![Vec::new(); 3];
        let mut st = [[0u64; 2]; 3];
        for round in 0..ROUNDS {
            for (k, &kind) in kinds.iter().enumerate() {
                let server = start(kind, refused);
                let f = load(server.addr, refused);
                drop(server);
                println!(
                    "{} round {round} {kind:?}: {:.0} req/s, p50 {} µs, p99 {} µs, 2xx {} 429 {}",
                    if refused { "refused" } else { "allowed" },
                    f.rps,
                    f.p50_us,
                    f.p99_us,
                    f.statuses[0],
                    f.statuses[1]
                );
                rps[k].push(f.rps);
                p50[k].push(f.p50_us as f64);
                p99[k].push(f.p99_us as f64);
                st[k][0] += f.statuses[0];
                st[k][1] += f.statuses[1];
            }
        }
        for (k, &kind) in kinds.iter().enumerate() {
            table.push((
                refused,
                kind,
                median(rps[k].clone()),
                median(p50[k].clone()) as u64,
                median(p99[k].clone()) as u64,
                st[k],
            ));
        }
    }
    println!();
    println!(
        "{:<9}{:<10}{:>12}{:>10}{:>10}{:>12}{:>12}",
        "traffic", "server", "req/s", "p50 µs", "p99 µs", "2xx", "429"
    );
    for (refused, kind, rps, p50, p99, st) in &table {
        println!(
            "{:<9}{:<10}{:>12.0}{:>10}{:>10}{:>12}{:>12}",
            if *refused { "refused" } else { "allowed" },
            format!("{kind:?}"),
            rps,
            p50,
            p99,
            st[0],
            st[1]
        );
    }
    let get = |refused: bool, kind: Peer| {
        table
            .iter()
            .find(|r| r.0 == refused && r.1 == kind)
            .unwrap()
            .2
    };
    println!();
    println!(
        "allowed: ours ÷ bare axum = {:.3}",
        get(false, Peer::Ours) / get(false, Peer::Bare)
    );
    println!(
        "allowed: ours ÷ tower_governor = {:.3}",
        get(false, Peer::Ours) / get(false, Peer::Governor)
    );
    println!(
        "refused ÷ allowed, ours = {:.3}",
        get(true, Peer::Ours) / get(false, Peer::Ours)
    );
    println!(
        "refused ÷ allowed, tower_governor = {:.3}",
        get(true, Peer::Governor) / get(false, Peer::Governor)
    );
}
