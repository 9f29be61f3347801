//! What the limiter adds to a WebSocket message, against what the layer adds to an HTTP
//! request: one rule on the memory store each, one client in the same process sending one
//! message (or request) at a time and waiting for its answer.
//!
//! `cargo bench -p ratekeeper-benches --bench ws` prints, per case, the heap allocations
//! and the wall time per message or request. For instructions, run one case under
//! callgrind twice, with N and 2N, and divide the difference by N (setup cancels out):
//!
//! ```text
//! WS_RUN=ws-ours:10000 valgrind --tool=callgrind target/release/deps/ws-<hash>
//! WS_RUN=ws-ours:20000 valgrind --tool=callgrind target/release/deps/ws-<hash>
//! ```
//!
//! Cases: `http-bare` (an axum route), `http-ours` (the same behind `RateLimitLayer`),
//! `ws-bare` (an echo socket), `ws-ours` (the same through `SocketLimiter`).

use std::alloc::System;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::State;
use axum::extract::ws::{Message as Msg, WebSocketUpgrade};
use axum::response::Response;
use axum::routing::get;
use futures_util::{SinkExt, StreamExt};
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use ratekeeper_axum::ws::{MessageRule, SocketLimiter};
use ratekeeper_axum::{
    HandlerLimiter, Limit, Limiter, MemoryStore, PrincipalKind, RateLimitLayer, Rule,
};
use ratekeeper_core::Principal;
use ratekeeper_tower::extract::HeaderKey;
use stats_alloc::{INSTRUMENTED_SYSTEM, StatsAlloc};
use tokio_tungstenite::tungstenite::Message;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Heap allocations so far (reallocations included).
fn allocs() -> u64 {
    let s = GLOBAL.stats();
    (s.allocations + s.reallocations) as u64
}

const QUOTA: u64 = 1_000_000_000;

fn limit() -> Limit {
    Limit::token_bucket("bench", QUOTA, 1_000_000, Duration::from_secs(1)).expect("a valid limit")
}

fn http_app(limited: bool) -> Router {
    let route = get(|| async { "ok" });
    let route = if limited {
        let key = HeaderKey::new("x-key".parse().expect("a name"), PrincipalKind::User);
        route.route_layer(
            RateLimitLayer::new(Limiter::new(MemoryStore::new())).rule(Rule::new(limit(), key)),
        )
    } else {
        route
    };
    Router::new().route("/", route)
}

async fn echo(State(sockets): State<Option<SocketLimiter>>, upgrade: WebSocketUpgrade) -> Response {
    upgrade.on_upgrade(move |mut ws| async move {
        match sockets {
            None => {
                while let Some(Ok(Msg::Text(t))) = ws.recv().await {
                    if ws.send(Msg::Text(t)).await.is_err() {
                        return;
                    }
                }
            }
            Some(sockets) => {
                let accepted = sockets
                    .accept(Principal::user("bench"), &http::HeaderMap::new())
                    .await
                    .expect("no connection limit");
                let mut ws = accepted.socket(ws);
                while let Some(Ok(Msg::Text(t))) = ws.recv().await {
                    if ws.send(Msg::Text(t)).await.is_err() {
                        return;
                    }
                }
            }
        }
    })
}

fn ws_app(limited: bool) -> Router {
    let sockets = limited.then(|| {
        SocketLimiter::new(HandlerLimiter::new(Limiter::new(MemoryStore::new())))
            .rule(MessageRule::new(limit()))
    });
    Router::new().route("/", get(echo)).with_state(sockets)
}

async fn serve(app: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    let addr = listener.local_addr().expect("an address");
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

/// Sends `n` requests or messages one at a time; (allocations, seconds) for them.
async fn run(case: &str, n: u64) -> (u64, f64) {
    let (http, limited) = match case {
        "http-bare" => (true, false),
        "http-ours" => (true, true),
        "ws-bare" => (false, false),
        "ws-ours" => (false, true),
        other => panic!("unknown case {other}"),
    };
    if http {
        let addr = serve(http_app(limited)).await;
        let stream = tokio::net::TcpStream::connect(addr)
            .await
            .expect("connects");
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                .await
                .expect("a handshake");
        tokio::spawn(conn);
        let req = || {
            hyper::Request::get("/")
                .header("host", "bench")
                .header("x-key", "bench")
                .body(Empty::<Bytes>::new())
                .expect("a request")
        };
        for _ in 0..100 {
            let r = sender.send_request(req()).await.expect("answered");
            let _ = r.into_body().collect().await;
        }
        let (a0, t0) = (allocs(), Instant::now());
        for _ in 0..n {
            let r = sender.send_request(req()).await.expect("answered");
            assert_eq!(r.status(), 200);
            let _ = r.into_body().collect().await;
        }
        (allocs() - a0, t0.elapsed().as_secs_f64())
    } else {
        let addr = serve(ws_app(limited)).await;
        let (mut ws, _) = tokio_tungstenite::connect_async(format!("ws://{addr}/"))
            .await
            .expect("connects");
        for _ in 0..100 {
            ws.send(Message::text("answer")).await.expect("sent");
            let _ = ws.next().await;
        }
        let (a0, t0) = (allocs(), Instant::now());
        for _ in 0..n {
            ws.send(Message::text("answer")).await.expect("sent");
            match ws.next().await {
                Some(Ok(Message::Text(t))) => assert_eq!(t.as_str(), "answer"),
                other => panic!("{other:?}"),
            }
        }
        (allocs() - a0, t0.elapsed().as_secs_f64())
    }
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    if let Ok(spec) = std::env::var("WS_RUN") {
        let (case, n) = spec.split_once(':').expect("WS_RUN=<case>:<n>");
        let n = n.parse().expect("a number");
        let (allocs, secs) = rt.block_on(run(case, n));
        println!(
            "{case}: {n} in {secs:.3} s, {:.2} allocations each",
            allocs as f64 / n as f64
        );
        return;
    }
    let n = 20_000;
    let mut per = Vec::new();
    for case in ["http-bare", "http-ours", "ws-bare", "ws-ours"] {
        let (allocs, secs) = rt.block_on(run(case, n));
        let (a, ns) = (allocs as f64 / n as f64, secs * 1e9 / n as f64);
        println!("{case:>10}: {a:6.2} allocations, {ns:8.0} ns per request or message");
        per.push((a, ns));
    }
    println!(
        "added by the limiter: HTTP {:+.2} allocations, {:+.0} ns; WebSocket {:+.2} allocations, {:+.0} ns",
        per[1].0 - per[0].0,
        per[1].1 - per[0].1,
        per[3].0 - per[2].0,
        per[3].1 - per[2].1,
    );
}
