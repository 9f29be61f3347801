//! `RateLimit<S>`: the decision, in `call`.

use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::header::{ACCEPT, ACCESS_CONTROL_REQUEST_METHOD, ORIGIN};
use http::{HeaderMap, Method, Request, Response};
use rate_limit_core::{Answer, Chain, Check};
use tower_service::Service;

use crate::body::ResponseBody;
use crate::future::{CheckFuture, ResponseFuture};
use crate::headers::{self, RateLimitInfo};
use crate::layer::Shared;
use crate::metrics;
use crate::response;

/// The rate-limiting service made by [`RateLimitLayer`](crate::RateLimitLayer).
///
/// `poll_ready` only forwards to the inner service: this service never returns `Pending`
/// to throttle, unlike tower's own `RateLimit` (whose back-pressure would stall axum's
/// router for every client at once). Over-limit requests are answered `Ok(429)`; the error
/// type stays the inner service's.
#[derive(Clone, Debug)]
pub struct RateLimit<S> {
    inner: S,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("rules", &self.rules)
            .finish_non_exhaustive()
    }
}

/// What the request told us that the answer needs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ctx {
    pub(crate) wants_html: bool,
    pub(crate) origin: bool,
}

/// What to do once the store answered.
pub(crate) enum Next {
    /// Call the inner service, then add these headers.
    Proceed(Option<RateLimitInfo>),
    /// Answer this instead.
    Respond(Response<Bytes>),
}

fn accepts_html(headers: &HeaderMap) -> bool {
    headers
        .get_all(ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.to_ascii_lowercase().contains("text/html"))
}

impl<S> RateLimit<S> {
    pub(crate) fn new(inner: S, shared: Arc<Shared>) -> Self {
        Self { inner, shared }
    }

    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl Shared {
    fn passes(&self, method: &Method, path: &str, headers: &HeaderMap) -> bool {
        self.rules.is_empty()
            || self.exact.iter().any(|p| p == path)
            || self.prefixes.iter().any(|p| path.starts_with(p.as_str()))
            || (!self.limit_preflights
                && method == Method::OPTIONS
                && headers.contains_key(ACCESS_CONTROL_REQUEST_METHOD))
    }

    /// Turns the limiter's answer into what the service does next.
    pub(crate) fn next(&self, answer: Answer, ctx: Ctx) -> Next {
        if let Some(reason) = answer.failure() {
            let policy = match &answer {
                Answer::Memory { .. } => "memory",
                Answer::Open(_) => "open",
                _ => "closed",
            };
            for n in &self.names {
                metrics::count2("rate_limit_store_error_total", n, "reason", reason.as_str());
                metrics::count2("rate_limit_fallback_total", n, "policy", policy);
            }
        }
        match answer {
            Answer::Store(d) | Answer::Memory { decision: d, .. } => {
                let Some(info) = RateLimitInfo::from_chain(&self.names, &d) else {
                    return Next::Proceed(None);
                };
                if d.is_allowed() {
                    for n in &self.names {
                        metrics::count("rate_limit_allowed_total", n);
                    }
                    return Next::Proceed(Some(info));
                }
                let denied = info
                    .denied_by()
                    .cloned()
                    .unwrap_or_else(|| info.headline().clone());
                if self.shadow {
                    metrics::count("rate_limit_shadow_limited_total", denied.name());
                    tracing::info!(
                        name: "rate_limit.shadow_limited",
                        limit = denied.name(),
                        "shadow mode: this request would have been refused"
                    );
                    return Next::Proceed(Some(info.shadow()));
                }
                metrics::count("rate_limit_limited_total", denied.name());
                let retry = denied.retry_after_secs();
                let mut resp = match (&self.redirect, ctx.wants_html, retry) {
                    (Some(page), true, Some(_)) => response::redirect(page),
                    _ => {
                        let mut r = self.responder.limited(&denied);
                        info.write(self.style, r.headers_mut());
                        r.extensions_mut().insert(info);
                        r
                    }
                };
                if let Some(secs) = retry {
                    resp.headers_mut()
                        .insert(http::header::RETRY_AFTER, headers::retry_after(secs));
                }
                Next::Respond(resp)
            }
            Answer::Open(_) => Next::Proceed(None),
            Answer::Closed { retry_after, .. } => {
                Next::Respond(response::unavailable(headers::ceil_secs(retry_after)))
            }
            // `Answer` is non-exhaustive; a kind this version does not know fails closed.
            _ => Next::Respond(response::unavailable(1)),
        }
    }

    /// Adds this layer's view (merged with an inner layer's) and CORS exposure.
    pub(crate) fn decorate<B>(
        &self,
        resp: &mut Response<B>,
        info: Option<RateLimitInfo>,
        ctx: Ctx,
    ) {
        let inner = resp.extensions_mut().remove::<RateLimitInfo>();
        let merged = match (info, inner) {
            (Some(mine), Some(theirs)) => Some(mine.merge(theirs)),
            (mine, theirs) => mine.or(theirs),
        };
        if let Some(info) = merged {
            info.write(self.style, resp.headers_mut());
            resp.extensions_mut().insert(info);
        }
        if ctx.origin {
            headers::expose(resp.headers_mut());
        }
    }
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for RateLimit<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone,
    ResBody: http_body::Body<Data = Bytes>,
{
    type Response = Response<ResponseBody<ResBody>>;
    type Error = S::Error;
    type Future = ResponseFuture<S, ReqBody>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<ReqBody>) -> Self::Future {
        let shared = &self.shared;
        if shared.passes(req.method(), req.uri().path(), req.headers()) {
            return ResponseFuture::pass(self.inner.call(req));
        }
        let ctx = Ctx {
            wants_html: accepts_html(req.headers()),
            origin: req.headers().contains_key(ORIGIN),
        };
        let (parts, body) = req.into_parts();
        let mut chain = Chain::new().mode(shared.mode);
        for rule in &shared.rules {
            match rule.key.extract(&parts) {
                Ok(p) => chain.push(Check::new(rule.limit.key(p), rule.cost)),
                Err(rejection) => {
                    let mut resp = response::rejection(&rejection);
                    if ctx.origin {
                        headers::expose(resp.headers_mut());
                    }
                    return ResponseFuture::ready(resp);
                }
            }
        }
        let req = Request::from_parts(parts, body);
        // Take the service that was polled ready; leave a fresh clone in its place.
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        let check = CheckFuture::new(Arc::clone(&self.shared), chain);
        ResponseFuture::check(check, inner, req, Arc::clone(&self.shared), ctx)
    }
}
