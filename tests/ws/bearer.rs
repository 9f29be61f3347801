//! The ws guide's common case, as it is written there: `POST /messages` limited per
//! `Bearer` token by a layer, and a socket whose upgrade names its principal with the same
//! extractor; over TCP with tokio-tungstenite, the messages sent either way spend one
//! budget of 30, and an upgrade without a token is a 401.

use std::time::Duration;

use axum::Router;
use axum::extract::ws::{Message as Msg, WebSocketUpgrade};
use axum::extract::{FromRequestParts, Request, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures_util::{SinkExt, StreamExt};
use ratekeeper_axum::tower::extract::{Bearer, KeyExtractor};
use ratekeeper_axum::ws::{MessageRule, SocketLimiter};
use ratekeeper_axum::{
    HandlerLimiter, Limit, Limiter, MemoryStore, RateLimitLayer, RejectionResponse, Rule,
};
use ratekeeper_tests::{Server, client};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

fn app() -> Result<Router, ratekeeper_axum::ConfigError> {
    let limiter = Limiter::new(MemoryStore::new());
    let messages = Limit::sliding_window("messages", 30, Duration::from_secs(60))?;
    let per_user =
        RateLimitLayer::new(limiter.clone()).rule(Rule::new(messages.clone(), Bearer::new()));
    let sockets = SocketLimiter::new(HandlerLimiter::new(limiter)).rule(MessageRule::new(messages));
    Ok(Router::new()
        .route("/messages", post(|| async { "sent" }).route_layer(per_user))
        .route("/ws", get(chat))
        .with_state(sockets))
}

async fn chat(State(sockets): State<SocketLimiter>, request: Request) -> Response {
    let (mut parts, _) = request.into_parts();
    let upgrade = match WebSocketUpgrade::from_request_parts(&mut parts, &()).await {
        Ok(upgrade) => upgrade,
        Err(not_a_socket) => return not_a_socket.into_response(),
    };
    let user = match Bearer::new().extract(&parts) {
        Ok(user) => user,
        Err(missing) => return RejectionResponse(missing).into_response(),
    };
    let accepted = match sockets.accept_parts(user, &parts).await {
        Ok(accepted) => accepted,
        Err(refused) => return refused.into_response(),
    };
    sockets.upgrade(upgrade).on_upgrade(move |ws| async move {
        let mut socket = accepted.socket(ws);
        while let Some(Ok(msg)) = socket.recv().await {
            if let Msg::Text(text) = msg {
                let _ = socket
                    .send(Msg::text(format!("sent {}", text.as_str())))
                    .await;
            }
        }
    })
}

#[tokio::test]
async fn a_socket_named_by_the_routes_bearer_rule_shares_its_budget() {
    let server = Server::start(app().unwrap()).await.unwrap();
    let token = "Bearer chat-user-token-1";
    let post = || async {
        let r = client()
            .post(server.url("/messages"))
            .header("authorization", token);
        r.send().await.unwrap().status()
    };
    for _ in 0..20 {
        assert_eq!(post().await, 200);
    }
    let mut req = format!("ws://{}/ws", server.addr())
        .into_client_request()
        .unwrap();
    req.headers_mut()
        .insert("authorization", token.parse().unwrap());
    let (mut ws, _) = tokio_tungstenite::connect_async(req).await.unwrap();
    let mut sent = 0;
    for i in 0..12 {
        ws.send(Message::text(format!("m{i}"))).await.unwrap();
        let reply = tokio::time::timeout(Duration::from_secs(5), ws.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        let reply = reply.to_text().unwrap().to_owned();
        if reply.starts_with("sent ") {
            sent += 1;
        } else {
            assert!(reply.contains("\"limit\":\"messages\""), "{reply}");
        }
    }
    assert_eq!(sent, 10, "30 in all: 20 by POST, 10 over the socket");
    assert_eq!(post().await, 429, "the socket spent the POST's budget");
    let anonymous = tokio_tungstenite::connect_async(format!("ws://{}/ws", server.addr()))
        .await
        .unwrap_err();
    assert!(anonymous.to_string().contains("401"), "{anonymous}");
}
