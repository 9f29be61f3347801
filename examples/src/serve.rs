//! How every example server serves its router over TCP: `axum::serve` gives hyper no timer,
//! so hyper's header-read timeout never applies and a client that opens connections and
//! never finishes a request head holds each one for as long as it likes. This accept loop
//! gives hyper a timer: a request head not read in full within [`HEADER_READ_TIMEOUT`] ends
//! its connection (HTTP/1.1; HTTP/2 has no such timeout in hyper: its connections are
//! pinged every [`HTTP2_KEEP_ALIVE`] and closed when a ping goes unanswered). Each request
//! carries the peer's address (`ConnectInfo<SocketAddr>`), and WebSocket upgrades work.

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tower::ServiceExt;

/// How long a client may take to send a request's head (HTTP/1.1).
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// How often an idle HTTP/2 connection is pinged; one that does not answer within as long
/// again is closed.
pub const HTTP2_KEEP_ALIVE: Duration = Duration::from_secs(20);

/// Serves `app` on `listener`, with connect info, until the process stops. An accept that
/// fails (out of descriptors, say) waits 100 ms and goes on: the server never ends on a
/// client's doing.
pub async fn serve(listener: TcpListener, app: Router) -> std::io::Result<()> {
    let mut http = auto::Builder::new(TokioExecutor::new());
    http.http1()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    http.http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(HTTP2_KEEP_ALIVE)
        .keep_alive_timeout(HTTP2_KEEP_ALIVE);
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let service = app
            .clone()
            .map_request(move |mut req: http::Request<Incoming>| {
                req.extensions_mut().insert(ConnectInfo::<SocketAddr>(peer));
                req
            });
        let http = http.clone();
        tokio::spawn(async move {
            let io = TokioIo::new(stream);
            let service = TowerToHyperService::new(service);
            // A connection's end (the client gone, a head too slow) is no server error.
            let _ = http.serve_connection_with_upgrades(io, service).await;
        });
    }
}
