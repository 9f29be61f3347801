//! The layer's response body: the inner service's, or one the layer wrote.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::Full;
use pin_project_lite::pin_project;

pin_project! {
    /// The body of a [`RateLimit`](crate::RateLimit) response: the inner service's body,
    /// or a short body the layer wrote (a 429, 503, 400 or 401).
    pub struct ResponseBody<B> {
        #[pin]
        kind: Kind<B>,
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind<B> {
        Inner { #[pin] body: B },
        Own { body: Full<Bytes> },
    }
}

impl<B> std::fmt::Debug for ResponseBody<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self.kind {
            Kind::Inner { .. } => "ResponseBody::Inner",
            Kind::Own { .. } => "ResponseBody::Own",
        })
    }
}

impl<B> ResponseBody<B> {
    pub(crate) fn inner(body: B) -> Self {
        Self {
            kind: Kind::Inner { body },
        }
    }

    pub(crate) fn own(bytes: Bytes) -> Self {
        Self {
            kind: Kind::Own {
                body: Full::new(bytes),
            },
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
        match self.project().kind.project() {
            KindProj::Inner { body } => body.poll_frame(cx),
            KindProj::Own { body } => Pin::new(body)
                .poll_frame(cx)
                .map(|f| f.map(|r| r.map_err(|never| match never {}))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Inner { body } => body.is_end_stream(),
            Kind::Own { body } => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Inner { body } => body.size_hint(),
            Kind::Own { body } => body.size_hint(),
        }
    }
}
