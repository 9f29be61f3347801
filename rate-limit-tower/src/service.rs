//! `RateLimit<S>`: the decision, in `call`.

use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};
use ratekeeper_core::Chain;
use tower_service::Service;

use crate::answer::{Ctx, Verdict};
use crate::body::LimitBody;
use crate::future::{CheckFuture, ResponseFuture, decide_now};
use crate::nesting;
use crate::shared::{Plan, Shared};

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

impl<S> RateLimit<S> {
    pub(crate) fn new(inner: S, shared: Arc<Shared>) -> Self {
        Self { inner, shared }
    }

    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The inner service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// The inner service, unwrapped.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for RateLimit<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone,
    ResBody: LimitBody,
{
    type Response = Response<ResBody>;
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
        let ctx = shared.ctx(req.headers());
        let (mut chain, mut slots) = (Chain::new().mode(shared.mode), Vec::new());
        chain.reserve(shared.rules.len());
        let (parts, body) = req.into_parts();
        let plan = shared.plan(&parts, &mut chain, &mut slots);
        let req = Request::from_parts(parts, body);
        match plan {
            Ok(Plan::Check) => {}
            Ok(Plan::Pass) => return ResponseFuture::pass(self.inner.call(req)),
            Err(refusal) => return ResponseFuture::ready(shared.answering.render(refusal, ctx)),
        }
        if !slots.is_empty() {
            // Slots first (a store call each), then the rules, in the response future.
            let check = CheckFuture::with_slots(Arc::clone(shared), chain, slots);
            return self.checked(check, req, ctx);
        }
        // A store that answers from memory is answered here: no future to box, no service
        // to clone, no store call to time.
        match decide_now(shared, &chain) {
            Ok(Verdict::Proceed(admit)) => {
                let shared = Arc::clone(shared);
                ResponseFuture::call(nesting::below(|| self.inner.call(req)), admit, shared, ctx)
            }
            Ok(Verdict::Refuse(refusal)) => {
                ResponseFuture::ready(shared.answering.render(refusal, ctx))
            }
            Err(later) => {
                let check = later.check(Arc::clone(shared), chain);
                self.checked(check, req, ctx)
            }
        }
    }
}

impl<S: Clone> RateLimit<S> {
    /// The response future that runs `check`, then calls the inner service or answers.
    fn checked<B>(&mut self, check: CheckFuture, req: Request<B>, ctx: Ctx) -> ResponseFuture<S, B>
    where
        S: Service<Request<B>>,
    {
        // Take the service that was polled ready; leave a fresh clone in its place.
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        ResponseFuture::check(check, inner, req, Arc::clone(&self.shared), ctx)
    }
}
