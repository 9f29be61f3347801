//! The client pacing layer against a hostile upstream and its own callers: headers with
//! times past any clock on any status answer every call (no panic) and pause at most
//! `max_pause`; three tasks on one pacer are served in arrival order; a caller that retries
//! a `WouldWait` at once leaves another scope its pace; GitHub's 403 with `retry-after` is
//! a refusal waited out, with no call inside the wait.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::Path;
use axum::routing::get;
use http::StatusCode;
use ratekeeper_core::clock::TokioClock;
use ratekeeper_core::pace::{Aimd, SharedPacer};
use ratekeeper_core::{AnyStore, MemoryStore};
use ratekeeper_tests::Server;
use ratekeeper_tower::client::{PaceError, PaceLayer};
use tokio::time::Instant;
use tower::{Service, ServiceBuilder, ServiceExt};

use crate::client::{Client, client};

/// What a hostile upstream answers: each a status and headers whose times no clock holds.
const FAR: [(u16, &str, &str); 9] = [
    (200, "x-ratelimit-reset", "18446744073709551615"),
    (200, "ratelimit-reset", "18446744073709551615"),
    (429, "retry-after", "Sun, 06 Nov 99999999999 08:49:37 GMT"),
    (200, "retry-after", "Sun, 06 Nov 99999999999 08:49:37 GMT"),
    (
        503,
        "retry-after",
        "Sunday, 06-Nov-18446744073709551615 08:49:37 GMT",
    ),
    (
        429,
        "retry-after",
        "Sun Nov  6 08:49:37 18446744073709551615",
    ),
    (429, "retry-after", "18446744073709551615"),
    (403, "retry-after", "Fri, 31 Dec 9999999999999 23:59:60 GMT"),
    (200, "ratelimit", r#""p";r=0;t=18446744073709551615"#),
];

#[tokio::test]
async fn times_past_any_clock_answer_every_call_and_pause_at_most_max_pause() {
    let app = Router::new().route(
        "/far/{case}",
        get(|Path(case): Path<usize>| async move {
            let (status, name, value) = FAR[case];
            let mut headers = http::HeaderMap::new();
            headers.insert(name, value.parse().unwrap());
            if name.ends_with("reset") {
                let remaining = name.replace("reset", "remaining");
                let remaining = http::HeaderName::from_bytes(remaining.as_bytes()).unwrap();
                headers.insert(remaining, "0".parse().unwrap());
            }
            (StatusCode::from_u16(status).unwrap(), headers, "")
        }),
    );
    let up = Server::start(app).await.unwrap();
    for (case, (status, name, value)) in FAR.iter().enumerate() {
        let pacer =
            SharedPacer::new(AnyStore::Memory(MemoryStore::new()), "far", aimd(50.0)).unwrap();
        let mut c = client(pacer, |l| {
            l.max_pause(Duration::from_secs(2))
                .max_wait(Duration::from_millis(100))
        });
        let req = || {
            http::Request::get(up.url(&format!("/far/{case}")))
                .body(String::new())
                .unwrap()
        };
        // The call that reads the header answers (a panic would end this test).
        let first = c.ready().await.unwrap().call(req()).await.unwrap();
        assert_eq!(first.status().as_u16(), *status);
        // The next waits for the far future held to max_pause, or goes when the answer
        // was no refusal and said nothing this reading counts.
        match c.ready().await.unwrap().call(req()).await {
            Err(PaceError::WouldWait { wait, .. }) => {
                assert!(wait <= Duration::from_secs(2), "{name}: {value}: {wait:?}");
                println!("{status} {name}: {value}: held to {wait:?}");
            }
            Ok(r) => println!("{status} {name}: {value}: no wait, {}", r.status()),
            Err(e) => panic!("{e}"),
        }
    }
}

fn aimd(rate: f64) -> Aimd {
    // A fixed rate: no step up, so the interval is known.
    Aimd {
        initial: rate,
        min: rate,
        max: rate,
        period: Duration::from_secs(3_600),
        ..Aimd::default()
    }
}

/// An upstream that never refuses and answers at once, as a Tower service (no sockets:
/// time is paused), paced at `rate` calls a second.
fn quiet(rate: f64) -> Client {
    let up = tower::service_fn(|_req: http::Request<String>| async {
        Ok::<_, reqwest::Error>(http::Response::new(reqwest::Body::from("")))
    });
    let pacer = SharedPacer::new(
        AnyStore::Memory(
            MemoryStore::builder()
                .clock(TokioClock::new())
                .build()
                .unwrap(),
        ),
        "fair",
        aimd(rate),
    )
    .unwrap();
    tower::util::BoxCloneService::new(
        ServiceBuilder::new()
            .layer(PaceLayer::new(pacer).max_wait(Duration::from_secs(2)))
            .service(up),
    )
}

#[tokio::test(start_paused = true)]
async fn three_tasks_on_one_pacer_are_served_in_arrival_order() {
    let c = quiet(10.0);
    let interval = Duration::from_millis(100);
    // The steady state: counted from the first second on. (Until every task has asked
    // once, the first one, answered at once, may ask twice: arrival order too.)
    let from = Instant::now() + Duration::from_secs(1);
    let until = Instant::now() + Duration::from_secs(30);
    let tasks: Vec<_> = (0..3)
        .map(|_| {
            let mut c = c.clone();
            tokio::spawn(async move {
                let (mut calls, mut longest, mut would_wait) = (0u32, Duration::ZERO, 0u32);
                while Instant::now() < until {
                    let asked = Instant::now();
                    let req = http::Request::get("http://up.example/items")
                        .body(String::new())
                        .unwrap();
                    match c.ready().await.unwrap().call(req).await {
                        // Counted in the window: a call answered past it is another
                        // window's.
                        Ok(_) if (from..until).contains(&Instant::now()) => calls += 1,
                        Ok(_) => {}
                        Err(PaceError::WouldWait { .. }) => would_wait += 1,
                        Err(e) => panic!("{e}"),
                    }
                    if asked >= from {
                        longest = longest.max(asked.elapsed());
                    }
                }
                (calls, longest, would_wait)
            })
        })
        .collect();
    let mut seen = Vec::new();
    for t in tasks {
        seen.push(t.await.unwrap());
    }
    println!("three tasks, 10/s for 30 s (paused time): (calls, longest wait, WouldWait) {seen:?}");
    let calls: Vec<u32> = seen.iter().map(|s| s.0).collect();
    let (lo, hi) = (calls.iter().min().unwrap(), calls.iter().max().unwrap());
    assert!(hi - lo <= 1, "{calls:?}");
    // Slots every 100 ms from 1 s to 29.9 s.
    assert_eq!(calls.iter().sum::<u32>(), 290, "the whole pace: {calls:?}");
    for (_, longest, would_wait) in &seen {
        // Each task waits for the two others' slots and its own: ε is 0 here.
        assert!(*longest <= interval * 3, "{longest:?}");
        assert_eq!(*would_wait, 0, "no slot past max_wait");
    }
}

#[test]
fn a_caller_retrying_would_wait_at_once_leaves_another_scope_its_pace() {
    // One worker thread for both callers, in a thread of its own: before answering
    // WouldWait yielded, the spinner held that thread forever (and the runtime's own timers
    // with it), so the verdict is waited for here, outside it.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            // Scope a paced at 1/s: the spinner's calls almost never go.
            let mut spinning = quiet(1.0);
            let spins = Arc::new(AtomicU64::new(0));
            let count = spins.clone();
            let spinner = tokio::spawn(async move {
                // Scope a: never waits (a deadline of now), asks again at once.
                loop {
                    let mut req = http::Request::get("http://a.example/")
                        .body(String::new())
                        .unwrap();
                    let deadline = ratekeeper_tower::client::Deadline(Instant::now());
                    req.extensions_mut().insert(deadline);
                    let _ = spinning.ready().await.unwrap().call(req).await;
                    count.fetch_add(1, Ordering::Relaxed);
                }
            });
            // Scope b, another pacer: 200 calls at 200/s take about a second. Before
            // WouldWait yielded, b ran only when the spinner's call went (once a second).
            let mut b = quiet(200.0);
            let started = Instant::now();
            for _ in 0..200 {
                let req = http::Request::get("http://b.example/")
                    .body(String::new())
                    .unwrap();
                b.ready().await.unwrap().call(req).await.unwrap();
            }
            spinner.abort();
            let _ = tx.send((started.elapsed(), spins.load(Ordering::Relaxed)));
        });
    });
    let (took, spins) = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("scope b starved beside a caller retrying WouldWait at once");
    println!("scope b: 200 calls in {took:?} beside {spins} WouldWait retries on scope a");
}

/// GitHub's secondary limit: 10 calls, then 403 with `retry-after: 2` for two seconds.
struct Secondary {
    start: std::time::Instant,
    /// (ms from the start, status) of every call.
    calls: std::sync::Mutex<Vec<(u128, u16)>>,
    /// When the pause began (ms from the start).
    paused_at: std::sync::Mutex<Option<u128>>,
}

impl Secondary {
    fn answer(&self) -> u16 {
        let now = self.start.elapsed().as_millis();
        let mut paused = self.paused_at.lock().unwrap();
        let mut calls = self.calls.lock().unwrap();
        let admitted = calls.iter().filter(|c| c.1 == 200).count();
        let status = match *paused {
            Some(at) if now < at + 2_000 => 403,
            None if admitted == 10 => {
                *paused = Some(now);
                403
            }
            _ => 200,
        };
        calls.push((now, status));
        status
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_403_with_retry_after_is_waited_out_by_every_task() {
    let secondary = Arc::new(Secondary {
        start: std::time::Instant::now(),
        calls: Default::default(),
        paused_at: Default::default(),
    });
    let up = secondary.clone();
    let app = Router::new().route(
        "/items",
        get(move || {
            let up = up.clone();
            async move {
                match up.answer() {
                    200 => (StatusCode::OK, [("x-ratelimit-limit", "5000")], ""),
                    _ => (StatusCode::FORBIDDEN, [("retry-after", "2")], ""),
                }
            }
        }),
    );
    let server = Server::start(app).await.unwrap();
    let pacer =
        SharedPacer::new(AnyStore::Memory(MemoryStore::new()), "github", aimd(50.0)).unwrap();
    let c = client(pacer, |l| l.max_wait(Duration::from_secs(5)));
    const TASKS: usize = 3;
    let until = Instant::now() + Duration::from_secs(3);
    let tasks: Vec<_> = (0..TASKS)
        .map(|_| {
            let (mut c, url) = (c.clone(), server.url("/items"));
            tokio::spawn(async move {
                while Instant::now() < until {
                    let req = http::Request::get(&url).body(String::new()).unwrap();
                    c.ready().await.unwrap().call(req).await.unwrap();
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let calls = secondary.calls.lock().unwrap().clone();
    let at = secondary
        .paused_at
        .lock()
        .unwrap()
        .expect("the limit was reached");
    let inside = calls
        .iter()
        .filter(|(t, _)| *t > at && *t < at + 2_000)
        .count();
    let after = calls
        .iter()
        .filter(|(t, s)| *t >= at + 2_000 && *s == 200)
        .count();
    println!(
        "403 with retry-after: 2 at {at} ms: {inside} calls inside the wait ({TASKS} tasks), \
         {after} admitted after it, {} calls in all",
        calls.len()
    );
    // Only a call already on its way when the 403 came (one per other task) may land inside.
    assert!(inside < TASKS, "{inside} calls inside the wait: {calls:?}");
    assert!(after > 0, "the calls resumed after the wait: {calls:?}");
}
