//! quiz-night's answer socket as a real process, against clients that misbehave (each
//! written on a plain socket: it pings without reading, floods without reading, never
//! answers a ping, never finishes its request's head): the server's memory stays where it
//! was, a client that does not read is closed, a flood's close arrives as 1008 (not a reset),
//! sockets under fresh participants from one IP stay within that IP's answer budget and
//! socket cap, and an idle socket and an unfinished head are closed within their timeouts.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::Quiz;
use common::ws::{PING, RawWs, TEXT};

const WS: &str = "/api/games/g1/ws";

fn socket(quiz: &Quiz, participant: &str) -> Result<RawWs, u16> {
    RawWs::connect(&quiz.addr, &format!("{WS}?participant={participant}"), "")
}

/// Four sockets send pings and never read. The kernel's buffers take the first few MB of
/// pongs; past them the server keeps at most its write buffer's bound per socket (it grew
/// by 970 MB in 5 s before), stops reading the pinger, and closes the socket once its
/// write has waited the write timeout (10 s; the idle timeout, 30 s, never comes into it).
#[test]
fn pings_never_read_leave_the_memory_where_it_was_and_the_sockets_are_closed() {
    let quiz = Quiz::start();
    assert!(quiz.healthz());
    let before = quiz.rss_mib();
    let threads: Vec<_> = (0..4)
        .map(|i| {
            let mut ws = socket(&quiz, &format!("pinger{i}")).unwrap();
            std::thread::spawn(move || pinger(&mut ws))
        })
        .collect();
    // The server's memory while they ping, sampled until every pinger is done.
    let mut peak = before;
    while !threads.iter().all(|t| t.is_finished()) {
        peak = peak.max(quiz.rss_mib());
        std::thread::sleep(Duration::from_millis(100));
    }
    let ends: Vec<(u64, Duration, Duration)> =
        threads.into_iter().map(|t| t.join().unwrap()).collect();
    println!(
        "4 sockets pinging unread: RSS {before:.1} -> {peak:.1} MiB at most; (pings, \
         the server stopped reading at, the server closed at): {ends:?}"
    );
    assert!(peak - before < 20.0, "{before} -> {peak} MiB");
    for (_, stalled, closed) in &ends {
        let after = closed.saturating_sub(*stalled);
        assert!(
            after < Duration::from_secs(25),
            "closed {after:?} after the stall"
        );
    }
    assert!(quiz.healthz(), "the server still serves");
}

/// Pings (125-byte payloads, the most a control frame holds) until a write has waited 2 s
/// (the server no longer reads), then waits, reading nothing, for the server to drop the
/// connection (seen as a reset: it drops it with this client's pings unread). Each bounded
/// at 90 s. The pings sent, and when each of the two came.
fn pinger(ws: &mut RawWs) -> (u64, Duration, Duration) {
    let start = Instant::now();
    let bound = Duration::from_secs(90);
    ws.stream
        .set_write_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    let ping = RawWs::frame_bytes(PING, &[b'p'; 125]);
    let mut sent = 0u64;
    while start.elapsed() < bound {
        match ws.stream.write_all(&ping) {
            Ok(()) => sent += 1,
            Err(_) => break,
        }
    }
    let stalled = start.elapsed();
    while start.elapsed() < bound {
        if ws.stream.take_error().ok().flatten().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    (sent, stalled, start.elapsed())
}

/// Floods of 25, 100 and 1 000 answers sent at once, nothing read until the last is sent:
/// the connection's ceiling (20 a second) closes each with 1008, and the client reads the
/// close frame (the server reads on until its close, so no reset throws it away).
#[test]
fn a_flood_sent_without_reading_is_closed_with_1008_that_the_client_reads() {
    let quiz = Quiz::start();
    for n in [25usize, 100, 1_000] {
        let mut ws = socket(&quiz, &format!("flood{n}")).unwrap();
        let mut burst = Vec::new();
        for i in 0..n {
            burst.extend(RawWs::frame_bytes(TEXT, format!("answer {i}").as_bytes()));
        }
        ws.stream.write_all(&burst).unwrap();
        let code = ws.close_code();
        println!("a flood of {n}: {code:?}");
        assert_eq!(code.unwrap(), Some(1008), "a flood of {n}");
    }
}

/// Sockets, each under a fresh participant, from one IP: their answers together stay
/// within the IP's answer budget (600 a minute, shared with `POST .../answers`), where each
/// participant's own 30 would have let 800 through.
#[test]
fn fresh_participants_from_one_ip_share_its_answer_budget() {
    let quiz = Quiz::start();
    let (mut accepted, mut refused) = (0, 0);
    for p in 0..40 {
        let mut ws = socket(&quiz, &format!("fresh{p}")).unwrap();
        assert!(ws.text().unwrap().contains("\"game\""), "the state first");
        for i in 0..20 {
            ws.send(TEXT, format!("answer {i}").as_bytes()).unwrap();
            let reply = ws.text().unwrap();
            if reply.contains("\"accepted\":true") {
                accepted += 1;
            } else {
                assert!(reply.contains("\"limit\":\"answers-ip\""), "{reply}");
                refused += 1;
            }
        }
    }
    println!(
        "40 fresh participants x 20 answers from one IP: {accepted} accepted, {refused} refused"
    );
    assert_eq!(accepted, 600);
    assert_eq!(refused, 200);
}

/// 200 sockets open at once from one IP, each a fresh participant; the 201st is refused
/// at the upgrade (429), and one more is let in once one closes.
#[test]
fn sockets_per_ip_are_capped_for_the_room() {
    let quiz = Quiz::start();
    let mut open: Vec<RawWs> = (0..200)
        .map(|p| socket(&quiz, &format!("room{p}")).unwrap())
        .collect();
    let refused = socket(&quiz, "room-extra").err();
    println!("200 sockets from one IP; the next: {refused:?}");
    assert_eq!(refused, Some(429));
    open.pop();
    // The slot comes back when the server sees the connection end: asked until it has.
    let t0 = Instant::now();
    loop {
        match socket(&quiz, "room-again") {
            Ok(_) => break,
            Err(429) if t0.elapsed() < Duration::from_secs(30) => {
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(other) => panic!("{other}"),
        }
    }
}

/// A socket that never answers the server's ping is closed with 1001 once the idle
/// timeout (30 s) has passed, the ping sent half way.
#[test]
fn an_idle_socket_is_pinged_then_closed() {
    let quiz = Quiz::start();
    let mut ws = socket(&quiz, "idle").unwrap();
    let t0 = Instant::now();
    let mut pinged = None;
    let code = loop {
        match ws.frame().unwrap() {
            (PING, _) => pinged = Some(t0.elapsed()),
            (0x8, p) => break u16::from_be_bytes([p[0], p[1]]),
            _ => {}
        }
    };
    let closed = t0.elapsed();
    println!("idle socket: pinged at {pinged:?}, closed with {code} at {closed:?}");
    assert_eq!(code, 1001);
    assert!(
        pinged.is_some_and(|p| p >= Duration::from_secs(14)),
        "{pinged:?}"
    );
    assert!(closed >= Duration::from_secs(29), "{closed:?}");
}

/// A request head never finished is closed by the server after the header-read timeout
/// (10 s); before, `axum::serve` held it for as long as the client liked.
#[test]
fn an_unfinished_request_head_is_closed_after_the_header_timeout() {
    let quiz = Quiz::start();
    let mut s = TcpStream::connect(&quiz.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: quiz\r\nX-Slow: ")
        .unwrap();
    let t0 = Instant::now();
    let mut rest = Vec::new();
    let end = s.read_to_end(&mut rest);
    let took = t0.elapsed();
    println!(
        "an unfinished head: closed after {took:?} ({} bytes answered, {end:?})",
        rest.len()
    );
    assert!(
        end.is_ok() || took < Duration::from_secs(59),
        "held for {took:?}"
    );
    assert!(
        took >= Duration::from_secs(9) && took < Duration::from_secs(30),
        "{took:?}"
    );
}
