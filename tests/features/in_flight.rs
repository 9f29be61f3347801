//! In-flight limits: at most `max` requests of one principal at once. The slot is taken
//! before the handler and released when the response body has been sent to the end or
//! dropped; on Redis it is a lease its holder renews, so a process killed with SIGKILL
//! frees its slots within the TTL.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::get;
use bytes::Bytes;
use http_body::Frame;
use ratekeeper_core::limiter::SlotAnswer;
use ratekeeper_core::{
    AnyStore, FailurePolicy, InFlight, Limiter, MemoryStore, Principal, PrincipalKind, RedisStore,
};
use ratekeeper_tests::redis::{RedisCluster, RedisServer};
use ratekeeper_tests::{Server, client, retry_after};
use ratekeeper_tower::extract::HeaderKey;
use ratekeeper_tower::{InFlightRule, RateLimitLayer};

/// A body of `left` chunks, one every `every`: a response that takes time to send.
struct Ticks {
    left: u32,
    every: Duration,
    sleep: Pin<Box<tokio::time::Sleep>>,
}

impl http_body::Body for Ticks {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if self.left == 0 {
            return Poll::Ready(None);
        }
        std::task::ready!(self.sleep.as_mut().poll(cx));
        self.left -= 1;
        let next = tokio::time::Instant::now() + self.every;
        self.sleep.as_mut().reset(next);
        Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(b"row\n")))))
    }
}

/// `x-rows` chunks, one every 50 ms, after the headers.
async fn export_rows(headers: axum::http::HeaderMap) -> axum::body::Body {
    let rows = headers["x-rows"].to_str().unwrap().parse().unwrap();
    let every = Duration::from_millis(50);
    axum::body::Body::new(Ticks {
        left: rows,
        every,
        sleep: Box::pin(tokio::time::sleep(every)),
    })
}

async fn server(store: AnyStore) -> Server {
    let exports = InFlight::new("exports", 2, Duration::from_secs(1)).unwrap();
    let layer = RateLimitLayer::new(Limiter::new(store)).in_flight(InFlightRule::new(
        exports,
        HeaderKey::new("x-account".parse().unwrap(), PrincipalKind::User),
    ));
    Server::start(Router::new().route("/export", get(export_rows).route_layer(layer)))
        .await
        .unwrap()
}

async fn export(server: &Server, account: &str, rows: u32) -> reqwest::Response {
    client()
        .get(server.url("/export"))
        .header("x-account", account)
        .header("x-rows", rows.to_string())
        .send()
        .await
        .unwrap()
}

async fn limits_in_flight(store: AnyStore) {
    let server = server(store).await;
    // Two exports streaming (headers received, bodies still being sent): a third waits.
    let first = export(&server, "ada", 8).await;
    let second = export(&server, "ada", 8).await;
    assert_eq!(
        (first.status().as_u16(), second.status().as_u16()),
        (200, 200)
    );
    assert_eq!(
        first.headers()["ratelimit-policy"],
        "\"exports\";q=2;qu=\"concurrent-requests\""
    );
    let third = export(&server, "ada", 1).await;
    assert_eq!(third.status(), 429);
    let retry: u64 = retry_after(&third);
    assert!(
        (1..=1).contains(&retry),
        "until the earliest lease ends: {retry}"
    );
    assert_eq!(
        third.headers()["ratelimit-policy"],
        "\"exports\";q=2;qu=\"concurrent-requests\""
    );
    // Another account is not affected.
    assert_eq!(export(&server, "grace", 1).await.status(), 200);
    // Once both bodies were sent to the end, the slots are free.
    assert_eq!(first.text().await.unwrap().lines().count(), 8);
    assert_eq!(second.text().await.unwrap().lines().count(), 8);
    assert_eq!(export(&server, "ada", 1).await.status(), 200);

    // A client that leaves mid-body frees its slot: the server's next write fails and
    // the body is dropped.
    let long = export(&server, "linus", 1_000).await;
    let _other = export(&server, "linus", 1_000).await;
    assert_eq!(export(&server, "linus", 1).await.status(), 429);
    drop(long);
    let started = Instant::now();
    loop {
        let r = export(&server, "linus", 1).await;
        if r.status() == 200 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_millis(900),
            "the slot came back before its lease could run out"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn in_flight_limits_on_the_memory_store() {
    limits_in_flight(AnyStore::Memory(MemoryStore::new())).await;
}

#[tokio::test]
async fn in_flight_limits_on_redis() {
    let redis = RedisServer::start();
    limits_in_flight(redis.store()).await;
}

#[tokio::test]
async fn in_flight_limits_on_a_cluster() {
    let cluster = RedisCluster::start();
    limits_in_flight(cluster.store()).await;
}

const CHILD_URL: &str = "RATE_LIMIT_TEST_SLOT_CHILD_REDIS";
const TTL: Duration = Duration::from_millis(600);

fn exports() -> InFlight {
    InFlight::new("exports", 2, TTL).unwrap()
}

/// Run by the test below in a child process: takes both slots and holds them (renewing)
/// until it is killed.
#[tokio::test]
#[ignore = "run as a child process by the SIGKILL test"]
async fn child_holding_slots() {
    let Ok(url) = std::env::var(CHILD_URL) else {
        return;
    };
    let limiter = Limiter::new(AnyStore::Redis(RedisStore::builder(url).build().unwrap()));
    let key = exports().slots(Principal::new(PrincipalKind::User, "ada"));
    let mut held = Vec::new();
    for _ in 0..2 {
        match limiter.take_slot(&key, FailurePolicy::Closed).await {
            SlotAnswer::Taken(slot) => held.push(slot),
            other => panic!("the child could not take a slot: {other:?}"),
        }
    }
    println!("HELD");
    tokio::time::sleep(Duration::from_secs(60)).await;
}

/// An application process holding slots is killed with SIGKILL: no release runs, and the
/// slots come back when their leases run out, within the TTL. Before that, renewals keep
/// them held well past the TTL.
#[tokio::test]
async fn slots_of_a_process_killed_with_sigkill_come_back_within_the_ttl() {
    use std::io::{BufRead, BufReader};

    let redis = RedisServer::start();
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "in_flight::child_holding_slots",
            "--ignored",
            "--nocapture",
        ])
        .env(CHILD_URL, redis.url())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    assert!(
        lines.any(|l| l.is_ok_and(|l| l.contains("HELD"))),
        "the child took its slots"
    );
    let limiter = Limiter::new(AnyStore::Redis(
        RedisStore::builder(redis.url()).build().unwrap(),
    ));
    let key = exports().slots(Principal::new(PrincipalKind::User, "ada"));
    let full = |a: &SlotAnswer| matches!(a, SlotAnswer::Full { .. });
    assert!(full(&limiter.take_slot(&key, FailurePolicy::Closed).await));
    // Three TTLs later the child's renewals still hold them.
    tokio::time::sleep(TTL * 3).await;
    assert!(full(&limiter.take_slot(&key, FailurePolicy::Closed).await));

    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let killed = Instant::now();
    let mut back = Vec::new();
    while back.len() < 2 {
        match limiter.take_slot(&key, FailurePolicy::Closed).await {
            SlotAnswer::Taken(slot) => back.push(slot),
            _ => tokio::time::sleep(Duration::from_millis(10)).await,
        }
        assert!(
            killed.elapsed() < TTL + Duration::from_millis(300),
            "not back within the TTL"
        );
    }
    // Never released twice: the two taken here are the only ones held.
    assert!(full(&limiter.take_slot(&key, FailurePolicy::Closed).await));
    drop(back);
}

/// The in-handler limiter: the handler takes its slot itself (the principal is known only
/// there) and holds it while it works.
async fn in_handler(store: AnyStore) {
    use ratekeeper_axum::HandlerLimiter;

    let limiter = HandlerLimiter::new(Limiter::new(store));
    let exports = InFlight::new("exports-in-handler", 2, Duration::from_secs(1)).unwrap();
    let app = Router::new().route(
        "/export",
        get(move |headers: axum::http::HeaderMap| {
            let (limiter, exports) = (limiter.clone(), exports.clone());
            async move {
                let account = headers["x-account"].to_str().unwrap().to_owned();
                let key = exports.slots(Principal::new(PrincipalKind::User, account));
                match limiter
                    .take_slot(&key, FailurePolicy::Closed, &headers)
                    .await
                {
                    Ok(slot) => {
                        tokio::time::sleep(Duration::from_millis(300)).await;
                        drop(slot);
                        axum::response::IntoResponse::into_response("done")
                    }
                    Err(refused) => axum::response::IntoResponse::into_response(refused),
                }
            }
        }),
    );
    let server = Server::start(app).await.unwrap();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..3 {
        let url = server.url("/export");
        tasks.spawn(async move {
            let r = client()
                .get(url)
                .header("x-account", "ada")
                .header("x-rows", "1");
            let r = r.send().await.unwrap();
            let policy = r
                .headers()
                .get("ratelimit-policy")
                .map(|v| v.to_str().unwrap().to_owned());
            (r.status().as_u16(), policy)
        });
    }
    let mut seen = Vec::new();
    while let Some(r) = tasks.join_next().await {
        seen.push(r.unwrap());
    }
    seen.sort();
    assert_eq!(seen[0], (200, None));
    assert_eq!(seen[1], (200, None));
    assert_eq!(
        seen[2],
        (
            429,
            Some("\"exports-in-handler\";q=2;qu=\"concurrent-requests\"".to_owned())
        )
    );
    // Released when the handlers finished.
    let r = client()
        .get(server.url("/export"))
        .header("x-account", "ada")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
}

#[tokio::test]
async fn the_in_handler_limiter_takes_slots_on_every_store() {
    in_handler(AnyStore::Memory(MemoryStore::new())).await;
    let redis = RedisServer::start();
    in_handler(redis.store()).await;
    let cluster = RedisCluster::start();
    in_handler(cluster.store()).await;
}

/// A command to take the slot and one to release it: measured on the server.
#[tokio::test]
async fn a_slot_costs_two_commands() {
    let redis = RedisServer::start();
    let server = server(redis.store()).await;
    let scripts = || redis.command_calls("evalsha") + redis.command_calls("eval");
    // The first request loads the script (a NOSCRIPT, then EVAL): not counted.
    assert_eq!(
        export(&server, "ada", 1).await.text().await.unwrap(),
        "row\n"
    );
    tokio::time::sleep(Duration::from_millis(50)).await;
    redis.cli(&["CONFIG", "RESETSTAT"]);
    for _ in 0..50 {
        let r = export(&server, "ada", 1).await;
        assert_eq!(r.text().await.unwrap(), "row\n");
    }
    // Releases run in the background once the body ends: let the last one land.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(scripts(), 100);
}

/// Redis down: each in-flight rule's policy decides — closed 503, a slot in the fallback
/// memory store (the limit still holds), or open (no slot).
#[tokio::test]
async fn a_down_store_falls_back_as_each_in_flight_rule_says() {
    use ratekeeper_tests::redis::down_store;

    let exports = InFlight::new("exports", 1, Duration::from_secs(1)).unwrap();
    let app = |policy: FailurePolicy| {
        let layer = RateLimitLayer::new(Limiter::new(down_store())).in_flight(
            InFlightRule::new(
                exports.clone(),
                HeaderKey::new("x-account".parse().unwrap(), PrincipalKind::User),
            )
            .on_store_error(policy),
        );
        Router::new().route("/export", get(export_rows).route_layer(layer))
    };
    let closed = Server::start(app(FailurePolicy::Closed)).await.unwrap();
    assert_eq!(export(&closed, "ada", 1).await.status(), 503);
    let memory = Server::start(app(FailurePolicy::Memory)).await.unwrap();
    let first = export(&memory, "ada", 6).await;
    assert_eq!(first.status(), 200);
    assert_eq!(
        export(&memory, "ada", 1).await.status(),
        429,
        "one at once, in memory"
    );
    drop(first.text().await);
    let open = Server::start(app(FailurePolicy::Open)).await.unwrap();
    let first = export(&open, "ada", 6).await;
    assert_eq!(
        export(&open, "ada", 1).await.status(),
        200,
        "no slot: not limited"
    );
    drop(first);
}
