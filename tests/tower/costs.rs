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
