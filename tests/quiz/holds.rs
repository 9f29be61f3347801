//! Held sign-in attempts cannot lock the owner out: one abandoned while held gives its units
//! back (it learnt nothing), and attempts kept waiting make the owner wait — one delay for
//! each attempt ahead of it — but never refuse it. Real TCP, real time (the test delays:
//! 10 ms doubling to 80 ms), on the memory store and a `redis-server`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use ratekeeper_core::{AnyStore, MemoryStore};
use ratekeeper_tests::client;
use ratekeeper_tests::redis::RedisServer;
use reqwest::StatusCode;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::{held_ms, start};

const WRONG: &str = "{\"email\":\"demo@example.com\",\"password\":\"guess\"}";
const RIGHT: &str = "{\"email\":\"demo@example.com\",\"password\":\"quiz\"}";

/// The owner's right password, from its own address.
async fn owner_signs_in(http: &reqwest::Client, s: &ratekeeper_tests::Server) -> reqwest::Response {
    http.post(s.url("/auth/sign-in"))
        .header("x-forwarded-for", "192.0.2.10")
        .body(RIGHT)
        .send()
        .await
        .unwrap()
}

/// Sends a sign-in on a raw connection from `ip` (through the trusted proxy), waits `for_`,
/// and closes the connection without reading the answer.
async fn abandon(addr: std::net::SocketAddr, ip: String, for_: Duration) {
    let mut c = TcpStream::connect(addr).await.unwrap();
    let req = format!(
        "POST /auth/sign-in HTTP/1.1\r\nhost: quiz\r\nx-forwarded-for: {ip}\r\n\
         content-type: application/json\r\ncontent-length: {}\r\n\r\n{WRONG}",
        WRONG.len()
    );
    c.write_all(req.as_bytes()).await.unwrap();
    tokio::time::sleep(for_).await;
    drop(c);
}

/// The attack: five connections a cycle, each a wrong password held and abandoned
/// before its answer, 1 025 attempts from 52 addresses (20 each: the IP limit). Before the
/// fix each stayed counted and the account's hard ceiling (1 000 in 15 minutes) refused
/// the owner's right password.
async fn abandoned(store: AnyStore) {
    let s = start(store, "127.0.0.0/8").await;
    let http = client();
    // Five failures answered at once: from now on, failures are held.
    for i in 0..5 {
        let r = http
            .post(s.url("/auth/sign-in"))
            .header("x-forwarded-for", format!("198.51.100.{i}"))
            .body(WRONG)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    }
    for cycle in 0..205 {
        let ip = format!("203.0.{}.{}", cycle / 4 / 250, cycle / 4 % 250);
        let mut conns = Vec::new();
        for _ in 0..5 {
            conns.push(tokio::spawn(abandon(
                s.addr(),
                ip.clone(),
                Duration::from_millis(4),
            )));
        }
        for c in conns {
            c.await.unwrap();
        }
    }
    // Give-backs on the Redis store run on the runtime: let them land.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let r = owner_signs_in(&http, &s).await;
    assert_eq!(r.status(), StatusCode::OK, "the owner signs in");
    // Only the five answered failures count: the owner's attempt is the 6th, held 10 ms
    // (a few more if some abandoned attempts are still being let go: never the lock-out).
    assert!(held_ms(&r) <= 500, "held {} ms", held_ms(&r));
}

#[tokio::test]
async fn abandoned_held_attempts_never_lock_the_owner_on_the_memory_store() {
    abandoned(AnyStore::Memory(MemoryStore::new())).await;
}

#[tokio::test]
async fn abandoned_held_attempts_never_lock_the_owner_on_redis() {
    let server = RedisServer::start();
    abandoned(server.store()).await;
}

/// Six attackers keep the account's line full (past its cap of five), each re-sending as
/// soon as it is answered, each attempt from the next of 60 addresses. The owner, from its
/// own address, joins the line anyway: it waits at most one delay (80 ms here, 8 s in the
/// demo) for each of the six attempts ahead and its own, and is let in.
async fn kept_open(store: AnyStore) {
    let s = Arc::new(start(store, "127.0.0.0/8").await);
    let http = client();
    let stop = Arc::new(AtomicBool::new(false));
    let next = Arc::new(AtomicU32::new(0));
    let mut attackers = Vec::new();
    for _ in 0..6 {
        let (s, http, stop, next) = (s.clone(), http.clone(), stop.clone(), next.clone());
        attackers.push(tokio::spawn(async move {
            let mut answered = 0;
            while !stop.load(Ordering::Relaxed) {
                let n = next.fetch_add(1, Ordering::Relaxed) % 60;
                let r = http
                    .post(s.url("/auth/sign-in"))
                    .header("x-forwarded-for", format!("203.0.113.{n}"))
                    .body(WRONG)
                    .send()
                    .await
                    .unwrap();
                if r.status() == StatusCode::UNAUTHORIZED {
                    answered += 1;
                }
            }
            answered
        }));
    }
    // The line fills: five failures at once, then everything is held 80 ms apart at most.
    tokio::time::sleep(Duration::from_millis(400)).await;
    let r = owner_signs_in(&http, &s).await;
    stop.store(true, Ordering::Relaxed);
    assert_eq!(r.status(), StatusCode::OK, "waited, never refused");
    let held = held_ms(&r);
    assert!(held > 0, "the owner waited in the line");
    // At most 7 delays of 80 ms, plus the timers' lag on a loaded machine.
    assert!(held <= 7 * 80 + 300, "held {held} ms: at most 7 delays");
    let mut answered = 0;
    for a in attackers {
        answered += a.await.unwrap();
    }
    assert!(answered > 5, "the attack ran: {answered} answered");
}

#[tokio::test]
async fn attempts_kept_waiting_delay_the_owner_never_refuse_it_on_the_memory_store() {
    kept_open(AnyStore::Memory(MemoryStore::new())).await;
}

#[tokio::test]
async fn attempts_kept_waiting_delay_the_owner_never_refuse_it_on_redis() {
    let server = RedisServer::start();
    kept_open(server.store()).await;
}
