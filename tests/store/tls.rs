//! TLS to Redis (`rediss://`, feature `tls`) against `redis-server --tls-port` with
//! certificates made in the test: the store verifies the server against the CA it was
//! given (and, without it, refuses the unknown CA), presents a client certificate where the
//! server asks for one, and counts exactly as over plain TCP — standalone and on a Cluster
//! whose nodes name their TLS ports.

use std::time::Duration;

use ratekeeper_core::{Chain, Limit, Principal, RedisStore, Store};
use ratekeeper_tests::redis::versions::Matrix;
use ratekeeper_tests::redis::{RedisCluster, RedisServer};
use ratekeeper_tests::tls::TestCerts;

/// `n` checks of one principal's chain: how many were admitted.
async fn admitted(store: &RedisStore, limit: &Limit, who: &str, n: usize) -> usize {
    let chain = Chain::new().check(limit, Principal::user(who));
    let mut ok = 0;
    for _ in 0..n {
        ok += usize::from(store.check(&chain).await.unwrap().is_allowed());
    }
    ok
}

/// A store that trusts the test CA and presents the client certificate (deny cache off).
fn trusted_with_certificate(server: &RedisServer, certs: &TestCerts) -> RedisStore {
    RedisStore::builder(server.tls_url())
        .tls_root_certificate(certs.ca_pem.clone())
        .tls_client_certificate(certs.client_cert_pem.clone(), certs.client_key_pem.clone())
        .deny_cache(0)
        .build()
        .unwrap()
}

/// A store that trusts the test CA and presents no certificate.
fn trusted_without_certificate(server: &RedisServer, certs: &TestCerts) -> RedisStore {
    RedisStore::builder(server.tls_url())
        .tls_root_certificate(certs.ca_pem.clone())
        .build()
        .unwrap()
}

#[tokio::test]
async fn standalone_over_tls_with_a_client_certificate() {
    let certs = TestCerts::make("standalone");
    // The server asks every client for a certificate signed by its CA.
    let server = RedisServer::start_tls(&certs, true);
    let limit = Limit::token_bucket("tls", 3, 1, Duration::from_secs(3600)).unwrap();
    let store = trusted_with_certificate(&server, &certs);
    store.health().await.unwrap();
    assert_eq!(admitted(&store, &limit, "alice", 5).await, 3);
    // The count is in Redis: seen over the plain port.
    let name = store.key_name(&limit.key(Principal::user("alice")));
    assert_eq!(server.cli(&["EXISTS", &name]).trim(), "1");

    // Without the CA, the server's certificate is not trusted: no connection, no count.
    let untrusting = RedisStore::builder(server.tls_url())
        .tls_client_certificate(certs.client_cert_pem.clone(), certs.client_key_pem.clone())
        .build()
        .unwrap();
    assert!(
        untrusting.health().await.is_err(),
        "an unknown CA was trusted"
    );
    // Without a client certificate, the server refuses the connection.
    let anonymous = trusted_without_certificate(&server, &certs);
    assert!(
        anonymous.health().await.is_err(),
        "no client certificate, yet answered"
    );
    // Plain TCP to the TLS port is no Redis.
    let plain = RedisStore::builder(server.tls_url().replace("rediss://", "redis://"))
        .build()
        .unwrap();
    assert!(plain.health().await.is_err());
    // A CA from another test run is not this server's.
    let other = TestCerts::make("other");
    let wrong_ca = RedisStore::builder(server.tls_url())
        .tls_root_certificate(other.ca_pem.clone())
        .tls_client_certificate(certs.client_cert_pem.clone(), certs.client_key_pem.clone())
        .build()
        .unwrap();
    assert!(wrong_ca.health().await.is_err(), "another CA was accepted");
}

/// Valkey 8.0 (Debian's build carries TLS): a client certificate, and the count exact. The
/// Redis 6.2 and Valkey 9.1 binaries of the matrix are built without TLS (they refuse
/// `--tls-port`).
#[tokio::test]
async fn standalone_over_tls_on_valkey_8_0() {
    let test = "standalone_over_tls_on_valkey_8_0";
    let certs = TestCerts::make("valkey");
    let server = RedisServer::start_tls_on(&Matrix::Valkey8_0.require(test), &certs, true);
    assert!(
        server
            .cli(&["INFO", "server"])
            .contains(Matrix::Valkey8_0.info_mark())
    );
    let limit = Limit::fixed_window("tls-valkey", 4, Duration::from_secs(3600)).unwrap();
    let store = trusted_with_certificate(&server, &certs);
    store.verify().await.unwrap();
    assert_eq!(admitted(&store, &limit, "grace", 6).await, 4);
    // A fixed window's state: its count, in the key of its window.
    let names = store.key_names(&limit.key(Principal::user("grace")));
    assert_eq!(crate::support::stored(&server, &names), "4");
    // Without a client certificate, Valkey refuses the connection.
    let anonymous = trusted_without_certificate(&server, &certs);
    assert!(
        anonymous.health().await.is_err(),
        "no client certificate, yet answered"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_over_tls_serves_every_masters_keys() {
    let certs = TestCerts::make("cluster");
    let cluster = RedisCluster::start_tls(&certs);
    let store = RedisStore::cluster_builder(cluster.tls_urls())
        .tls_root_certificate(certs.ca_pem.clone())
        .deny_cache(0)
        .build()
        .unwrap();
    store.health().await.unwrap();
    let limit = Limit::token_bucket("tls-cluster", 4, 1, Duration::from_secs(3600)).unwrap();
    for i in 0..30 {
        assert_eq!(
            admitted(&store, &limit, &format!("u{i}"), 6).await,
            4,
            "u{i}"
        );
    }
    // Thirty principals spread over the three masters: each holds some of the keys.
    for n in cluster.nodes() {
        let keys: u64 = n.cli(&["DBSIZE"]).trim().parse().unwrap();
        assert!(keys > 0, "node {} holds no key", n.port());
    }
    // Over plain TCP, the slot map names the plain ports: the store, which speaks only TLS
    // to every node, read its map over TLS and was given the TLS ports.
    let slots = cluster.nodes()[0].cli(&["CLUSTER", "SLOTS"]);
    for n in cluster.nodes() {
        assert!(slots.contains(&n.port().to_string()));
        assert!(!slots.contains(&n.tls_port().to_string()));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinels_over_tls_lead_to_the_primary_over_tls_and_after_a_failover() {
    use super::sentinel::{failed_over, until_answered};
    use ratekeeper_tests::redis::{RedisSentinels, SENTINEL_MASTER};

    let certs = TestCerts::make("sentinel");
    let mut s = RedisSentinels::start_tls(&certs);
    let store = RedisStore::sentinel_builder(s.tls_urls(), SENTINEL_MASTER)
        .tls_root_certificate(certs.ca_pem.clone())
        .deny_cache(0)
        .build()
        .unwrap();
    let limit = Limit::token_bucket("tls-sentinel", 3, 1, Duration::from_secs(3600)).unwrap();
    // TLS to a Sentinel, then to the primary it names, can outlast one call's budget on a
    // loaded machine (CI failed once so: "sentinel connect timed out"): wait until the
    // store answers (a health check charges nothing) before counting.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while let Err(e) = store.health().await {
        assert!(
            std::time::Instant::now() < deadline,
            "no answer over TLS: {e}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(admitted(&store, &limit, "alice", 5).await, 3);
    let name = store.key_name(&limit.key(Principal::user("alice")));
    assert_eq!(s.servers[0].cli(&["EXISTS", &name]).trim(), "1");

    // The Sentinels name the servers' TLS ports; after the primary dies, the store reaches
    // the promoted replica over TLS too.
    let old = s.servers[0].tls_port();
    s.servers[0].kill();
    let new = failed_over(&s, old, Duration::from_secs(20)).await;
    assert_eq!(new, s.servers[1].tls_port());
    let chain = Chain::new().check(&limit, Principal::user("bob"));
    until_answered(&store, &chain, Duration::from_secs(10))
        .await
        .expect("the store answers again without a restart");
    let bob = store.key_name(&limit.key(Principal::user("bob")));
    assert_eq!(s.servers[1].cli(&["EXISTS", &bob]).trim(), "1");
}
