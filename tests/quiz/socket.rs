//! quiz-night's answer socket, over TCP with a real WebSocket client: the game's state on
//! connect, answers sharing the `POST`'s budget of 30 a minute, a refused answer told over
//! the socket while it stays open, a missing participant a 400, a fourth socket a 429.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use ratekeeper_core::{AnyStore, MemoryStore};
use ratekeeper_tests::client;
use ratekeeper_tests::redis::RedisServer;
use tokio_tungstenite::tungstenite::Message;

use crate::start;

async fn text(
    ws: &mut (impl StreamExt<Item = Result<Message, tokio_tungstenite::tungstenite::Error>> + Unpin),
) -> String {
    loop {
        match tokio::time::timeout(Duration::from_secs(5), ws.next()).await {
            Ok(Some(Ok(Message::Text(t)))) => return t.as_str().to_owned(),
            Ok(Some(Ok(Message::Ping(_) | Message::Pong(_)))) => continue,
            other => panic!("no text: {other:?}"),
        }
    }
}

/// One answer by `POST` for the socket's participant; its status.
async fn answer(s: &ratekeeper_tests::Server) -> u16 {
    let r = client()
        .post(s.url("/api/games/g1/answers"))
        .header("x-participant-id", "sock");
    r.send().await.unwrap().status().as_u16()
}

async fn answers_over_the_socket_and_http(store: AnyStore) {
    let s = start(store, "").await;
    let url = format!("ws://{}/api/games/g1/ws?participant=sock", s.addr());
    let (mut ws, _) = tokio_tungstenite::connect_async(&url).await.unwrap();
    assert!(
        text(&mut ws).await.contains("\"game\":\"g1\""),
        "the state on connect"
    );
    // 20 answers over HTTP, 10 over the socket: the budget of 30, shared.
    for _ in 0..20 {
        assert_eq!(answer(&s).await, 200);
    }
    for i in 0..10 {
        ws.send(Message::text(format!("answer {i}"))).await.unwrap();
        assert!(
            text(&mut ws).await.contains("\"accepted\":true"),
            "answer {i}"
        );
    }
    ws.send(Message::text("one too many")).await.unwrap();
    let refused = text(&mut ws).await;
    assert!(refused.contains("\"code\":\"limit.exceeded\""), "{refused}");
    assert!(refused.contains("\"limit\":\"answers\""), "{refused}");
    ws.send(Message::Ping(b"still".to_vec().into()))
        .await
        .unwrap();
    let pong = tokio::time::timeout(Duration::from_secs(5), ws.next()).await;
    assert!(matches!(pong, Ok(Some(Ok(Message::Pong(_))))), "{pong:?}");
    assert_eq!(answer(&s).await, 429, "the socket spent the POST's budget");
    // Three sockets at once per participant; a fourth is refused at the upgrade.
    let _b = tokio_tungstenite::connect_async(&url).await.unwrap();
    let _c = tokio_tungstenite::connect_async(&url).await.unwrap();
    let fourth = tokio_tungstenite::connect_async(&url).await.unwrap_err();
    assert!(fourth.to_string().contains("429"), "{fourth}");
    // No participant: 400, never a shared key.
    let none = format!("ws://{}/api/games/g1/ws", s.addr());
    let err = tokio_tungstenite::connect_async(&none).await.unwrap_err();
    assert!(err.to_string().contains("400"), "{err}");
}

#[tokio::test]
async fn answers_over_the_socket_share_the_posts_budget_on_memory() {
    answers_over_the_socket_and_http(AnyStore::Memory(MemoryStore::new())).await;
}

#[tokio::test]
async fn answers_over_the_socket_share_the_posts_budget_on_redis() {
    let redis = RedisServer::start();
    answers_over_the_socket_and_http(redis.store()).await;
}

/// Redis down: the answer rules fail open, so does the socket's connection slot; the
/// player's page is served.
#[tokio::test]
async fn with_redis_down_the_socket_opens_and_answers_and_the_play_page_is_served() {
    let s = start(ratekeeper_tests::redis::down_store(), "").await;
    let url = format!("ws://{}/api/games/g1/ws?participant=down", s.addr());
    let (mut ws, _) = tokio_tungstenite::connect_async(&url).await.unwrap();
    assert!(text(&mut ws).await.contains("\"game\":\"g1\""));
    ws.send(Message::text("42")).await.unwrap();
    assert!(text(&mut ws).await.contains("\"accepted\":true"));
    let page = client().get(s.url("/play")).send().await.unwrap();
    assert_eq!(page.status(), 200);
    let page = page.text().await.unwrap();
    assert!(
        page.contains("new WebSocket(") && page.contains("/poll"),
        "{page}"
    );
}
