//! Twenty pile-ups of held sign-in attempts against the release `quiz-night` (in-memory
//! store) run under `ulimit -n 1024`: each pile-up opens 1 500 connections, each a wrong
//! password on one of 300 accounts that already have five failures (so every attempt is
//! held or turned away), from 1 500 addresses reused by every pile-up (so the store's keys
//! stay the same), and closes those still waiting 1.5 s later. Not in CI:
//! `scripts/pileups.sh`.
//!
//! Prints, per pile-up, how many were answered before the close, the time a right password
//! and `/healthz` took in the middle of it, and the server's RSS after it cleared; fails
//! (exit 1) unless the RSS plateaus: the highest after the last five pile-ups within 5% of
//! the highest after the five before.

mod quiz;

use std::time::{Duration, Instant};

use ratekeeper_testkit::rss_kib;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn request(ip: &str, body: &str, path: &str) -> String {
    format!(
        "POST {path} HTTP/1.1\r\nhost: quiz\r\nx-forwarded-for: {ip}\r\n\
         content-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// One request on its own connection; the time to the first byte of the answer.
async fn timed(port: u16, raw: String) -> Duration {
    let t = Instant::now();
    let mut c = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    c.write_all(raw.as_bytes()).await.unwrap();
    let mut buf = [0u8; 64];
    let _ = c.read(&mut buf).await;
    t.elapsed()
}

const PILEUPS: u32 = 20;

fn main() {
    let (mut server, port) = quiz::start(Some(1_024));
    let pid = server.id();
    let rt = quiz::runtime();
    let wrong = |a: u32| format!("{{\"email\":\"a{a}@example.com\",\"password\":\"guess\"}}");
    let series = rt.block_on(async {
        // Five failures on each of 300 accounts, each from its own address.
        for a in 0..300u32 {
            for k in 0..5u32 {
                let ip = format!("10.200.{}.{}", a >> 8, (a & 0xff) ^ (k << 5));
                timed(port, request(&ip, &wrong(a), "/auth/sign-in")).await;
            }
        }
        let mut series = Vec::new();
        for p in 0..PILEUPS {
            let mut conns = Vec::new();
            for i in 0..1_500u32 {
                // 1 500 addresses, each once a pile-up: 20 attempts over the twenty, the
                // sign-in IP limit, so no pile-up adds keys to the store.
                let ip = format!("10.1.{}.{}", i >> 8, i & 0xff);
                let raw = request(&ip, &wrong(i % 300), "/auth/sign-in");
                conns.push(tokio::spawn(async move {
                    let Ok(mut c) = TcpStream::connect(("127.0.0.1", port)).await else {
                        return false;
                    };
                    let _ = c.write_all(raw.as_bytes()).await;
                    let mut buf = [0u8; 64];
                    // Answered (a 429 at once) or still held at the close.
                    matches!(
                        tokio::time::timeout(Duration::from_millis(1_500), c.read(&mut buf)).await,
                        Ok(Ok(n)) if n > 0
                    )
                }));
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
            let right = timed(
                port,
                request(
                    &format!("192.0.2.{p}"),
                    "{\"email\":\"demo@example.com\",\"password\":\"quiz\"}",
                    "/auth/sign-in",
                ),
            )
            .await;
            let health = timed(port, "GET /healthz HTTP/1.1\r\nhost: quiz\r\n\r\n".into()).await;
            let mut answered = 0;
            for c in conns {
                answered += u32::from(c.await.unwrap());
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
            let rss = rss_kib(pid);
            println!(
                "pileups: {}: 1 500 sent, {answered} answered before the close; right password {} ms, /healthz {} ms; RSS {rss} KiB",
                p + 1,
                right.as_millis(),
                health.as_millis()
            );
            series.push(rss);
        }
        series
    });
    let _ = server.kill();
    let _ = server.wait();
    // A plateau: the last five pile-ups' highest RSS within 5% of the five before (the
    // store's sign-in logs still grow their capacity, 8 -> 16 -> 32 entries, until 20).
    let before = series[10..15].iter().max().copied().unwrap_or(0);
    let last = series[15..].iter().max().copied().unwrap_or(0);
    println!("pileups: highest RSS after pile-ups 11-15 and 16-20: {before} and {last} KiB");
    if last * 100 > before * 105 {
        eprintln!("pileups: RSS still grows: no plateau");
        std::process::exit(1);
    }
}
