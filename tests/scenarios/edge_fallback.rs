//! edge-fallback: a missing, failing or slow store; counted in memory; logged once per
//! reason; never a key.

use ratekeeper_core::testing::LogCapture;
use ratekeeper_examples::edge_fallback::{EdgeStore, app};
use ratekeeper_tests::redis::{RedisServer, free_port};
use ratekeeper_tests::{Server, client};
use reqwest::StatusCode;

async fn counted_in_memory(store: EdgeStore) {
    let server = Server::start(app(&store).unwrap()).await.unwrap();
    let http = client();
    for i in 0..120 {
        let r = http.get(server.url("/api/items")).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{store:?} request {i}");
    }
    let r = http.get(server.url("/api/items")).send().await.unwrap();
    assert_eq!(
        r.status(),
        StatusCode::TOO_MANY_REQUESTS,
        "{store:?}: still limited"
    );
    let r = http
        .get(server.url("/api/me"))
        .header("authorization", "Bearer u1")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
}

#[tokio::test]
async fn missing_failing_and_slow_stores_count_in_memory_and_log_each_reason_once() {
    let lines = LogCapture::global();
    for (store, name, reason) in [
        (
            EdgeStore::Missing(format!("redis://127.0.0.1:{}/", free_port())),
            "redis",
            "missing",
        ),
        (EdgeStore::Failing, "failing-store", "failed"),
        (EdgeStore::Slow, "slow-store", "timed_out"),
    ] {
        counted_in_memory(store).await;
        let all = lines.lines();
        let fallback: Vec<&String> = all
            .iter()
            .filter(|l| {
                l.starts_with("rate_limit.fallback ") && l.contains(&format!("store={name} "))
            })
            .collect();
        assert_eq!(fallback.len(), 1, "{name}: {fallback:?}");
        assert!(
            fallback[0].contains(&format!("reason=\"{reason}\"")),
            "{}",
            fallback[0]
        );
    }
    for l in lines
        .lines()
        .iter()
        // The example's start-up line names the Redis endpoint (127.0.0.1 too): not a key.
        .filter(|l| l.starts_with("rate_limit.") && !l.starts_with("rate_limit.example.store "))
    {
        // Nor is a store's own name (`store=redis 127.0.0.1:6390`), in this test's lines or
        // those of another test of this binary: the capture is process-wide.
        let without_store = match l.find(" store=") {
            Some(at) => {
                // The value runs to the next `field=`.
                let rest = &l[at + " store=".len()..];
                let mut words = rest.split(' ');
                words.next();
                let tail: Vec<&str> = words.skip_while(|w| !w.contains('=')).collect();
                format!("{} {}", &l[..at], tail.join(" "))
            }
            None => l.clone(),
        };
        assert!(
            !without_store.contains("127.0.0.1")
                && !without_store.contains("ip:")
                && !without_store.contains("u:u1"),
            "a key in a log line: {l}"
        );
    }
}

#[tokio::test]
async fn on_working_stores_the_limits_hold() {
    counted_in_memory(EdgeStore::Memory).await;
    let redis = RedisServer::start();
    counted_in_memory(EdgeStore::Redis(redis.url())).await;
}
