//! A Cluster node down costs only its keys. Three masters with
//! `cluster-require-full-coverage no` (with the default `yes`, Redis itself refuses every
//! key about one node timeout after a master dies); steady load over 240 principals; one
//! master SIGKILLed; then 3× the node timeout of measurement. Requests whose keys live on
//! the other masters are answered by Redis as before; only the dead node's keys follow the
//! rule's failure policy. Before per-node failure domains, 98.6% of all requests failed.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ratekeeper_core::{AnyStore, Chain, FailurePolicy, Limit, Limiter, Principal, RedisStore};
use ratekeeper_tests::redis::{RedisCluster, principal_slot};
use tokio::time::Instant;

#[derive(Debug, Default, Clone)]
struct OutcomeTally {
    ok: Vec<Duration>,
    failed: usize,
}

impl OutcomeTally {
    fn total(&self) -> usize {
        self.ok.len() + self.failed
    }

    fn p99(&mut self) -> Duration {
        self.ok.sort_unstable();
        self.ok
            .get(self.ok.len() * 99 / 100)
            .copied()
            .unwrap_or_default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_dead_master_fails_only_its_own_keys() {
    one_master_down(Down::Killed).await;
}

/// The same with the master frozen (SIGSTOP): its connections stay open and nothing answers,
/// so each request to it costs the time budget until its cool-down starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_frozen_master_fails_only_its_own_keys() {
    one_master_down(Down::Frozen).await;
}

#[derive(Debug, Clone, Copy)]
enum Down {
    Killed,
    Frozen,
}

async fn one_master_down(how: Down) {
    let mut cluster = RedisCluster::start_with(&["--cluster-require-full-coverage", "no"]);
    let victim = cluster.nodes()[1].port();
    let owners = cluster.slot_owners(0);
    let dead_ranges: Vec<(u16, u16)> = owners
        .iter()
        .find(|(p, _)| *p == victim)
        .map(|(_, r)| r.clone())
        .expect("the victim owns slots");
    let store = RedisStore::cluster_builder(cluster.urls()).build().unwrap();
    let limiter = Limiter::shared(AnyStore::Redis(store));
    let limit =
        Limit::token_bucket("node-down", 1_000_000, 1_000_000, Duration::from_secs(1)).unwrap();
    let principals: Arc<Vec<(Principal, bool)>> = Arc::new(
        (0..240)
            .map(|i| {
                let p = Principal::participant(format!("p{i}"));
                let slot = principal_slot(p.as_str());
                let dead = dead_ranges.iter().any(|&(a, b)| a <= slot && slot <= b);
                (p, dead)
            })
            .collect(),
    );
    // Every principal answered once before measuring: connections and slot map are warm.
    for (p, _) in principals.iter() {
        let chain = Chain::new().check(&limit, p.clone());
        assert!(
            limiter
                .check(&chain, FailurePolicy::Open)
                .await
                .failure()
                .is_none()
        );
    }

    let killed = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for t in 0..8 {
        let (limiter, limit, principals) = (limiter.clone(), limit.clone(), principals.clone());
        let (killed, stop) = (killed.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            // (before: all keys; after: live nodes' keys, dead node's keys)
            let (mut before, mut live, mut dead) = (
                OutcomeTally::default(),
                OutcomeTally::default(),
                OutcomeTally::default(),
            );
            let mut i = t;
            while !stop.load(Ordering::Relaxed) {
                let (p, on_dead) = &principals[i % principals.len()];
                i += 8;
                let chain = Chain::new().check(&limit, p.clone());
                let t0 = Instant::now();
                let answer = limiter.check(&chain, FailurePolicy::Open).await;
                let took = t0.elapsed();
                // Read after the answer: a request the kill could touch counts as "after".
                let after = killed.load(Ordering::Relaxed);
                let tally = match (after, on_dead) {
                    (false, _) => &mut before,
                    (true, false) => &mut live,
                    (true, true) => &mut dead,
                };
                if answer.failure().is_some() {
                    tally.failed += 1;
                } else {
                    tally.ok.push(took);
                }
            }
            (before, live, dead)
        }));
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    // Counted as "after" from just before the kill: no request that could see it is
    // counted in the baseline.
    killed.store(true, Ordering::Relaxed);
    match how {
        Down::Killed => cluster.nodes_mut()[1].kill(),
        Down::Frozen => cluster.nodes()[1].pause(),
    }
    // Three node timeouts (2 s each): Redis marks the node failed meanwhile.
    tokio::time::sleep(Duration::from_secs(6)).await;
    stop.store(true, Ordering::Relaxed);
    let (mut before, mut live, mut dead) = (
        OutcomeTally::default(),
        OutcomeTally::default(),
        OutcomeTally::default(),
    );
    for t in tasks {
        let (b, l, d) = t.await.unwrap();
        before.ok.extend(b.ok);
        before.failed += b.failed;
        live.ok.extend(l.ok);
        live.failed += l.failed;
        dead.ok.extend(d.ok);
        dead.failed += d.failed;
    }
    let (p99_before, p99_live) = (before.p99(), live.p99());
    let live_failed = live.failed as f64 / live.total().max(1) as f64;
    if let Down::Frozen = how {
        cluster.nodes()[1].resume();
    }
    println!(
        "{how:?}: before: {} requests, {} failed, p99 {:?}; after, live nodes' keys: {} requests, \
         {:.2}% failed, p99 {:?}; dead node's keys: {} requests, {} failed",
        before.total(),
        before.failed,
        p99_before,
        live.total(),
        live_failed * 100.0,
        p99_live,
        dead.total(),
        dead.failed,
    );
    assert_eq!(before.failed, 0);
    assert!(live.total() > 1_000, "load kept flowing to the live nodes");
    assert!(
        live_failed <= 0.01,
        "{:.2}% of live nodes' keys failed",
        live_failed * 100.0
    );
    assert!(dead.failed > 0, "the dead node's keys followed the policy");
    // Latency: within twice the baseline (a few ms of slack for a 2-core machine's noise).
    assert!(
        p99_live <= p99_before * 2 + Duration::from_millis(5),
        "p99 {p99_live:?} after vs {p99_before:?} before"
    );
}

/// Cluster failover: 3 masters with a replica each. A master is SIGKILLed; once its
/// replica is promoted (about the node timeout, 2 s, later), its keys are answered by
/// Redis again, by the same store, without a restart; in between they follow the policy,
/// and the other masters' keys never stop being answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_promoted_replica_serves_the_dead_masters_keys_without_a_restart() {
    let cluster = RedisCluster::start_shaped(1, &["--cluster-require-full-coverage", "no"]);
    a_promoted_replica_serves(cluster).await;
}

/// The same failover on a Valkey 8 Cluster (the compatibility matrix).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_promoted_replica_serves_the_dead_masters_keys_on_valkey_8_0() {
    use ratekeeper_tests::redis::versions::Matrix;
    let valkey =
        Matrix::Valkey8_0.require("a_promoted_replica_serves_the_dead_masters_keys_on_valkey_8_0");
    let cluster = RedisCluster::start_on(&valkey, 1, &["--cluster-require-full-coverage", "no"]);
    let info = cluster.nodes()[0].cli(&["INFO", "server"]);
    assert!(info.contains(Matrix::Valkey8_0.info_mark()), "{info}");
    a_promoted_replica_serves(cluster).await;
}

async fn a_promoted_replica_serves(mut cluster: RedisCluster) {
    // Replicas in sync before the kill, or there is nothing to promote.
    let deadline = Instant::now() + Duration::from_secs(20);
    while !cluster.nodes().iter().all(|n| {
        let info = n.cli(&["INFO", "replication"]);
        info.contains("role:master") || info.contains("master_link_status:up")
    }) {
        assert!(Instant::now() < deadline, "replicas never synced");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let owners = cluster.slot_owners(0);
    let (victim_port, dead_ranges) = owners[0].clone();
    let victim = cluster
        .nodes()
        .iter()
        .position(|n| n.port() == victim_port)
        .expect("the victim is one of ours");
    let store = RedisStore::cluster_builder(cluster.urls()).build().unwrap();
    let limiter = Limiter::shared(AnyStore::Redis(store));
    let limit =
        Limit::token_bucket("failover", 1_000_000, 1_000_000, Duration::from_secs(1)).unwrap();
    let on = |dead: bool| {
        (0..)
            .map(|i| Principal::participant(format!("f{i}")))
            .find(|p| {
                let s = principal_slot(p.as_str());
                dead_ranges.iter().any(|&(a, b)| a <= s && s <= b) == dead
            })
            .unwrap()
    };
    let (dead_key, live_key) = (
        Chain::new().check(&limit, on(true)),
        Chain::new().check(&limit, on(false)),
    );
    for chain in [&dead_key, &live_key] {
        assert!(
            limiter
                .check(chain, FailurePolicy::Open)
                .await
                .failure()
                .is_none()
        );
    }
    cluster.nodes_mut()[victim].kill();
    let killed = Instant::now();
    let (mut live_failed, mut served_again) = (0, None);
    while killed.elapsed() < Duration::from_secs(20) {
        if limiter
            .check(&live_key, FailurePolicy::Open)
            .await
            .failure()
            .is_some()
        {
            live_failed += 1;
        }
        if limiter
            .check(&dead_key, FailurePolicy::Open)
            .await
            .failure()
            .is_none()
        {
            served_again = Some(killed.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let served_again = served_again.expect("the dead master's keys are served again");
    println!("the dead master's keys answered again {served_again:?} after the kill");
    // Node timeout 2 s, the election, the slot map re-read and one cool-down at most.
    assert!(served_again < Duration::from_secs(10), "{served_again:?}");
    assert_eq!(live_failed, 0, "the live masters' keys never failed");
}

/// A chain split across slot groups whose later group's node is dead: the store answers
/// an error (the rule's policy applies) and gives back what the earlier group charged.
/// Regression: the refund script, never run on the live node before, met `NOSCRIPT`, and
/// redis-rs's `SCRIPT LOAD` (no key) went to a random node — the dead one — so the refund
/// failed and the charge stayed.
#[tokio::test]
async fn a_failed_slot_group_refunds_the_groups_before_it() {
    use ratekeeper_core::Store;
    let mut cluster = RedisCluster::start_with(&["--cluster-require-full-coverage", "no"]);
    let owners = cluster.slot_owners(0);
    let victim_port = cluster.nodes()[1].port();
    let on = |dead: bool| {
        let ranges = &owners.iter().find(|(p, _)| *p == victim_port).unwrap().1;
        (0..)
            .map(|i| Principal::participant(format!("r{i}")))
            .find(|p| {
                let s = principal_slot(p.as_str());
                ranges.iter().any(|&(a, b)| a <= s && s <= b) == dead
            })
            .unwrap()
    };
    let (live, dead) = (on(false), on(true));
    let store = RedisStore::cluster_builder(cluster.urls()).build().unwrap();
    // Logs over an hour: no window boundary can reset a count while the node dies.
    let hour = Duration::from_secs(3_600);
    let first = Limit::sliding_log("refund-first", 10, hour).unwrap();
    let second = Limit::sliding_log("refund-second", 10, hour).unwrap();
    let chain = Chain::new()
        .check(&first, live.clone())
        .check(&second, dead);
    store.check(&chain).await.unwrap();
    assert_eq!(
        store
            .peek(&first.key(live.clone()))
            .await
            .unwrap()
            .remaining(),
        9
    );
    cluster.nodes_mut()[1].kill();
    assert!(
        store.check(&chain).await.is_err(),
        "the dead node's group fails"
    );
    assert_eq!(
        store.peek(&first.key(live)).await.unwrap().remaining(),
        9,
        "the live group's charge was given back"
    );
}
