//! A limited socket: the receive loop that checks each data message, keeps the connection
//! alive or ends it when the client is gone, and bounds every write by time.

use axum::extract::ws::{CloseFrame, Message, WebSocket, close_code};
use futures_sink::Sink;
use ratekeeper_core::limiter::Slot;
use ratekeeper_core::{Answer, Principal};
use ratekeeper_tower::{RefusalKind, Verdict};
use tokio::time::Instant;

use super::{CLOSE_DRAIN, SocketLimiter, notice};

/// A socket admitted by [`SocketLimiter::accept`]: its principals and its connection slots,
/// waiting for the upgrade to complete.
#[derive(Debug)]
pub struct Accepted {
    limiter: SocketLimiter,
    principal: Principal,
    /// Each rule's principal, in the rules' order.
    principals: Vec<Principal>,
    slots: Vec<Slot>,
}

impl Accepted {
    pub(super) fn new(
        limiter: SocketLimiter,
        principal: Principal,
        principals: Vec<Principal>,
        slots: Vec<Slot>,
    ) -> Self {
        Self {
            limiter,
            principal,
            principals,
            slots,
        }
    }

    /// The upgraded socket, limited. It holds the connection slots until it is dropped.
    pub fn socket(self, ws: WebSocket) -> LimitedSocket {
        LimitedSocket {
            inner: ws,
            limiter: self.limiter,
            principal: self.principal,
            principals: self.principals,
            _slots: self.slots,
            window: None,
            seen: Instant::now(),
            pinged: false,
            closed: None,
        }
    }
}

/// Why a limited socket closed the connection itself.
///
/// You read it (`LimitedSocket::closed_by`) after a socket ends, to log or count why the
/// server closed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Closed {
    /// The connection's own message ceiling: 1008.
    ConnectionCeiling,
    /// A rule made with [`MessageRule::closes`](super::MessageRule::closes) refused: 1008.
    Ceiling,
    /// The store could not answer and the rules fail closed: 1013.
    StoreUnavailable,
    /// No frame from the client within the idle timeout, a ping included: 1001.
    Idle,
    /// The client did not read what the socket wrote within the write timeout: the
    /// connection is dropped (no close frame can reach a client that does not read; 1006
    /// on its side).
    WriteStalled,
}

impl Closed {
    /// The close code sent (for [`WriteStalled`](Self::WriteStalled), the one the client
    /// sees: none was sent).
    pub fn code(self) -> u16 {
        match self {
            Self::ConnectionCeiling | Self::Ceiling => close_code::POLICY,
            Self::StoreUnavailable => close_code::AGAIN,
            Self::Idle => close_code::AWAY,
            Self::WriteStalled => close_code::ABNORMAL,
        }
    }

    fn reason(self) -> &'static str {
        match self {
            Self::ConnectionCeiling => "connection message ceiling",
            Self::Ceiling => "message ceiling",
            Self::StoreUnavailable => "rate limit store unavailable",
            Self::Idle => "idle",
            Self::WriteStalled => "writes not read",
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
    principals: Vec<Principal>,
    _slots: Vec<Slot>,
    /// The connection ceiling's window: its start and the messages in it.
    window: Option<(Instant, u64)>,
    /// When the client last sent a frame, and whether a ping went out since.
    seen: Instant,
    pinged: bool,
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
    /// refusal's text message and skipped; past a ceiling, with the store down under a
    /// closed policy, past the idle timeout, or when the client does not read what is
    /// written to it, the connection is closed and `None` returned
    /// ([`closed_by`](Self::closed_by) says why). `None` too when the client is gone.
    /// Cancel-safe while it waits for a frame (a `select!` with a timer may drop it).
    pub async fn recv(&mut self) -> Option<Result<Message, axum::Error>> {
        loop {
            if self.closed.is_some() {
                return None;
            }
            let msg = match self.next_frame().await? {
                Ok(msg) => msg,
                Err(e) => return Some(Err(e)),
            };
            self.seen = Instant::now();
            self.pinged = false;
            if let Message::Ping(_) = msg {
                // tungstenite queued the pong: a client that pings and never reads is
                // found here, when the pong cannot be written in time.
                if !self.write(None).await {
                    return None;
                }
            }
            if matches!(msg, Message::Ping(_) | Message::Pong(_) | Message::Close(_)) {
                return Some(Ok(msg));
            }
            match self.check(&msg).await {
                Check::Admit => return Some(Ok(msg)),
                Check::Drop(notice) => {
                    if !self.write(Some(Message::text(notice))).await {
                        return None;
                    }
                }
                Check::Close(why) => {
                    self.close(why).await;
                    return None;
                }
            }
        }
    }

    /// The client's next frame, sending a ping half way through the idle timeout and
    /// closing the connection at its end (`None` then, as when the client is gone).
    async fn next_frame(&mut self) -> Option<Result<Message, axum::Error>> {
        let Some(idle) = self.limiter.idle_timeout else {
            return self.inner.recv().await;
        };
        loop {
            let at = if self.pinged {
                self.seen + idle
            } else {
                self.seen + idle / 2
            };
            tokio::select! {
                msg = self.inner.recv() => return msg,
                () = tokio::time::sleep_until(at) => {
                    if self.pinged {
                        self.close(Closed::Idle).await;
                        return None;
                    }
                    self.pinged = true;
                    if !self.write(Some(Message::Ping(Vec::new().into()))).await {
                        return None;
                    }
                }
            }
        }
    }

    /// Sends a message to the client, waiting at most the write timeout for it to read:
    /// past that, the connection is closed ([`Closed::WriteStalled`]) and this is an error.
    pub async fn send(&mut self, msg: Message) -> Result<(), axum::Error> {
        if let Some(why) = self.closed {
            return Err(axum::Error::new(why.reason()));
        }
        self.written(Some(msg)).await
    }

    /// Writes `msg` (or only what is queued: a pong) within the write timeout; false when
    /// the connection is closed or gone.
    async fn write(&mut self, msg: Option<Message>) -> bool {
        self.written(msg).await.is_ok()
    }

    /// The one timed write: past the write timeout the connection is closed
    /// ([`Closed::WriteStalled`]).
    async fn written(&mut self, msg: Option<Message>) -> Result<(), axum::Error> {
        let timeout = self.limiter.write_timeout;
        let written = match msg {
            Some(m) => tokio::time::timeout(timeout, self.inner.send(m)).await,
            None => {
                let inner = &mut self.inner;
                let flush =
                    std::future::poll_fn(|cx| std::pin::Pin::new(&mut *inner).poll_flush(cx));
                tokio::time::timeout(timeout, flush).await
            }
        };
        written.unwrap_or_else(|_| {
            self.closed = Some(Closed::WriteStalled);
            Err(axum::Error::new(Closed::WriteStalled.reason()))
        })
    }

    /// Why this socket closed the connection, if it did.
    pub fn closed_by(&self) -> Option<Closed> {
        self.closed
    }

    /// The principal its messages are counted under (a [`keyed`](super::MessageRule::keyed)
    /// rule's are its own).
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
        let chain = self.limiter.chain(&self.principals, msg);
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
                    Check::Drop(notice::render(answering, &refusal))
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

    /// Sends the close frame, then reads on (discarding, for at most two seconds) until
    /// the client's close: a connection dropped with the client's messages unread is reset
    /// by the kernel, and the reset throws away the close frame on the client's side (it
    /// would see 1006, not the code sent).
    async fn close(&mut self, why: Closed) {
        self.closed = Some(why);
        let frame = CloseFrame {
            code: why.code(),
            reason: why.reason().into(),
        };
        // The client may be gone already, or not reading: the connection ends either way.
        if !self.write(Some(Message::Close(Some(frame)))).await {
            return;
        }
        let until = Instant::now() + CLOSE_DRAIN;
        while let Ok(Some(Ok(msg))) = tokio::time::timeout_at(until, self.inner.recv()).await {
            if let Message::Close(_) = msg {
                break;
            }
        }
    }
}
