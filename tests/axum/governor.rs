//! The guide from tower_governor (`ratekeeper_axum::guide::from_tower_governor`): its
//! before and after, the very files the guide shows, served over TCP and sent the same
//! requests by a real HTTP client.

use std::time::{Duration, Instant};

use ratekeeper_tests::{Server, client, retry_after};
use reqwest::StatusCode;

#[allow(
    dead_code,
    unreachable_pub,
    reason = "the guide's `main` serves on a fixed port, its `app` is `pub` for a reader; the test serves `app`"
)]
mod before {
    include!("../../rate-limit-axum/docs/from-tower-governor/before.rs");
}

#[allow(
    dead_code,
    unreachable_pub,
    reason = "the guide's `main` serves on a fixed port, its `app` is `pub` for a reader; the test serves `app`"
)]
mod after {
    include!("../../rate-limit-axum/docs/from-tower-governor/after.rs");
}

/// The statuses of `n` requests sent one after another (each with its own
/// `X-Forwarded-For` when `spoof`), the last refusal, and how long they took.
async fn burst(s: &Server, n: u8, spoof: bool) -> (Vec<u16>, Option<reqwest::Response>, Duration) {
    let c = client();
    let start = Instant::now();
    let (mut statuses, mut refused) = (Vec::new(), None);
    for i in 0..n {
        let mut req = c.get(s.url("/api"));
        if spoof {
            req = req.header("x-forwarded-for", format!("198.51.100.{i}"));
        }
        let r = req.send().await.expect("the server answers");
        statuses.push(r.status().as_u16());
        if r.status() == StatusCode::TOO_MANY_REQUESTS {
            refused = Some(r);
        }
    }
    (statuses, refused, start.elapsed())
}

/// A burst of 5, one back every 2 s: exactly 5 of a burst sent within 2 s, and never more
/// than the bucket and what it won back while the burst lasted.
fn assert_burst_of_five(who: &str, statuses: &[u16], took: Duration) {
    let admitted = statuses.iter().filter(|s| **s == 200).count() as u64;
    let won_back = took.as_secs() / 2;
    assert!(
        (5..=5 + won_back).contains(&admitted),
        "{who}: {statuses:?} in {took:?}"
    );
    if took < Duration::from_secs(2) {
        assert_eq!(statuses, [200, 200, 200, 200, 200, 429, 429, 429], "{who}");
    }
}

#[tokio::test]
async fn before_and_after_serve_the_same_limit_and_differ_where_the_guide_says() {
    let before = Server::start(before::app()).await.unwrap();
    let after = Server::start(after::app().unwrap()).await.unwrap();

    // The same limit: 5 at once, then refused, with the body of one's own.
    let (b_statuses, b_refused, b_took) = burst(&before, 8, false).await;
    let (a_statuses, a_refused, a_took) = burst(&after, 8, false).await;
    assert_burst_of_five("before", &b_statuses, b_took);
    assert_burst_of_five("after", &a_statuses, a_took);

    // Before: x-ratelimit-after and Retry-After, the wait rounded down (at most the 2 s).
    let b_refused = b_refused.expect("before refused");
    let b_wait = retry_after(&b_refused);
    assert!(b_wait <= 2, "{b_wait}");
    assert_eq!(
        b_refused.headers()["x-ratelimit-after"],
        b_wait.to_string().as_str()
    );
    assert_eq!(b_refused.text().await.unwrap(), "slow down");
    // After: Retry-After at least 1, the IETF fields, the same body.
    let a_refused = a_refused.expect("after refused");
    let a_wait = retry_after(&a_refused);
    assert!((1..=2).contains(&a_wait), "{a_wait}");
    assert_eq!(a_refused.headers()["ratelimit-policy"], "\"api\";q=5;w=10");
    assert_eq!(
        a_refused.headers()["ratelimit"],
        format!("\"api\";r=0;t={a_wait}").as_str()
    );
    assert_eq!(a_refused.text().await.unwrap(), "slow down");

    // One request won back: after the period on the first, after exactly its Retry-After
    // on the second (rounded up, so never too soon).
    tokio::time::sleep(Duration::from_secs(2)).await;
    let r = client().get(before.url("/api")).send().await.unwrap();
    assert_eq!(r.status(), 200, "before, 2 s later");
    assert!(r.headers().contains_key("x-ratelimit-remaining"));
    tokio::time::sleep(Duration::from_secs(a_wait)).await;
    let r = client().get(after.url("/api")).send().await.unwrap();
    assert_eq!(r.status(), 200, "after, Retry-After ({a_wait} s) later");
    assert!(r.headers().contains_key("ratelimit-remaining"));
    assert!(r.headers().contains_key("ratelimit"));
}

#[tokio::test]
async fn a_client_naming_itself_in_x_forwarded_for_evades_the_before_not_the_after() {
    let before = Server::start(before::app()).await.unwrap();
    let after = Server::start(after::app().unwrap()).await.unwrap();
    // A fresh X-Forwarded-For per request: SmartIpKeyExtractor believes each, a fresh
    // bucket each time.
    let (b_statuses, _, _) = burst(&before, 8, true).await;
    assert_eq!(b_statuses, [200; 8]);
    // ClientIp trusts no proxy unless told: the peer, whatever the header says.
    let (a_statuses, _, a_took) = burst(&after, 8, true).await;
    assert_burst_of_five("after, spoofing", &a_statuses, a_took);
}
