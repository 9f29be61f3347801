//! The layer's response body: the inner service's, or one the layer wrote.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::Full;
use pin_project_lite::pin_project;
use rate_limit_core::limiter::Slot;

pin_project! {
    /// The body of a [`RateLimit`](crate::RateLimit) response: the inner service's body,
    /// or a short body the layer wrote (a 429, 503, 400 or 401).
    ///
    /// It holds the request's in-flight slots ([`InFlightRule`](crate::InFlightRule)):
    /// released when the body has been sent to the end, or when it is dropped (the client
    /// left).
    pub struct ResponseBody<B> {
        #[pin]
        kind: BodyKind<B>,
        slots: Vec<Slot>,
    }
}

pin_project! {
    #[project = BodyKindProj]
    enum BodyKind<B> {
        Inner { #[pin] body: B },
        Own { body: Full<Bytes> },
    }
}

impl<B> std::fmt::Debug for ResponseBody<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self.kind {
            BodyKind::Inner { .. } => "ResponseBody::Inner",
            BodyKind::Own { .. } => "ResponseBody::Own",
        })
    }
}

impl<B> ResponseBody<B> {
    pub(crate) fn inner(body: B) -> Self {
        Self {
            kind: BodyKind::Inner { body },
            slots: Vec::new(),
        }
    }

    /// The inner service's body, holding `slots` until it ends.
    pub(crate) fn holding(body: B, slots: Vec<Slot>) -> Self {
        Self {
            kind: BodyKind::Inner { body },
            slots,
        }
    }

    pub(crate) fn own(bytes: Bytes) -> Self {
        Self {
            kind: BodyKind::Own {
                body: Full::new(bytes),
            },
            slots: Vec::new(),
        }
    }
}

impl<B: Body<Data = Bytes>> Body for ResponseBody<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let this = self.project();
        let frame = match this.kind.project() {
            BodyKindProj::Inner { body } => body.poll_frame(cx),
            BodyKindProj::Own { body } => Pin::new(body)
                .poll_frame(cx)
                .map(|f| f.map(|r| r.map_err(|never| match never {}))),
        };
        if let Poll::Ready(None) = frame {
            // Sent to the end: the request no longer holds its slots.
            this.slots.clear();
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            BodyKind::Inner { body } => body.is_end_stream(),
            BodyKind::Own { body } => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            BodyKind::Inner { body } => body.size_hint(),
            BodyKind::Own { body } => body.size_hint(),
        }
    }
}
