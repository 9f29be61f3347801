//! Shared support for the end-to-end tests: servers on real TCP listeners and clients.

pub mod refusals;
pub mod room;

/// The `redis-server` harness (shared with the benches).
pub use ratekeeper_testkit::redis;
pub use ratekeeper_testkit::{rss_kib, tls};

use std::net::SocketAddr;

use axum::Router;
use axum::extract::ConnectInfo;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// A server on a free loopback port, stopped when dropped.
#[derive(Debug)]
pub struct Server {
    addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Server {
    /// Serves `app` (with connect info, so handlers and layers see the peer address).
    pub async fn start(app: Router) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(async move {
            // The test ends by dropping the server; an accept error ends it early and the
            // test's requests then fail loudly.
            let _ = axum::serve(
                listener,
                app.into_make_service_with_connect_info::<SocketAddr>(),
            )
            .await;
        });
        Ok(Self { addr, task })
    }

    /// `http://127.0.0.1:PORT` + `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// The listening address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Reads the peer from axum's `ConnectInfo`, for `ClientIp::peer_source`.
pub fn connect_info_peer(ext: &axum::http::Extensions) -> Option<std::net::IpAddr> {
    ext.get::<ConnectInfo<SocketAddr>>().map(|c| c.0.ip())
}

/// A refusal's `Retry-After`, in whole seconds (the test fails if it is absent or not a
/// number).
pub fn retry_after(r: &reqwest::Response) -> u64 {
    r.headers()["retry-after"]
        .to_str()
        .expect("Retry-After is visible ASCII")
        .parse()
        .expect("Retry-After is whole seconds")
}

/// A client that does not follow redirects.
pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("a plain HTTP client builds")
}

/// The README's Rust blocks, compiled and run as doctests (`cargo test --workspace` runs
/// them with this crate's dependencies: every crate of the family, axum, tokio).
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;

/// The repository's guides to the examples (`docs/examples.md`, `docs/quiz-night.md`),
/// compiled and run the same way; the crates' guides are doctested in their own crates.
#[cfg(doctest)]
#[doc = include_str!("../../docs/examples.md")]
pub struct ExamplesGuideDoctests;

/// See [`ExamplesGuideDoctests`].
#[cfg(doctest)]
#[doc = include_str!("../../docs/quiz-night.md")]
pub struct QuizNightGuideDoctests;

/// reqwest as a Tower `Service<http::Request<String>>`, for the client pacing layer.
pub fn reqwest_service() -> tower::util::BoxCloneService<
    http::Request<String>,
    http::Response<reqwest::Body>,
    reqwest::Error,
> {
    let http = reqwest::Client::new();
    tower::util::BoxCloneService::new(tower::service_fn(move |req: http::Request<String>| {
        let http = http.clone();
        async move {
            let req = reqwest::Request::try_from(req)?;
            Ok::<_, reqwest::Error>(http::Response::from(http.execute(req).await?))
        }
    }))
}

/// A local upstream of `per_second` calls a second (a fixed window, our own layer on a
/// memory store of its own) at `/items`, stating its limit in the fields `style` sends: what
/// the client pacing layer is tested and measured against.
pub async fn upstream(per_second: u64, style: ratekeeper_tower::HeaderStyle) -> Server {
    use ratekeeper_tower::{Answering, RateLimitLayer, Rule};
    let limit = ratekeeper_core::Limit::fixed_window(
        "upstream",
        per_second,
        std::time::Duration::from_secs(1),
    )
    .expect("a valid limit");
    let layer = RateLimitLayer::new(ratekeeper_core::Limiter::new(
        ratekeeper_core::MemoryStore::new(),
    ))
    .answering(Answering::new().headers(style))
    .rule(Rule::new(limit, ratekeeper_tower::extract::Global));
    let app = Router::new().route(
        "/items",
        axum::routing::get(|| async { "item" }).route_layer(layer),
    );
    Server::start(app).await.expect("a free port")
}
