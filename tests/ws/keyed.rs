//! A socket's second key: a rule keyed by the client's IP (run on the upgrade request)
//! shares the budget of the route's rule with the same limit and extractor, so sockets
//! under fresh participants from one IP stay within that IP's budget, their answers and
//! the `POST`s counted together; and a cap on sockets per IP. On every store.

use std::collections::HashMap;
use std::time::Duration;

use axum::Router;
use axum::extract::ws::{Message as Msg, WebSocketUpgrade};
use axum::extract::{FromRequestParts, Query, Request, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use ratekeeper_axum::ws::{MessageRule, SocketLimiter};
use ratekeeper_axum::{HandlerLimiter, Limit, Limiter, RateLimitLayer, Rule, client_ip};
use ratekeeper_core::{AnyStore, InFlight, MemoryStore, Principal};
use ratekeeper_tests::redis::{RedisCluster, RedisServer};
use ratekeeper_tests::{Server, client};

use crate::{MINUTE, connect, say};

/// What one IP may answer a minute, by socket and `POST` together.
const PER_IP: u64 = 5;

fn app(store: AnyStore, tag: &str) -> Router {
    let per_ip = Limit::fixed_window(&format!("{tag}-answers-ip"), PER_IP, MINUTE).unwrap();
    let layer = RateLimitLayer::new(Limiter::new(store.clone()))
        .rule(Rule::new(per_ip.clone(), client_ip()));
    let sockets = SocketLimiter::new(HandlerLimiter::new(Limiter::new(store)))
        .rule(MessageRule::new(per_ip).keyed(client_ip()))
        .connections_by(
            InFlight::new(&format!("{tag}-sockets-ip"), 3, Duration::from_secs(30)).unwrap(),
            client_ip(),
        );
    Router::new()
        .route("/answers", post(|| async { "ok" }).route_layer(layer))
        .route("/ws", get(keyed_ws))
        .with_state(sockets)
}

async fn keyed_ws(
    State(sockets): State<SocketLimiter>,
    Query(q): Query<HashMap<String, String>>,
    request: Request,
) -> Response {
    let (mut parts, _) = request.into_parts();
    let upgrade = match WebSocketUpgrade::from_request_parts(&mut parts, &()).await {
        Ok(u) => u,
        Err(e) => return e.into_response(),
    };
    let who = Principal::participant(q.get("p").map_or("", String::as_str));
    let accepted = match sockets.accept_parts(who, &parts).await {
        Ok(a) => a,
        Err(refused) => return refused.into_response(),
    };
    sockets.upgrade(upgrade).on_upgrade(move |ws| async move {
        let mut socket = accepted.socket(ws);
        while let Some(Ok(msg)) = socket.recv().await {
            if let Msg::Text(t) = msg {
                let _ = socket.send(Msg::text(format!("ok:{}", t.as_str()))).await;
            }
        }
    })
}

async fn one_ip(store: AnyStore, tag: &str) {
    let server = Server::start(app(store, tag)).await.unwrap();
    // One answer by POST, then three sockets under fresh participants, two answers each.
    let posted = client().post(server.url("/answers")).send().await.unwrap();
    assert_eq!(posted.status(), 200);
    let mut sockets = Vec::new();
    for p in 0..3 {
        sockets.push(connect(&server, &format!("{tag}-fresh{p}")).await.unwrap());
    }
    let fourth = connect(&server, &format!("{tag}-fresh3"))
        .await
        .unwrap_err();
    assert!(
        fourth.to_string().contains("429"),
        "a fourth socket from one IP: {fourth}"
    );
    let mut admitted = 1;
    for ws in &mut sockets {
        for i in 0..2 {
            let reply = say(ws, &format!("a{i}")).await;
            if reply.starts_with("ok:") {
                admitted += 1;
            } else {
                assert!(reply.contains(&format!("{tag}-answers-ip")), "{reply}");
            }
        }
    }
    let after = client().post(server.url("/answers")).send().await.unwrap();
    println!(
        "{tag}: {admitted} admitted of 7 from one IP; the next POST {}",
        after.status()
    );
    assert_eq!(
        admitted, PER_IP,
        "one IP's budget, sockets and POSTs together"
    );
    assert_eq!(after.status(), 429, "the sockets spent the POST's budget");
    // A socket closed gives its slot back: asked until the server has seen it go.
    drop(sockets.pop());
    let t0 = std::time::Instant::now();
    while connect(&server, &format!("{tag}-fresh4")).await.is_err() {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the slot never came back"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_sockets_second_key_shares_the_routes_budget_on_memory() {
    one_ip(AnyStore::Memory(MemoryStore::new()), "keyed-memory").await;
}

#[tokio::test]
async fn a_sockets_second_key_shares_the_routes_budget_on_redis() {
    let redis = RedisServer::start();
    one_ip(redis.store(), "keyed-redis").await;
}

#[tokio::test]
async fn a_sockets_second_key_shares_the_routes_budget_on_a_cluster() {
    let cluster = RedisCluster::start();
    one_ip(cluster.store(), "keyed-cluster").await;
}
