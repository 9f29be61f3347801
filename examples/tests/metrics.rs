//! quiz-night with `QUIZ_METRICS=1`, as a real process over TCP: after allowed, limited,
//! held and store-down requests, `/metrics` on its own listener shows each series with
//! the right value — on process memory and on a real `redis-server`.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use ratekeeper_testkit::redis::RedisServer;

mod common;

struct Quiz {
    child: Child,
    app: String,
    metrics: String,
}

impl Quiz {
    fn start(redis: Option<&str>) -> Self {
        // Port 0 for both listeners: the server says which ports it was given (ports picked
        // free beforehand can be taken by another test's server first).
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_quiz-night"));
        cmd.env("QUIZ_BIND", "127.0.0.1:0")
            .env("QUIZ_METRICS", "1")
            .env("QUIZ_METRICS_BIND", "127.0.0.1:0")
            .env_remove("REDIS_URL")
            .env_remove("REDIS_CLUSTER")
            .env_remove("REDIS_SENTINEL")
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        if let Some(url) = redis {
            cmd.env("REDIS_URL", url);
        }
        let mut child = cmd.spawn().expect("quiz-night starts");
        let said = common::said_until_listening(&mut child);
        let app = common::address_after(&said, "listening on http://").expect("the app's address");
        // The log names the metrics listener's own port (scraped below), not the 0 asked for.
        let metrics = common::address_after(&said, "metrics on http://").expect("{said}");
        assert!(
            !metrics.ends_with(":0") && said.contains(&format!("{metrics}/metrics")),
            "{said}"
        );
        Self {
            child,
            app,
            metrics,
        }
    }

    /// `method path` with `headers` and `body`: the status.
    fn send(&self, method: &str, path: &str, headers: &[&str], body: &str) -> u16 {
        let (status, _) = http(&self.app, method, path, headers, body);
        status
    }

    fn poll(&self, who: &str) -> u16 {
        self.send(
            "GET",
            "/api/games/g1/poll",
            &[&format!("x-participant-id: {who}")],
            "",
        )
    }

    /// The scrape: every sample line.
    fn scrape(&self) -> String {
        let (status, text) = http(&self.metrics, "GET", "/metrics", &[], "");
        assert_eq!(status, 200);
        text
    }
}

impl Drop for Quiz {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn http(addr: &str, method: &str, path: &str, headers: &[&str], body: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for h in headers {
        req.push_str(h);
        req.push_str("\r\n");
    }
    req.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    s.write_all(req.as_bytes()).unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).unwrap();
    let status = resp[9..12].parse().unwrap();
    let body = resp
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_owned();
    (status, body)
}

/// The value of `name` whose labels include every one of `labels` (`k="v"`).
fn sample(text: &str, name: &str, labels: &[&str]) -> Option<f64> {
    text.lines().find_map(|line| {
        let (series, value) = line.rsplit_once(' ')?;
        let rest = series.strip_prefix(name)?;
        (rest.is_empty() || rest.starts_with('{'))
            .then_some(())
            .filter(|()| labels.iter().all(|l| rest.contains(l)))?;
        value.parse().ok()
    })
}

fn decisions(text: &str, limit: &str, outcome: &str) -> f64 {
    let (l, o) = (
        format!("limit=\"{limit}\""),
        format!("outcome=\"{outcome}\""),
    );
    sample(text, "rate_limit_decisions_total", &[&l, &o]).unwrap_or(0.0)
}

/// 21 polls (20 allowed, the 21st limited), and 6 failed sign-ins of one account (the 6th
/// held 1 s, then answered).
fn allowed_limited_and_held(quiz: &Quiz) {
    let polls: Vec<u16> = (0..21).map(|_| quiz.poll("ada")).collect();
    assert_eq!(polls.iter().filter(|s| **s == 200).count(), 20, "{polls:?}");
    assert_eq!(polls[20], 429);
    for _ in 0..6 {
        let status = quiz.send(
            "POST",
            "/auth/sign-in",
            &["content-type: application/json"],
            r#"{"email":"grace@example.com","password":"wrong"}"#,
        );
        assert_eq!(status, 401);
    }
    let text = quiz.scrape();
    assert_eq!(decisions(&text, "poll", "allowed"), 20.0, "{text}");
    assert_eq!(decisions(&text, "poll", "limited"), 1.0);
    // Near the limit: 4 of 20 left or fewer, after the 16th to the 20th poll.
    let near = sample(&text, "rate_limit_near_limit_total", &["limit=\"poll\""]);
    assert_eq!(near, Some(5.0), "{text}");
    assert_eq!(decisions(&text, "sign-in-account", "held"), 1.0, "{text}");
    assert_eq!(decisions(&text, "sign-in-account", "allowed"), 5.0);
    // Every route passes the global guard: 21 polls and 6 sign-ins.
    assert_eq!(decisions(&text, "global-ip", "allowed"), 27.0);
}

#[test]
fn quiz_night_serves_its_metrics_on_memory() {
    let quiz = Quiz::start(None);
    allowed_limited_and_held(&quiz);
    let text = quiz.scrape();
    // Checks answered in process memory are not timed.
    assert_eq!(
        sample(&text, "rate_limit_store_seconds_count", &[]),
        None,
        "{text}"
    );
    assert_eq!(sample(&text, "rate_limit_store_errors_total", &[]), None);
}

#[test]
fn quiz_night_serves_its_metrics_on_redis_and_while_it_is_down() {
    let mut redis = RedisServer::start();
    let quiz = Quiz::start(Some(&redis.url()));
    allowed_limited_and_held(&quiz);
    // Each layer's store call timed: 21 polls through two layers, 6 sign-ins through one.
    let text = quiz.scrape();
    let timed = sample(
        &text,
        "rate_limit_store_seconds_count",
        &["store=\"redis\""],
    );
    assert!(timed.is_some_and(|n| n >= 40.0), "{text}");

    // Redis gone: polls are let through (the poll rule's policy is open), the global
    // guard counts in memory; each is a store error.
    redis.kill();
    for _ in 0..3 {
        assert_eq!(quiz.poll("bob"), 200);
    }
    let text = quiz.scrape();
    let errors: f64 = text
        .lines()
        .filter(|l| l.starts_with("rate_limit_store_errors_total{"))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum();
    assert!(errors >= 3.0, "{text}");
    let fallback = |limit: &str, policy: &str| {
        let (l, p) = (format!("limit=\"{limit}\""), format!("policy=\"{policy}\""));
        sample(&text, "rate_limit_fallbacks_total", &[&l, &p]).unwrap_or(0.0)
    };
    assert_eq!(fallback("poll", "open"), 3.0, "{text}");
    assert_eq!(fallback("global-ip", "memory"), 3.0, "{text}");
}
