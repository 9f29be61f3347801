//! The shared-state conformance suite (`ratekeeper_core::testing::shared_state`) on every
//! store: memory, standalone Redis, a Cluster, and a memory store boxed with
//! `BoxStore::with_shared` (what a store of your own looks like to the services). Each
//! Redis run gets a prefix of its own per fresh store: the fleet's state is one per prefix.

use std::sync::atomic::{AtomicU32, Ordering};

use ratekeeper_core::store::BoxStore;
use ratekeeper_core::testing::shared_state;
use ratekeeper_core::{MemoryStore, RedisStore};
use ratekeeper_tests::redis::{RedisCluster, RedisServer};

fn prefix() -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!("cf{}", N.fetch_add(1, Ordering::Relaxed))
}

#[tokio::test]
async fn the_memory_store_carries_what_instances_share() {
    shared_state(MemoryStore::new).await;
}

#[tokio::test]
async fn a_boxed_store_carries_what_instances_share() {
    shared_state(|| BoxStore::with_shared(MemoryStore::new())).await;
}

#[tokio::test]
async fn redis_carries_what_instances_share() {
    let redis = RedisServer::start();
    let fresh = || {
        RedisStore::builder(redis.url())
            .prefix(prefix())
            .build()
            .unwrap()
    };
    shared_state(fresh).await;
}

#[tokio::test]
async fn a_cluster_carries_what_instances_share() {
    let cluster = RedisCluster::start();
    let fresh = || {
        RedisStore::cluster_builder(cluster.urls())
            .prefix(prefix())
            .build()
            .unwrap()
    };
    shared_state(fresh).await;
}

#[tokio::test]
async fn a_store_of_checks_alone_says_what_it_lacks() {
    use ratekeeper_core::fleet::Fleet;
    use ratekeeper_core::store::{SharedState, StoreErrorKind};
    use ratekeeper_core::{AnyStore, Limit};
    let plain = AnyStore::from(BoxStore::new(MemoryStore::new()));
    let e = plain.fleet_mark().await.unwrap_err();
    assert_eq!(e.kind(), StoreErrorKind::Unsupported);
    assert_eq!(e.kind().as_str(), "unsupported");
    let limit = Limit::fixed_window("plain", 10, std::time::Duration::from_secs(60)).unwrap();
    let fleet = Fleet::new(plain.clone(), [limit.clone()]);
    assert!(fleet.set_quota("plain", 2).await.is_err(), "refused");
    assert_eq!(limit.quota(), 10, "applied nowhere");
    assert!(fleet.sync().await.is_err());
    let said = fleet.applied().error.unwrap();
    assert!(said.contains("unsupported"), "{said}");
    assert!(plain.bans(&limit).await.is_err());
}
