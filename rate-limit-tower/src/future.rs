//! The response future: wait for the store, then call the inner service or answer.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use http::{Request, Response};
use pin_project_lite::pin_project;
use rate_limit_core::limiter::{Ask, Reservation, Slot, SlotAnswer, SlotKey};
use rate_limit_core::{Answer, Chain};
use tower_service::Service;

use crate::body::LimitBody;
use crate::headers::Record;
use crate::meters::Meters;
use crate::nesting;
use crate::response;
use crate::shared::{Ctx, Next, Shared};

/// The store calls of one request (boxed: its type cannot be named).
pub(crate) struct CheckFuture(Pin<Box<dyn Future<Output = Admission> + Send>>);

/// What the store calls decided.
pub(crate) enum Admission {
    /// The rules' answer.
    Answer {
        answer: Answer,
        /// What it reserved, when a rule counts by outcome.
        reservation: Option<Reservation>,
        /// The in-flight slots taken.
        slots: Vec<Slot>,
        /// The refused principal's jitter seed.
        seed: u64,
    },
    /// An in-flight limit refused (429), or its store failed closed (503).
    Respond(Response<Bytes>),
}

impl CheckFuture {
    /// The rules' check; `ask`: what the memory front said when it could not answer (the
    /// store is then asked without passing the front again).
    pub(crate) fn new(shared: Arc<Shared>, chain: Chain, ask: Option<Ask>) -> Self {
        Self(Box::pin(async move {
            let answer = check(&shared, &chain, ask).await;
            settle(&shared, &chain, answer, Vec::new()).await
        }))
    }

    /// An answer already in hand (from memory) that must be held first.
    pub(crate) fn held(shared: Arc<Shared>, chain: Chain, answer: Answer) -> Self {
        Self(Box::pin(async move {
            settle(&shared, &chain, answer, Vec::new()).await
        }))
    }

    /// In-flight slots first, then the rules.
    pub(crate) fn with_slots(
        shared: Arc<Shared>,
        chain: Chain,
        keys: Vec<SlotKey>,
        ctx: Ctx,
    ) -> Self {
        Self(Box::pin(async move {
            let mut slots = Vec::with_capacity(keys.len());
            for (j, (rule, key)) in shared.in_flight.iter().zip(&keys).enumerate() {
                match shared.limiter.take_slot(key, rule.policy).await {
                    SlotAnswer::Taken(slot) => {
                        slots.push(Meters::slot_taken(&shared.meters, j, slot))
                    }
                    SlotAnswer::Open(_) => {}
                    SlotAnswer::Full { max, retry_after } => {
                        // The slots taken so far are released as `slots` drops.
                        return Admission::Respond(shared.in_flight_refusal(
                            j,
                            max,
                            retry_after,
                            ctx,
                        ));
                    }
                    // The store failed closed: as the rules' own closed answer, 503.
                    _ => return Admission::Respond(response::unavailable(1)),
                }
            }
            let answer = check(&shared, &chain, None).await;
            settle(&shared, &chain, answer, slots).await
        }))
    }
}

async fn check(shared: &Shared, chain: &Chain, ask: Option<Ask>) -> Answer {
    // A remote store's call is timed; a check in process memory is not.
    #[cfg(feature = "metrics")]
    let started = shared.meters.remote.then(tokio::time::Instant::now);
    let answer = match ask {
        Some(ask) => shared.limiter.ask(chain, shared.policy, ask).await,
        None => shared.limiter.check(chain, shared.policy).await,
    };
    #[cfg(feature = "metrics")]
    if let Some(started) = started {
        shared.meters.layer.latency(started.elapsed());
    }
    shared.note_failure(&answer, chain);
    answer
}

/// Holds an admitted answer for its delay, and notes what it reserved.
async fn settle(shared: &Shared, chain: &Chain, answer: Answer, slots: Vec<Slot>) -> Admission {
    let held = shared.meters.holding(&answer);
    let answer = shared.holding.hold(&shared.limiter, chain, answer).await;
    drop(held);
    let reservation = shared.reservation(&answer, chain);
    let seed = shared.answering.jitter_seed(&answer, chain);
    Admission::Answer {
        answer,
        reservation,
        slots,
        seed,
    }
}

/// A give-back on its way to the store: the response waits for it, so the client's next
/// request sees the unit returned.
type GiveBack = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Gives back `reservation`: at once when the store answers at once (the memory store);
/// else on the runtime (so it completes even if the response future is dropped), or in
/// the response future when there is no runtime. `None`: done.
fn give_back(shared: &Shared, reservation: Reservation) -> Option<GiveBack> {
    let limiter = shared.limiter.clone();
    // A failure keeps the unit counted; the limiter has logged it.
    let mut give: GiveBack = Box::pin(async move {
        let _ = limiter.give_back(reservation).await;
    });
    let mut noop = Context::from_waker(std::task::Waker::noop());
    if give.as_mut().poll(&mut noop).is_ready() {
        return None;
    }
    Some(match tokio::runtime::Handle::try_current() {
        Ok(rt) => {
            let handle = rt.spawn(give);
            Box::pin(async move {
                let _ = handle.await;
            })
        }
        Err(_) => give,
    })
}

pin_project! {
    /// The response future of [`RateLimit`](crate::RateLimit).
    pub struct ResponseFuture<S, B>
    where
        S: Service<Request<B>>,
    {
        #[pin]
        kind: FutureKind<S, B>,
    }
}

pin_project! {
    #[project = FutureKindProj]
    enum FutureKind<S, B>
    where
        S: Service<Request<B>>,
    {
        Ready { response: Option<Response<Bytes>> },
        Pass { #[pin] fut: S::Future },
        Check {
            check: CheckFuture,
            inner: Option<S>,
            req: Option<Request<B>>,
            shared: Arc<Shared>,
            ctx: Ctx,
        },
        Call {
            #[pin] fut: S::Future,
            record: Record,
            reservation: Option<Reservation>,
            slots: Vec<Slot>,
            shared: Arc<Shared>,
            ctx: Ctx,
        },
        Settle {
            give: GiveBack,
            response: Option<S::Response>,
            record: Record,
            slots: Vec<Slot>,
            shared: Arc<Shared>,
            ctx: Ctx,
        },
    }
}

impl<S: Service<Request<B>>, B> fmt::Debug for ResponseFuture<S, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ResponseFuture")
    }
}

impl<S: Service<Request<B>>, B> ResponseFuture<S, B> {
    pub(crate) fn ready(response: Response<Bytes>) -> Self {
        Self {
            kind: FutureKind::Ready {
                response: Some(response),
            },
        }
    }

    pub(crate) fn pass(fut: S::Future) -> Self {
        Self {
            kind: FutureKind::Pass { fut },
        }
    }

    pub(crate) fn call(
        fut: S::Future,
        record: Record,
        reservation: Option<Reservation>,
        slots: Vec<Slot>,
        shared: Arc<Shared>,
        ctx: Ctx,
    ) -> Self {
        Self {
            kind: FutureKind::Call {
                fut,
                record,
                reservation,
                slots,
                shared,
                ctx,
            },
        }
    }

    pub(crate) fn check(
        check: CheckFuture,
        inner: S,
        req: Request<B>,
        shared: Arc<Shared>,
        ctx: Ctx,
    ) -> Self {
        Self {
            kind: FutureKind::Check {
                check,
                inner: Some(inner),
                req: Some(req),
                shared,
                ctx,
            },
        }
    }
}

fn own<R: LimitBody>(resp: Response<Bytes>) -> Response<R> {
    resp.map(R::from_bytes)
}

/// The inner service's response, holding the request's slots until its body ends, with
/// this layer's headers.
#[inline]
fn finish<R: LimitBody>(
    mut resp: Response<R>,
    record: Record,
    slots: Vec<Slot>,
    shared: &Shared,
    ctx: Ctx,
) -> Response<R> {
    // In place: a response is moved only where it must be (a body that holds slots).
    if !slots.is_empty() {
        resp = resp.map(|b| b.holding(slots));
    }
    shared.decorate(&mut resp, record, ctx);
    resp
}

fn empty_500<R: LimitBody>() -> Response<R> {
    let mut r = Response::new(R::from_bytes(Bytes::new()));
    *r.status_mut() = http::StatusCode::INTERNAL_SERVER_ERROR;
    r
}

impl<S, B, R> Future for ResponseFuture<S, B>
where
    S: Service<Request<B>, Response = Response<R>>,
    R: LimitBody,
{
    type Output = Result<Response<R>, S::Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        loop {
            let next = match self.as_mut().project().kind.project() {
                FutureKindProj::Ready { response } => {
                    let resp = response.take().map(own);
                    // Polled again after completion: answer an empty 500 rather than panic.
                    return Poll::Ready(Ok(resp.unwrap_or_else(empty_500)));
                }
                FutureKindProj::Pass { fut } => {
                    return Poll::Ready(ready!(fut.poll(cx)));
                }
                FutureKindProj::Call {
                    fut,
                    record,
                    reservation,
                    slots,
                    shared,
                    ctx,
                } => {
                    // An error (no response) keeps a reservation counted.
                    let resp = ready!(nesting::below(|| fut.poll(cx)))?;
                    let pending = reservation
                        .take()
                        .and_then(|r| shared.not_counted(r, &resp))
                        .and_then(|r| give_back(shared, r));
                    match pending {
                        Some(give) => FutureKind::Settle {
                            give,
                            response: Some(resp),
                            record: record.take(),
                            slots: std::mem::take(slots),
                            shared: Arc::clone(shared),
                            ctx: *ctx,
                        },
                        None => {
                            let resp =
                                finish(resp, record.take(), std::mem::take(slots), shared, *ctx);
                            return Poll::Ready(Ok(resp));
                        }
                    }
                }
                FutureKindProj::Settle {
                    give,
                    response,
                    record,
                    slots,
                    shared,
                    ctx,
                } => {
                    ready!(give.as_mut().poll(cx));
                    let Some(resp) = response.take() else {
                        return Poll::Ready(Ok(empty_500()));
                    };
                    let resp = finish(resp, record.take(), std::mem::take(slots), shared, *ctx);
                    return Poll::Ready(Ok(resp));
                }
                FutureKindProj::Check {
                    check,
                    inner,
                    req,
                    shared,
                    ctx,
                } => {
                    let checked = ready!(check.0.as_mut().poll(cx));
                    after_check(checked, inner, req, shared, *ctx)
                }
            };
            self.as_mut().project().kind.set(next);
        }
    }
}

/// What follows the limits' answer: a response now, or the inner service's call.
fn after_check<S, B, R>(
    checked: Admission,
    inner: &mut Option<S>,
    req: &mut Option<Request<B>>,
    shared: &Arc<Shared>,
    ctx: Ctx,
) -> FutureKind<S, B>
where
    S: Service<Request<B>, Response = Response<R>>,
{
    let (answer, reservation, slots, seed) = match checked {
        Admission::Answer {
            answer,
            reservation,
            slots,
            seed,
        } => (answer, reservation, slots, seed),
        Admission::Respond(mut resp) => {
            crate::shared::finish(&mut resp, ctx);
            return FutureKind::Ready {
                response: Some(resp),
            };
        }
    };
    match shared.next(answer, ctx, seed) {
        Next::Respond(mut resp) => {
            // The answer carries its headers already; only CORS (and gRPC's form) is left.
            crate::shared::finish(&mut resp, ctx);
            FutureKind::Ready {
                response: Some(resp),
            }
        }
        Next::Proceed(record) => match (inner.take(), req.take()) {
            (Some(mut svc), Some(req)) => FutureKind::Call {
                fut: nesting::below(|| svc.call(req)),
                record: shared.with_slots(record, &slots),
                reservation,
                slots,
                shared: Arc::clone(shared),
                ctx,
            },
            _ => FutureKind::Ready { response: None },
        },
    }
}
