//! Bearer tokens of any realistic length name their user (a signed JWT is 500 bytes to a few
//! KiB); only past the documented cap, 8 KiB, is a token refused.

use ratekeeper_core::{AnyStore, MemoryStore};
use ratekeeper_examples::food_api::{app_with_store, model_budget};
use ratekeeper_tests::redis::RedisServer;
use ratekeeper_tests::{Server, client};
use ratekeeper_tower::extract::DEFAULT_MAX_HASHED_LEN;
use reqwest::StatusCode;

/// A JWT-shaped token of exactly `len` bytes (base64url segments joined by dots), its last
/// byte `last`.
fn token(len: usize, last: u8) -> String {
    let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut t: Vec<u8> = (0..len)
        .map(|i| {
            if i == 36 || i == len * 2 / 3 {
                b'.'
            } else {
                alphabet[(i * 7 + i / 64) % alphabet.len()]
            }
        })
        .collect();
    t[len - 1] = last;
    String::from_utf8(t).unwrap()
}

async fn long_tokens(store: AnyStore) {
    let server = Server::start(app_with_store(store.clone(), model_budget().unwrap()).unwrap())
        .await
        .unwrap();
    let http = client();
    let support = |t: &str| {
        http.post(server.url("/support"))
            .header("authorization", format!("Bearer {t}"))
            .send()
    };
    // `/support` allows each account 5 an hour (and the address 20).
    for len in [512, 2 * 1024, DEFAULT_MAX_HASHED_LEN] {
        let (a, b) = (token(len, b'a'), token(len, b'b'));
        for i in 0..5 {
            let r = support(&a).await.unwrap();
            assert_eq!(r.status(), StatusCode::OK, "{len} bytes, request {i}");
        }
        let r = support(&a).await.unwrap();
        assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS, "{len} bytes");
        assert_eq!(r.headers()["ratelimit-limit"], "5", "the account's limit");
        // The whole token is hashed: one differing last byte is another account.
        assert_eq!(support(&b).await.unwrap().status(), StatusCode::OK, "{len}");
    }
    // One byte over the cap: 401 with a stable code, the token never echoed.
    let r = support(&token(DEFAULT_MAX_HASHED_LEN + 1, b'a'))
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(r.headers()["www-authenticate"], "Bearer");
    let body = r.text().await.unwrap();
    assert!(body.contains("principal.too_long"), "{body}");
    assert!(body.len() < 400, "the token is not echoed: {body}");
}

#[tokio::test]
async fn tokens_up_to_8_kib_name_their_user_on_the_memory_store() {
    long_tokens(AnyStore::Memory(MemoryStore::new())).await;
}

#[tokio::test]
async fn tokens_up_to_8_kib_name_their_user_on_redis() {
    let server = RedisServer::start();
    long_tokens(server.store()).await;
}
