//! The in-handler limiter: for principals or costs known only inside the handler.

use std::convert::Infallible;

use axum::extract::{FromRef, FromRequestParts};
use axum::response::{IntoResponse, IntoResponseParts, Response, ResponseParts};
use http::request::Parts;
use ratekeeper_core::limiter::{FailureReason, Holding, Reservation, Slot, SlotAnswer, SlotKey};
use ratekeeper_core::{AnyStore, Chain, Check, Decision, FailurePolicy, Limiter};
use ratekeeper_tower::extract::Rejection;
use ratekeeper_tower::{Answering, RateLimitInfo, Refusal, Verdict};

/// Checks limits from inside a handler, with the same limiter, timeout and failure
/// policies as the layer, and the same answers. Take it from state:
///
/// ```
/// use axum::{Json, Router, extract::State, routing::post};
/// use ratekeeper_axum::{Admitted, HandlerLimiter, Refused};
/// use ratekeeper_axum::core::{AnyStore, Chain, FailurePolicy, Limit, Limiter, MemoryStore, Principal, PrincipalKind};
/// use std::time::Duration;
///
/// #[derive(Clone)]
/// struct App { limiter: HandlerLimiter, per_account: Limit }
///
/// impl axum::extract::FromRef<App> for HandlerLimiter {
///     fn from_ref(app: &App) -> Self { app.limiter.clone() }
/// }
///
/// async fn sign_in(
///     State(app): State<App>,
///     limiter: HandlerLimiter,
///     Json(email): Json<String>,
/// ) -> Result<(Admitted, &'static str), Refused> {
///     let chain = Chain::new().check(&app.per_account,
///         Principal::personal(PrincipalKind::User, email.to_lowercase()));
///     let admitted = limiter.check(&chain, FailurePolicy::Closed).await?;
///     Ok((admitted, "welcome"))
/// }
///
/// # fn main() -> Result<(), ratekeeper_axum::core::ConfigError> {
/// let app = App {
///     limiter: HandlerLimiter::new(Limiter::new(MemoryStore::new())),
///     per_account: Limit::sliding_log("sign-in-account", 5, Duration::from_secs(900))?,
/// };
/// let router: Router = Router::new().route("/auth/sign-in", post(sign_in)).with_state(app);
/// # let _ = router; Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct HandlerLimiter {
    limiter: Limiter<AnyStore>,
    answering: Answering,
    holding: Holding,
    /// What a refusal's form depends on, copied from the request when taken as an
    /// extractor: `accept` (a browser), `content-type` (a gRPC call), `origin` (CORS).
    head: http::HeaderMap,
}

impl HandlerLimiter {
    /// A limiter answering like a layer with default settings.
    pub fn new(limiter: Limiter) -> Self {
        Self {
            limiter,
            answering: Answering::new(),
            holding: Holding::default(),
            head: http::HeaderMap::new(),
        }
    }

    /// At most `n` requests held at once by this limiter and its clones (default
    /// [`default_max_held`](crate::core::limiter::default_max_held): a quarter of the process's
    /// open-file limit),
    /// for limits made with [`Limit::delayed`](crate::core::Limit::delayed): the
    /// checks below wait out a request's delay, one at a time per principal, before they
    /// return; over this cap, or from a source already waiting in a full line of its
    /// principal, they answer 429 at once and give the units back. See [`Holding`].
    #[must_use]
    pub fn max_held(mut self, n: u64) -> Self {
        self.holding = Holding::new(usize::try_from(n).unwrap_or(usize::MAX));
        self
    }

    /// The limiter's answer, held for its delay.
    pub(crate) async fn answer(
        &self,
        chain: &Chain,
        policy: FailurePolicy,
    ) -> ratekeeper_core::Answer {
        let answer = self.limiter.check(chain, policy).await;
        self.holding.hold(&self.limiter, chain, answer).await
    }

    /// How refusals and headers are written (share the layer's settings).
    #[must_use]
    pub fn answering(mut self, answering: Answering) -> Self {
        self.answering = answering;
        self
    }

    /// How its refusals and headers are written (for the socket's refusals).
    #[cfg(feature = "ws")]
    pub(crate) fn answering_ref(&self) -> &Answering {
        &self.answering
    }

    /// The limiter.
    pub fn limiter(&self) -> &Limiter<AnyStore> {
        &self.limiter
    }

    /// Checks `chain` in one store call; `Err` is the response to send: the 429 (or, for a
    /// browser, the redirect to the page set with [`Answering::redirect_browsers`]; for a
    /// gRPC call, its status), or the 503 when the store is down and `policy` fails closed.
    ///
    /// Taken as an extractor (as above), the limiter knows the request it answers; taken
    /// from state by hand it does not, and answers as for an API client (use
    /// [`check_for`](Self::check_for) then).
    pub async fn check(&self, chain: &Chain, policy: FailurePolicy) -> Result<Admitted, Refused> {
        self.bans(chain, &self.head)?;
        let answer = self.answer(chain, policy).await;
        self.check_answer(answer, chain, &self.head)
    }

    /// Like [`check`](Self::check), answering as for a request with these headers.
    pub async fn check_for(
        &self,
        chain: &Chain,
        policy: FailurePolicy,
        headers: &http::HeaderMap,
    ) -> Result<Admitted, Refused> {
        self.bans(chain, headers)?;
        let answer = self.answer(chain, policy).await;
        self.check_answer(answer, chain, headers)
    }

    /// Checks `chain` and keeps what it charged as a reservation, for a handler that counts
    /// by outcome: [`Reserved::keep`] when the outcome counts (a wrong password),
    /// [`Reserved::give_back`] when it does not (the right one). See
    /// [`Reservation`](crate::core::limiter::Reservation) for the race-freedom this buys and its
    /// consequences. A [`Reserved`] dropped unsettled keeps its units counted.
    pub async fn reserve(
        &self,
        chain: &Chain,
        policy: FailurePolicy,
        headers: &http::HeaderMap,
    ) -> Result<Reserved, Refused> {
        self.bans(chain, headers)?;
        let answer = self.answer(chain, policy).await;
        let reservation = answer.reservation(chain);
        let admitted = self.check_answer(answer, chain, headers)?;
        Ok(Reserved {
            admitted,
            reservation,
            limiter: self.limiter.clone(),
        })
    }

    // The same result as the public methods return (a refusal is a whole response).
    #[allow(clippy::result_large_err)]
    fn check_answer(
        &self,
        answer: ratekeeper_core::Answer,
        chain: &Chain,
        headers: &http::HeaderMap,
    ) -> Result<Admitted, Refused> {
        match self.answering.verdict_for(answer, chain) {
            Verdict::Proceed(info) => Ok(Admitted {
                info,
                answering: self.answering.clone(),
            }),
            Verdict::Refuse(refusal) => Err(self.refuse(refusal, headers)),
        }
    }

    /// A ban in `chain` keyed on a principal the requester does not own: the operator's
    /// error, answered through the responder.
    #[allow(clippy::result_large_err)]
    fn bans(&self, chain: &Chain, headers: &http::HeaderMap) -> Result<(), Refused> {
        ratekeeper_tower::check_bans(chain).map_err(|r| self.refuse(r.into(), headers))
    }

    /// The response to `refusal` for a request with these headers, made as this
    /// limiter's refusals are (its [`Answering`]'s responder, headers and forms): for a
    /// refusal decided in the handler, e.g. an extractor's rejection
    /// (`limiter.refuse(rejection.into(), &parts.headers)`), so that it answers in problem
    /// details where the limiter does.
    pub fn refuse(&self, refusal: Refusal, headers: &http::HeaderMap) -> Refused {
        let resp = self.answering.respond(refusal, headers);
        Refused(resp.map(axum::body::Body::from))
    }

    /// Takes a slot of an in-flight limit ([`InFlight`](crate::core::InFlight)) for
    /// work done inside the handler: hold the [`Slot`] while the work runs (it is released
    /// when dropped; move it into a streaming body to hold it until the body is sent). `Err`
    /// is the 429 (with a `Retry-After` estimate and `qu="concurrent-requests"`), or the 503
    /// when the store is down and `policy` fails closed.
    pub async fn take_slot(
        &self,
        key: &SlotKey,
        policy: FailurePolicy,
        headers: &http::HeaderMap,
    ) -> Result<Option<Slot>, Refused> {
        match self.limiter.take_slot(key, policy).await {
            SlotAnswer::Taken(slot) => Ok(Some(slot)),
            SlotAnswer::Open(_) => Ok(None),
            SlotAnswer::Full { max, retry_after } => {
                let name = std::sync::Arc::from(key.in_flight().name());
                Err(self.refuse(Refusal::in_flight(name, max, retry_after), headers))
            }
            // Closed (or a kind this version does not know): 503, as the layer answers.
            _ => {
                let wait = std::time::Duration::from_secs(1);
                Err(self.refuse(Refusal::unavailable(wait), headers))
            }
        }
    }

    /// Charges a cost known only after the work (an LLM call's tokens): always applied,
    /// overdrawing if need be, so the next checks wait for the debt. See
    /// [`Limiter::charge`].
    pub async fn charge(
        &self,
        check: &Check,
        policy: FailurePolicy,
    ) -> Result<Decision, FailureReason> {
        self.limiter.charge(check, policy).await
    }
}

impl<S> FromRequestParts<S> for HandlerLimiter
where
    HandlerLimiter: FromRef<S>,
    S: Send + Sync,
{
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let mut limiter = Self::from_ref(state);
        for name in [
            http::header::ACCEPT,
            http::header::CONTENT_TYPE,
            http::header::ORIGIN,
        ] {
            for value in parts.headers.get_all(&name) {
                limiter.head.append(name.clone(), value.clone());
            }
        }
        Ok(limiter)
    }
}

/// An admitted check: return it with the response to add the rate-limit headers.
///
/// You get it from `HandlerLimiter::check` when you limit in a handler, where the principal
/// or the cost is in the body.
#[derive(Debug, Clone)]
pub struct Admitted {
    info: Option<RateLimitInfo>,
    answering: Answering,
}

impl Admitted {
    /// What the limiter decided (`None` when a store failure let the request through).
    pub fn info(&self) -> Option<&RateLimitInfo> {
        self.info.as_ref()
    }
}

impl IntoResponseParts for Admitted {
    type Error = Infallible;

    fn into_response_parts(self, mut res: ResponseParts) -> Result<ResponseParts, Self::Error> {
        if let Some(info) = self.info {
            self.answering.write(&info, res.headers_mut());
            res.extensions_mut().insert(info);
        }
        Ok(res)
    }
}

/// An admitted check whose units are reserved until the handler knows whether its outcome
/// counts (see [`HandlerLimiter::reserve`]).
#[derive(Debug)]
#[must_use = "a reservation dropped unsettled stays counted; say so with keep()"]
pub struct Reserved {
    admitted: Admitted,
    reservation: Option<Reservation>,
    limiter: Limiter<AnyStore>,
}

impl Reserved {
    /// The outcome counts: the units stay charged.
    pub fn keep(self) -> Admitted {
        self.admitted
    }

    /// The outcome does not count: every reserved unit goes back (one more store call).
    /// If the store cannot take them, they stay counted (the limiter logs why).
    pub async fn give_back(self) -> Admitted {
        self.give_back_only(|_, _| true).await
    }

    /// Gives back the units of the checks for which `f` (given each check's position in
    /// the chain) is true; the others stay counted. E.g. after the right password, the
    /// per-account unit goes back and the per-IP unit stays.
    pub async fn give_back_only(self, f: impl FnMut(usize, &Check) -> bool) -> Admitted {
        if let Some(mut r) = self.reservation {
            r.retain(f);
            let _ = self.limiter.give_back(r).await;
        }
        self.admitted
    }
}

/// A refusal, ready to send: the layer's 429 (with `Retry-After` and the rate-limit
/// headers) or 503, or an extractor's 4xx.
#[derive(Debug)]
pub struct Refused(Response);

impl IntoResponse for Refused {
    fn into_response(self) -> Response {
        self.0
    }
}

impl From<Rejection> for Refused {
    fn from(r: Rejection) -> Self {
        Self(RejectionResponse(r).into_response())
    }
}

/// An extractor's [`Rejection`] as an axum response: its status, JSON
/// `{"error": ..., "code": ...}`, and `WWW-Authenticate` for a 401.
#[derive(Debug)]
pub struct RejectionResponse(pub Rejection);

impl IntoResponse for RejectionResponse {
    fn into_response(self) -> Response {
        ratekeeper_tower::rejection_response(&self.0).map(axum::body::Body::from)
    }
}
