//! A limited socket: the receive loop that checks each data message.

use axum::extract::ws::{CloseFrame, Message, WebSocket, close_code};
use ratekeeper_core::limiter::Slot;
use ratekeeper_core::{Answer, Principal};
use ratekeeper_tower::{RefusalKind, Verdict};
use tokio::time::Instant;

use super::{SocketLimiter, notice};

/// A socket admitted by [`SocketLimiter::accept`]: its principal and its connection slot,
/// waiting for the upgrade to complete.
#[derive(Debug)]
pub struct Accepted {
    limiter: SocketLimiter,
    principal: Principal,
    slot: Option<Slot>,
}

impl Accepted {
    pub(super) fn new(limiter: SocketLimiter, principal: Principal, slot: Option<Slot>) -> Self {
        Self {
            limiter,
            principal,
            slot,
        }
    }

    /// The upgraded socket, limited. It holds the connection slot until it is dropped.
    pub fn socket(self, ws: WebSocket) -> LimitedSocket {
        LimitedSocket {
            inner: ws,
            limiter: self.limiter,
            principal: self.principal,
            _slot: self.slot,
            window: None,
            closed: None,
        }
    }
}

/// Why a limited socket closed the connection itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Closed {
    /// The connection's own message ceiling: 1008.
    ConnectionCeiling,
    /// A rule made with [`MessageRule::closes`](super::MessageRule::closes) refused: 1008.
    Ceiling,
    /// The store could not answer and the rules fail closed: 1013.
    StoreUnavailable,
}

impl Closed {
    /// The close code sent.
    pub fn code(self) -> u16 {
        match self {
            Self::ConnectionCeiling | Self::Ceiling => close_code::POLICY,
            Self::StoreUnavailable => close_code::AGAIN,
        }
    }

    fn reason(self) -> &'static str {
        match self {
            Self::ConnectionCeiling => "connection message ceiling",
            Self::Ceiling => "message ceiling",
            Self::StoreUnavailable => "rate limit store unavailable",
        }
    }
}

/// A WebSocket whose incoming data messages are checked against a [`SocketLimiter`]'s
/// rules; ping, pong and close frames pass uncounted.
#[derive(Debug)]
pub struct LimitedSocket {
    inner: WebSocket,
    limiter: SocketLimiter,
    principal: Principal,
    _slot: Option<Slot>,
    /// The connection ceiling's window: its start and the messages in it.
    window: Option<(Instant, u32)>,
    closed: Option<Closed>,
}

/// What one message's check decided.
enum Check {
    Admit,
    Drop(String),
    Close(Closed),
}

impl LimitedSocket {
    /// The next admitted message (or control frame). A refused message is answered with the
    /// refusal's text message and skipped; past a ceiling, or with the store down under a
    /// closed policy, the connection is closed with its code and `None` returned
    /// ([`closed_by`](Self::closed_by) says why). `None` too when the client is gone.
    pub async fn recv(&mut self) -> Option<Result<Message, axum::Error>> {
        if self.closed.is_some() {
            return None;
        }
        loop {
            let msg = match self.inner.recv().await? {
                Ok(msg) => msg,
                Err(e) => return Some(Err(e)),
            };
            if matches!(msg, Message::Ping(_) | Message::Pong(_) | Message::Close(_)) {
                return Some(Ok(msg));
            }
            match self.check(&msg).await {
                Check::Admit => return Some(Ok(msg)),
                Check::Drop(notice) => {
                    if let Err(e) = self.inner.send(Message::text(notice)).await {
                        return Some(Err(e));
                    }
                }
                Check::Close(why) => {
                    self.close(why).await;
                    return None;
                }
            }
        }
    }

    /// Sends a message to the client.
    pub async fn send(&mut self, msg: Message) -> Result<(), axum::Error> {
        self.inner.send(msg).await
    }

    /// Why this socket closed the connection, if it did.
    pub fn closed_by(&self) -> Option<Closed> {
        self.closed
    }

    /// The principal its messages are counted under.
    pub fn principal(&self) -> &Principal {
        &self.principal
    }

    /// The socket underneath (its messages then pass unchecked).
    pub fn into_inner(self) -> WebSocket {
        self.inner
    }

    async fn check(&mut self, msg: &Message) -> Check {
        if self.over_connection_ceiling() {
            return Check::Close(Closed::ConnectionCeiling);
        }
        if self.limiter.rules.is_empty() {
            return Check::Admit;
        }
        let chain = self.limiter.chain(&self.principal, msg);
        let answer = self
            .limiter
            .handler
            .answer(&chain, self.limiter.policy)
            .await;
        let refusing = match &answer {
            Answer::Store(d) | Answer::Memory { decision: d, .. } => d.denied_by().map(|(i, _)| i),
            _ => None,
        };
        let answering = self.limiter.handler.answering_ref();
        match answering.verdict_for(answer, &chain) {
            Verdict::Proceed(_) => Check::Admit,
            Verdict::Refuse(refusal) => {
                if refusal.kind() == RefusalKind::Unavailable {
                    Check::Close(Closed::StoreUnavailable)
                } else if refusing.is_some_and(|i| self.limiter.rules[i].closes) {
                    Check::Close(Closed::Ceiling)
                } else {
                    Check::Drop(notice::render(answering, refusal))
                }
            }
        }
    }

    /// Counts this message in the connection's window; true when it is past the ceiling.
    fn over_connection_ceiling(&mut self) -> bool {
        let Some((max, per)) = self.limiter.ceiling else {
            return false;
        };
        let now = Instant::now();
        let (start, n) = match self.window {
            Some((start, n)) if now.duration_since(start) < per => (start, n),
            _ => (now, 0),
        };
        self.window = Some((start, n + 1));
        n + 1 > max
    }

    async fn close(&mut self, why: Closed) {
        self.closed = Some(why);
        let frame = CloseFrame {
            code: why.code(),
            reason: why.reason().into(),
        };
        // The client may be gone already: the connection ends either way.
        let _ = self.inner.send(Message::Close(Some(frame))).await;
    }
}
