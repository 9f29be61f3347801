//! A flood of fresh `x-participant-id`s on `/poll` (the 2.1 M, scaled to a store of
//! 1 000 keys per limit) resets nothing that refuses or slows someone: another
//! participant's poll limit, an address at its sign-in limit, an account's failures.

use std::time::Duration;

use ratekeeper_core::{AnyStore, MemoryStore};
use ratekeeper_tests::client;
use reqwest::StatusCode;

use crate::{held_ms, start};

#[tokio::test]
async fn a_flood_of_fresh_participants_resets_no_limit_over_tcp() {
    let store = MemoryStore::builder().max_keys(1_000).build().unwrap();
    let s = start(AnyStore::Memory(store.clone()), "127.0.0.0/8").await;
    let http = client();
    let poll = |who: String, ip: String| {
        http.get(s.url("/api/games/g1/poll"))
            .header("x-participant-id", who)
            .header("x-forwarded-for", ip)
            .send()
    };
    let sign_in = |ip: &str, email: &str| {
        http.post(s.url("/auth/sign-in"))
            .header("x-forwarded-for", ip.to_owned())
            .body(format!("{{\"email\":\"{email}\",\"password\":\"guess\"}}"))
            .send()
    };
    // A participant at its limit, an address at its sign-in limit, an account with five
    // failures (the next is held).
    for _ in 0..20 {
        let r = poll("eve".into(), "198.51.100.1".into()).await.unwrap();
        assert_eq!(r.status(), StatusCode::OK);
    }
    for i in 0..20 {
        let r = sign_in("198.51.100.2", &format!("u{i}@example.com"))
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    }
    for i in 0..5 {
        let r = sign_in(&format!("198.51.100.{}", 10 + i), "demo@example.com")
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    }
    // 5 000 fresh participants, from enough addresses for the global guard (1 200 a minute).
    for n in 0..5_000u32 {
        let ip = format!("203.0.{}.{}", n / 1_000, n % 250);
        let r = poll(format!("flood-{n}"), ip).await.unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{n}");
    }
    assert!(
        store.evictions() > 0,
        "the flood filled the poll limit's room"
    );
    let r = poll("eve".into(), "198.51.100.1".into()).await.unwrap();
    assert_eq!(
        r.status(),
        StatusCode::TOO_MANY_REQUESTS,
        "eve is still limited"
    );
    let r = sign_in("198.51.100.2", "u99@example.com").await.unwrap();
    assert_eq!(
        r.status(),
        StatusCode::TOO_MANY_REQUESTS,
        "the address is still limited"
    );
    let r = sign_in("198.51.100.30", "demo@example.com").await.unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert!(
        held_ms(&r) >= Duration::from_millis(10).as_millis() as u64,
        "the account's 6th failure is still held"
    );
}
