//! The response future: wait for the store, then call the inner service or answer.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use pin_project_lite::pin_project;
use ratekeeper_core::limiter::{Ask, Reservation, Slot, SlotAnswer, SlotKey};
use ratekeeper_core::{Answer, Chain};
use tower_service::Service;

use crate::answer::{Ctx, Verdict};
use crate::body::LimitBody;
use crate::headers::Record;
use crate::meters::Meters;
use crate::nesting;
use crate::refusal::Refusal;
use crate::shared::Shared;

/// What an admitted request's response needs: the headers' record, what it reserved (a
/// rule counting by outcome), and the in-flight slots it holds until its body ends.
#[derive(Debug)]
pub(crate) struct Admit {
    pub(crate) record: Record,
    pub(crate) reservation: Option<Reservation>,
    pub(crate) slots: Vec<Slot>,
}

/// The store calls of one request (boxed: its type cannot be named).
pub(crate) struct CheckFuture(Pin<Box<dyn Future<Output = Verdict<Admit>> + Send>>);

/// Why a request's verdict waits for a future: the store must be asked, or an answer held.
pub(crate) enum Later {
    /// Not answered from memory: the store is asked, the memory front not passed again.
    Ask(Ask),
    /// Over a delayed limit's threshold: held first (boxed: rare, and it is boxed into
    /// the check future anyway).
    Hold(Box<Answer>),
}

impl Later {
    /// The future that finishes the check of `chain`.
    pub(crate) fn check(self, shared: Arc<Shared>, chain: Chain) -> CheckFuture {
        match self {
            Self::Ask(ask) => CheckFuture::new(shared, chain, Some(ask)),
            Self::Hold(answer) => CheckFuture::held(shared, chain, *answer),
        }
    }
}

/// The verdict on `chain` now, when the store answers from memory (the memory store; the
/// Redis deny cache) and nothing is held; else why it must wait.
#[inline(always)]
#[allow(
    clippy::result_large_err,
    reason = "inlined into `call`: the verdict is built in place (see `Verdict`)"
)]
pub(crate) fn decide_now(shared: &Shared, chain: &Chain) -> Result<Verdict<Admit>, Later> {
    let answer = shared
        .limiter
        .try_check_or_ask(chain, shared.policy)
        .map_err(Later::Ask)?;
    shared.note_failure(&answer, chain);
    if answer.decision().is_some_and(|d| !d.delay().is_zero()) {
        return Err(Later::Hold(Box::new(answer)));
    }
    let reservation = shared.reservation(&answer, chain);
    // Admitted (the common case): the answer is read where it lies, not moved.
    if let Some(record) = shared.admitted(&answer) {
        let slots = Vec::new();
        return Ok(Verdict::Proceed(Admit {
            record,
            reservation,
            slots,
        }));
    }
    let seed = shared.answering.jitter_seed(&answer, chain);
    Ok(admit(shared, answer, seed, reservation, Vec::new()))
}

/// The verdict on `answer`, with what an admission keeps.
fn admit(
    shared: &Shared,
    answer: Answer,
    seed: u64,
    reservation: Option<Reservation>,
    slots: Vec<Slot>,
) -> Verdict<Admit> {
    match shared.decide(answer, seed) {
        Verdict::Proceed(record) => Verdict::Proceed(Admit {
            record: shared.with_slots(record, &slots),
            reservation,
            slots,
        }),
        // The slots taken are released as they drop.
        Verdict::Refuse(refusal) => Verdict::Refuse(refusal),
    }
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
    pub(crate) fn with_slots(shared: Arc<Shared>, chain: Chain, keys: Vec<SlotKey>) -> Self {
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
                        return Verdict::Refuse(shared.in_flight_refusal(j, max, retry_after));
                    }
                    // The store failed closed: as the rules' own closed answer, 503.
                    _ => return Verdict::Refuse(Refusal::unavailable(Duration::from_secs(1))),
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

/// Holds an admitted answer for its delay, then decides.
async fn settle(
    shared: &Shared,
    chain: &Chain,
    answer: Answer,
    slots: Vec<Slot>,
) -> Verdict<Admit> {
    let held = shared.meters.holding(&answer);
    let answer = shared.holding.hold(&shared.limiter, chain, answer).await;
    drop(held);
    let reservation = shared.reservation(&answer, chain);
    let seed = shared.answering.jitter_seed(&answer, chain);
    admit(shared, answer, seed, reservation, slots)
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
    ///
    /// You name it only in types (a service that wraps the layer's); it is what the layer's
    /// service returns.
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
        Check { check: CheckFuture, then: Option<Then<S, B>> },
        Call { #[pin] fut: S::Future, after: Option<After> },
        Settle { give: GiveBack, rest: Option<(S::Response, After)> },
    }
}

/// What a checked request does once its verdict is in: call `inner` with `req`.
struct Then<S, B> {
    inner: S,
    req: Request<B>,
    shared: Arc<Shared>,
    ctx: Ctx,
}

/// What an admitted request's response still needs once the inner service answers.
pub(crate) struct After {
    admit: Admit,
    shared: Arc<Shared>,
    ctx: Ctx,
}

impl After {
    /// What the response does not count goes back to the store: `None` when nothing does,
    /// or it went back at once.
    fn give_back<R>(&mut self, resp: &Response<R>) -> Option<GiveBack> {
        let pending = self.admit.reservation.take();
        let pending = pending.and_then(|r| self.shared.not_counted(r, resp));
        pending.and_then(|r| give_back(&self.shared, r))
    }

    /// The inner service's response, finished (see [`finish`]).
    fn finish<R: LimitBody>(self, resp: Response<R>) -> Response<R> {
        finish(resp, self.admit, &self.shared, self.ctx)
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

    pub(crate) fn call(fut: S::Future, admit: Admit, shared: Arc<Shared>, ctx: Ctx) -> Self {
        let after = Some(After { admit, shared, ctx });
        Self {
            kind: FutureKind::Call { fut, after },
        }
    }

    pub(crate) fn check(
        check: CheckFuture,
        inner: S,
        req: Request<B>,
        shared: Arc<Shared>,
        ctx: Ctx,
    ) -> Self {
        let then = Some(Then {
            inner,
            req,
            shared,
            ctx,
        });
        Self {
            kind: FutureKind::Check { check, then },
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
    admit: Admit,
    shared: &Shared,
    ctx: Ctx,
) -> Response<R> {
    // In place: a response is moved only where it must be (a body that holds slots).
    if !admit.slots.is_empty() {
        resp = resp.map(|b| b.holding(admit.slots));
    }
    shared.decorate(&mut resp, admit.record, ctx);
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
                    // Polled again after completion: answer an empty 500 rather than panic.
                    return Poll::Ready(Ok(response.take().map_or_else(empty_500, own)));
                }
                FutureKindProj::Pass { fut } => return fut.poll(cx),
                FutureKindProj::Check { check, then } => {
                    let verdict = ready!(check.0.as_mut().poll(cx));
                    after_check(verdict, then.take())
                }
                FutureKindProj::Call { fut, after } => {
                    // An error (no response) keeps a reservation counted.
                    let resp = ready!(nesting::below(|| fut.poll(cx)))?;
                    let Some(mut after) = after.take() else {
                        return Poll::Ready(Ok(empty_500()));
                    };
                    // What the response does not count goes back before it is answered.
                    let Some(give) = after.give_back(&resp) else {
                        return Poll::Ready(Ok(after.finish(resp)));
                    };
                    let rest = Some((resp, after));
                    FutureKind::Settle { give, rest }
                }
                FutureKindProj::Settle { give, rest } => {
                    ready!(give.as_mut().poll(cx));
                    let done = rest.take().map(|(r, a)| a.finish(r));
                    return Poll::Ready(Ok(done.unwrap_or_else(empty_500)));
                }
            };
            self.as_mut().project().kind.set(next);
        }
    }
}

/// What follows the limits' verdict: a response now, or the inner service's call.
fn after_check<S, B, R>(verdict: Verdict<Admit>, then: Option<Then<S, B>>) -> FutureKind<S, B>
where
    S: Service<Request<B>, Response = Response<R>>,
{
    let Some(Then {
        mut inner,
        req,
        shared,
        ctx,
    }) = then
    else {
        return FutureKind::Ready { response: None };
    };
    match verdict {
        Verdict::Refuse(refusal) => {
            let response = Some(shared.answering.render(refusal, ctx));
            FutureKind::Ready { response }
        }
        Verdict::Proceed(admit) => {
            let fut = nesting::below(|| inner.call(req));
            let after = Some(After { admit, shared, ctx });
            FutureKind::Call { fut, after }
        }
    }
}
