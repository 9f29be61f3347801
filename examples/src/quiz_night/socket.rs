//! `GET /api/games/{game}/ws`: answers and the game's state over a WebSocket, under the same
//! answer budget as `POST /api/games/{game}/answers`. The poll stays as the fallback.
//!
//! A browser cannot set headers on a WebSocket, so the participant comes from the query
//! (`?participant=p1`) or, for other clients, `x-participant-id`: one principal either way,
//! the same the `POST` is counted under.

use std::time::Duration;

use axum::extract::ws::{Message, WebSocketUpgrade};
use axum::extract::{FromRequestParts, Path, Query, Request, State};
use axum::response::{IntoResponse, Response};
use ratekeeper_axum::ws::{MessageRule, SocketLimiter};
use ratekeeper_core::{ConfigError, FailurePolicy, InFlight, Limit, Principal};
use ratekeeper_tower::extract::{ClientIp, Rejection};
use serde::Deserialize;
use serde_json::json;

use super::{Limits, QuizState};

/// How often the socket sends the game's state (the poll's period, pushed).
const STATE_EVERY: Duration = Duration::from_secs(10);

/// Sockets open at once from one client IP: a room of 100 phones behind one address, each
/// with a socket and room to reconnect.
const SOCKETS_PER_IP: u64 = 200;

/// The socket's limits: 120 messages a minute per participant close the socket (1008, a
/// client ignoring its refusals); the answer budgets shared with the `POST`, both keys (30
/// a minute per participant, 600 per client IP) drop a refused answer with the refusal's
/// text; 20 messages a second on one connection close it; 3 sockets at once per
/// participant and 200 per IP; messages up to 4 KiB; a client silent for 30 s (no pong to
/// the ping sent at 15 s) or not reading for 10 s is closed.
pub(super) fn limiter(
    limits: &Limits,
    handler: ratekeeper_axum::HandlerLimiter,
    client: &ClientIp,
) -> Result<SocketLimiter, ConfigError> {
    let minute = Duration::from_secs(60);
    let half_minute = Duration::from_secs(30);
    Ok(SocketLimiter::new(handler)
        .rule(
            MessageRule::new(Limit::sliding_window("answers-ws-ceiling", 120, minute)?)
                .closes()
                .on_store_error(FailurePolicy::Open),
        )
        .rule(MessageRule::new(limits.answers.clone()).on_store_error(FailurePolicy::Open))
        .rule(
            MessageRule::new(limits.answers_ip.clone())
                .keyed(client.clone())
                .on_store_error(FailurePolicy::Open),
        )
        .connection_ceiling(20, Duration::from_secs(1))?
        .connections(InFlight::new("ws-connections", 3, half_minute)?)
        .connections_by(
            InFlight::new("ws-connections-ip", SOCKETS_PER_IP, half_minute)?,
            client.clone(),
        )
        .idle_timeout(Some(half_minute))
        .max_message_size(4 * 1024))
}

#[derive(Deserialize)]
pub(super) struct Who {
    participant: Option<String>,
}

pub(super) async fn socket(
    State(state): State<QuizState>,
    Path(game): Path<String>,
    Query(who): Query<Who>,
    request: Request,
) -> Response {
    // The upgrade request's head: the participant's keys and the client's IP come from it.
    let (mut parts, _) = request.into_parts();
    let upgrade = match WebSocketUpgrade::from_request_parts(&mut parts, &state).await {
        Ok(upgrade) => upgrade,
        Err(not_a_socket) => return not_a_socket.into_response(),
    };
    let headers = &parts.headers;
    let id = who.participant.or_else(|| {
        headers
            .get("x-participant-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    });
    let Some(id) = id.filter(|id| !id.is_empty() && id.len() <= 128) else {
        let missing = Rejection::missing(
            "principal.missing",
            "a participant (?participant= or x-participant-id) is required",
        );
        return state
            .limiter
            .refuse(missing.into(), headers)
            .into_response();
    };
    let accepted = match state
        .sockets
        .accept_parts(Principal::participant(id), &parts)
        .await
    {
        Ok(accepted) => accepted,
        Err(refused) => return refused.into_response(),
    };
    state
        .sockets
        .upgrade(upgrade)
        .on_upgrade(move |ws| async move {
            let mut socket = accepted.socket(ws);
            let state_of = |game: &str| json!({ "game": game, "question": null, "open": true });
            if socket
                .send(Message::text(state_of(&game).to_string()))
                .await
                .is_err()
            {
                return;
            }
            let mut tick = tokio::time::interval(STATE_EVERY);
            tick.tick().await;
            loop {
                tokio::select! {
                    msg = socket.recv() => match msg {
                        Some(Ok(Message::Text(_) | Message::Binary(_))) => {
                            let reply = json!({ "game": game, "accepted": true });
                            if socket.send(Message::text(reply.to_string())).await.is_err() {
                                return;
                            }
                        }
                        Some(Ok(_)) => {}
                        Some(Err(_)) | None => return,
                    },
                    _ = tick.tick() => {
                        if socket.send(Message::text(state_of(&game).to_string())).await.is_err() {
                            return;
                        }
                    }
                }
            }
        })
}
