//! `/healthz` while payment webhooks flood quiz-night's de-duplication, below its cap and
//! past it (1 000 000 ids, where every new id evicts the oldest): webhook throughput and
//! `/healthz` latency, the two phases in one run. Before eviction was amortized O(1), 4
//! connections of webhooks past the cap took `/healthz` from 0.43 ms to 28 ms (p50).
//!
//! `cargo bench -p ratekeeper-benches --bench dedupe_flood`
//!
//! The server (quiz-night on the memory store, 2 worker threads) and the load share the
//! machine's two cores. Webhooks come from 4 keep-alive connections, each request with a
//! fresh `x-delivery-id` and an `X-Forwarded-For` from 65 536 addresses (the server trusts
//! loopback as its proxy), so no per-IP limit refuses them; one more connection asks
//! `/healthz` in a loop. Goals (issue #12): `/healthz` p99 past the cap ≤ 2× below it;
//! webhook throughput past the cap ≥ 0.8× below it.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper::body::Bytes;
use ratekeeper_core::store::Dedupe;
use ratekeeper_core::{AnyStore, MemoryStore};
use ratekeeper_examples::StoreEnv;
use ratekeeper_examples::quiz_night::{QuizConfig, app_with_store, serve};

const FLOOD: Duration = Duration::from_secs(4);
const CONNECTIONS: usize = 4;
const CAP: u64 = 1_000_000;

async fn connect(addr: SocketAddr) -> hyper::client::conn::http1::SendRequest<Full<Bytes>> {
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.set_nodelay(true).unwrap();
    let (sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .unwrap();
    tokio::spawn(conn);
    sender
}

/// (webhooks processed per second, `/healthz` latencies in µs, sorted).
async fn phase(addr: SocketAddr, prefix: &'static str, flood: bool) -> (f64, Vec<u64>) {
    let stop = Arc::new(AtomicBool::new(false));
    let processed = Arc::new(AtomicU64::new(0));
    let mut senders = Vec::new();
    for c in 0..if flood { CONNECTIONS } else { 0 } {
        let (stop, processed) = (stop.clone(), processed.clone());
        senders.push(tokio::spawn(async move {
            let mut s = connect(addr).await;
            let mut n: u64 = c as u64;
            while !stop.load(Ordering::Relaxed) {
                let ip = format!("198.51.{}.{}", (n >> 8) & 0xff, n & 0xff);
                let req = Request::post("/webhooks/payments")
                    .header("host", "quiz")
                    .header("content-type", "application/json")
                    .header("x-forwarded-for", ip)
                    .header("x-delivery-id", format!("{prefix}-{n}"))
                    .body(Full::new(Bytes::from_static(b"{\"amount\":5}")))
                    .unwrap();
                n += CONNECTIONS as u64;
                s.ready().await.unwrap();
                let resp = s.send_request(req).await.unwrap();
                let ok = resp.status().is_success();
                let _ = resp.into_body().collect().await;
                if ok {
                    processed.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    let t0 = Instant::now();
    let mut probe = connect(addr).await;
    let mut lat = Vec::new();
    while t0.elapsed() < FLOOD {
        let req = Request::get("/healthz")
            .header("host", "quiz")
            .body(Full::new(Bytes::new()))
            .unwrap();
        let t = Instant::now();
        probe.ready().await.unwrap();
        let resp = probe.send_request(req).await.unwrap();
        assert!(resp.status().is_success());
        let _ = resp.into_body().collect().await;
        lat.push(u64::try_from(t.elapsed().as_micros()).unwrap_or(u64::MAX));
        // A health checker asks now and then, not in a tight loop.
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let elapsed = t0.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    for s in senders {
        s.await.unwrap();
    }
    lat.sort_unstable();
    (processed.load(Ordering::Relaxed) as f64 / elapsed, lat)
}

fn pct(lat: &[u64], p: usize) -> f64 {
    lat.get(lat.len() * p / 100).copied().unwrap_or(0) as f64 / 1_000.0
}

fn main() {
    let store = MemoryStore::new();
    let cfg = QuizConfig {
        store: StoreEnv::Memory,
        trusted_proxies: vec!["127.0.0.0/8".parse().unwrap()],
        sign_in_delay: None,
        ..QuizConfig::default()
    };
    let app = app_with_store(&cfg, AnyStore::Memory(store.clone())).unwrap();
    let server = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let listener = server
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    server.spawn(serve(listener, app));
    let load = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();

    let (_, quiet) = load.block_on(phase(addr, "warm", false));
    let (below_rate, below) = load.block_on(phase(addr, "below", true));
    // Up to the cap, straight into the store the app uses.
    let t0 = Instant::now();
    server.block_on(async {
        for i in 0..CAP {
            store
                .first_seen(&format!("fill-{i}"), Duration::from_secs(86_400))
                .await
                .unwrap();
        }
    });
    let filled = t0.elapsed();
    let (past_rate, past) = load.block_on(phase(addr, "past", true));

    println!("filled to the {CAP}-id cap in {filled:?}");
    println!("                          webhooks/s   /healthz p50 ms   p99 ms   probes");
    println!(
        "no flood                  {:>10}   {:>15.3}   {:>6.3}   {:>6}",
        "-",
        pct(&quiet, 50),
        pct(&quiet, 99),
        quiet.len()
    );
    for (name, rate, lat) in [
        ("below the cap", below_rate, &below),
        ("past the cap", past_rate, &past),
    ] {
        println!(
            "{name:<25} {rate:>10.0}   {:>15.3}   {:>6.3}   {:>6}",
            pct(lat, 50),
            pct(lat, 99),
            lat.len()
        );
    }
    println!(
        "past / below: webhooks {:.3} (goal >= 0.8), /healthz p99 {:.3} (goal <= 2)",
        past_rate / below_rate,
        pct(&past, 99) / pct(&below, 99)
    );
}
