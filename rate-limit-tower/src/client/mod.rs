//! The other end of the wire: a layer for **clients** that paces outgoing calls by what the
//! upstream says, one pace per scope shared by every worker.
//!
//! [`PaceLayer`] wraps any `Service<http::Request<B>>` that answers `http::Response`s
//! (hyper-util's client, a tonic `Channel`, a `tower::service_fn`). Before a request leaves,
//! it takes a slot of its scope's pace from a [`SharedPacer`] (the scope: the request's host
//! by default, or any [`Scope`]), waiting up to [`PaceLayer::max_wait`] or the request's
//! [`Deadline`], and answering [`PaceError::WouldWait`] without a call when the wait would
//! pass either. From every answer it learns:
//!
//! | the upstream says | the layer does |
//! |---|---|
//! | 429, 503, gRPC `RESOURCE_EXHAUSTED`; 403 with `Retry-After` or an empty limit (GitHub) | a refusal: the shared rate drops (AIMD: at most once a period) and every worker waits out `Retry-After` (seconds or an HTTP date), `grpc-retry-pushback-ms`, `RetryInfo`, or the reset of an empty limit; which statuses count: [`refused_on`](PaceLayer::refused_on), [`refused_when_told`](PaceLayer::refused_when_told) |
//! | `RateLimit-Policy` (IETF draft-11), `RateLimit-Limit: 10, 10;w=1` | the strictest policy's rate, times [`headroom`](PaceLayer::headroom) (0.9), is the scope's ceiling, and its pace straight away (unless it refused within the period) |
//! | `RateLimit: "p";r=0;t=3`, `RateLimit-Remaining: 0` with `-Reset`, `X-RateLimit-Remaining: 0` with `-Reset` (delta or Unix time) | every worker waits for the reset, with no decrease |
//! | nothing | AIMD on its refusals: a step up each period of successes, a cut on each refusal |
//!
//! Every wait an upstream asks for is held to [`max_pause`](PaceLayer::max_pause) (an hour
//! by default; the pacer's own bound too), every time computed from its numbers saturates;
//! a header that does not parse is ignored, never a wait. Callers of one scope are served
//! in the order they asked, each waiting for its own slot. A gRPC refusal sent after a response body (in trailers) is not seen: tonic and our
//! own [`GrpcResponder`](crate::GrpcResponder) refuse in the headers
//! ("trailers-only").
//!
//! **One pace for a fleet**: the scope's rate, its next slot and its pause live in the
//! pacer's store (memory, Redis, Cluster), so workers on several hosts together stay under
//! the upstream's limit, a worker that dies leaves the others the whole rate, and a store
//! outage leaves each worker its share of the last rate (fail open, see
//! [`SharedPacer`]).
//!
//! ```
//! use ratekeeper_tower::core::pace::{Aimd, SharedPacer};
//! use ratekeeper_tower::core::{AnyStore, MemoryStore};
//! use ratekeeper_tower::client::PaceLayer;
//! use std::time::Duration;
//! use tower::{Service, ServiceBuilder, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! let pacer = SharedPacer::new(AnyStore::Memory(MemoryStore::new()), "upstream", Aimd::default())?;
//! // Any HTTP client service; here one that answers like an upstream stating its limit.
//! let upstream = tower::service_fn(|_req: http::Request<()>| async {
//!     let answer = http::Response::builder()
//!         .header("ratelimit-policy", r#""default";q=50;w=1"#)
//!         .body(())?;
//!     Ok::<_, http::Error>(answer)
//! });
//! let mut client = ServiceBuilder::new()
//!     .layer(PaceLayer::new(pacer.clone()).max_wait(Duration::from_secs(5)))
//!     .service(upstream);
//! let req = http::Request::get("https://api.example.com/items").body(())?;
//! let answer = client.ready().await?.call(req).await?;
//! assert_eq!(answer.status(), 200);
//! assert_eq!(pacer.rate("api.example.com"), 45.0); // 0.9 of what it allows
//! # Ok(())
//! # }
//! ```

mod grpc;
mod told;

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime};

use http::{Extensions, HeaderMap, Method, Request, Response, StatusCode, Uri};
use ratekeeper_core::pace::{SharedPacer, Turn};
use tokio::time::Instant;
use tower_layer::Layer;
use tower_service::Service;

/// The longest an upstream may make the workers wait, by default.
pub const DEFAULT_MAX_PAUSE: Duration = Duration::from_secs(3_600);
/// The longest a request waits for its slot, by default.
pub const DEFAULT_MAX_WAIT: Duration = Duration::from_secs(30);
/// The share of what an upstream states that the workers use, by default.
pub const DEFAULT_HEADROOM: f64 = 0.9;
/// How often a worker tells the store a ceiling it already told.
const RETELL: Duration = Duration::from_secs(10);

/// What a [`Scope`] sees of a request.
///
/// You read it in a `Scope` of your own, to pace by an account, a path or anything else a
/// request's head carries.
#[derive(Debug)]
#[non_exhaustive]
pub struct Head<'a> {
    /// The method.
    pub method: &'a Method,
    /// The URI (its host is the default scope).
    pub uri: &'a Uri,
    /// The headers.
    pub headers: &'a HeaderMap,
    /// The extensions (an account the caller put there).
    pub extensions: &'a Extensions,
}

/// Which pace a request takes: a host, an account, a site. Requests of one scope share
/// one rate among every worker of the pacer.
pub trait Scope: Clone + Send + Sync + 'static {
    /// The scope of a request (any text; it is hashed into the store's key).
    fn of(&self, head: &Head<'_>) -> String;
}

impl<F> Scope for F
where
    F: Fn(&Head<'_>) -> String + Clone + Send + Sync + 'static,
{
    fn of(&self, head: &Head<'_>) -> String {
        self(head)
    }
}

/// The request's host (`api.example.com`; `Host` when the URI has none): the default scope.
///
/// A `PaceLayer` paces by it unless given another scope; you name it only in types
/// (`Paced<T, ByHost>`).
#[derive(Debug, Clone, Copy, Default)]
pub struct ByHost;

impl Scope for ByHost {
    fn of(&self, head: &Head<'_>) -> String {
        head.uri
            .host()
            .or_else(|| head.headers.get(http::header::HOST)?.to_str().ok())
            .unwrap_or("")
            .to_ascii_lowercase()
    }
}

/// The latest a request may wait for its slot until: put it in the request's extensions.
///
/// You need it when a call has a deadline of its own (the request your service is
/// answering), so the pacer gives up rather than wait past it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadline(pub Instant);

/// Why a paced call did not answer.
///
/// You match on it where you call a paced client: `WouldWait` means no call was made, and
/// says when one could be; the rest are your client's own errors.
#[derive(Debug)]
#[non_exhaustive]
pub enum PaceError<E> {
    /// The slot would come later than the layer's `max_wait` or the request's
    /// [`Deadline`]: no call was made.
    WouldWait {
        /// The scope.
        scope: String,
        /// How long it would have waited (from when it asked).
        wait: Duration,
    },
    /// The inner service failed.
    Upstream(E),
}

impl<E: std::fmt::Display> std::fmt::Display for PaceError<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::WouldWait { scope, wait } => write!(
                f,
                "pace.would_wait: a call to {scope:?} would wait {wait:?}, past its bound"
            ),
            Self::Upstream(e) => write!(f, "{e}"),
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for PaceError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Upstream(e) => Some(e),
            Self::WouldWait { .. } => None,
        }
    }
}

/// Paces a client's requests per scope by what the upstream says (see the [module](self)).
///
/// You need it when your service calls an API that limits you: one around each client,
/// every worker sharing one `SharedPacer` through the store.
#[derive(Debug, Clone)]
pub struct PaceLayer<S = ByHost> {
    pacer: SharedPacer,
    scope: S,
    settings: Settings,
}

#[derive(Debug, Clone, Copy)]
struct Settings {
    max_wait: Duration,
    max_pause: Duration,
    headroom: f64,
    refusals: told::Refusals,
}

impl PaceLayer {
    /// Paces by the request's host through `pacer` (its store and name are what workers
    /// share; its AIMD settings pace an upstream that says nothing).
    pub fn new(pacer: SharedPacer) -> Self {
        Self {
            pacer,
            scope: ByHost,
            settings: Settings {
                max_wait: DEFAULT_MAX_WAIT,
                max_pause: DEFAULT_MAX_PAUSE,
                headroom: DEFAULT_HEADROOM,
                refusals: told::Refusals::default(),
            },
        }
    }
}

impl<S> PaceLayer<S> {
    /// Paces by `scope` instead of the host.
    pub fn scope<T: Scope>(self, scope: T) -> PaceLayer<T> {
        PaceLayer {
            pacer: self.pacer,
            scope,
            settings: self.settings,
        }
    }

    /// The longest a request waits for its slot (default [`DEFAULT_MAX_WAIT`]); past it,
    /// [`PaceError::WouldWait`] without a call.
    #[must_use]
    pub fn max_wait(mut self, wait: Duration) -> Self {
        self.settings.max_wait = wait;
        self
    }

    /// The longest an upstream may make the workers wait (default [`DEFAULT_MAX_PAUSE`]):
    /// a `Retry-After` of a week waits this long.
    #[must_use]
    pub fn max_pause(mut self, pause: Duration) -> Self {
        self.settings.max_pause = pause;
        self
    }

    /// The share of the rate an upstream states that the workers use (default
    /// [`DEFAULT_HEADROOM`], from 0.1 to 1): room for clocks and calls in flight.
    #[must_use]
    pub fn headroom(mut self, share: f64) -> Self {
        self.settings.headroom = if share.is_finite() {
            share.clamp(0.1, 1.0)
        } else {
            DEFAULT_HEADROOM
        };
        self
    }
}

impl<S> PaceLayer<S> {
    /// The statuses that are always a refusal (default 429 and 503), replacing these.
    #[must_use]
    pub fn refused_on(mut self, statuses: impl IntoIterator<Item = StatusCode>) -> Self {
        self.settings.refusals.always = told::Statuses::of(statuses);
        self
    }

    /// The statuses that are a refusal when the answer says how long to wait
    /// (`Retry-After`, or a remaining count of 0 with its reset), replacing these (default
    /// 403: GitHub answers its primary and secondary limits so; a 403 that says neither is
    /// about permissions, and paces nothing).
    #[must_use]
    pub fn refused_when_told(mut self, statuses: impl IntoIterator<Item = StatusCode>) -> Self {
        self.settings.refusals.when_told = told::Statuses::of(statuses);
        self
    }
}

impl<S: Clone, T> Layer<T> for PaceLayer<S> {
    type Service = Paced<T, S>;

    fn layer(&self, inner: T) -> Self::Service {
        Paced {
            inner,
            pacer: self.pacer.clone(),
            scope: self.scope.clone(),
            settings: self.settings,
            notes: Arc::default(),
        }
    }
}

/// The service [`PaceLayer`] makes.
///
/// You name it only in types; `PaceLayer` wraps your client in it.
#[derive(Debug, Clone)]
pub struct Paced<T, S = ByHost> {
    inner: T,
    pacer: SharedPacer,
    scope: S,
    settings: Settings,
    notes: Notes,
}

/// What this worker noted of each scope: the ceiling it last told the store and when, and
/// the end of a pause an upstream asked of it.
type Notes = Arc<Mutex<HashMap<String, Note>>>;

#[derive(Debug, Default)]
struct Note {
    ceiling: Option<(f64, Instant)>,
    paused_until: Option<Instant>,
}

impl<T, S, B, RB> Service<Request<B>> for Paced<T, S>
where
    T: Service<Request<B>, Response = Response<RB>> + Clone + Send + 'static,
    T::Future: Send,
    T::Error: Send,
    S: Scope,
    B: Send + 'static,
    RB: Send + 'static,
{
    type Response = Response<RB>;
    type Error = PaceError<T::Error>;
    type Future = Pin<Box<dyn Future<Output = Result<Response<RB>, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(PaceError::Upstream)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let scope = self.scope.of(&Head {
            method: req.method(),
            uri: req.uri(),
            headers: req.headers(),
            extensions: req.extensions(),
        });
        let deadline = req.extensions().get::<Deadline>().map(|d| d.0);
        // The ready service goes with this call; a clone stays for the next.
        let ready = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, ready);
        let pace = Pacing {
            pacer: self.pacer.clone(),
            settings: self.settings,
            notes: self.notes.clone(),
        };
        Box::pin(async move {
            pace.slot(&scope, deadline).await?;
            let answer = inner.call(req).await.map_err(PaceError::Upstream)?;
            let said = told::told(
                answer.status(),
                answer.headers(),
                SystemTime::now(),
                pace.settings.max_pause,
                &pace.settings.refusals,
            );
            pace.learn(&scope, said).await;
            Ok(answer)
        })
    }
}

/// What a call needs of its layer: the pacer, the settings, the notes.
struct Pacing {
    pacer: SharedPacer,
    settings: Settings,
    notes: Notes,
}

impl Pacing {
    fn note<T>(&self, scope: &str, f: impl FnOnce(&mut Note) -> T) -> T {
        let mut notes = self.notes.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = notes.get_mut(scope) {
            return f(n);
        }
        f(notes.entry(scope.to_owned()).or_default())
    }

    /// Takes the scope's next slot within the bound (the layer's `max_wait` from when it
    /// asked, and the request's deadline) and waits for it, or says it would wait too long.
    /// Callers are served in the order they asked: each is told its own slot. A pause this
    /// worker learnt while it waited (an upstream's refusal of another call) gives the slot
    /// up, and the call asks again.
    async fn slot<E>(&self, scope: &str, deadline: Option<Instant>) -> Result<(), PaceError<E>> {
        let asked = Instant::now();
        loop {
            let now = Instant::now();
            let mut within = self.settings.max_wait.saturating_sub(now - asked);
            if let Some(dl) = deadline {
                within = within.min(dl.saturating_duration_since(now));
            }
            match self.pacer.reserve(scope, within).await {
                Turn::Now => return Ok(()),
                Turn::After(d) => {
                    tokio::time::sleep(d).await;
                    let woke = Instant::now();
                    let paused = self.note(scope, |n| n.paused_until.is_some_and(|p| p > woke));
                    if !paused {
                        return Ok(());
                    }
                }
                Turn::Beyond(d) => {
                    // The memory pacer answers without suspending: a caller that asks again
                    // at once must still leave the worker thread to the other tasks.
                    tokio::task::yield_now().await;
                    return Err(PaceError::WouldWait {
                        scope: scope.to_owned(),
                        wait: (now - asked).saturating_add(d),
                    });
                }
            }
        }
    }

    /// What the answer said, into the pacer: a refusal at once; a success with the next
    /// call; a ceiling when it moved by more than 5 % (or every 10 s); an empty limit's
    /// reset at once.
    async fn learn(&self, scope: &str, t: told::Told) {
        if let Some(w) = t.wait {
            let until = Instant::now().checked_add(w);
            self.note(scope, |n| {
                n.paused_until = n.paused_until.max(until);
            });
        }
        if t.refused {
            self.pacer.rejected(scope, t.wait).await;
            return;
        }
        self.pacer.success(scope);
        let ceiling = t.allows.map(|a| a * self.settings.headroom);
        let new_ceiling = ceiling.filter(|c| {
            self.note(scope, |n| {
                let fresh = n.ceiling.is_some_and(|(was, at)| {
                    (was - c).abs() <= was * 0.05 && at.elapsed() < RETELL
                });
                if !fresh {
                    n.ceiling = Some((*c, Instant::now()));
                }
                !fresh
            })
        });
        if new_ceiling.is_some() || t.wait.is_some() {
            self.pacer.told(scope, t.wait, new_ceiling).await;
        }
    }
}
