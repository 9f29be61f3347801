//! The check at start (`RedisStore::verify`) on real servers: every server of the matrix
//! and a Cluster pass it; a user with exactly the Redis guide's ACL (and its Cluster line, on a
//! Cluster) passes it and runs the conformance suite; a user missing a command, or whose key pattern leaves the store's
//! keys out, is told which; `CONFIG` renamed is said once and the store works; no
//! password reaches the error.

use ratekeeper_core::store::VerifyError;
use ratekeeper_core::{AnyStore, RedisStore};
use ratekeeper_tests::redis::versions::Matrix;
use ratekeeper_tests::redis::{RedisCluster, RedisServer};

/// The Redis guide's ACL for a limiter user (prefix `rl`), as `ACL SETUSER` arguments.
pub(crate) const LIMITER_ACL: &[&str] = &[
    "on",
    "resetkeys",
    "~rl:*",
    "resetchannels",
    "&rl:*",
    "-@all",
    "+evalsha",
    "+eval",
    "+set",
    "+del",
    "+scan",
    "+time",
    "+get",
    "+mget",
    "+incrby",
    "+pexpire",
    "+zadd",
    "+zcard",
    "+zrange",
    "+zrem",
    "+zremrangebyscore",
    "+zscore",
    "+hget",
    "+hgetall",
    "+hset",
    "+hincrby",
    "+hdel",
    "+publish",
    "+subscribe",
    "+info",
    "+config|get",
];

/// What a Cluster's nodes add to [`LIMITER_ACL`] (the Redis guide says so).
const CLUSTER_ACL: &[&str] = &["+cluster|slots", "+asking"];

const PASSWORD: &str = "s3cret-acl-password";

fn user_with(server: &RedisServer, name: &str, acl: &[&str]) -> RedisStore {
    let mut args = vec!["ACL", "SETUSER", name, "reset"];
    args.extend_from_slice(acl);
    let password = format!(">{PASSWORD}");
    args.push(&password);
    let ok = server.cli(&args);
    assert!(ok.contains("OK"), "{ok}");
    let url = format!("redis://{name}:{PASSWORD}@127.0.0.1:{}", server.port());
    RedisStore::builder(&url).build().unwrap()
}

#[tokio::test]
async fn every_server_of_the_matrix_passes_the_check_at_start() {
    for kind in Matrix::ALL {
        let server = kind.start("every_server_of_the_matrix_passes_the_check_at_start");
        let store = RedisStore::builder(server.url()).build().unwrap();
        let verified = store
            .verify()
            .await
            .unwrap_or_else(|e| panic!("{kind:?}: {e}"));
        let seen = verified.server.expect("INFO is allowed").to_string();
        let want = kind.name().to_ascii_lowercase();
        assert_eq!(seen, want, "{kind:?}");
        assert_eq!(
            verified.eviction_policies.as_deref(),
            Some(&["noeviction".to_owned()][..])
        );
    }
}

#[tokio::test]
async fn a_cluster_and_a_user_with_the_readme_acl_pass_the_check_at_start() {
    let cluster = RedisCluster::start();
    let AnyStore::Redis(store) = cluster.store() else {
        unreachable!("a Redis Cluster store")
    };
    let verified = store.verify().await.unwrap();
    assert_eq!(verified.eviction_policies.map(|p| p.len()), Some(3));

    // The Redis guide's ACL and its Cluster line, on every node: the check passes and the
    // conformance suite (chains across slot groups, refunds) runs through that user.
    let mut acl = LIMITER_ACL.to_vec();
    acl.extend(CLUSTER_ACL);
    let password = format!(">{PASSWORD}");
    for node in cluster.nodes() {
        let mut args = vec!["ACL", "SETUSER", "limiter", "reset", &password];
        args.extend_from_slice(&acl);
        assert!(node.cli(&args).contains("OK"));
    }
    let urls = cluster
        .urls()
        .into_iter()
        .map(|u| u.replace("redis://", &format!("redis://limiter:{PASSWORD}@")));
    let user = RedisStore::cluster_builder(urls).build().unwrap();
    let verified = user.verify().await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(verified.eviction_policies.map(|p| p.len()), Some(3));
    crate::conformance::suite(&AnyStore::Redis(user)).await;
}

/// The ACL the tests grant is the one the stores guide (ratekeeper-core's docs/stores.md)
/// shows, word for word.
#[test]
fn the_readme_shows_the_acl_the_tests_grant() {
    let readme = include_str!("../../rate-limit-core/docs/stores.md");
    let line = readme
        .lines()
        .find(|l| l.starts_with("ACL SETUSER limiter "))
        .expect("the Redis guide's ACL line");
    let words: Vec<&str> = line
        .split(' ')
        .skip(3)
        .filter(|w| !w.starts_with('>'))
        .collect();
    assert_eq!(words, LIMITER_ACL);
    let cluster = format!("`{}`", CLUSTER_ACL.join(" "));
    assert!(
        readme.contains(&cluster),
        "the stores guide does not show {cluster}"
    );
}

/// A user with exactly the Redis guide's ACL: the check passes and the conformance suite runs
/// through it, on Redis 7.0 and on Redis 6.2.
#[tokio::test]
async fn a_user_with_the_readme_acl_passes_and_runs_the_suite() {
    for kind in [Matrix::Redis7_0, Matrix::Redis6_2] {
        let server = kind.start("a_user_with_the_readme_acl_passes_and_runs_the_suite");
        let store = user_with(&server, "limiter", LIMITER_ACL);
        let verified = store
            .verify()
            .await
            .unwrap_or_else(|e| panic!("{kind:?}: {e}"));
        assert!(verified.fleet_missing.is_empty(), "{kind:?}: {verified:?}");
        let store = AnyStore::Redis(store);
        crate::conformance::suite(&store).await;
        crate::compat::fleet_scripts(&store, &server).await;
    }
}

/// A user missing one command the scripts run (`zadd`: the in-flight slots), or one the
/// store sends (`del`): the check names each; a key pattern that leaves the store's keys
/// out is `keys`. On 7.0 and on 6.2 alike.
#[tokio::test]
async fn a_user_missing_a_permission_is_told_which() {
    for kind in [Matrix::Redis7_0, Matrix::Redis6_2] {
        let server = kind.start("a_user_missing_a_permission_is_told_which");
        let without = |cut: &[&str]| -> Vec<&str> {
            LIMITER_ACL
                .iter()
                .copied()
                .filter(|a| !cut.contains(a))
                .collect()
        };
        let store = user_with(&server, "no-zadd", &without(&["+zadd", "+del"]));
        let err = store.verify().await.unwrap_err();
        assert_eq!(err.code(), "redis.permission", "{kind:?}: {err}");
        let VerifyError::Permission { missing } = &err else {
            panic!("{err}")
        };
        assert!(
            missing.contains(&"zadd".to_owned()),
            "{kind:?}: {missing:?}"
        );
        assert!(missing.contains(&"del".to_owned()), "{kind:?}: {missing:?}");
        assert!(!err.to_string().contains(PASSWORD), "{err}");

        let mut other_keys = without(&["~rl:*"]);
        other_keys.push("~other:*");
        let store = user_with(&server, "other-keys", &other_keys);
        let err = store.verify().await.unwrap_err();
        let VerifyError::Permission { missing } = &err else {
            panic!("{err}")
        };
        assert_eq!(missing, &["keys".to_owned()], "{kind:?}");

        // What only a fleet needs fails nothing, and is named.
        let store = user_with(&server, "no-fleet", &without(&["&rl:*", "+hgetall"]));
        let verified = store.verify().await.unwrap();
        assert_eq!(verified.fleet_missing, ["channels", "hgetall"], "{kind:?}");
    }
}

/// `CONFIG` renamed away (managed services): the check passes without the eviction
/// policy, and the store counts.
#[tokio::test]
async fn config_renamed_leaves_the_eviction_policy_unchecked_and_the_store_working() {
    let server = RedisServer::start_with(
        ratekeeper_tests::redis::free_port(),
        &["--rename-command", "CONFIG", ""],
    );
    let store = RedisStore::builder(server.url()).build().unwrap();
    let verified = store.verify().await.unwrap();
    assert_eq!(verified.eviction_policies, None);
    let store = AnyStore::Redis(store);
    crate::conformance::suite(&store).await;
}

/// A wrong password: the check fails as unavailable, and the password is nowhere in what
/// it says.
#[tokio::test]
async fn a_wrong_password_fails_without_showing_it() {
    let server = Matrix::Redis7_0.start("a_wrong_password_fails_without_showing_it");
    server.cli(&["ACL", "SETUSER", "limiter", "on", ">right", "~*", "+@all"]);
    let url = format!("redis://limiter:{PASSWORD}@127.0.0.1:{}", server.port());
    let store = RedisStore::builder(&url).build().unwrap();
    let err = store.verify().await.unwrap_err();
    let said = format!("{err} {err:?}");
    assert!(!said.contains(PASSWORD), "{said}");
    // It says what it is: an authentication failure, with its own code.
    assert_eq!(err.code(), "redis.auth", "{said}");
    assert!(said.contains("authentication failed"), "{said}");
    // A check says the same, and never the password either.
    let chain = ratekeeper_core::Chain::new().check(
        &ratekeeper_core::Limit::fixed_window("auth", 5, std::time::Duration::from_secs(60))
            .unwrap(),
        ratekeeper_core::Principal::user("u"),
    );
    let e = ratekeeper_core::Store::check(&store, &chain)
        .await
        .unwrap_err();
    let said = format!("{e} {e:?}");
    assert_eq!(
        e.kind(),
        ratekeeper_core::store::StoreErrorKind::Unauthenticated,
        "{said}"
    );
    assert!(
        said.contains("authentication failed") && !said.contains(PASSWORD),
        "{said}"
    );
}

/// A server that needs a password, and a URL without one: every command is answered
/// NOAUTH, and the store says so as an authentication failure (`redis.auth`), not as a
/// command refused.
#[tokio::test]
async fn a_missing_password_is_an_authentication_failure() {
    let server = Matrix::Redis7_0.start("a_missing_password_is_an_authentication_failure");
    let url = server.url();
    server.cli(&["CONFIG", "SET", "requirepass", PASSWORD]);
    let store = RedisStore::builder(&url).build().unwrap();
    let err = store.verify().await.unwrap_err();
    let said = format!("{err} {err:?}");
    assert_eq!(err.code(), "redis.auth", "{said}");
    assert!(said.contains("authentication failed"), "{said}");
    assert!(!said.contains(PASSWORD), "{said}");
}

/// The examples' check at start: a store the environment names is verified, memory is not.
#[tokio::test]
async fn the_examples_verify_the_store_they_are_given() {
    use ratekeeper_examples::{StoreEnv, verify_env};
    let server = Matrix::Redis7_0.start("the_examples_verify_the_store_they_are_given");
    let found = verify_env(&StoreEnv::Redis(server.url())).await;
    assert!(matches!(found, Some(Ok(_))), "{found:?}");
    assert!(verify_env(&StoreEnv::Memory).await.is_none());
    let store = user_with(&server, "bare", &["on", "~rl:*", "-@all", "+evalsha"]);
    drop(store);
    let url = format!("redis://bare:{PASSWORD}@127.0.0.1:{}", server.port());
    let found = verify_env(&StoreEnv::Redis(url)).await;
    let Some(Err(e)) = found else {
        panic!("a user without permissions is refused: {found:?}")
    };
    assert_eq!(
        e.code(),
        "redis.permission",
        "{e}: {:?}",
        std::error::Error::source(&e)
    );
}

/// Several applications on one server: a password in the URL (never in what the store
/// says of itself), a database number (the keys land in that database only), and a prefix
/// each (the same limit and principal count apart).
#[tokio::test]
async fn auth_database_numbers_and_prefixes_share_one_server() {
    use ratekeeper_core::{Chain, Limit, Principal, Store};
    use std::time::Duration;
    let server = Matrix::Redis7_0.start("auth_database_numbers_and_prefixes_share_one_server");
    server.cli(&[
        "ACL",
        "SETUSER",
        "app",
        "on",
        &format!(">{PASSWORD}"),
        "~*",
        "+@all",
    ]);
    let url = |db: u8| format!("redis://app:{PASSWORD}@127.0.0.1:{}/{db}", server.port());
    let a = RedisStore::builder(url(3)).prefix("app-a").build().unwrap();
    let b = RedisStore::builder(url(3)).prefix("app-b").build().unwrap();
    let c = RedisStore::builder(url(5)).prefix("app-a").build().unwrap();
    for s in [&a, &b, &c] {
        assert!(!s.endpoint().contains(PASSWORD), "{}", s.endpoint());
        let described = AnyStore::Redis(s.clone()).describe();
        assert!(!described.contains(PASSWORD), "{described}");
        s.verify().await.unwrap();
    }
    // A log over an hour: no window boundary can reset a count mid-test.
    let limit = Limit::sliding_log("shared", 10, Duration::from_secs(3_600)).unwrap();
    let chain = Chain::new().check(&limit, Principal::user("ada"));
    for _ in 0..3 {
        a.check(&chain).await.unwrap();
    }
    let left = |d: ratekeeper_core::ChainDecision| d.decisions()[0].remaining();
    assert_eq!(left(a.check(&chain).await.unwrap()), 6, "a's own count");
    assert_eq!(
        left(b.check(&chain).await.unwrap()),
        9,
        "another prefix counts apart"
    );
    assert_eq!(
        left(c.check(&chain).await.unwrap()),
        9,
        "another database counts apart"
    );
    let keys_in = |db: &str| server.cli(&["-n", db, "KEYS", "app-*"]);
    assert!(keys_in("0").trim().is_empty(), "nothing in database 0");
    let three = keys_in("3");
    assert!(
        three.contains("app-a:") && three.contains("app-b:"),
        "{three}"
    );
    let five = keys_in("5");
    assert!(
        five.contains("app-a:") && !five.contains("app-b:"),
        "{five}"
    );
}
