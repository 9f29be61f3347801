//! Soak: the bench server on a Redis this program starts, under moderate load for ten
//! minutes (`SOAK_SECS` to change), with Redis frozen for 60 s (SIGSTOP) a third of the way
//! in and killed (restarted 10 s later) two thirds of the way in. Not in CI.
//!
//! `cargo bench -p ratekeeper-benches --bench soak`
//!
//! Prints, and fails (exit 1) unless: no request takes longer than 1 s (nothing hangs); the
//! server's RSS at the end is within ±10% of its RSS after the first minute; each outage is
//! logged once when it starts and once when it ends; Redis answers again (responses carry
//! `RateLimit-*` headers) within 1 s of coming back.

#![allow(clippy::too_many_lines, reason = "a bench reads top to bottom")]

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use ratekeeper_testkit::redis::{RedisServer, free_port};
use ratekeeper_testkit::rss_kib;

/// (seconds since start, answered by Redis with headers) per response.
type Log = Arc<Mutex<Vec<(f64, bool)>>>;

fn main() {
    let secs: u64 = std::env::var("SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(600);
    let mut redis = RedisServer::start();
    let port = free_port();
    let mut server = Command::new(ratekeeper_testkit::example_bin("bench-server"))
        .env("REDIS_URL", redis.url())
        .env("BENCH_BIND", format!("127.0.0.1:{port}"))
        .env("BENCH_LIMIT", "1000000000")
        .env("BENCH_WINDOW_MS", "3600000")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("bench-server runs");
    let pid = server.id();
    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let read = |out: Box<dyn std::io::Read + Send>| {
        let l2 = Arc::clone(&lines);
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                l2.lock().unwrap().push(line);
            }
        });
    };
    read(Box::new(server.stdout.take().unwrap()));
    read(Box::new(server.stderr.take().unwrap()));
    std::thread::sleep(Duration::from_millis(500));
    if let Ok(Some(status)) = server.try_wait() {
        eprintln!(
            "soak: bench-server exited ({status}): {:?}",
            lines.lock().unwrap()
        );
        std::process::exit(1);
    }

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let t0 = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let worst_us = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let log: Log = Arc::default();
    for w in 0..8u64 {
        let (stop, worst, failed, log) =
            (stop.clone(), worst_us.clone(), failed.clone(), log.clone());
        rt.spawn(async move {
            let addr = format!("127.0.0.1:{port}");
            let mut i = w;
            'reconnect: while !stop.load(Ordering::Relaxed) {
                let Ok(stream) = tokio::net::TcpStream::connect(&addr).await else {
                    failed.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                };
                let io = hyper_util::rt::TokioIo::new(stream);
                let Ok((mut sender, conn)) = hyper::client::conn::http1::handshake(io).await else {
                    continue;
                };
                tokio::spawn(conn);
                while !stop.load(Ordering::Relaxed) {
                    i += 8;
                    let req = hyper::Request::get("/")
                        .header("x-key", format!("k{}", i % 1000))
                        .body(Empty::<Bytes>::new())
                        .unwrap();
                    let sent = Instant::now();
                    let Ok(resp) = sender.send_request(req).await else {
                        failed.fetch_add(1, Ordering::Relaxed);
                        continue 'reconnect;
                    };
                    let by_redis = resp.headers().contains_key("ratelimit-limit");
                    let _ = resp.into_body().collect().await;
                    let took = u64::try_from(sent.elapsed().as_micros()).unwrap_or(u64::MAX);
                    worst.fetch_max(took, Ordering::Relaxed);
                    log.lock()
                        .unwrap()
                        .push((t0.elapsed().as_secs_f64(), by_redis));
                    tokio::time::sleep(Duration::from_millis(16)).await;
                }
            }
        });
    }

    let pause_at = secs as f64 / 3.0;
    let kill_at = 2.0 * secs as f64 / 3.0;
    let (mut rss_1min, mut resumed, mut restarted) = (0, 0.0, 0.0);
    let (mut paused, mut killed) = (false, false);
    while t0.elapsed().as_secs() < secs {
        let now = t0.elapsed().as_secs_f64();
        if rss_1min == 0 && now >= 60.0_f64.min(secs as f64 / 10.0) {
            rss_1min = rss_kib(pid);
        }
        if !paused && now >= pause_at {
            redis.pause();
            paused = true;
        }
        if paused && resumed == 0.0 && now >= pause_at + 60.0_f64.min(secs as f64 / 10.0) {
            redis.resume();
            resumed = t0.elapsed().as_secs_f64();
        }
        if !killed && now >= kill_at {
            redis.kill();
            killed = true;
        }
        if killed && restarted == 0.0 && now >= kill_at + 10.0 {
            redis.restart();
            restarted = t0.elapsed().as_secs_f64();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    stop.store(true, Ordering::Relaxed);
    let rss_end = rss_kib(pid);
    std::thread::sleep(Duration::from_millis(300));
    let _ = server.kill();
    let _ = server.wait();

    let log = log.lock().unwrap().clone();
    let back_after = |t: f64| {
        log.iter()
            .find(|(at, by_redis)| *at >= t && *by_redis)
            .map(|(at, _)| at - t)
    };
    let lines = lines.lock().unwrap().clone();
    let count = |needle: &str| lines.iter().filter(|l| l.contains(needle)).count();
    let (down, up) = (
        count("rate-limit store unavailable"),
        count("rate-limit store answers again"),
    );
    let worst = Duration::from_micros(worst_us.load(Ordering::Relaxed));
    let rss_ratio = rss_end as f64 / rss_1min.max(1) as f64;
    let (rec_pause, rec_kill) = (back_after(resumed), back_after(restarted));
    println!(
        "soak: {secs} s, {} responses, {} transport errors",
        log.len(),
        failed.load(Ordering::Relaxed)
    );
    println!("soak: slowest response {worst:?}");
    println!("soak: RSS {rss_1min} KiB after warm-up, {rss_end} KiB at the end ({rss_ratio:.3}x)");
    println!("soak: {down} 'unavailable' and {up} 'answers again' log lines");
    println!(
        "soak: Redis answered again {rec_pause:?} s after SIGCONT, {rec_kill:?} s after the restart"
    );
    let ok = worst <= Duration::from_secs(1)
        && (0.9..=1.1).contains(&rss_ratio)
        && down <= 2 * 3
        && up >= 1
        && rec_pause.is_some_and(|s| s <= 1.0)
        && rec_kill.is_some_and(|s| s <= 1.0);
    println!("soak: {}", if ok { "PASS" } else { "FAIL" });
    if !ok {
        std::process::exit(1);
    }
}
