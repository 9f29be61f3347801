//! The fleet's history across a store that lost its state (the third probe's case): Redis
//! restarts empty while instances A–C, which applied version 2, are cut off; a new
//! instance D makes one change (version 1 of a new epoch), or two (version 2, the same
//! number as A–C's). When A–C read again they find another history and apply the store's:
//! D's acknowledged change is kept, and every instance ends on one state and one mark. On
//! a standalone Redis (restarted) and behind Sentinels (the primary emptied, as a restart
//! without persistence leaves it, and the replica with it).

use std::time::Duration;

use ratekeeper_core::fleet::Fleet;
use ratekeeper_core::{AnyStore, Limit, Principal, RedisStore};
use ratekeeper_tests::redis::{RedisSentinels, RedisServer, SENTINEL_MASTER};

/// An instance that reads only when told to (`sync`): cut off between its reads.
fn instance(store: AnyStore, name: &str) -> (Limit, Fleet) {
    let limit = Limit::fixed_window(name, 10, Duration::from_secs(60)).unwrap();
    (limit.clone(), Fleet::new(store, [limit]))
}

/// Runs the case; `empty` empties the store; D makes `changes_by_d` changes. Returns the
/// state's field `q:<name>` as the store holds it, read by `raw`.
async fn restart_case(
    store: impl Fn() -> AnyStore,
    empty: impl FnOnce(),
    changes_by_d: usize,
    name: &str,
) {
    let old: Vec<(Limit, Fleet)> = (0..3).map(|_| instance(store(), name)).collect();
    for (_, f) in &old {
        f.sync().await.unwrap();
    }
    let a = &old[0].1;
    a.set_quota(name, 3).await.unwrap();
    a.set_override(name, &Principal::participant("vip"), 6)
        .await
        .unwrap();
    for (_, f) in &old {
        assert_eq!(f.sync().await.unwrap(), 2);
    }
    let before = a.applied();
    empty();
    let (d_limit, d) = instance(store(), name);
    // D reads until the store answers again (a restart takes a moment to accept).
    while d.sync().await.is_err() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(d.applied().version, 0, "D found the store empty");
    assert_eq!(
        d.set_quota(name, 7).await.unwrap(),
        1,
        "answered: version 1"
    );
    if changes_by_d == 2 {
        d.set_override(name, &Principal::participant("guest"), 9)
            .await
            .unwrap();
    }
    let d_mark = d.applied();
    assert_ne!(
        d_mark.epoch, before.epoch,
        "a new history, with its own epoch"
    );
    for (limit, f) in &old {
        // Its connection broke with the restart: it reads again until the store answers.
        while f.sync().await.is_err() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let got = f.applied();
        assert_eq!(
            (got.epoch, got.version),
            (d_mark.epoch, d_mark.version),
            "A–C are on the store's history"
        );
        assert_eq!(limit.quota(), 7, "D's acknowledged change is kept");
        assert_eq!(
            limit.overrides(),
            d_limit.overrides(),
            "one state everywhere"
        );
    }
    assert_eq!(d_limit.quota(), 7);
    // D reads again: nothing was put back over its change.
    while d.sync().await.is_err() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(d_limit.quota(), 7);
    assert_eq!(
        (d.applied().epoch, d.applied().version),
        (d_mark.epoch, d_mark.version)
    );
}

#[tokio::test]
async fn after_a_restart_a_new_instances_change_is_kept_by_every_instance_on_redis() {
    for changes in [1, 2] {
        let mut redis = RedisServer::start();
        let url = redis.url();
        let store = || AnyStore::Redis(RedisStore::builder(url.clone()).build().unwrap());
        let name = format!("history-{changes}");
        restart_case(store, || redis.restart(), changes, &name).await;
        assert_eq!(
            redis
                .cli(&["HGET", "rl:v3:{x.fleet}:runtime", &format!("q:{name}")])
                .trim(),
            "7"
        );
    }
}

#[tokio::test]
async fn after_the_state_is_lost_a_new_instances_change_is_kept_behind_sentinels() {
    for changes in [1, 2] {
        let s = RedisSentinels::start();
        let store = || {
            AnyStore::Redis(
                RedisStore::sentinel_builder(s.urls(), SENTINEL_MASTER)
                    .build()
                    .unwrap(),
            )
        };
        let primary = s.primary_port().unwrap();
        let server = s.servers.iter().find(|r| r.port() == primary).unwrap();
        let name = format!("sentinel-history-{changes}");
        let empty = || {
            server.cli(&["FLUSHALL"]);
        };
        restart_case(store, empty, changes, &name).await;
        let raw = server.cli(&["HGET", "rl:v3:{x.fleet}:runtime", &format!("q:{name}")]);
        assert_eq!(raw.trim(), "7");
    }
}

/// What the store holds is read, not trusted to decode: a log line or an entry written by
/// hand (or by a newer release) fails the read with a stable code (`corrupt`), applies
/// nothing, and the instance keeps what it applied and says why.
#[tokio::test]
async fn a_stored_change_that_does_not_decode_is_an_error_and_applied_nowhere() {
    let redis = RedisServer::start();
    let name = "corrupt";
    let (_, a) = instance(redis.store(), name);
    let (limit, b) = instance(redis.store(), name);
    a.set_quota(name, 4).await.unwrap();
    b.sync().await.unwrap();
    assert_eq!(limit.quota(), 4);
    // A log line that does not decode: B, one version behind, reads it.
    a.set_quota(name, 5).await.unwrap();
    redis.cli(&["HSET", "rl:v3:{x.fleet}:log", "2", "set\nq:corrupt"]);
    let e = b.sync().await.unwrap_err();
    assert_eq!(e.kind().as_str(), "corrupt");
    assert_eq!(limit.quota(), 4, "nothing applied");
    assert!(b.applied().error.unwrap().contains("corrupt"));
    // An entry that does not decode: read whole (the log no longer covers B's version).
    redis.cli(&["HDEL", "rl:v3:{x.fleet}:log", "2"]);
    redis.cli(&["HSET", "rl:v3:{x.fleet}:runtime", "q:corrupt", "forty"]);
    let e = b.sync().await.unwrap_err();
    assert_eq!(e.kind().as_str(), "corrupt");
    assert_eq!(limit.quota(), 4, "nothing applied");
    assert_eq!(b.applied().version, 1);
}

/// A failover that lost a change, then another change at the same version: A and B applied
/// version 2; the store goes back to version 1 (a replica that missed the change, written
/// here by hand as the promoted replica holds it); A reads that, applies it, and makes a
/// new change, version 2 again, while B was cut off. B comes back on the same epoch and
/// version: the tip (each change's stamp) tells the two changes apart, and B reads the
/// store's state. Without it B would keep the lost change, showing the same version.
#[tokio::test]
async fn a_lost_change_then_another_at_its_version_is_not_taken_for_it() {
    let redis = RedisServer::start();
    let name = "failover-split";
    let (a_limit, a) = instance(redis.store(), name);
    let (b_limit, b) = instance(redis.store(), name);
    a.set_quota(name, 3).await.unwrap();
    a.set_quota(name, 5).await.unwrap();
    b.sync().await.unwrap();
    assert_eq!((b.applied().version, b_limit.quota()), (2, 5));
    // The promoted replica's state: version 1, as it was before the second change.
    let (state, log) = ("rl:v3:{x.fleet}:runtime", "rl:v3:{x.fleet}:log");
    let first = redis.cli(&["HGET", log, "1"]);
    let tip = first.split('\n').next().unwrap().trim().to_owned();
    redis.cli(&[
        "HSET",
        state,
        "#v",
        "1",
        "#t",
        &tip,
        &format!("q:{name}"),
        "3",
    ]);
    redis.cli(&["HDEL", log, "2"]);
    a.sync().await.unwrap();
    assert_eq!(
        (a.applied().version, a_limit.quota()),
        (1, 3),
        "A took the store's"
    );
    a.set_quota(name, 7).await.unwrap();
    assert_eq!(a.applied().version, 2);
    b.sync().await.unwrap();
    assert_eq!(
        b_limit.quota(),
        7,
        "B read the change that now holds version 2"
    );
    assert_eq!(
        (b.applied().epoch, b.applied().version),
        (a.applied().epoch, a.applied().version)
    );
}
