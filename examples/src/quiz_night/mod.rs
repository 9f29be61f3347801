//! quiz-night: a pub-quiz server, the README's demo.
//!
//! A whole pub is one IP address, so player-facing limits key on the participant or the
//! user; the client IP is the unit of abuse only for sign-in and the global bot guard,
//! sized for a full room polling at once.
//!
//! | route | principal(s), in order | limit(s) | algorithm | store down |
//! |---|---|---|---|---|
//! | every route but `/too-many-requests`, `/healthz` | client IP | 1200 / 60 s | sliding window | count in memory |
//! | `GET /api/games/{game}/poll` | participant | 20 / 60 s | sliding window | allow |
//! | `POST /api/games/{game}/answers` | participant, client IP | 30 / 60 s, 600 / 60 s | sliding window | allow |
//! | `GET /api/games/{game}/ws` (WebSocket; each message) | participant (`?participant=` or `x-participant-id`), client IP | 120 / 60 s then close 1008; the answers' 30 / 60 s and 600 / 60 s per IP, shared with the `POST`; 20 a second per connection then 1008; 3 sockets at once per participant, 200 per IP; silent 30 s (no pong) or not reading for 10 s: closed | sliding window | allow |
//! | `POST /host/games/{game}/next` | user (bearer) | bucket of 10, +2/s | token bucket | allow |
//! | `POST /auth/sign-in` | client IP, account | 20 attempts / 15 min, then 429; per account, *failed* attempts over 15 min: 5 at once, then each held 1 s, 2 s, 4 s, then 8 s, one at a time in one line per account (a full line of 5 turns away only an address already in it) | sliding log | 503 |
//! | `POST /api/ask` | visitor · visitor+game · game · everybody | 20/min · 15/day · 500/day · 5000/day | fixed windows | 503 |
//! | `POST /webhooks/payments` | client IP | 600 / 60 s | sliding window | allow |

use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::middleware::Next;
use axum::routing::{get, post};
use ipnet::IpNet;
use ratekeeper_axum::{HandlerLimiter, client_ip};
use ratekeeper_core::fleet::Fleet;
use ratekeeper_core::{
    AnyStore, ConfigError, Delay, FailurePolicy, Limit, Limiter, Principal, PrincipalKind,
};
use ratekeeper_tower::extract::{
    Bearer, ClientIp, ForwardedSource, HeaderKey, KeyExtractor, Rejection, key_fn,
};
use ratekeeper_tower::{RateLimitLayer, Rule};
use tokio::net::TcpListener;

mod handlers;
mod pages;
mod socket;

/// The page browsers are sent to when limited; exempt from every limit.
pub const LIMITED_PAGE: &str = "/too-many-requests";

/// How the server is set up (from the environment in the binary).
#[derive(Debug, Clone, Default)]
pub struct QuizConfig {
    /// Where to count: `REDIS_URL`, `REDIS_CLUSTER` or `REDIS_SENTINEL` (see
    /// [`StoreEnv`](crate::StoreEnv)); none: process memory.
    pub store: crate::StoreEnv,
    /// `QUIZ_TRUSTED_PROXIES`: reverse proxies whose forwarding headers are believed.
    pub trusted_proxies: Vec<IpNet>,
    /// The hold of an account's 6th failed sign-in in 15 minutes (doubling per attempt to
    /// 8 times this). `None`: 1 s. Tests shorten it.
    pub sign_in_delay: Option<Duration>,
    /// `QUIZ_ADMIN_TOKEN`: the admin API and page at `/admin`, for this token (read and
    /// write, named `admin` in the audit log). Unset: no admin routes at all.
    pub admin_token: Option<String>,
    /// `QUIZ_ADMIN_INSECURE_COOKIE=1`: the page's session cookie without `Secure`, for a
    /// page served over plain HTTP on a private network.
    pub admin_insecure_cookie: bool,
}

impl QuizConfig {
    /// Reads the store variables and `QUIZ_TRUSTED_PROXIES` (comma-separated CIDRs).
    pub fn from_env() -> Result<Self, String> {
        let store = crate::StoreEnv::from_env().map_err(|e| e.to_string())?;
        let trusted_proxies = match std::env::var("QUIZ_TRUSTED_PROXIES") {
            Ok(list) => list
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(|s| {
                    s.parse::<IpNet>()
                        .or_else(|_| s.parse::<std::net::IpAddr>().map(IpNet::from))
                        .map_err(|_| format!("QUIZ_TRUSTED_PROXIES: {s:?} is not a CIDR"))
                })
                .collect::<Result<_, _>>()?,
            Err(_) => Vec::new(),
        };
        Ok(Self {
            store,
            trusted_proxies,
            sign_in_delay: None,
            admin_token: std::env::var("QUIZ_ADMIN_TOKEN")
                .ok()
                .filter(|t| !t.is_empty()),
            admin_insecure_cookie: std::env::var("QUIZ_ADMIN_INSECURE_COOKIE").as_deref()
                == Ok("1"),
        })
    }
}

/// The limits, each written once.
#[derive(Debug, Clone)]
pub(crate) struct Limits {
    pub(crate) global: Limit,
    pub(crate) poll: Limit,
    pub(crate) answers: Limit,
    pub(crate) answers_ip: Limit,
    pub(crate) host: Limit,
    pub(crate) sign_in_ip: Limit,
    pub(crate) sign_in_account: Limit,
    pub(crate) ask_burst: Limit,
    pub(crate) ask_visitor_game: Limit,
    pub(crate) ask_game: Limit,
    pub(crate) ask_all: Limit,
    pub(crate) webhooks: Limit,
}

impl Limits {
    fn new(sign_in_delay: Duration) -> Result<Self, ConfigError> {
        let minute = Duration::from_secs(60);
        let quarter = Duration::from_secs(15 * 60);
        let day = Duration::from_secs(86_400);
        Ok(Self {
            // Sized for a full pub on one Wi-Fi with every phone polling: 100 × 6/min
            // = 600, plus joins, page loads and answers.
            global: Limit::sliding_window("global-ip", 1_200, minute)?,
            poll: Limit::sliding_window("poll", 20, minute)?,
            answers: Limit::sliding_window("answers", 30, minute)?,
            answers_ip: Limit::sliding_window("answers-ip", 600, minute)?,
            host: Limit::token_bucket("host-next", 10, 2, Duration::from_secs(1))?,
            sign_in_ip: Limit::sliding_log("sign-in-ip", 20, quarter)?,
            // Failed attempts per account (right ones are given back): 5 at once, then held
            // 1 s, 2 s, 4 s, then 8 s each, one at a time, at most 5 waiting. Slowed, never
            // locked: the quota (the hard ceiling) is beyond what the holds let through
            // (at most 119 failures in 15 minutes per instance; see the README).
            sign_in_account: Limit::sliding_log("sign-in-account", 1_000, quarter)?
                .delayed(Delay::doubling(5, sign_in_delay, sign_in_delay * 8)?.max_held(5)?)?,
            ask_burst: Limit::fixed_window("ask-burst", 20, minute)?,
            ask_visitor_game: Limit::fixed_window("ask-visitor-game", 15, day)?,
            ask_game: Limit::fixed_window("ask-game", 500, day)?,
            ask_all: Limit::fixed_window("ask-all", 5_000, day)?,
            webhooks: Limit::sliding_window("webhooks-ip", 600, minute)?,
        })
    }
}

/// What the handlers share.
#[derive(Debug, Clone)]
pub(crate) struct QuizState {
    pub(crate) limiter: HandlerLimiter,
    pub(crate) store: AnyStore,
    pub(crate) limits: Limits,
    pub(crate) client: ClientIp,
    /// The answer socket's limits (`socket.rs`).
    pub(crate) sockets: ratekeeper_axum::ws::SocketLimiter,
}

impl axum::extract::FromRef<QuizState> for HandlerLimiter {
    fn from_ref(s: &QuizState) -> Self {
        s.limiter.clone()
    }
}

fn participant() -> HeaderKey {
    HeaderKey::new(
        http::HeaderName::from_static("x-participant-id"),
        PrincipalKind::Participant,
    )
}

fn game_header() -> Result<HeaderKey, ConfigError> {
    Ok(HeaderKey::new(
        http::HeaderName::from_static("x-game-id"),
        PrincipalKind::custom("game")?,
    ))
}

/// The quiz's router over `store`.
pub fn app(cfg: &QuizConfig) -> Result<Router, ConfigError> {
    let store = cfg.store.build()?;
    crate::announce(&store);
    app_with_store(cfg, store)
}

/// The quiz's router over a given store (tests pass one).
pub fn app_with_store(cfg: &QuizConfig, store: AnyStore) -> Result<Router, ConfigError> {
    let limits = Limits::new(cfg.sign_in_delay.unwrap_or(Duration::from_secs(1)))?;
    // One source: the rightmost X-Forwarded-For hop that is not a trusted proxy. A second
    // source (X-Real-IP first) would let a client behind a proxy that passes its own
    // X-Real-IP through name any address it likes.
    let client = client_ip()
        .trusted_proxies(cfg.trusted_proxies.iter().copied())
        .source(ForwardedSource::XForwardedFor);
    // Every layer and the handlers count in one store through one limiter (one cool-down,
    // one log line per outage): clones of one `Limiter`. With the admin on, it tracks who
    // is limited (heavy hitters per limit).
    let mut limiter = Limiter::builder(store.clone());
    if cfg.admin_token.is_some() {
        limiter = limiter.heavy_hitters();
    }
    let limiter = limiter.build()?;
    // One way of answering for every layer and the handlers: 303 to the page for browsers.
    // The page is told the wait (`?wait=45`), so it can say it.
    let page = format!("{LIMITED_PAGE}?wait={{retry_after}}");
    // A room refused together (every phone falling back to polling at once) comes back
    // spread over up to 5 s more, never sooner than the true wait.
    let answering = ratekeeper_tower::Answering::new()
        .redirect_browsers(&page)?
        .jitter(Duration::from_secs(5));
    let layer = || RateLimitLayer::new(limiter.clone()).answering(answering.clone());

    let global = layer()
        .rule(
            Rule::new(limits.global.clone(), client.clone()).on_store_error(FailurePolicy::Memory),
        )
        .exempt("/healthz");
    let poll = layer()
        .rule(Rule::new(limits.poll.clone(), participant()).on_store_error(FailurePolicy::Open));
    let answers = layer()
        .rule(Rule::new(limits.answers.clone(), participant()).on_store_error(FailurePolicy::Open))
        .rule(
            Rule::new(limits.answers_ip.clone(), client.clone())
                .on_store_error(FailurePolicy::Open),
        );
    let host = layer()
        .rule(Rule::new(limits.host.clone(), Bearer::new()).on_store_error(FailurePolicy::Open));
    let visitor_game = visitor_game(&client)?;
    // Four fixed windows in one round trip, in order: a refusal charges none of them.
    let ask = layer()
        .rule(Rule::new(limits.ask_burst.clone(), client.clone()))
        .rule(Rule::new(limits.ask_visitor_game.clone(), visitor_game))
        .rule(Rule::new(limits.ask_game.clone(), game_header()?))
        .rule(Rule::new(
            limits.ask_all.clone(),
            ratekeeper_tower::extract::Global,
        ));
    let webhooks = layer().rule(
        Rule::new(limits.webhooks.clone(), client.clone()).on_store_error(FailurePolicy::Open),
    );

    let admin = admin(
        cfg,
        &store,
        &[&global, &poll, &answers, &host, &ask, &webhooks],
        &limits,
        &client,
    )?;
    // Refusals inside handlers answer like the layers.
    let handler = HandlerLimiter::new(limiter.clone()).answering(answering.clone());
    let state = QuizState {
        sockets: socket::limiter(&limits, handler.clone(), &client)?,
        limiter: handler,
        store,
        limits,
        client,
    };
    let router = routes(state, [poll, answers, host, ask, webhooks]).layer(global);
    // The admin outside every limit (an operator reaches it during a flood), behind its
    // token. Its changes go to every instance on the store (the fleet); no request is
    // served before this instance read the fleet's state once (or a second passed: a
    // store that does not answer leaves the limits as written).
    Ok(match admin {
        Some((a, fleet)) => {
            router
                .merge(a.router())
                .layer(axum::middleware::from_fn(move |req, next: Next| {
                    let fleet = fleet.clone();
                    async move {
                        // Once ready, one flag: no timer on a request's path.
                        if !fleet.is_ready() {
                            let first = Duration::from_secs(1);
                            let _ = tokio::time::timeout(first, fleet.ready()).await;
                        }
                        next.run(req).await
                    }
                }))
        }
        None => router,
    })
}

/// The routes, each with its layer: `[poll, answers, host, ask, webhooks]`.
fn routes(state: QuizState, layers: [RateLimitLayer; 5]) -> Router {
    let [poll, answers, host, ask, webhooks] = layers;
    Router::new()
        .route("/", get(handlers::home))
        .route(LIMITED_PAGE, get(handlers::limited_page))
        .route("/play", get(handlers::play))
        .route("/robots.txt", get(handlers::robots))
        .route("/healthz", get(handlers::healthz))
        .route(
            "/api/games/{game}/poll",
            get(handlers::poll).route_layer(poll),
        )
        .route(
            "/api/games/{game}/answers",
            post(handlers::answer).route_layer(answers),
        )
        .route("/api/games/{game}/ws", get(socket::socket))
        .route(
            "/host/games/{game}/next",
            post(handlers::next_question).route_layer(host),
        )
        // Each body read up to what the route accepts (413 past it): a sign-in is a few
        // hundred bytes, a question or a webhook a few kB.
        .route(
            "/auth/sign-in",
            post(handlers::sign_in).layer(DefaultBodyLimit::max(SIGN_IN_BODY)),
        )
        .route("/api/ask", post(handlers::ask).route_layer(ask))
        .route(
            "/webhooks/payments",
            post(handlers::payment_webhook).route_layer(webhooks),
        )
        .layer(DefaultBodyLimit::max(BODY))
        .with_state(state)
}

/// A visitor (by client IP) in a game (`x-game-id`).
fn visitor_game(client: &ClientIp) -> Result<impl KeyExtractor + use<>, ConfigError> {
    let visitor = client.clone();
    let game = game_header()?;
    let vg_kind = PrincipalKind::custom("visitor-game")?;
    Ok(key_fn(move |parts| -> Result<Principal, Rejection> {
        let v = visitor.extract(parts)?;
        let g = game.extract(parts)?;
        Ok(Principal::composite(
            vg_kind.clone(),
            [v.value(), g.value()],
        ))
    }))
}

/// The largest sign-in body read (an email and a password in JSON).
pub const SIGN_IN_BODY: usize = 1024;
/// The largest body any other route reads.
pub const BODY: usize = 16 * 1024;

/// The admin over every layer's and handler's limits, with `QUIZ_ADMIN_TOKEN` only; its
/// failed sign-ins counted per client IP as the layers find it (behind the same proxies).
/// Its changes go through a fleet over `store`, run here (a read a second, and at each of
/// the store's notices), so every instance on one Redis obeys them.
fn admin(
    cfg: &QuizConfig,
    store: &AnyStore,
    layers: &[&RateLimitLayer],
    limits: &Limits,
    client: &ClientIp,
) -> Result<Option<(ratekeeper_admin::Admin, Fleet)>, ConfigError> {
    let Some(token) = &cfg.admin_token else {
        return Ok(None);
    };
    let mut a =
        ratekeeper_admin::Admin::builder().token("admin", token, ratekeeper_admin::Role::ReadWrite);
    for l in layers {
        a = a.layer(l);
    }
    a = a
        .limit(limits.sign_in_ip.clone())
        .limit(limits.sign_in_account.clone())
        .client_ip(client.clone());
    if cfg.admin_insecure_cookie {
        a = a.insecure_cookie();
    }
    let every = layers
        .iter()
        .flat_map(|l| l.limits())
        .chain([limits.sign_in_ip.clone(), limits.sign_in_account.clone()]);
    let fleet = Fleet::new(store.clone(), every);
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        runtime.spawn(fleet.clone().run(Duration::from_secs(1)));
    }
    let a = a.fleet(fleet.clone()).build()?;
    Ok(Some((a, fleet)))
}

/// Serves `app` on `listener` (with connect info) until the process stops.
pub async fn serve(listener: TcpListener, app: Router) -> std::io::Result<()> {
    crate::serve::serve(listener, app).await
}
