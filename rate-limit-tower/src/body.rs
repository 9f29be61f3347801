//! The layer's response bodies: the inner service's own body type, so that a framework
//! need not box the layer's answer again ([`LimitBody`]), and [`ResponseBody`], a wrapper
//! that makes any body one.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::Full;
use pin_project_lite::pin_project;
use ratekeeper_core::limiter::Slot;

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
    /// `body`, as a `ResponseBody`: what a service whose body is not a [`LimitBody`]
    /// maps its responses with (`.map_response(|r| r.map(ResponseBody::new))`).
    pub fn new(body: B) -> Self {
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

/// A response body the layer can answer in, and hold a request's in-flight slots in: the
/// [`RateLimit`](crate::RateLimit) service answers with its inner service's body type, so
/// that a framework that boxes bodies (axum) does not box the layer's answer a second time.
///
/// Implemented for axum's `Body` (feature `axum`, on with `ratekeeper-axum`), for
/// `http_body_util`'s `BoxBody` and `UnsyncBoxBody` of `Bytes`, and for [`ResponseBody`],
/// which wraps any other body.
#[diagnostic::on_unimplemented(
    message = "the rate limiter cannot answer in a `{Self}` body",
    note = "with axum, turn on ratekeeper-tower's `axum` feature (ratekeeper-axum does); \
            for another body type, map the inner service's responses into \
            `ratekeeper_tower::ResponseBody` or a boxed body"
)]
pub trait LimitBody: Body<Data = Bytes> + Sized {
    /// A short body the layer wrote (a 429, 503, 400 or 401).
    fn from_bytes(bytes: Bytes) -> Self;

    /// This body, holding `slots` until it has been sent to the end or is dropped (the
    /// client left). Called only with slots to hold.
    fn holding(self, slots: Vec<Slot>) -> Self;
}

impl<B: Body<Data = Bytes>> LimitBody for ResponseBody<B> {
    fn from_bytes(bytes: Bytes) -> Self {
        Self::own(bytes)
    }

    fn holding(mut self, slots: Vec<Slot>) -> Self {
        self.slots.extend(slots);
        self
    }
}

impl<E: 'static> LimitBody for http_body_util::combinators::UnsyncBoxBody<Bytes, E> {
    fn from_bytes(bytes: Bytes) -> Self {
        use http_body_util::BodyExt;
        Full::new(bytes)
            .map_err(|never| match never {})
            .boxed_unsync()
    }

    fn holding(self, slots: Vec<Slot>) -> Self {
        use http_body_util::BodyExt;
        ResponseBody::holding(self, slots).boxed_unsync()
    }
}

impl<E: 'static> LimitBody for http_body_util::combinators::BoxBody<Bytes, E> {
    fn from_bytes(bytes: Bytes) -> Self {
        use http_body_util::BodyExt;
        Full::new(bytes).map_err(|never| match never {}).boxed()
    }

    fn holding(self, slots: Vec<Slot>) -> Self {
        use http_body_util::BodyExt;
        ResponseBody::holding(self, slots).boxed()
    }
}

#[cfg(feature = "axum")]
impl LimitBody for axum::body::Body {
    fn from_bytes(bytes: Bytes) -> Self {
        Self::from(bytes)
    }

    fn holding(self, slots: Vec<Slot>) -> Self {
        Self::new(ResponseBody::holding(self, slots))
    }
}

#[cfg(test)]
mod tests {
    use http_body_util::BodyExt;
    use http_body_util::combinators::{BoxBody, UnsyncBoxBody};

    use super::*;

    async fn text<B: Body<Data = Bytes>>(body: B) -> String
    where
        B::Error: std::fmt::Debug,
    {
        let bytes = body.collect().await.unwrap().to_bytes();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    #[tokio::test]
    async fn every_limit_body_answers_in_its_own_type_and_passes_the_inner_body_through() {
        type Boxed = BoxBody<Bytes, std::convert::Infallible>;
        type Unsync = UnsyncBoxBody<Bytes, std::convert::Infallible>;
        assert_eq!(text(Boxed::from_bytes(Bytes::from("429"))).await, "429");
        assert_eq!(text(Unsync::from_bytes(Bytes::from("429"))).await, "429");
        let inner = || Full::new(Bytes::from("ok"));
        let held = inner().boxed().holding(Vec::new());
        assert_eq!(text(held).await, "ok");
        let held = inner().boxed_unsync().holding(Vec::new());
        assert_eq!(text(held).await, "ok");
        let own = ResponseBody::<Full<Bytes>>::from_bytes(Bytes::from("429"));
        assert_eq!(text(own).await, "429");
        assert_eq!(
            text(ResponseBody::new(inner()).holding(Vec::new())).await,
            "ok"
        );
    }
}
