//! Limits inside a WebSocket (feature `ws`): every incoming message checked against rules,
//! like a request against a layer's, under the principal named once at the upgrade.
//!
//! - **One budget** per principal across its sockets and its HTTP requests: a rule here and a
//!   layer's rule with the same [`Limit`] and principal count in the same key, on every
//!   store, so an answer sent over the socket and one `POST`ed spend the same budget.
//! - **Control frames are free**: ping, pong and close are never counted.
//! - **Graded answers**: a message a rule refuses is dropped and the client is told, in a
//!   text message of the documented shape below, with the wait; the connection stays. A
//!   rule made with [`MessageRule::closes`] is a hard ceiling: its refusal closes the
//!   connection with 1008 (policy violation). So does the connection's own message
//!   ceiling ([`SocketLimiter::connection_ceiling`]), counted in the connection, with no
//!   store. A store that cannot answer under a closed policy closes with 1013 (try again
//!   later).
//! - **Sizes before reads**: [`SocketLimiter::upgrade`] sets the largest message and frame
//!   the socket reads (64 KiB by default), so a huge message is refused before it is read
//!   whole.
//! - **Connections per principal**: [`SocketLimiter::connections`] takes an in-flight slot
//!   at the upgrade ([`SocketLimiter::accept`]: 429 over HTTP when every slot is held) and
//!   holds it while the socket lives; a client that never sends a close frees it when its
//!   connection drops.
//!
//! ```
//! use axum::extract::ws::{Message, WebSocketUpgrade};
//! use axum::extract::{Query, State};
//! use axum::response::{IntoResponse, Response};
//! use axum::{Router, routing::get};
//! use ratekeeper_axum::core::{InFlight, Principal};
//! use ratekeeper_axum::ws::{MessageRule, SocketLimiter};
//! use ratekeeper_axum::{HandlerLimiter, Limit, Limiter, MemoryStore};
//! use std::time::Duration;
//!
//! # fn main() -> Result<(), ratekeeper_axum::ConfigError> {
//! let minute = Duration::from_secs(60);
//! // The same limit the HTTP route's layer uses: one budget for both.
//! let answers = Limit::sliding_window("answers", 30, minute)?;
//! let sockets = SocketLimiter::new(HandlerLimiter::new(Limiter::new(MemoryStore::new())))
//!     // A hard ceiling first: 120 messages a minute per player, then the connection closes.
//!     .rule(MessageRule::new(Limit::sliding_window("ws-ceiling", 120, minute)?).closes())
//!     .rule(MessageRule::new(answers))
//!     .connection_ceiling(20, Duration::from_secs(1))? // a flood of tiny messages: 1008
//!     .connections(InFlight::new("ws-connections", 3, Duration::from_secs(30))?);
//!
//! async fn ws(
//!     State(sockets): State<SocketLimiter>,
//!     Query(q): Query<std::collections::HashMap<String, String>>,
//!     upgrade: WebSocketUpgrade,
//! ) -> Response {
//!     let who = Principal::participant(q.get("participant").map_or("", String::as_str));
//!     let accepted = match sockets.accept(who, &http::HeaderMap::new()).await {
//!         Ok(accepted) => accepted,
//!         Err(refused) => return refused.into_response(), // 429: every slot held
//!     };
//!     sockets.upgrade(upgrade).on_upgrade(move |ws| async move {
//!         let mut socket = accepted.socket(ws);
//!         while let Some(Ok(msg)) = socket.recv().await {
//!             if let Message::Text(answer) = msg {
//!                 let _ = socket.send(Message::text(format!("got {answer}"))).await;
//!             }
//!         }
//!     })
//! }
//! let app: Router = Router::new().route("/ws", get(ws)).with_state(sockets);
//! # let _ = app; Ok(()) }
//! ```
//!
//! **The refusal message** is a text message, JSON, with the fields of the HTTP answer
//! (the same [`Answering`](ratekeeper_tower::Answering) renders both):
//!
//! ```json
//! {"type":"rate_limited","code":"limit.exceeded","limit":"answers","retry_after":12,
//!  "headers":{"retry-after":"12","ratelimit-policy":"\"answers\";q=30;w=60",
//!             "ratelimit":"\"answers\";r=0;t=12"}}
//! ```
//!
//! `type` is always `rate_limited`; `code` is the refusal's stable code; `limit` and
//! `retry_after` (whole seconds, never 0) are present when a limit refused; `headers`
//! holds `Retry-After` and every `RateLimit*` field the HTTP answer would carry, by their
//! lower-case names.
//!
//! **What a client can do**: open many sockets under one principal (one budget: no gain;
//! [`SocketLimiter::connections`] caps them), flood tiny messages (the connection ceiling,
//! then 1008, with no store call past it), send huge ones (refused at the frame and message
//! size, before they are read whole), never send a close (the slot frees when the
//! connection drops), and open each socket under a fresh principal (keys as bounded as
//! HTTP's: the memory store's per-limit cap, Redis's TTLs; name the principal from
//! something the client cannot mint freely where that matters).

mod notice;
mod socket;

use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::{Message, WebSocketUpgrade};
use ratekeeper_core::{
    Chain, ChainMode, ConfigError, ConfigErrorKind, FailurePolicy, InFlight, Limit, Principal,
};

use crate::HandlerLimiter;

pub use socket::{Accepted, Closed, LimitedSocket};

/// The largest message (and frame) a limited socket reads by default: 64 KiB.
pub const DEFAULT_MAX_MESSAGE: usize = 64 * 1024;

/// A message's cost: kibibytes of its payload, rounded up, at least 1.
pub fn message_kib(msg: &Message) -> u64 {
    let len = match msg {
        Message::Text(t) => t.len(),
        Message::Binary(b) => b.len(),
        _ => 0,
    };
    (len as u64).div_ceil(1024).max(1)
}

type CostFn = dyn Fn(&Message) -> u64 + Send + Sync;

/// One limit every data message of a socket is checked against.
#[derive(Clone)]
pub struct MessageRule {
    limit: Limit,
    cost: Option<Arc<CostFn>>,
    policy: FailurePolicy,
    closes: bool,
}

impl std::fmt::Debug for MessageRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MessageRule")
            .field("limit", &self.limit.name())
            .field("policy", &self.policy)
            .field("closes", &self.closes)
            .finish_non_exhaustive()
    }
}

impl MessageRule {
    /// A rule charging each data message 1, failing closed when the store cannot answer.
    pub fn new(limit: Limit) -> Self {
        Self {
            limit,
            cost: None,
            policy: FailurePolicy::Closed,
            closes: false,
        }
    }

    /// Each message's cost, from the message (its size: [`message_kib`]; a weight by its
    /// type). A computed 0 counts as 1, as the layer's computed costs do.
    #[must_use]
    pub fn cost(mut self, f: impl Fn(&Message) -> u64 + Send + Sync + 'static) -> Self {
        self.cost = Some(Arc::new(f));
        self
    }

    /// What a message gets when the store cannot answer: closed (the default) closes the
    /// connection with 1013, memory counts in this process, open lets it through.
    #[must_use]
    pub fn on_store_error(mut self, policy: FailurePolicy) -> Self {
        self.policy = policy;
        self
    }

    /// A hard ceiling: this rule's refusal closes the connection with 1008 instead of
    /// dropping the message. Put ceilings before the rules that only drop: with a ceiling,
    /// each message is counted by every rule up to and including the one that refused it
    /// (`ChainMode::CountAttempts`), so a ceiling ahead of the budget counts the messages
    /// the budget refuses, and a client hammering past its budget stays refused. Without
    /// a ceiling, a refused message consumes nothing (`ChainMode::InOrder`).
    #[must_use]
    pub fn closes(mut self) -> Self {
        self.closes = true;
        self
    }

    fn cost_of(&self, msg: &Message) -> u64 {
        self.cost.as_ref().map_or(1, |f| f(msg).max(1))
    }
}

/// How a socket's messages are limited: built once, cloned into each connection.
#[derive(Debug, Clone)]
pub struct SocketLimiter {
    handler: HandlerLimiter,
    rules: Arc<[MessageRule]>,
    /// Derived from the rules when one is added: the chain's mode and the strictest policy.
    mode: ChainMode,
    policy: FailurePolicy,
    ceiling: Option<(u32, Duration)>,
    connections: Option<InFlight>,
    max_message: usize,
}

impl SocketLimiter {
    /// Limits checked with `handler`'s limiter and answered in its `Answering`'s forms.
    pub fn new(handler: HandlerLimiter) -> Self {
        Self {
            handler,
            rules: Arc::from(Vec::new()),
            mode: ChainMode::InOrder,
            policy: FailurePolicy::Closed,
            ceiling: None,
            connections: None,
            max_message: DEFAULT_MAX_MESSAGE,
        }
    }

    /// Adds a rule; every data message is checked against all of them, in order, in one
    /// store call.
    #[must_use]
    pub fn rule(mut self, rule: MessageRule) -> Self {
        let mut rules = self.rules.to_vec();
        rules.push(rule);
        // With a ceiling, every attempt counts up to the refusing rule (that one too, so a
        // client hammering past its budget stays refused); without one, a refused message
        // consumes nothing, as a refused request does.
        self.mode = if rules.iter().any(|r| r.closes) {
            ChainMode::CountAttempts
        } else {
            ChainMode::InOrder
        };
        self.policy = rules
            .iter()
            .map(|r| r.policy)
            .reduce(FailurePolicy::strictest)
            .unwrap_or(FailurePolicy::Closed);
        self.rules = Arc::from(rules);
        self
    }

    /// At most `messages` data messages per `per` on one connection, counted in the
    /// connection (no store): the next one closes it with 1008. `ws.ceiling_invalid` for 0.
    pub fn connection_ceiling(mut self, messages: u32, per: Duration) -> Result<Self, ConfigError> {
        if messages == 0 || per.is_zero() {
            return Err(ConfigError::new(
                ConfigErrorKind::SocketInvalid,
                "connection_ceiling",
                "a connection's ceiling needs a number of messages and a period above 0",
            ));
        }
        self.ceiling = Some((messages, per));
        Ok(self)
    }

    /// At most `limit.max()` sockets open at once per principal (across instances on a
    /// shared store), taken by [`accept`](Self::accept) and held while the socket lives.
    /// When the store cannot answer, the rules' strictest failure policy decides (closed:
    /// the upgrade is a 503; memory: a slot in the fallback store; open: no slot).
    #[must_use]
    pub fn connections(mut self, limit: InFlight) -> Self {
        self.connections = Some(limit);
        self
    }

    /// The largest message the socket reads, and the largest frame (default
    /// [`DEFAULT_MAX_MESSAGE`]): a larger one ends the connection before it is read whole.
    #[must_use]
    pub fn max_message_size(mut self, bytes: usize) -> Self {
        self.max_message = bytes;
        self
    }

    /// `upgrade` with this limiter's message and frame sizes.
    pub fn upgrade(&self, upgrade: WebSocketUpgrade) -> WebSocketUpgrade {
        upgrade
            .max_message_size(self.max_message)
            .max_frame_size(self.max_message)
    }

    /// Admits a socket for `principal` at its upgrade: takes its connection slot when
    /// [`connections`](Self::connections) is set. `Err` is the HTTP answer for the upgrade
    /// request (429 when every slot is held, 503 when the store is down and fails closed),
    /// made for a request with these headers.
    pub async fn accept(
        &self,
        principal: Principal,
        headers: &http::HeaderMap,
    ) -> Result<Accepted, crate::Refused> {
        let slot = match &self.connections {
            None => None,
            Some(limit) => {
                let key = limit.slots(principal.clone());
                self.handler.take_slot(&key, self.policy, headers).await?
            }
        };
        Ok(Accepted::new(self.clone(), principal, slot))
    }

    /// The chain one message is checked with, and the cost per rule.
    fn chain(&self, principal: &Principal, msg: &Message) -> Chain {
        let mut chain = Chain::new().mode(self.mode);
        for rule in self.rules.iter() {
            chain = chain.check_cost(&rule.limit, principal.clone(), rule.cost_of(msg));
        }
        chain
    }
}

#[cfg(test)]
mod tests {
    use super::message_kib;
    use axum::extract::ws::Message;

    #[test]
    fn a_message_costs_its_kibibytes_rounded_up_and_at_least_one() {
        assert_eq!(message_kib(&Message::text("a")), 1);
        assert_eq!(message_kib(&Message::text("x".repeat(1024))), 1);
        assert_eq!(message_kib(&Message::binary(vec![0u8; 1025])), 2);
        assert_eq!(message_kib(&Message::Ping(Vec::new().into())), 1);
    }
}
