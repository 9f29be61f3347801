#![doc = include_str!("../../docs/ws.md")]

mod notice;
mod socket;

use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::{Message, WebSocketUpgrade};
use ratekeeper_core::{
    Chain, ChainMode, ConfigError, ConfigErrorKind, FailurePolicy, InFlight, Limit, Principal,
};
use ratekeeper_tower::extract::KeyExtractor;

use crate::HandlerLimiter;

pub use socket::{Accepted, Closed, LimitedSocket};

/// The largest message (and frame) a limited socket reads by default: 64 KiB.
pub const DEFAULT_MAX_MESSAGE: usize = 64 * 1024;
/// The most a socket keeps of what it writes and the client has not read, by default:
/// 1 MiB (pongs to a client that pings and never reads included). Also the largest message
/// it can send.
pub const DEFAULT_MAX_WRITE_BUFFER: usize = 1024 * 1024;
/// How long a write may wait for the client to read, by default: past it the connection is
/// closed.
pub const DEFAULT_WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a socket waits for any frame from the client by default (a ping is sent half
/// way): past it the connection is closed with 1001.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a socket that sent its close frame reads on (discarding) for the client's, so
/// that unread messages do not make the kernel reset the connection over the close frame.
const CLOSE_DRAIN: Duration = Duration::from_secs(2);

/// A key extractor run on the upgrade request.
type Extractor = Arc<dyn KeyExtractor>;

/// A cap on sockets per principal a key names ([`SocketLimiter::connections_by`]).
#[derive(Clone)]
struct KeyedCap(InFlight, Extractor);

impl std::fmt::Debug for KeyedCap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("KeyedCap")
            .field(&self.0)
            .finish_non_exhaustive()
    }
}

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
///
/// You add one to a `SocketLimiter` for each limit the messages spend, closing the
/// connection when it refuses (`closes`) or not.
#[derive(Clone)]
pub struct MessageRule {
    limit: Limit,
    key: Option<Extractor>,
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
            .field("keyed", &self.key.is_some())
            .finish_non_exhaustive()
    }
}

impl MessageRule {
    /// A rule charging each data message 1, failing closed when the store cannot answer.
    pub fn new(limit: Limit) -> Self {
        Self {
            limit,
            key: None,
            cost: None,
            policy: FailurePolicy::Closed,
            closes: false,
        }
    }

    /// Counted under the principal `key` names from the upgrade request (the client's IP,
    /// say) rather than the socket's: the same limit and extractor as a layer's rule give
    /// the socket's messages and the route's requests one budget, second key included. The
    /// request must reach [`SocketLimiter::accept_parts`] (its `ConnectInfo` for the peer
    /// address); a request the extractor finds no principal in is refused at the upgrade
    /// with the extractor's answer (400).
    #[must_use]
    pub fn keyed(mut self, key: impl KeyExtractor) -> Self {
        self.key = Some(Arc::new(key));
        self
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
///
/// You need it for a WebSocket route whose messages must spend limits, a route's budget
/// included (the module's guide shows both).
#[derive(Debug, Clone)]
pub struct SocketLimiter {
    handler: HandlerLimiter,
    rules: Arc<[MessageRule]>,
    /// Derived from the rules when one is added: the chain's mode and the strictest policy.
    mode: ChainMode,
    policy: FailurePolicy,
    ceiling: Option<(u64, Duration)>,
    connections: Option<InFlight>,
    connections_by: Arc<[KeyedCap]>,
    max_message: usize,
    max_write_buffer: usize,
    write_timeout: Duration,
    idle_timeout: Option<Duration>,
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
            connections_by: Arc::from(Vec::new()),
            max_message: DEFAULT_MAX_MESSAGE,
            max_write_buffer: DEFAULT_MAX_WRITE_BUFFER,
            write_timeout: DEFAULT_WRITE_TIMEOUT,
            idle_timeout: Some(DEFAULT_IDLE_TIMEOUT),
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
    pub fn connection_ceiling(mut self, messages: u64, per: Duration) -> Result<Self, ConfigError> {
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

    /// At most `limit.max()` sockets open at once per principal that `key` names from the
    /// upgrade request (the client's IP: a cap per address, sized for the most devices one
    /// address serves), taken by [`accept_parts`](Self::accept_parts) beside
    /// [`connections`](Self::connections) and held while the socket lives.
    #[must_use]
    pub fn connections_by(mut self, limit: InFlight, key: impl KeyExtractor) -> Self {
        let mut by = self.connections_by.to_vec();
        by.push(KeyedCap(limit, Arc::new(key)));
        self.connections_by = Arc::from(by);
        self
    }

    /// The most the socket keeps of what it writes and the client has not read (default
    /// [`DEFAULT_MAX_WRITE_BUFFER`], at least 64 KiB): a client that pings and never reads
    /// grows the server by no more. It is also the largest message the socket can send.
    #[must_use]
    pub fn max_write_buffer(mut self, bytes: usize) -> Self {
        self.max_write_buffer = bytes.max(64 * 1024);
        self
    }

    /// How long a write (a message sent, or the pong to a client's ping) may wait for the
    /// client to read (default [`DEFAULT_WRITE_TIMEOUT`]): past it the connection is closed
    /// ([`Closed::WriteStalled`]).
    #[must_use]
    pub fn write_timeout(mut self, timeout: Duration) -> Self {
        self.write_timeout = timeout;
        self
    }

    /// How long [`LimitedSocket::recv`] waits for any frame from the client (default
    /// [`DEFAULT_IDLE_TIMEOUT`]): half way it sends a ping (any WebSocket client answers
    /// it), and past it the connection is closed with 1001 ([`Closed::Idle`]). `None`: no
    /// timeout.
    #[must_use]
    pub fn idle_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.idle_timeout = timeout.filter(|t| !t.is_zero());
        self
    }

    /// The largest message the socket reads, and the largest frame (default
    /// [`DEFAULT_MAX_MESSAGE`]): a larger one ends the connection before it is read whole.
    #[must_use]
    pub fn max_message_size(mut self, bytes: usize) -> Self {
        self.max_message = bytes;
        self
    }

    /// `upgrade` with this limiter's message and frame sizes and its write buffer's bound.
    pub fn upgrade(&self, upgrade: WebSocketUpgrade) -> WebSocketUpgrade {
        // tungstenite needs the bound above the buffer it fills before writing.
        let buffer = (self.max_write_buffer / 2).min(128 * 1024);
        upgrade
            .max_message_size(self.max_message)
            .max_frame_size(self.max_message)
            .write_buffer_size(buffer)
            .max_write_buffer_size(self.max_write_buffer)
    }

    /// Admits a socket for `principal` at its upgrade, from the request's headers alone:
    /// [`accept_parts`](Self::accept_parts) for a request of only these headers (a
    /// [`keyed`](MessageRule::keyed) rule or [`connections_by`](Self::connections_by) that
    /// needs more, the peer address say, refuses it: use `accept_parts`).
    pub async fn accept(
        &self,
        principal: Principal,
        headers: &http::HeaderMap,
    ) -> Result<Accepted, crate::Refused> {
        let mut parts = http::Request::new(()).into_parts().0;
        parts.headers = headers.clone();
        self.accept_parts(principal, &parts).await
    }

    /// Admits a socket for `principal` at its upgrade request `parts`: names each
    /// [`keyed`](MessageRule::keyed) rule's principal from them, and takes the connection
    /// slots ([`connections`](Self::connections) for `principal`,
    /// [`connections_by`](Self::connections_by) for the principals their keys name). `Err`
    /// is the HTTP answer for the upgrade request: the extractor's (400) when a key finds
    /// no principal, 429 when every slot of a cap is held, 503 when the store is down and
    /// fails closed.
    pub async fn accept_parts(
        &self,
        principal: Principal,
        parts: &http::request::Parts,
    ) -> Result<Accepted, crate::Refused> {
        let refuse =
            |r: ratekeeper_tower::extract::Rejection| self.handler.refuse(r.into(), &parts.headers);
        let mut principals = Vec::with_capacity(self.rules.len());
        for rule in self.rules.iter() {
            principals.push(match &rule.key {
                Some(key) => key.extract(parts).map_err(refuse)?,
                None => principal.clone(),
            });
        }
        let mut caps: Vec<(&InFlight, Principal)> = Vec::new();
        if let Some(limit) = &self.connections {
            caps.push((limit, principal.clone()));
        }
        for KeyedCap(limit, key) in self.connections_by.iter() {
            caps.push((limit, key.extract(parts).map_err(refuse)?));
        }
        let mut slots = Vec::with_capacity(caps.len());
        for (limit, who) in caps {
            let key = limit.slots(who);
            // A cap refused drops the slots taken before it.
            if let Some(slot) = self
                .handler
                .take_slot(&key, self.policy, &parts.headers)
                .await?
            {
                slots.push(slot);
            }
        }
        Ok(Accepted::new(self.clone(), principal, principals, slots))
    }

    /// The chain one message is checked with: each rule under its principal, at its cost.
    fn chain(&self, principals: &[Principal], msg: &Message) -> Chain {
        let mut chain = Chain::new().mode(self.mode);
        for (rule, who) in self.rules.iter().zip(principals) {
            chain = chain.check_cost(&rule.limit, who.clone(), rule.cost_of(msg));
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
