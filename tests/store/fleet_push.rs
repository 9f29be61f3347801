//! The fleet's notices and what the store can lose: a change reaches every instance at the
//! store's notice, long before the periodic read; a notice lost (the subscriber's
//! connection killed) is healed by the periodic read within its period; a ban lifted on
//! one instance lets the principal through on the others at once (their cached refusal
//! dropped); a setting (the admin's access lists) reaches every watcher; the state survives
//! a restart without persistence (the instances put it back) and a Sentinel failover; a
//! flood of changes leaves checks answered. Redis, a Cluster and Sentinels.

use std::time::Duration;

use ratekeeper_core::{AnyStore, Chain, Limit, Principal, RedisStore, Store};
use ratekeeper_tests::redis::{RedisCluster, RedisSentinels, RedisServer, SENTINEL_MASTER};
use tokio::time::Instant;

use super::fleet::{Instance, admitted, instance_with, within};

/// Longer than any test waits for a change: only a notice applies it in time.
const LONG: Duration = Duration::from_secs(30);
const HALF: Duration = Duration::from_millis(500);

async fn three(store: &impl Fn() -> AnyStore, name: &str, period: Duration) -> [Instance; 3] {
    let ban = || Limit::ban(&format!("{name}-ban"), 1, Duration::from_secs(60), LONG).unwrap();
    let one = async || instance_with(store(), name, period, [ban()]).await;
    let i = [one().await, one().await, one().await];
    within(|| i.iter().all(|i| i.fleet.applied().listening)).await;
    i
}

async fn notices_apply_changes(store: impl Fn() -> AnyStore, name: &str) {
    let [a, b, c] = three(&store, name, LONG).await;
    let t0 = Instant::now();
    a.fleet.set_quota(name, 3).await.unwrap();
    let took = within(|| b.limit.quota() == 3 && c.limit.quota() == 3).await;
    println!("{name}: applied by B and C {took:?} after the write (period {LONG:?})");
    assert!(t0.elapsed() < Duration::from_secs(1));
    // A setting (the admin keeps the access lists so) reaches every watcher.
    let seen = std::sync::Arc::new(std::sync::Mutex::new(None::<String>));
    let s = seen.clone();
    c.fleet.watch_setting("access", move |v| {
        *s.lock().unwrap() = v.map(str::to_owned);
    });
    b.fleet
        .set_setting("access", "deny 192.0.2.0/24")
        .await
        .unwrap();
    within(|| seen.lock().unwrap().as_deref() == Some("deny 192.0.2.0/24")).await;
    assert!(a.fleet.set_setting("not a name", "x").await.is_err());
}

#[tokio::test]
async fn a_change_reaches_every_instance_at_the_stores_notice_on_redis() {
    let redis = RedisServer::start();
    notices_apply_changes(|| redis.store(), "push-redis").await;
}

#[tokio::test]
async fn a_change_reaches_every_instance_at_the_stores_notice_on_a_cluster() {
    let cluster = RedisCluster::start();
    notices_apply_changes(|| cluster.store(), "push-cluster").await;
}

/// Kills every subscriber's connection on `servers`, and waits until the instances know.
async fn cut_notices(servers: &[&RedisServer], instances: &[&Instance]) {
    for s in servers {
        s.cli(&["CLIENT", "KILL", "TYPE", "pubsub"]);
    }
    within(|| instances.iter().all(|i| !i.fleet.applied().listening)).await;
}

async fn a_lost_notice_is_healed(
    store: impl Fn() -> AnyStore,
    servers: &[&RedisServer],
    name: &str,
) {
    let [a, b, c] = three(&store, name, HALF).await;
    cut_notices(servers, &[&b, &c]).await;
    let t0 = Instant::now();
    a.fleet.set_quota(name, 4).await.unwrap();
    let took = within(|| b.limit.quota() == 4 && c.limit.quota() == 4).await;
    println!("{name}: notice lost, applied by the periodic read {took:?} after the write");
    assert!(t0.elapsed() < HALF + Duration::from_millis(300));
    // And the subscribers come back.
    within(|| b.fleet.applied().listening && c.fleet.applied().listening).await;
}

#[tokio::test]
async fn a_lost_notice_is_healed_by_the_periodic_read_on_redis() {
    let redis = RedisServer::start();
    a_lost_notice_is_healed(|| redis.store(), &[&redis], "lost-redis").await;
}

#[tokio::test]
async fn a_lost_notice_is_healed_by_the_periodic_read_on_a_cluster() {
    let cluster = RedisCluster::start();
    let nodes: Vec<&RedisServer> = cluster.nodes().iter().collect();
    a_lost_notice_is_healed(|| cluster.store(), &nodes, "lost-cluster").await;
}

async fn a_lifted_ban(store: impl Fn() -> AnyStore, name: &str) {
    let [a, b, c] = three(&store, name, LONG).await;
    let ban_name = format!("{name}-ban");
    let who = Principal::participant("flooder");
    let chain = |i: &Instance| {
        let ban = i.fleet.limit(&ban_name).unwrap();
        Chain::new()
            .check(ban, who.clone())
            .check(&i.limit, who.clone())
    };
    let check = async |i: &Instance| i.limiter.store().check(&chain(i)).await.unwrap();
    // Past the quota on A, then banned: refused on A and C (each caches the refusal).
    while !check(&a).await.denied_by().is_some_and(|(_, d)| d.is_ban()) {}
    for i in [&a, &c] {
        assert!(check(i).await.denied_by().is_some_and(|(_, d)| d.is_ban()));
    }
    // Lifted through B; its count reset too, for the test's sake.
    let v = b.fleet.lift_ban(&ban_name, &who).await.unwrap();
    b.fleet.lift_ban(name, &who).await.unwrap();
    within(|| [&a, &c].iter().all(|i| i.fleet.applied().version > v)).await;
    for i in [&a, &c] {
        assert!(
            check(i).await.is_allowed(),
            "let through at once after the notice"
        );
    }
}

#[tokio::test]
async fn a_ban_lifted_on_one_instance_lets_the_principal_through_on_the_others_on_redis() {
    let redis = RedisServer::start();
    a_lifted_ban(|| redis.store(), "lift-redis").await;
}

#[tokio::test]
async fn a_ban_lifted_on_one_instance_lets_the_principal_through_on_the_others_on_a_cluster() {
    let cluster = RedisCluster::start();
    a_lifted_ban(|| cluster.store(), "lift-cluster").await;
}

/// Redis restarted without persistence: the hash is gone; the instances put it back as
/// they applied it, and the next change goes on top of it (not on an empty state).
#[tokio::test]
async fn the_instances_put_back_a_state_the_store_lost_in_a_restart() {
    let mut redis = RedisServer::start();
    let name = "restart";
    let store = || redis.store();
    let [a, b, c] = three(&store, name, HALF).await;
    a.fleet.set_quota(name, 3).await.unwrap();
    a.fleet
        .set_override(name, &Principal::participant("vip"), 6)
        .await
        .unwrap();
    let v = a.fleet.applied().version;
    within(|| [&b, &c].iter().all(|i| i.fleet.applied().version == v)).await;
    redis.restart();
    let key = "rl:v3:{x.fleet}:runtime";
    let t0 = Instant::now();
    while redis.cli(&["HGET", key, "q:restart"]).trim() != "3" {
        assert!(t0.elapsed() < Duration::from_secs(3), "not put back");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    println!("put back {:?} after the restart", t0.elapsed());
    assert_eq!(redis.cli(&["HGET", key, "#v"]).trim(), v.to_string());
    // A change after the restart keeps what was there.
    b.fleet.set_quota(name, 2).await.unwrap();
    within(|| [&a, &c].iter().all(|i| i.limit.quota() == 2)).await;
    assert!(
        c.limit
            .overrides()
            .iter()
            .any(|(p, q)| p == "p:vip" && *q == 6),
        "the override survived"
    );
    assert_eq!(a.fleet.applied().version, v + 1);
}

/// Behind Sentinels: the state is on the primary and its replica; after the primary is
/// killed and the replica promoted, it is still there, and a change through one instance
/// reaches the others (their subscribers follow the new primary).
#[tokio::test]
async fn the_state_survives_a_sentinel_failover() {
    let mut s = RedisSentinels::start();
    let store = || {
        AnyStore::Redis(
            RedisStore::sentinel_builder(s.urls(), SENTINEL_MASTER)
                .build()
                .unwrap(),
        )
    };
    let [a, b, c] = three(&store, "sentinel-fleet", HALF).await;
    a.fleet.set_quota("sentinel-fleet", 3).await.unwrap();
    within(|| b.limit.quota() == 3 && c.limit.quota() == 3).await;
    // The replica has it before the primary goes.
    s.servers[0].cli(&["WAIT", "1", "2000"]);
    let old = s.servers[0].port();
    s.servers[0].kill();
    super::sentinel::failed_over(&s, old, Duration::from_secs(20)).await;
    let t0 = Instant::now();
    loop {
        if c.fleet.set_quota("sentinel-fleet", 5).await.is_ok() {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "no change after the failover"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let raw = s.servers[1].cli(&["HGET", "rl:v3:{x.fleet}:runtime", "#v"]);
    assert_eq!(raw.trim(), "2", "the new primary had the first change");
    let took = within(|| a.limit.quota() == 5 && b.limit.quota() == 5).await;
    println!("after the failover, a change applied by the others in {took:?}");
}

/// 300 changes through A as fast as it can make them while B checks: every check is
/// answered, B ends at the last version, and B read the state far fewer times than it
/// was told of changes.
#[tokio::test]
async fn a_flood_of_changes_leaves_checks_answered() {
    let redis = RedisServer::start();
    let name = "flood";
    // A response timeout that a loaded CI machine (every store test at once) does not
    // reach: what is measured is the flood's effect, not the machine's.
    let patient = || {
        AnyStore::Redis(
            RedisStore::builder(redis.url())
                .response_timeout(Duration::from_secs(3))
                .build()
                .unwrap(),
        )
    };
    let [a, b, _c] = three(&patient, name, HALF).await;
    // A second of checks on B: alone, then beside the flood.
    let checks = async || {
        let (mut n, mut slowest) = (0, Duration::ZERO);
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(1) {
            let t = Instant::now();
            let who = Principal::participant(format!("p{}", n % 1_000));
            let chain = Chain::new().check(&b.limit, who);
            assert!(b.limiter.store().check(&chain).await.is_ok());
            slowest = slowest.max(t.elapsed());
            n += 1;
        }
        (n, slowest)
    };
    let (alone, alone_slowest) = checks().await;
    let before = redis.command_calls("hgetall");
    let flood = async {
        for i in 0..300u64 {
            a.fleet.set_quota(name, 1_000 + i).await.unwrap();
        }
    };
    let ((), (n, slowest)) = tokio::join!(flood, checks());
    within(|| b.limit.quota() == 1_299).await;
    let reads = redis.command_calls("hgetall") - before;
    println!(
        "300 changes: B answered {n} checks in the second beside them (slowest {slowest:?}), \
         {alone} alone (slowest {alone_slowest:?}); HGETALLs by all three: {reads}"
    );
    assert!(admitted(&b, "q", 1).await == 1);
}

/// Notices forged on the store's channel: a version far ahead, a replayed one, an event
/// for a limit not run, a lift of a principal still banned, noise. Each prompts a read of
/// the state's own version at most: nothing is applied that the state does not hold, and
/// the ban stays (the store holds it).
#[tokio::test]
async fn a_forged_notice_applies_nothing_the_state_does_not_hold() {
    let redis = RedisServer::start();
    let name = "forged";
    let [a, b, _c] = three(&|| redis.store(), name, LONG).await;
    a.fleet.set_quota(name, 3).await.unwrap();
    within(|| b.limit.quota() == 3).await;
    let v = b.fleet.applied().version;
    let ban = b.fleet.limit(&format!("{name}-ban")).unwrap().clone();
    let who = Principal::participant("victim");
    let chain = Chain::new()
        .check(&ban, who.clone())
        .check(&b.limit, who.clone());
    let banned = async || {
        b.limiter
            .store()
            .check(&chain)
            .await
            .unwrap()
            .denied_by()
            .is_some_and(|(_, d)| d.is_ban())
    };
    while !banned().await {}
    let channel = "rl:v3:{x.fleet}:changes";
    let lift = format!("{} lift {name}-ban p:victim", v + 1);
    for forged in ["999999", "1", "1 lift no-such p:x", "noise", lift.as_str()] {
        redis.cli(&["PUBLISH", channel, forged]);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(b.fleet.applied().version, v, "no version but the state's");
    assert_eq!(b.limit.quota(), 3);
    assert!(banned().await, "still banned: the store holds the ban");
}
