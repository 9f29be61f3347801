//! The room test: a pub of phones behind one IP, all on quiz-night's answer socket; the
//! socket server becomes unreachable and every phone falls back to polling at the same
//! instant; later the socket server returns and the phones go back to it. Shared by the
//! test (a small room) and the bench that prints the figures (`--bench room`).
//!
//! Two quiz-night instances on one store, as a deployment runs them: the HTTP one (polls,
//! answers) and the socket one, run on a runtime of its own so that stopping it drops every
//! socket at once, as a crashed or unreachable socket server does.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures_util::{SinkExt, StreamExt};
use ratekeeper_core::{AnyStore, Limit, Principal, Store};
use ratekeeper_examples::quiz_night::{QuizConfig, app_with_store};
use tokio::sync::Mutex;
use tokio_tungstenite::tungstenite::Message;

use crate::{Server, client};

/// The room and its timeline.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Phones in the room.
    pub phones: usize,
    /// Of them, how many poll faster than the poll limit allows (they meet their own limit
    /// and its jittered `Retry-After`).
    pub impatient: usize,
    /// How often a phone polls while its socket is down.
    pub poll_every: Duration,
    /// How often an impatient phone polls.
    pub impatient_every: Duration,
    /// How often a polling phone tries the socket again (plus up to a second of jitter).
    pub reconnect_every: Duration,
    /// On sockets before the outage.
    pub before: Duration,
    /// The socket server unreachable.
    pub outage: Duration,
    /// After the socket server is back, until the run ends.
    pub after: Duration,
}

/// What the room measured.
#[derive(Debug, Default)]
pub struct Report {
    /// Requests refused by the global per-IP guard (`global-ip`).
    pub global_refusals: u64,
    /// Polls admitted, and refused by the phone's own poll limit.
    pub polls: u64,
    /// See `polls`.
    pub poll_refusals: u64,
    /// Phones that met their own poll limit.
    pub phones_limited: usize,
    /// The `Retry-After` values those refusals carried, in seconds (distinct ones sorted).
    pub retry_afters: Vec<u64>,
    /// Polls in the first second after the outage began (the synchronized burst).
    pub burst: u64,
    /// Seconds from the socket server's return to each phone back on a socket.
    pub back_after: Vec<f64>,
    /// Answers admitted over the socket and by `POST`.
    pub answers: u64,
    /// Participants whose stored answer and poll counts differ from what they were
    /// admitted by more than rounding (a check counted twice, or not at all).
    pub miscounted: Vec<String>,
}

impl Report {
    /// The figures, one per line.
    pub fn lines(&self, phones: usize) -> String {
        let mut back = self.back_after.clone();
        back.sort_by(f64::total_cmp);
        let q = |p: f64| {
            back.get(((back.len() as f64 - 1.0) * p) as usize)
                .copied()
                .unwrap_or(f64::NAN)
        };
        format!(
            "global-ip refusals: {}\npolls admitted: {}, refused by the phone's own limit: {} ({} phones)\n\
             Retry-After values of those refusals (s): {:?}\npolls in the first second of the outage: {}\n\
             back on sockets: {} of {phones}, after p50 {:.2} s, max {:.2} s\nanswers admitted: {}\n\
             participants miscounted: {}",
            self.global_refusals,
            self.polls,
            self.poll_refusals,
            self.phones_limited,
            self.retry_afters,
            self.burst,
            back.len(),
            q(0.5),
            q(1.0),
            self.answers,
            self.miscounted.len(),
        )
    }
}

/// quiz-night's answer socket served on a runtime of its own: stopping it drops every
/// socket, and the port refuses connections until it is served again.
struct SocketServer {
    runtime: Option<tokio::runtime::Runtime>,
}

impl SocketServer {
    fn start(addr: SocketAddr, cfg: &QuizConfig, store: AnyStore) -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a runtime");
        let app = app_with_store(cfg, store).expect("quiz-night builds");
        runtime.spawn(async move {
            let listener = loop {
                match tokio::net::TcpListener::bind(addr).await {
                    Ok(l) => break l,
                    Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
                }
            };
            let app = app.into_make_service_with_connect_info::<SocketAddr>();
            let _ = axum::serve(listener, app).await;
        });
        Self {
            runtime: Some(runtime),
        }
    }

    fn stop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

impl Drop for SocketServer {
    // A runtime dropped inside another one must not wait for its tasks.
    fn drop(&mut self) {
        self.stop();
    }
}

#[derive(Debug, Default)]
struct Phone {
    polls: Vec<SystemTime>,
    poll_refusals: u64,
    global_refusals: u64,
    retry_afters: Vec<u64>,
    answers: Vec<SystemTime>,
    back_at: Option<Instant>,
    /// Its first poll fell in the outage's first second.
    in_burst: bool,
}

/// Runs the room on `store` and reports.
pub async fn run(store: AnyStore, plan: Plan) -> Report {
    let cfg = QuizConfig::default();
    let http = Server::start(app_with_store(&cfg, store.clone()).expect("quiz-night builds"))
        .await
        .expect("a server");
    let ws_addr = SocketAddr::from(([127, 0, 0, 1], crate::redis::free_port()));
    let mut sockets = SocketServer::start(ws_addr, &cfg, store.clone());
    tokio::time::sleep(Duration::from_millis(200)).await;

    let start = Instant::now();
    let outage_at = start + plan.before;
    let back_at = outage_at + plan.outage;
    let end = back_at + plan.after;
    let phones: Vec<Arc<Mutex<Phone>>> = (0..plan.phones).map(|_| Arc::default()).collect();
    let mut tasks = Vec::new();
    for (i, phone) in phones.iter().enumerate() {
        let every = if i < plan.impatient {
            plan.impatient_every
        } else {
            plan.poll_every
        };
        let (phone, plan, http_url) = (
            phone.clone(),
            plan.clone(),
            format!("http://{}", http.addr()),
        );
        tasks.push(tokio::spawn(async move {
            play(
                i,
                phone,
                &plan,
                every,
                &http_url,
                ws_addr,
                (outage_at, back_at, end),
            )
            .await;
        }));
    }
    tokio::time::sleep_until((outage_at).into()).await;
    sockets.stop();
    tokio::time::sleep_until(back_at.into()).await;
    let _sockets = SocketServer::start(ws_addr, &cfg, store.clone());
    for t in tasks {
        let _ = t.await;
    }
    report(&store, &phones, back_at).await
}

fn who(i: usize) -> String {
    format!("phone{i}")
}

/// One phone: on the socket while it can be; polling (and trying the socket again) while it
/// cannot. It answers three times over the socket at the start, once by `POST` during the
/// outage.
async fn play(
    i: usize,
    phone: Arc<Mutex<Phone>>,
    plan: &Plan,
    every: Duration,
    http: &str,
    ws: SocketAddr,
    (outage_at, back_at, end): (Instant, Instant, Instant),
) {
    let url = format!("ws://{ws}/api/games/g1/ws?participant={}", who(i));
    let mut answered_by_post = false;
    let mut answered_by_socket = false;
    // The next poll: at once when a socket drops, then every `every` (or the wait a refusal
    // asked for), whatever the tries of the socket in between.
    let mut next_poll = Instant::now();
    while Instant::now() < end {
        // On the socket until it drops.
        if let Ok(Ok((mut socket, _))) = tokio::time::timeout(
            Duration::from_secs(2),
            tokio_tungstenite::connect_async(&url),
        )
        .await
        {
            let now = Instant::now();
            if now >= back_at {
                let mut p = phone.lock().await;
                p.back_at.get_or_insert(now);
            }
            // Three answers over the socket on the first connection (a check counted twice
            // would show as three too many in the store).
            if !answered_by_socket {
                for a in ["41", "42", "43"] {
                    let _ = socket.send(Message::text(a)).await;
                }
                answered_by_socket = true;
            }
            loop {
                let left = end.saturating_duration_since(Instant::now());
                match tokio::time::timeout(left, socket.next()).await {
                    Ok(Some(Ok(Message::Text(t)))) if t.as_str().contains("\"accepted\":true") => {
                        phone.lock().await.answers.push(SystemTime::now());
                    }
                    Ok(Some(Ok(_))) => {}
                    Ok(_) => break,   // the socket dropped: fall back to polling
                    Err(_) => return, // the run is over
                }
            }
            next_poll = Instant::now();
        }
        // Polling, from the instant the socket dropped, trying the socket again now and then.
        let jitter = Duration::from_millis((i as u64 * 7919) % 1000);
        let next_try = Instant::now() + plan.reconnect_every + jitter;
        loop {
            let now = Instant::now();
            if now >= end {
                return;
            }
            if now >= next_try {
                break;
            }
            if now >= next_poll {
                let wait = poll(&phone, http, i, outage_at).await.unwrap_or(every);
                next_poll = Instant::now() + wait.max(every);
                if !answered_by_post && Instant::now() < back_at {
                    answered_by_post = answer(&phone, http, i).await;
                }
            }
            tokio::time::sleep_until(next_poll.min(next_try).min(end).into()).await;
        }
    }
}

/// One poll; the wait a refusal asked for.
async fn poll(phone: &Mutex<Phone>, http: &str, i: usize, outage_at: Instant) -> Option<Duration> {
    let r = client()
        .get(format!("{http}/api/games/g1/poll"))
        .header("x-participant-id", who(i))
        .send()
        .await
        .ok()?;
    let mut p = phone.lock().await;
    if p.polls.is_empty() && p.poll_refusals == 0 {
        p.in_burst = Instant::now() < outage_at + Duration::from_secs(1);
    }
    if r.status() == 200 {
        p.polls.push(SystemTime::now());
        return None;
    }
    let wait = r
        .headers()
        .get("retry-after")?
        .to_str()
        .ok()?
        .parse()
        .ok()?;
    let body = r.text().await.unwrap_or_default();
    if body.contains("global-ip") {
        p.global_refusals += 1;
    } else {
        p.poll_refusals += 1;
        p.retry_afters.push(wait);
    }
    Some(Duration::from_secs(wait))
}

async fn answer(phone: &Mutex<Phone>, http: &str, i: usize) -> bool {
    let Ok(r) = client()
        .post(format!("{http}/api/games/g1/answers"))
        .header("x-participant-id", who(i))
        .send()
        .await
    else {
        return false;
    };
    let mut p = phone.lock().await;
    match r.status().as_u16() {
        200 => p.answers.push(SystemTime::now()),
        _ if r.text().await.unwrap_or_default().contains("global-ip") => p.global_refusals += 1,
        _ => {}
    }
    true
}

/// A sliding window's count at `now` of the admissions at `times` (the store's estimate).
fn estimate(times: &[SystemTime], now: SystemTime, window: u64) -> f64 {
    let secs = |t: &SystemTime| {
        t.duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64())
    };
    let now = secs(&now);
    let current = (now / window as f64).floor();
    let count = |w: f64| {
        times
            .iter()
            .filter(|t| (secs(t) / window as f64).floor() == w)
            .count() as f64
    };
    let elapsed = now - current * window as f64;
    count(current - 1.0) * (window as f64 - elapsed) / window as f64 + count(current)
}

async fn report(store: &AnyStore, phones: &[Arc<Mutex<Phone>>], back_at: Instant) -> Report {
    let minute = Duration::from_secs(60);
    let poll = Limit::sliding_window("poll", 20, minute).expect("quiz-night's poll limit");
    let answers = Limit::sliding_window("answers", 30, minute).expect("quiz-night's answers limit");
    let mut r = Report::default();
    let mut waits = std::collections::BTreeSet::new();
    for (i, phone) in phones.iter().enumerate() {
        let p = phone.lock().await;
        r.global_refusals += p.global_refusals;
        r.polls += p.polls.len() as u64;
        r.poll_refusals += p.poll_refusals;
        r.phones_limited += usize::from(p.poll_refusals > 0);
        waits.extend(p.retry_afters.iter().copied());
        r.burst += u64::from(p.in_burst);
        if let Some(t) = p.back_at {
            r.back_after.push(t.duration_since(back_at).as_secs_f64());
        }
        r.answers += p.answers.len() as u64;
        let now = SystemTime::now();
        for (limit, times) in [(&poll, &p.polls), (&answers, &p.answers)] {
            let key = limit.key(Principal::participant(who(i)));
            let Ok(state) = store.peek(&key).await else {
                continue;
            };
            let stored = (state.limit() - state.remaining()) as f64;
            let expected = estimate(times, now, 60);
            // Refused checks consume nothing; the stored count is the estimate rounded.
            if (stored - expected).abs() >= 1.0 {
                r.miscounted.push(format!(
                    "{}: {} stored {stored}, admitted {expected:.2}",
                    who(i),
                    limit.name()
                ));
            }
        }
    }
    r.retry_afters = waits.into_iter().collect();
    r
}
