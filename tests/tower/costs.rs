//! A cost taken from the request's head, in the layer: an upload charged by the KiB it
//! declares is refused before its body is read, and a computed cost of 0 still counts.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::routing::post;
use ratekeeper_core::{AnyStore, Limit, Limiter, MemoryStore, PrincipalKind};
use ratekeeper_tests::redis::RedisServer;
use ratekeeper_tests::{Server, client};
use ratekeeper_tower::extract::HeaderKey;
use ratekeeper_tower::{RateLimitLayer, Rule, cost};

const KIB: usize = 1_024;

/// `/upload`: 1 MiB per user per minute, charged by the declared KiB; the handler counts
/// the bytes it reads.
fn uploads(store: AnyStore, read: Arc<AtomicUsize>) -> Router {
    let layer = RateLimitLayer::new(Limiter::new(store)).rule(
        Rule::new(
            Limit::fixed_window("upload-kib", 1_024, Duration::from_secs(60)).unwrap(),
            HeaderKey::new("x-user".parse().unwrap(), PrincipalKind::User),
        )
        .cost_from(|head| cost::body_kib(head).unwrap_or(1_024)),
    );
    let handler = move |body: Bytes| async move {
        read.fetch_add(body.len(), Ordering::SeqCst);
        "stored"
    };
    Router::new()
        .route("/upload", post(handler).route_layer(layer))
        .layer(axum::extract::DefaultBodyLimit::max(4 * KIB * KIB))
}

async fn refused_uploads_are_never_read(store: AnyStore) {
    let read = Arc::new(AtomicUsize::new(0));
    let server = Server::start(uploads(store, Arc::clone(&read)))
        .await
        .unwrap();
    let http = client();
    let upload = |bytes: usize| {
        http.post(server.url("/upload"))
            .header("x-user", "ada")
            .body(vec![b'x'; bytes])
            .send()
    };
    // 2 MiB can never fit 1 MiB a minute: refused at once, no wait told, nothing read.
    let r = upload(2 * KIB * KIB).await.unwrap();
    assert_eq!(r.status(), 429);
    assert!(r.headers().get("retry-after").is_none());
    assert!(
        r.text()
            .await
            .unwrap()
            .contains("\"code\":\"limit.cost_too_high\"")
    );
    assert_eq!(read.load(Ordering::SeqCst), 0, "the refused body was read");
    // 600 KiB fits and is read; 500 KiB more does not fit this minute and is not read.
    assert_eq!(upload(600 * KIB).await.unwrap().status(), 200);
    assert_eq!(read.load(Ordering::SeqCst), 600 * KIB);
    let r = upload(500 * KIB).await.unwrap();
    assert_eq!(r.status(), 429);
    assert!(r.headers().get("retry-after").is_some());
    assert_eq!(r.headers()["ratelimit-remaining"], "424");
    assert_eq!(read.load(Ordering::SeqCst), 600 * KIB);
    // What is left still fits.
    assert_eq!(upload(424 * KIB).await.unwrap().status(), 200);
    assert_eq!(read.load(Ordering::SeqCst), 1_024 * KIB);
}

#[tokio::test]
async fn refused_uploads_are_never_read_on_memory() {
    refused_uploads_are_never_read(AnyStore::Memory(MemoryStore::new())).await;
}

#[tokio::test]
async fn refused_uploads_are_never_read_on_redis() {
    let redis = RedisServer::start();
    refused_uploads_are_never_read(redis.store()).await;
}

/// A computed cost of 0 is charged as 1: empty bodies, or a method weighted 0, are never
/// free however many are sent.
#[tokio::test]
async fn a_computed_cost_of_zero_counts_as_one() {
    let layer = RateLimitLayer::in_memory().rule(
        Rule::new(
            Limit::fixed_window("weighted", 3, Duration::from_secs(60)).unwrap(),
            HeaderKey::new("x-user".parse().unwrap(), PrincipalKind::User),
        )
        .cost_from(|head| cost::body_kib(head).unwrap_or(0)),
    );
    let app = Router::new().route("/", post(|| async { "ok" }).route_layer(layer));
    let server = Server::start(app).await.unwrap();
    let http = client();
    let mut answered = Vec::new();
    for _ in 0..5 {
        let r = http
            .post(server.url("/"))
            .header("x-user", "ada")
            .send()
            .await
            .unwrap();
        answered.push(r.status().as_u16());
    }
    assert_eq!(answered, [200, 200, 200, 429, 429]);
}

/// How a body's size is charged when the head does not give it, over TCP (1 024 a minute
/// per user, charged by the declared KiB, 1 024 when unknown): an empty reqwest `POST`
/// (HTTP/1.1, no `content-length`, no `transfer-encoding`: an empty body) costs 1; a
/// chunked one costs the fallback; an empty HTTP/2 `POST` from reqwest (hyper's client
/// writes `content-length: 0` for a body it knows is empty) costs 1.
#[tokio::test]
async fn an_empty_a_chunked_and_an_http2_post_are_charged_as_the_guide_says() {
    let read = Arc::new(AtomicUsize::new(0));
    let server = Server::start(uploads(AnyStore::Memory(MemoryStore::new()), read))
        .await
        .unwrap();
    let remaining = |r: &reqwest::Response| -> u64 {
        assert_eq!(r.status(), 200);
        r.headers()["ratelimit-remaining"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap()
    };
    // Empty, HTTP/1.1: reqwest writes neither length header.
    let r = client()
        .post(server.url("/upload"))
        .header("x-user", "empty")
        .send()
        .await
        .unwrap();
    assert_eq!(r.version(), reqwest::Version::HTTP_11);
    assert_eq!(remaining(&r), 1_023, "an empty POST costs 1");
    // Chunked: the length is unknown until the body is read: the fallback.
    let mut s = tokio::net::TcpStream::connect(server.addr()).await.unwrap();
    let req = "POST /upload HTTP/1.1\r\nHost: x\r\nx-user: chunked\r\n\
               Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n0\r\n\r\n";
    tokio::io::AsyncWriteExt::write_all(&mut s, req.as_bytes())
        .await
        .unwrap();
    let mut answer = String::new();
    tokio::io::AsyncReadExt::read_to_string(&mut s, &mut answer)
        .await
        .unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        answer
            .to_ascii_lowercase()
            .contains("ratelimit-remaining: 0\r\n"),
        "a chunked POST costs the fallback: {answer}"
    );
    // HTTP/2 (prior knowledge), empty.
    let h2 = reqwest::Client::builder()
        .http2_prior_knowledge()
        .build()
        .unwrap();
    let r = h2
        .post(server.url("/upload"))
        .header("x-user", "h2")
        .send()
        .await
        .unwrap();
    assert_eq!(r.version(), reqwest::Version::HTTP_2);
    let h2_left = remaining(&r);
    println!("an empty HTTP/2 POST: {} left of 1024", h2_left);
    assert_eq!(h2_left, 1_023, "hyper declares the empty body's length");
}
