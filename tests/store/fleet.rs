//! The fleet's runtime state: a quota or an override changed through one instance is
//! obeyed by every instance on the same store within a second; an instance started after a
//! change obeys it from its first check; a change the store cannot take is refused and
//! applied nowhere. Three instances, each its own store connection, limit and fleet, on one
//! `redis-server` and on a Cluster; on the memory store each instance keeps its own.

use std::time::{Duration, Instant};

use ratekeeper_core::fleet::Fleet;
use ratekeeper_core::{
    AnyStore, Chain, FailurePolicy, Limit, Limiter, MemoryStore, Principal, Store,
};
use ratekeeper_tests::redis::{RedisCluster, RedisServer, down_store, principal_slot};

const MINUTE: Duration = Duration::from_secs(60);
const PERIOD: Duration = Duration::from_millis(100);

pub(super) struct Instance {
    pub(super) limit: Limit,
    pub(super) fleet: Fleet,
    pub(super) limiter: Limiter,
    run: tokio::task::JoinHandle<()>,
}

impl Drop for Instance {
    fn drop(&mut self) {
        self.run.abort();
    }
}

async fn instance(store: AnyStore, name: &str) -> Instance {
    instance_with(store, name, PERIOD, []).await
}

/// An instance running `name` (10 a minute) and `more` under a fleet that reads every
/// `period`, read once before it serves.
pub(super) async fn instance_with(
    store: AnyStore,
    name: &str,
    period: Duration,
    more: impl IntoIterator<Item = Limit>,
) -> Instance {
    let limit = Limit::fixed_window(name, 10, MINUTE).unwrap();
    let fleet = Fleet::new(store.clone(), std::iter::once(limit.clone()).chain(more));
    fleet.sync().await.unwrap();
    let run = tokio::spawn(fleet.clone().run(period));
    Instance {
        limit,
        fleet,
        limiter: Limiter::new(store),
        run,
    }
}

/// Waits until `done`, at most 2 s; how long it took.
pub(super) async fn within(done: impl Fn() -> bool) -> Duration {
    let t0 = Instant::now();
    while !done() {
        assert!(
            t0.elapsed() < Duration::from_secs(2),
            "not applied within 2 s"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    t0.elapsed()
}

pub(super) async fn admitted(i: &Instance, who: &str, n: usize) -> usize {
    let mut ok = 0;
    for _ in 0..n {
        let chain = Chain::new().check(&i.limit, Principal::participant(who));
        ok += usize::from(
            i.limiter
                .check(&chain, FailurePolicy::Closed)
                .await
                .is_allowed(),
        );
    }
    ok
}

async fn three_instances(store: impl Fn() -> AnyStore, name: &str) {
    let a = instance(store(), name).await;
    let b = instance(store(), name).await;
    let c = instance(store(), name).await;
    // A quota lowered through A: obeyed by B and C within a second.
    let v = a.fleet.set_quota(name, 2).await.unwrap();
    let took = within(|| b.limit.quota() == 2 && c.limit.quota() == 2).await;
    println!("{name}: quota 10 → 2 through A, applied by B and C in {took:?}");
    assert!(took < Duration::from_secs(1));
    assert_eq!(
        admitted(&b, "p1", 5).await,
        2,
        "B refuses past the lowered quota"
    );
    assert_eq!(b.fleet.applied().version, v);
    // An override through B, on A and C.
    b.fleet
        .set_override(name, &Principal::participant("vip"), 4)
        .await
        .unwrap();
    within(|| {
        [&a, &c].iter().all(|i| {
            i.limit
                .overrides()
                .iter()
                .any(|(p, q)| p == "p:vip" && *q == 4)
        })
    })
    .await;
    assert_eq!(admitted(&c, "vip", 6).await, 4);
    // An instance started after the changes obeys them from its first check.
    let d = instance(store(), name).await;
    assert_eq!(d.limit.quota(), 2);
    assert_eq!(admitted(&d, "p2", 3).await, 2);
    // Cleared through C: gone everywhere.
    c.fleet
        .clear_override(name, &Principal::participant("vip"))
        .await
        .unwrap();
    within(|| [&a, &b, &d].iter().all(|i| i.limit.overrides().is_empty())).await;
    // Two operators at once: every instance ends at the one written last.
    let (x, y) = tokio::join!(a.fleet.set_quota(name, 5), b.fleet.set_quota(name, 7));
    let last = if x.unwrap() > y.unwrap() { 5 } else { 7 };
    within(|| [&a, &b, &c, &d].iter().all(|i| i.limit.quota() == last)).await;
}

#[tokio::test]
async fn a_change_through_one_instance_is_obeyed_by_every_instance_on_redis() {
    let redis = RedisServer::start();
    three_instances(|| redis.store(), "fleet-redis").await;
}

#[tokio::test]
async fn a_change_through_one_instance_is_obeyed_by_every_instance_on_a_cluster() {
    let cluster = RedisCluster::start();
    three_instances(|| cluster.store(), "fleet-cluster").await;
}

/// 100 changes through one instance: how long the other two took to apply each.
#[tokio::test]
async fn a_hundred_changes_reach_every_instance_within_a_second() {
    let redis = RedisServer::start();
    let name = "fleet-hundred";
    // The recommended period: a second. The notices carry the changes.
    let second = Duration::from_secs(1);
    let a = instance_with(redis.store(), name, second, []).await;
    let b = instance_with(redis.store(), name, second, []).await;
    let c = instance_with(redis.store(), name, second, []).await;
    within(|| [&a, &b, &c].iter().all(|i| i.fleet.applied().listening)).await;
    let mut took = Vec::new();
    for i in 0..100u64 {
        let quota = 100 + i;
        // At an operator's pace (50 ms apart, under the 20 ms gap between two reads an
        // instance keeps), not a flood's.
        tokio::time::sleep(Duration::from_millis(50)).await;
        // From before the write: the write itself, its notice, and the others' reads.
        let t0 = Instant::now();
        a.fleet.set_quota(name, quota).await.unwrap();
        within(|| b.limit.quota() == quota && c.limit.quota() == quota).await;
        took.push(t0.elapsed());
    }
    took.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "100 changes, applied by both other instances: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms (period {second:?}, with notices)",
        ms(took[49]),
        ms(took[98]),
        ms(took[99])
    );
    assert!(took[99] < Duration::from_secs(1));
}

#[tokio::test]
async fn a_change_the_store_cannot_take_is_refused_and_applied_nowhere() {
    let store = down_store();
    let limit = Limit::fixed_window("fleet-down", 10, MINUTE).unwrap();
    let fleet = Fleet::new(store, [limit.clone()]);
    assert!(fleet.set_quota("fleet-down", 2).await.is_err());
    assert_eq!(limit.quota(), 10, "not applied locally either");
    assert!(fleet.sync().await.is_err());
    assert!(
        fleet.applied().error.is_some(),
        "the instance says it is cut off"
    );
    assert!(fleet.set_quota("no-such-limit", 2).await.is_err());
    assert!(fleet.set_quota("fleet-down", 0).await.is_err());
}

#[tokio::test]
async fn on_the_memory_store_each_instance_keeps_its_own() {
    let a = instance(AnyStore::Memory(MemoryStore::new()), "fleet-mem").await;
    let b = instance(AnyStore::Memory(MemoryStore::new()), "fleet-mem").await;
    a.fleet.set_quota("fleet-mem", 3).await.unwrap();
    assert_eq!(a.limit.quota(), 3, "applied at once here");
    tokio::time::sleep(PERIOD * 3).await;
    assert_eq!(
        b.limit.quota(),
        10,
        "another process's memory store is its own"
    );
}

/// The Cluster master that holds the fleet's state killed: each instance keeps the settings
/// it applied and says it is cut off, a change is refused, and checks of keys on the other
/// masters are answered as before (the fleet reads off the requests' path).
#[tokio::test]
async fn the_node_holding_the_fleets_state_down_costs_only_the_fleet() {
    let mut cluster = RedisCluster::start_with(&["--cluster-require-full-coverage", "no"]);
    let name = "fleet-node-down";
    let a = instance(cluster.store(), name).await;
    let b = instance(cluster.store(), name).await;
    a.fleet.set_quota(name, 5).await.unwrap();
    within(|| b.limit.quota() == 5).await;
    let slot = principal_slot("x.fleet");
    let (port, ranges) = cluster
        .slot_owners(0)
        .into_iter()
        .find(|(_, r)| r.iter().any(|&(lo, hi)| lo <= slot && slot <= hi))
        .expect("an owner of the fleet's slot");
    let dead = |s: u16| ranges.iter().any(|&(lo, hi)| lo <= s && s <= hi);
    let victim = cluster
        .nodes()
        .iter()
        .position(|n| n.port() == port)
        .unwrap();
    cluster.nodes_mut()[victim].kill();
    let t0 = Instant::now();
    while b.fleet.applied().error.is_none() {
        assert!(t0.elapsed() < Duration::from_secs(5), "never said cut off");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(b.limit.quota(), 5, "the settings it applied stay");
    assert!(a.fleet.set_quota(name, 7).await.is_err(), "refused");
    assert_eq!(b.limit.quota(), 5);
    let alive = (0..)
        .map(|i| Principal::participant(format!("p{i}")))
        .find(|p| !dead(principal_slot(p.as_str())))
        .unwrap();
    let chain = Chain::new().check(&b.limit, alive);
    assert!(
        b.limiter.store().check(&chain).await.is_ok(),
        "other keys answered"
    );
}
