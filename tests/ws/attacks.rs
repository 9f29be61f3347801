//! What a client can do to a limited socket, the worst case of each.

use std::time::Duration;

use axum::Router;
use axum::routing::get;
use futures_util::SinkExt;
use ratekeeper_axum::ws::{MessageRule, SocketLimiter};
use ratekeeper_axum::{HandlerLimiter, Limit, Limiter};
use ratekeeper_core::{AnyStore, MemoryStore};
use ratekeeper_tests::Server;
use ratekeeper_tests::redis::RedisServer;
use tokio_tungstenite::tungstenite::Message;

use crate::{BUDGET, MINUTE, app, connect, next, say, ws};

/// Many sockets for one principal: one budget between them, and the third upgrade is a 429.
async fn many_sockets_one_budget(store: AnyStore) {
    let server = Server::start(app(store)).await.unwrap();
    let mut a = connect(&server, "many").await.unwrap();
    let mut b = connect(&server, "many").await.unwrap();
    let third = connect(&server, "many").await.unwrap_err();
    assert!(third.to_string().contains("429"), "{third}");
    let mut admitted = 0;
    for i in 0..4 {
        for ws in [&mut a, &mut b] {
            if say(ws, &format!("m{i}")).await.starts_with("ok:") {
                admitted += 1;
            }
        }
    }
    assert_eq!(admitted, BUDGET, "two sockets, one budget");
}

#[tokio::test]
async fn many_sockets_for_one_principal_share_one_budget_on_memory() {
    many_sockets_one_budget(AnyStore::Memory(MemoryStore::new())).await;
}

#[tokio::test]
async fn many_sockets_for_one_principal_share_one_budget_on_redis() {
    let redis = RedisServer::start();
    many_sockets_one_budget(redis.store()).await;
}

/// A flood of tiny messages, sent without waiting: the connection's own ceiling (20 a
/// second) closes it with 1008, and no message past it reaches the store.
#[tokio::test]
async fn a_flood_of_tiny_messages_closes_with_1008_and_costs_the_store_nothing_past_it() {
    let redis = RedisServer::start();
    let answers = Limit::fixed_window("ws-flood", BUDGET, MINUTE).unwrap();
    let sockets = SocketLimiter::new(HandlerLimiter::new(Limiter::new(redis.store())))
        .rule(MessageRule::new(answers))
        .connection_ceiling(20, Duration::from_secs(1))
        .unwrap();
    let server = Server::start(Router::new().route("/ws", get(ws)).with_state(sockets))
        .await
        .unwrap();
    let mut ws = connect(&server, "flood").await.unwrap();
    for i in 0..200 {
        // The server may close before all are sent.
        if ws.send(Message::text(format!("{i}"))).await.is_err() {
            break;
        }
    }
    let (mut ok, mut refused) = (0, 0);
    let code = loop {
        match next(&mut ws).await {
            Some(Message::Text(t)) if t.as_str().starts_with("ok:") => ok += 1,
            Some(Message::Text(_)) => refused += 1,
            Some(Message::Close(Some(f))) => break u16::from(f.code),
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(code, 1008);
    assert_eq!(
        (ok, refused),
        (BUDGET, 20 - BUDGET),
        "20 checked, then closed"
    );
    let calls = redis.command_calls("evalsha") + redis.command_calls("eval");
    assert!(calls <= 21, "{calls} script calls for 20 checked messages");
}

/// A message over the size limit ends the connection before it is read whole; nothing of
/// it is answered.
#[tokio::test]
async fn a_huge_message_ends_the_connection_unread() {
    let server = Server::start(app(AnyStore::Memory(MemoryStore::new())))
        .await
        .unwrap();
    let mut ws = connect(&server, "huge").await.unwrap();
    let _ = ws.send(Message::text("x".repeat(64 * 1024))).await;
    match next(&mut ws).await {
        None => {}
        Some(Message::Close(Some(f))) => assert_eq!(u16::from(f.code), 1009, "{f:?}"),
        other => panic!("a huge message was answered: {other:?}"),
    }
}

/// A client that never sends a close frame: its slot frees when its connection drops.
#[tokio::test]
async fn a_client_that_never_closes_frees_its_slot_when_it_drops() {
    let server = Server::start(app(AnyStore::Memory(MemoryStore::new())))
        .await
        .unwrap();
    let a = connect(&server, "quiet").await.unwrap();
    let _b = connect(&server, "quiet").await.unwrap();
    assert!(connect(&server, "quiet").await.is_err(), "both slots held");
    drop(a); // the TCP connection ends, no close frame
    let start = std::time::Instant::now();
    while connect(&server, "quiet").await.is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(3),
            "the slot never came back"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Fresh principals per socket: keys as bounded as HTTP's. On a memory store capped at
/// 64 keys a limit, 300 sockets under fresh principals leave a refused principal refused
/// (they take the room of keys that refuse nobody).
#[tokio::test]
async fn fresh_principals_per_socket_reset_no_refusing_counter() {
    // Two shards of 32 keys a limit (a shard holds max_keys / shards of each limit).
    let store = AnyStore::Memory(
        MemoryStore::builder()
            .max_keys(64)
            .shards(2)
            .build()
            .unwrap(),
    );
    let server = Server::start(app(store)).await.unwrap();
    let mut ws = connect(&server, "victim").await.unwrap();
    for m in ["a", "b", "c"] {
        assert!(say(&mut ws, m).await.starts_with("ok:"));
    }
    assert!(say(&mut ws, "d").await.contains("limit.exceeded"));
    for i in 0..300 {
        let mut fresh = connect(&server, &format!("fresh{i}")).await.unwrap();
        assert!(say(&mut fresh, "x").await.starts_with("ok:"));
    }
    let again = say(&mut ws, "e").await;
    assert!(again.contains("limit.exceeded"), "still refused: {again}");
}
