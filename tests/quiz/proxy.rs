//! Behind a trusted proxy, a byte of the client's in `X-Forwarded-For` used to make the proxy
//! the client: a second sign-in budget of 20 per attacker. Now the client is still the
//! client, and a header naming nobody is a 400.

use ratekeeper_core::{AnyStore, MemoryStore};
use ratekeeper_tests::client;
use reqwest::StatusCode;
use reqwest::header::HeaderValue;

use crate::start;

#[tokio::test]
async fn obs_text_in_x_forwarded_for_gives_no_second_sign_in_budget() {
    let s = start(AnyStore::Memory(MemoryStore::new()), "127.0.0.0/8").await;
    let http = client();
    let sign_in = |xff: &'static [u8], i: usize| {
        http.post(s.url("/auth/sign-in"))
            .header("x-forwarded-for", HeaderValue::from_bytes(xff).unwrap())
            .body(format!(
                "{{\"email\":\"user{i}@example.com\",\"password\":\"x\"}}"
            ))
            .send()
    };
    for i in 0..20 {
        let r = sign_in(b"198.51.100.7", i).await.unwrap();
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED, "{i}");
    }
    for (i, line) in [
        &b"198.51.100.7"[..],
        b"\x80, 198.51.100.7",
        b"\xc3\x28,198.51.100.7",
    ]
    .into_iter()
    .enumerate()
    {
        let r = sign_in(line, 20 + i).await.unwrap();
        assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS, "{line:?}");
    }
    for line in [&b"\x80"[..], b"198.51.100.7 \x80"] {
        let r = sign_in(line, 30).await.unwrap();
        assert_eq!(r.status(), StatusCode::BAD_REQUEST, "{line:?}");
        let body = r.text().await.unwrap();
        assert!(body.contains("ip.forwarded_invalid"), "{body}");
    }
}
