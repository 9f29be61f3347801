//! 64 concurrent tasks over two store instances (separate connections), one key, limit
//! 100: exactly 100 allowed, 20 repetitions.

use std::time::Duration;

use ratekeeper_core::{AnyStore, Chain, Limit, Principal, Store};
use ratekeeper_tests::redis::{RedisCluster, RedisServer};

use crate::support::{clear_of_boundary, cluster, standalone};

async fn hammer(a: AnyStore, b: AnyStore) {
    for rep in 0..20 {
        let minute = Duration::from_secs(60);
        let limit = match rep % 4 {
            0 => Limit::fixed_window(&format!("ex{rep}"), 100, minute),
            1 => Limit::sliding_window(&format!("ex{rep}"), 100, minute),
            2 => Limit::sliding_log(&format!("ex{rep}"), 100, minute),
            _ => Limit::token_bucket(&format!("ex{rep}"), 100, 1, minute),
        }
        .unwrap();
        let chain = Chain::new().check(&limit, Principal::user("hot"));
        // Windows align to the epoch: a minute boundary inside a repetition would let a
        // second window's quota through (up to 200 allowed).
        clear_of_boundary(minute, Duration::from_secs(5)).await;
        let mut tasks = Vec::new();
        for t in 0..64 {
            let store = if t % 2 == 0 { a.clone() } else { b.clone() };
            let chain = chain.clone();
            tasks.push(tokio::spawn(async move {
                let mut ok = 0u32;
                for _ in 0..4 {
                    ok += u32::from(store.check(&chain).await.expect("answers").is_allowed());
                }
                ok
            }));
        }
        let mut total = 0;
        for t in tasks {
            total += t.await.unwrap();
        }
        assert_eq!(total, 100, "{} repetition {rep}", limit.name());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_instances_one_standalone_redis() {
    let server = RedisServer::start();
    hammer(standalone(&server.url()), standalone(&server.url())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_instances_one_cluster() {
    let c = RedisCluster::start();
    hammer(cluster(&c.urls()), cluster(&c.urls())).await;
}
