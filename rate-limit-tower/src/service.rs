//! `RateLimit<S>`: the decision, in `call`.

use std::sync::Arc;
use std::task::{Context, Poll};

use http::header::ORIGIN;
use http::{Request, Response};
use rate_limit_core::{Chain, Check};
use tower_service::Service;

use crate::access::Listed;
use crate::answer::accepts_html;
use crate::body::LimitBody;
use crate::extract::Rejection;
use crate::future::{CheckFuture, ResponseFuture};
use crate::nesting;
use crate::response;
use crate::rule::not_owned;
use crate::shared::{Ctx, Next, Shared, finish};

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

    /// A layer counting through `limiter` (see
    /// [`RateLimitLayer::new`](crate::RateLimitLayer::new)), as tower-http's services offer.
    pub fn layer(limiter: rate_limit_core::Limiter) -> crate::RateLimitLayer {
        crate::RateLimitLayer::new(limiter)
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
        let grpc = crate::grpc::is_grpc(req.headers());
        let ctx = Ctx {
            wants_html: !grpc && shared.answering.redirect.is_some() && accepts_html(req.headers()),
            origin: req.headers().contains_key(ORIGIN),
            record: shared.info_extension || nesting::under_another_layer(),
            grpc,
        };
        let (parts, body) = req.into_parts();
        match shared.listed(&parts) {
            Listed::Neither => {}
            Listed::Allowed => {
                let req = Request::from_parts(parts, body);
                return ResponseFuture::pass(self.inner.call(req));
            }
            refused => return listed_refusal(refused, ctx),
        }
        let mut chain = Chain::new().mode(shared.mode);
        for rule in &shared.rules {
            match rule.key.extract(&parts) {
                Ok(p) if !rule.limit.may_name(&p) => {
                    return rejected(&not_owned(rule.limit.name(), &p), ctx);
                }
                Ok(p) => chain.push(Check::new(rule.limit.key(p), rule.cost)),
                Err(rejection) => return rejected(&rejection, ctx),
            }
        }
        let mut slots = Vec::new();
        for rule in &shared.in_flight {
            match rule.key.extract(&parts) {
                Ok(p) => slots.push(rule.limit.slots(p)),
                Err(rejection) => return rejected(&rejection, ctx),
            }
        }
        let req = Request::from_parts(parts, body);
        if !slots.is_empty() {
            // Slots first (a store call each), then the rules, in the response future.
            let check = CheckFuture::with_slots(Arc::clone(shared), chain, slots, ctx);
            return self.checked(check, req, ctx);
        }
        // A store that answers from memory (the memory store; the Redis deny cache) is
        // answered here, with no future to box and no service to clone (and no store call
        // to time).
        let answer = shared.limiter.try_check_or_ask(&chain, shared.policy);
        if let Ok(answer) = answer {
            shared.note_failure(&answer, &chain);
            if answer.decision().is_some_and(|d| !d.delay().is_zero()) {
                // Over a delayed limit's threshold: held first, in the response future.
                let check = CheckFuture::held(Arc::clone(shared), chain, answer);
                return self.checked(check, req, ctx);
            }
            let reservation = shared.reservation(&answer, &chain);
            // Admitted (the common case): the answer is read where it lies, not moved.
            let record = match shared.admitted(&answer) {
                Some(record) => record,
                None => {
                    let seed = shared.answering.jitter_seed(&answer, &chain);
                    match shared.next(answer, ctx, seed) {
                        Next::Proceed(record) => record,
                        Next::Respond(mut resp) => {
                            finish(&mut resp, ctx);
                            return ResponseFuture::ready(resp);
                        }
                    }
                }
            };
            return ResponseFuture::call(
                nesting::below(|| self.inner.call(req)),
                record,
                reservation,
                Vec::new(),
                Arc::clone(shared),
                ctx,
            );
        }
        // Not answered from memory: the store is asked, the memory front not passed again.
        let ask = answer.err();
        let check = CheckFuture::new(Arc::clone(&self.shared), chain, ask);
        self.checked(check, req, ctx)
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

/// An access list's refusal: denied (403), or its extractor's rejection.
fn listed_refusal<S: Service<Request<B>>, B>(listed: Listed, ctx: Ctx) -> ResponseFuture<S, B> {
    match listed {
        Listed::Unresolved(rejection) => rejected(&rejection, ctx),
        _ => {
            let mut resp = response::forbidden();
            finish(&mut resp, ctx);
            ResponseFuture::ready(resp)
        }
    }
}

/// An extractor's rejection (400, 401), with CORS exposure for a request with `Origin`.
fn rejected<S: Service<Request<B>>, B>(rejection: &Rejection, ctx: Ctx) -> ResponseFuture<S, B> {
    let mut resp = response::rejection_response(rejection);
    finish(&mut resp, ctx);
    ResponseFuture::ready(resp)
}
