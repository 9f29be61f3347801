//! Limits inside a WebSocket, over TCP with a real client (tokio-tungstenite), on the memory
//! store, a real `redis-server` and a Cluster: a message over the budget gets the refusal's
//! text and the socket stays open; past the ceiling the close code is 1008; the socket and
//! a `POST` share one budget; control frames are free; a store that is down under a closed
//! policy closes with 1013. And what an attacker can do: many sockets for one principal,
//! a flood of tiny messages, a huge message, never sending a close, fresh principals.

use std::collections::HashMap;
use std::time::Duration;

use axum::Router;
use axum::extract::ws::{Message as Msg, WebSocketUpgrade};
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures_util::{SinkExt, StreamExt};
use ratekeeper_axum::ws::{Closed, MessageRule, SocketLimiter};
use ratekeeper_axum::{HandlerLimiter, Limit, Limiter, RateLimitLayer, Rule};
use ratekeeper_core::{AnyStore, InFlight, MemoryStore, Principal, PrincipalKind};
use ratekeeper_tests::redis::{RedisCluster, RedisServer, down_store, principal_slot};
use ratekeeper_tests::{Server, client};
use ratekeeper_tower::extract::HeaderKey;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

mod attacks;
mod bearer;
mod keyed;

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

const MINUTE: Duration = Duration::from_secs(60);
/// The answer budget, shared by the socket and the `POST`.
const BUDGET: u64 = 3;
/// The hard ceiling per principal: messages sent, refused ones included.
const CEILING: u64 = 6;

fn sockets(store: AnyStore, answers: &Limit) -> SocketLimiter {
    SocketLimiter::new(HandlerLimiter::new(Limiter::new(store)))
        .rule(
            MessageRule::new(Limit::fixed_window("ws-ceiling", CEILING, MINUTE).unwrap()).closes(),
        )
        .rule(MessageRule::new(answers.clone()))
        .connection_ceiling(20, Duration::from_secs(1))
        .unwrap()
        .connections(InFlight::new("ws-connections", 2, Duration::from_secs(30)).unwrap())
        .max_message_size(1024)
}

/// `POST /answers` (keyed on `x-participant-id`) and `GET /ws?p=<participant>`, which
/// echoes each admitted text as `ok:<text>`, both spending `answers`.
fn app(store: AnyStore) -> Router {
    let answers = Limit::fixed_window("ws-answers", BUDGET, MINUTE).unwrap();
    let player = HeaderKey::new(
        "x-participant-id".parse().unwrap(),
        PrincipalKind::Participant,
    );
    let layer =
        RateLimitLayer::new(Limiter::new(store.clone())).rule(Rule::new(answers.clone(), player));
    Router::new()
        .route("/answers", post(|| async { "ok" }).route_layer(layer))
        .route("/ws", get(ws))
        .with_state(sockets(store, &answers))
}

async fn ws(
    State(sockets): State<SocketLimiter>,
    Query(q): Query<HashMap<String, String>>,
    upgrade: WebSocketUpgrade,
) -> Response {
    let who = Principal::participant(q.get("p").map_or("", String::as_str));
    let accepted = match sockets.accept(who, &http::HeaderMap::new()).await {
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

async fn connect(server: &Server, who: &str) -> Result<Ws, tokio_tungstenite::tungstenite::Error> {
    let url = format!("ws://{}/ws?p={who}", server.addr());
    tokio_tungstenite::connect_async(url)
        .await
        .map(|(ws, _)| ws)
}

/// The next message that is not a pong, within 5 s.
async fn next(ws: &mut Ws) -> Option<Message> {
    loop {
        match tokio::time::timeout(Duration::from_secs(5), ws.next()).await {
            Ok(Some(Ok(Message::Pong(_)))) => continue,
            Ok(Some(Ok(m))) => return Some(m),
            _ => return None,
        }
    }
}

/// Sends `text`, answers the reply as text (a close frame as `close:<code>`).
async fn say(ws: &mut Ws, text: &str) -> String {
    ws.send(Message::text(text)).await.unwrap();
    match next(ws).await {
        Some(Message::Text(t)) => t.as_str().to_owned(),
        Some(Message::Close(Some(f))) => format!("close:{}", u16::from(f.code)),
        other => format!("{other:?}"),
    }
}

async fn pong(ws: &mut Ws) -> bool {
    ws.send(Message::Ping(b"hi".to_vec().into())).await.unwrap();
    matches!(
        tokio::time::timeout(Duration::from_secs(5), ws.next()).await,
        Ok(Some(Ok(Message::Pong(p)))) if &p[..] == b"hi"
    )
}

async fn post_answer(server: &Server, who: &str) -> u16 {
    client()
        .post(server.url("/answers"))
        .header("x-participant-id", who)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// The whole story on one store: shared budget, the refusal's text, free control frames,
/// the ceiling's 1008.
async fn one_budget_graded(store: AnyStore, who: &str) {
    let server = Server::start(app(store)).await.unwrap();
    assert_eq!(
        post_answer(&server, who).await,
        200,
        "1 of {BUDGET}, over HTTP"
    );
    let mut ws = connect(&server, who).await.unwrap();
    assert!(pong(&mut ws).await, "a ping is answered");
    assert_eq!(say(&mut ws, "a").await, "ok:a");
    assert_eq!(say(&mut ws, "b").await, "ok:b");
    // The budget is spent: the socket's answer is the refusal, and the socket stays.
    let refused = say(&mut ws, "c").await;
    let v: serde_json::Value = serde_json::from_str(&refused).expect(&refused);
    assert_eq!(v["type"], "rate_limited", "{refused}");
    assert_eq!(v["code"], "limit.exceeded", "{refused}");
    assert_eq!(v["limit"], "ws-answers", "{refused}");
    let wait = v["retry_after"].as_u64().expect(&refused);
    assert!((1..=60).contains(&wait), "{refused}");
    assert_eq!(v["headers"]["retry-after"], wait.to_string(), "{refused}");
    let policy = v["headers"]["ratelimit-policy"].as_str().expect(&refused);
    assert!(policy.contains("\"ws-answers\";q=3;w=60"), "{refused}");
    assert!(
        v["headers"]["ratelimit"]
            .as_str()
            .expect(&refused)
            .contains(";r=0"),
        "{refused}"
    );
    assert!(pong(&mut ws).await, "the socket stays open after a refusal");
    // The same budget over HTTP.
    assert_eq!(
        post_answer(&server, who).await,
        429,
        "the socket spent the POST's budget"
    );
    // Control frames are free: 30 pings, and the ceiling still counts only messages.
    for _ in 0..30 {
        assert!(pong(&mut ws).await);
    }
    // Ceiling: a, b, c counted; d, e, f are refused and counted; the 7th closes.
    for m in ["d", "e", "f"] {
        assert!(say(&mut ws, m).await.contains("limit.exceeded"), "{m}");
    }
    assert_eq!(say(&mut ws, "g").await, "close:1008", "past the ceiling");
}

#[tokio::test]
async fn one_budget_graded_answers_on_memory() {
    one_budget_graded(AnyStore::Memory(MemoryStore::new()), "ann").await;
}

#[tokio::test]
async fn one_budget_graded_answers_on_redis() {
    let redis = RedisServer::start();
    one_budget_graded(redis.store(), "ann").await;
}

#[tokio::test]
async fn one_budget_graded_answers_on_a_cluster() {
    let cluster = RedisCluster::start();
    // Principals on different masters: each master's keys answer alike.
    for who in ["ann", "bob", "cat"] {
        one_budget_graded(cluster.store(), who).await;
    }
}

#[tokio::test]
async fn a_store_down_under_a_closed_policy_closes_with_1013() {
    let server = Server::start(app(down_store())).await.unwrap();
    // The connection slot fails closed too: no socket at all while the store is down.
    let err = connect(&server, "ann").await.unwrap_err();
    assert!(err.to_string().contains("503"), "{err}");
    // Without a connection limit, the first message is refused with 1013.
    let answers = Limit::fixed_window("ws-answers", BUDGET, MINUTE).unwrap();
    let open = SocketLimiter::new(HandlerLimiter::new(Limiter::new(down_store())))
        .rule(MessageRule::new(answers));
    let app = Router::new().route("/ws", get(ws)).with_state(open);
    let server = Server::start(app).await.unwrap();
    let mut ws = connect(&server, "ann").await.unwrap();
    assert!(pong(&mut ws).await, "control frames need no store");
    assert_eq!(say(&mut ws, "a").await, "close:1013");
    assert_eq!(Closed::StoreUnavailable.code(), u16::from(CloseCode::Again));
}

/// On a Cluster, one master down closes with 1013 only the sockets whose principal it owns;
/// a principal on a live master is answered as before.
#[tokio::test]
async fn one_dead_cluster_master_closes_only_its_principals_sockets_with_1013() {
    let mut cluster = RedisCluster::start_with(&["--cluster-require-full-coverage", "no"]);
    let victim = cluster.nodes()[1].port();
    let owners = cluster.slot_owners(0);
    let dead = owners
        .iter()
        .find(|(p, _)| *p == victim)
        .map(|(_, r)| r.clone())
        .unwrap();
    let on_dead = |who: &str| {
        let slot = principal_slot(Principal::participant(who).as_str());
        dead.iter().any(|&(a, b)| a <= slot && slot <= b)
    };
    let mut names = (0..).map(|i| format!("n{i}"));
    let doomed = names.by_ref().find(|w| on_dead(w)).unwrap();
    let alive = names.find(|w| !on_dead(w)).unwrap();
    let answers = Limit::fixed_window("ws-node", 100, MINUTE).unwrap();
    let sockets = SocketLimiter::new(HandlerLimiter::new(Limiter::new(cluster.store())))
        .rule(MessageRule::new(answers));
    let server = Server::start(Router::new().route("/ws", get(ws)).with_state(sockets))
        .await
        .unwrap();
    let mut a = connect(&server, &doomed).await.unwrap();
    let mut b = connect(&server, &alive).await.unwrap();
    assert_eq!(say(&mut a, "1").await, "ok:1");
    assert_eq!(say(&mut b, "1").await, "ok:1");
    cluster.nodes_mut()[1].kill();
    assert_eq!(
        say(&mut a, "2").await,
        "close:1013",
        "{doomed}'s master is dead"
    );
    for i in 2..6 {
        assert_eq!(
            say(&mut b, &i.to_string()).await,
            format!("ok:{i}"),
            "{alive} lives"
        );
    }
}
