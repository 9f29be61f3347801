//! quiz-night as a real process: uploads that are never finished (a 2 MB body held at its
//! last byte) to a route that must not buffer them, by hundreds at once. The admin refuses
//! an unauthenticated one from its head (401) and the sign-in reads 1 KiB at most (413),
//! so the server's memory stays where it was: measured from its resident set.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Barrier};
use std::time::Duration;

mod common;

use common::Quiz;

const BODY: usize = 2 * 1024 * 1024;

/// `n` uploads of `head` with a [`BODY`]-byte body, all held at the last byte at once:
/// the server's RSS (MiB) before, while held, and after they closed; the statuses read.
fn held_uploads(quiz: &Quiz, n: usize, head: &str) -> (f64, f64, f64, Vec<u16>) {
    assert!(quiz.healthz());
    let before = quiz.rss_mib();
    let held = Arc::new(Barrier::new(n + 1));
    let answered = Arc::new(Barrier::new(n + 1));
    let threads: Vec<_> = (0..n)
        .map(|_| {
            let (addr, head) = (quiz.addr.clone(), head.to_owned());
            let (held, answered) = (held.clone(), answered.clone());
            std::thread::spawn(move || {
                let mut s = TcpStream::connect(&addr).unwrap();
                s.set_write_timeout(Some(Duration::from_secs(2))).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                let req = format!(
                    "{head} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
                     Content-Length: {BODY}\r\n\r\n"
                );
                let mut ok = s.write_all(req.as_bytes()).is_ok();
                let chunk = vec![b' '; 64 * 1024];
                let mut sent = 0;
                // All but the last byte (a server that stops reading blocks the writes:
                // the time-out ends them).
                while ok && sent < BODY - 1 {
                    let n = chunk.len().min(BODY - 1 - sent);
                    ok = s.write_all(&chunk[..n]).is_ok();
                    sent += n;
                }
                held.wait();
                let mut status = [0u8; 12];
                let code = s
                    .read_exact(&mut status)
                    .ok()
                    .and_then(|()| std::str::from_utf8(&status[9..12]).ok()?.parse().ok())
                    .unwrap_or(0);
                answered.wait();
                code
            })
        })
        .collect();
    held.wait();
    std::thread::sleep(Duration::from_millis(300));
    let peak = quiz.rss_mib();
    answered.wait();
    let codes: Vec<u16> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    std::thread::sleep(Duration::from_millis(500));
    let after = quiz.rss_mib();
    assert!(quiz.healthz(), "the server still serves");
    (before, peak, after, codes)
}

/// 250 unauthenticated `PUT /admin/api/access` of 2 MB each, then 100 sign-ins of 2 MB:
/// the server's resident set grows by a few MB at most (it grew by ~480 MB and ~200 MB
/// when the bodies were buffered before the token was checked).
#[test]
fn held_uploads_leave_the_servers_memory_where_it_was() {
    let quiz = Quiz::start();
    let (before, peak, after, codes) = held_uploads(&quiz, 250, "PUT /admin/api/access");
    println!(
        "admin uploads: RSS {before:.1} MiB before, {peak:.1} held, {after:.1} after; \
         401 read on {} of 250 (the rest reset by the server's close)",
        codes.iter().filter(|&&c| c == 401).count()
    );
    assert!(codes.iter().all(|&c| c == 401 || c == 0), "{codes:?}");
    assert!(peak - before < 24.0, "{before} -> {peak} MiB while held");
    assert!(after - before < 12.0, "{before} -> {after} MiB after");

    let (before, peak, after, codes) = held_uploads(&quiz, 100, "POST /auth/sign-in");
    println!(
        "sign-in uploads: RSS {before:.1} MiB before, {peak:.1} held, {after:.1} after; \
         413 read on {} of 100",
        codes.iter().filter(|&&c| c == 413).count()
    );
    assert!(codes.iter().all(|&c| c == 413 || c == 0), "{codes:?}");
    assert!(peak - before < 16.0, "{before} -> {peak} MiB while held");
    assert!(after - before < 12.0, "{before} -> {after} MiB after");
}
