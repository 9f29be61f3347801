//! A flood of fresh keys against the release `quiz-night` (in-memory store): 2.1 M fresh
//! `x-participant-id`s on `/poll` (`FLOOD_KEYS` to change), from 4 096 addresses behind a
//! trusted proxy (so the global guard admits them). Not in CI: `scripts/key-flood.sh`.
//!
//! Before the flood: a participant at its poll limit, an address at its sign-in limit, an
//! account with five failures. Prints the rate, the server's RSS before and after, and
//! fails (exit 1) unless after the flood the participant's count is still there (refused,
//! or — the poll window slides over 60 s and the flood takes most of a minute — admitted
//! with fewer left than a fresh key's 19), the address is still refused and the account's
//! next failure is still held.

mod quiz;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use ratekeeper_testkit::rss_kib;

type Sender = hyper::client::conn::http1::SendRequest<Full<Bytes>>;

async fn connect(port: u16) -> Sender {
    let stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("quiz-night answers");
    let io = hyper_util::rt::TokioIo::new(stream);
    let (sender, conn) = hyper::client::conn::http1::handshake(io).await.unwrap();
    tokio::spawn(conn);
    sender
}

/// Sends one request; its status, whether it was held (`Server-Timing`) and what its
/// `RateLimit-Remaining` says.
async fn send(
    s: &mut Sender,
    method: &str,
    path: &str,
    headers: &[(&str, String)],
    body: &str,
) -> (u16, bool, Option<u64>) {
    let mut b = hyper::Request::builder()
        .method(method)
        .uri(path)
        .header("host", "quiz");
    for (k, v) in headers {
        b = b.header(*k, v);
    }
    s.ready().await.expect("the connection is ready");
    let resp = s
        .send_request(b.body(Full::new(Bytes::from(body.to_owned()))).unwrap())
        .await
        .expect("an answer");
    let held = resp.headers().contains_key("server-timing");
    let remaining = resp
        .headers()
        .get("ratelimit-remaining")
        .and_then(|v| v.to_str().ok()?.parse().ok());
    let status = resp.status().as_u16();
    let _ = resp.into_body().collect().await;
    (status, held, remaining)
}

fn main() {
    let keys: u64 = std::env::var("FLOOD_KEYS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2_100_000);
    let (mut server, port) = quiz::start(None);
    let pid = server.id();
    let rt = quiz::runtime();
    let ok = rt.block_on(async move {
        let mut s = connect(port).await;
        let poll = |who: String, ip: String| vec![("x-participant-id", who), ("x-forwarded-for", ip)];
        for _ in 0..20 {
            send(&mut s, "GET", "/api/games/g1/poll", &poll("eve".into(), "198.51.100.1".into()), "").await;
        }
        let sign_in = |i: u32| format!("{{\"email\":\"u{i}@example.com\",\"password\":\"guess\"}}");
        for i in 0..20 {
            send(&mut s, "POST", "/auth/sign-in", &[("x-forwarded-for", "198.51.100.2".into())], &sign_in(i)).await;
        }
        let demo = "{\"email\":\"demo@example.com\",\"password\":\"guess\"}";
        for i in 0..5 {
            send(&mut s, "POST", "/auth/sign-in", &[("x-forwarded-for", format!("198.51.100.{}", 10 + i))], demo).await;
        }
        let rss_before = rss_kib(pid);
        let t0 = Instant::now();
        let next = Arc::new(AtomicU64::new(0));
        let refused = Arc::new(AtomicU64::new(0));
        let mut workers = Vec::new();
        for _ in 0..32 {
            let (next, refused) = (next.clone(), refused.clone());
            workers.push(tokio::spawn(async move {
                let mut s = connect(port).await;
                loop {
                    let n = next.fetch_add(1, Ordering::Relaxed);
                    if n >= keys {
                        break;
                    }
                    let ip = format!("10.0.{}.{}", (n % 4_096) >> 8, n & 0xff);
                    let h = [("x-participant-id", format!("flood-{n}")), ("x-forwarded-for", ip)];
                    if send(&mut s, "GET", "/api/games/g1/poll", &h, "").await.0 != 200 {
                        refused.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }));
        }
        for w in workers {
            w.await.unwrap();
        }
        let secs = t0.elapsed().as_secs_f64();
        let rss_after = rss_kib(pid);
        let eve = send(&mut s, "GET", "/api/games/g1/poll", &poll("eve".into(), "198.51.100.1".into()), "").await;
        let ip = send(&mut s, "POST", "/auth/sign-in", &[("x-forwarded-for", "198.51.100.2".into())], &sign_in(99)).await;
        let acct = send(&mut s, "POST", "/auth/sign-in", &[("x-forwarded-for", "198.51.100.30".into())], demo).await;
        println!(
            "key_flood: {keys} fresh participants in {secs:.1} s ({:.0}/s), {} not 200; RSS {} -> {} KiB",
            keys as f64 / secs,
            refused.load(Ordering::Relaxed),
            rss_before,
            rss_after
        );
        println!(
            "key_flood: after: eve {} with {:?} left (want 429, or under 19 left), address {} (want 429), account held {} (want true)",
            eve.0, eve.2, ip.0, acct.1
        );
        let eve_kept = eve.0 == 429 || eve.2.is_some_and(|left| left < 19);
        eve_kept && ip.0 == 429 && acct.1
    });
    let _ = server.kill();
    let _ = server.wait();
    if !ok {
        eprintln!("key_flood: a limit was reset by the flood");
        std::process::exit(1);
    }
}
