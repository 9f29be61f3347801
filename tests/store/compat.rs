//! The compatibility matrix (`scripts/servers.sh` installs it, pinned): every script runs
//! on each server — the conformance suite (chains, every algorithm, bans), in-flight slots,
//! the shared pacer, de-duplication, the fleet's changes, notices, restore and heavy
//! hitters — and on Redis 6.2 a write it refuses is a refusal, not
//! an unknown. Every script runs under `MONITOR` there, and each command it ran names only
//! keys its call declared (what Dragonfly requires; `dragonfly.rs`). A 3-master Cluster
//! and Sentinel run on Valkey as on Redis 7 (`node_down.rs`, `sentinel.rs`). A missing
//! server fails its test with a message naming the installer.

use std::time::Duration;

use ratekeeper_core::limiter::SlotAnswer;
use ratekeeper_core::pace::{Aimd, Pace, SharedPacer};
use ratekeeper_core::store::{Dedupe, StoreErrorKind};
use ratekeeper_core::{AnyStore, Chain, FailurePolicy, InFlight, Limit, Limiter, Principal, Store};
use ratekeeper_tests::redis::RedisCluster;
use ratekeeper_tests::redis::versions::Matrix;

use crate::monitor::Monitor;
use crate::support::standalone;

#[tokio::test]
async fn every_script_runs_on_redis_6_2() {
    every_script_runs_on(Matrix::Redis6_2, "every_script_runs_on_redis_6_2").await;
}

#[tokio::test]
async fn every_script_runs_on_redis_7_0() {
    every_script_runs_on(Matrix::Redis7_0, "every_script_runs_on_redis_7_0").await;
}

#[tokio::test]
async fn every_script_runs_on_valkey_8_0() {
    every_script_runs_on(Matrix::Valkey8_0, "every_script_runs_on_valkey_8_0").await;
}

#[tokio::test]
async fn every_script_runs_on_valkey_9_1() {
    every_script_runs_on(Matrix::Valkey9_1, "every_script_runs_on_valkey_9_1").await;
}

/// The conformance suite on a 3-master Valkey 8 Cluster: keys in every slot group, chains
/// across them.
#[tokio::test]
async fn a_valkey_8_0_cluster_passes_the_conformance_suite() {
    let test = "a_valkey_8_0_cluster_passes_the_conformance_suite";
    let cluster = RedisCluster::start_on(&Matrix::Valkey8_0.require(test), 0, &[]);
    let info = cluster.nodes()[0].cli(&["INFO", "server"]);
    assert!(info.contains(Matrix::Valkey8_0.info_mark()), "{info}");
    crate::conformance::suite(&cluster.store()).await;
}

fn server(test: &str) -> ratekeeper_tests::redis::RedisServer {
    Matrix::Redis6_2.start(test)
}

async fn every_script_runs_on(kind: Matrix, test: &str) {
    let server = kind.start(test);
    let monitor = Monitor::start(server.port());
    let store = standalone(&server.url());
    crate::conformance::suite(&store).await;

    // Units given back (refund.lua): the check no longer counts.
    let limiter = Limiter::new(store.clone());
    let exports = Limit::fixed_window("compat-refund", 1, Duration::from_secs(60)).unwrap();
    let chain = Chain::new().check(&exports, Principal::user("ada"));
    let answer = limiter.check(&chain, FailurePolicy::Closed).await;
    limiter
        .give_back(answer.reservation(&chain).unwrap())
        .await
        .unwrap();
    assert!(
        limiter
            .check(&chain, FailurePolicy::Closed)
            .await
            .is_allowed()
    );

    // In-flight slots (slots.lua): two, then full, then one back.
    let exports = InFlight::new("compat-exports", 2, Duration::from_secs(5)).unwrap();
    let key = exports.slots(Principal::user("ada"));
    let mut held = Vec::new();
    for _ in 0..2 {
        match limiter.take_slot(&key, FailurePolicy::Closed).await {
            SlotAnswer::Taken(s) => held.push(s),
            other => panic!("{other:?}"),
        }
    }
    assert!(matches!(
        limiter.take_slot(&key, FailurePolicy::Closed).await,
        SlotAnswer::Full { max: 2, .. }
    ));
    drop(held.pop());
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(matches!(
        limiter.take_slot(&key, FailurePolicy::Closed).await,
        SlotAnswer::Taken(_)
    ));

    // The shared pacer (pacer.lua): a second worker waits for the first's slot, and a
    // rejection halves the rate both see — only the store can tell it that.
    let aimd = Aimd {
        initial: 5.0,
        period: Duration::from_secs(3_600),
        ..Aimd::default()
    };
    let worker = SharedPacer::new(store.clone(), "compat", aimd).unwrap();
    let other = SharedPacer::new(store.clone(), "compat", aimd).unwrap();
    assert_eq!(worker.acquire("example.org").await, Pace::Go);
    assert!(matches!(other.acquire("example.org").await, Pace::Wait(_)));
    worker
        .rejected("example.org", Some(Duration::from_secs(30)))
        .await;
    assert!(
        matches!(other.acquire("example.org").await, Pace::Wait(d) if d > Duration::from_secs(29))
    );
    assert_eq!(other.rate("example.org"), 2.5);
    assert_eq!(other.workers("example.org"), 2);
    // What the remote side said (the client layer's `told`): a ceiling, the pace at once.
    other.told("example.net", None, Some(3.0)).await;
    assert_eq!(other.rate("example.net"), 3.0);
    // A state written before the ceiling (four numbers) still reads as itself.
    let old = "rl:v3:{x.pacer:example.com}:pacer:compat";
    server.cli(&["SET", old, "7.5 0 0 0", "PX", "60000"]);
    assert_eq!(worker.acquire("example.com").await, Pace::Go);
    assert_eq!(
        worker.rate("example.com"),
        7.5,
        "{}",
        server.cli(&["GET", old])
    );

    // De-duplication (SET NX PX).
    let AnyStore::Redis(redis) = &store else {
        unreachable!()
    };
    let day = Duration::from_secs(86_400);
    assert!(redis.first_seen("compat-delivery", day).await.unwrap());
    assert!(!redis.first_seen("compat-delivery", day).await.unwrap());

    fleet_scripts(&store, &server).await;

    // Every script ran, and touched only the keys its call declared (Dragonfly's rule).
    let shas = crate::dragonfly::scripts()
        .into_iter()
        .map(|(name, source)| {
            (
                server.cli(&["SCRIPT", "LOAD", &source]).trim().to_owned(),
                name,
            )
        })
        .collect();
    let ran = crate::dragonfly::assert_only_declared_keys(&monitor.finish(), &shas);
    assert_eq!(ran.len(), 9, "scripts seen: {ran:?}");
}

/// The fleet's scripts: a change and its notice (fleet.lua), a read of the mark and of what
/// changed (fleet_read.lua), an event, the state put back
/// after the server lost it (fleet_restore.lua), a heavy-hitters report (top_put.lua).
pub(crate) async fn fleet_scripts(store: &AnyStore, server: &ratekeeper_tests::redis::RedisServer) {
    use ratekeeper_core::fleet::Fleet;
    let minute = Duration::from_secs(60);
    let limit = Limit::fixed_window("compat-fleet", 10, minute).unwrap();
    let ban = Limit::ban("compat-fleet-ban", 1, minute, minute).unwrap();
    let tracked = Limiter::builder(store.clone())
        .heavy_hitters()
        .build()
        .unwrap();
    let chain = Chain::new().check(&limit, Principal::user("ada"));
    tracked.check(&chain, FailurePolicy::Closed).await;
    let fleet = Fleet::new(store.clone(), [limit.clone(), ban])
        .named("compat")
        .unwrap()
        .hitters_every(Duration::from_millis(100));
    let run = tokio::spawn(fleet.clone().run(Duration::from_millis(100)));
    let t0 = std::time::Instant::now();
    let report = "rl:v3:{x.top}:compat-fleet:compat";
    while !fleet.applied().listening || server.cli(&["EXISTS", report]).trim() != "1" {
        assert!(
            t0.elapsed() < Duration::from_secs(3),
            "no notices or no report"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    fleet.set_quota("compat-fleet", 5).await.unwrap();
    assert_eq!(limit.quota(), 5);
    fleet
        .lift_ban("compat-fleet-ban", &Principal::user("ada"))
        .await
        .unwrap();
    let hash = "rl:v3:{x.fleet}:runtime";
    server.cli(&["DEL", hash]);
    fleet.sync().await.unwrap();
    assert_eq!(server.cli(&["HGET", hash, "q:compat-fleet"]).trim(), "5");
    run.abort();
}

/// At its memory cap under `noeviction`, Redis 6.2 refuses the script's first write and
/// wraps the refusal in a generic error: still a refusal (nothing was written), never an
/// unknown that a fail-open route would let through unlimited.
#[tokio::test]
async fn a_refused_write_on_redis_6_2_is_a_refusal() {
    let server = server("a_refused_write_on_redis_6_2_is_a_refusal");
    let store = standalone(&server.url());
    // A log over an hour: no window boundary can reset the count between the checks.
    let limit = Limit::sliding_log("compat-oom", 10, Duration::from_secs(3_600)).unwrap();
    let chain = Chain::new().check(&limit, Principal::user("ada"));
    assert!(store.check(&chain).await.is_ok());
    crate::support::over_the_memory_cap(&server);
    let err = store.check(&chain).await.unwrap_err();
    assert_eq!(err.kind(), StoreErrorKind::Rejected, "{err}");
    server.cli(&["CONFIG", "SET", "maxmemory", "0"]);
    let d = store.check(&chain).await.unwrap();
    assert_eq!(
        d.decisions()[0].remaining(),
        8,
        "the refused call charged nothing"
    );
}

/// The symptom over TCP: a fail-open route on Redis 6.2 ran with no limit at all
/// (every check failed). Now it counts: two, then 429.
#[tokio::test]
async fn a_fail_open_route_on_redis_6_2_is_limited_over_tcp() {
    use axum::Router;
    use axum::routing::get;
    use ratekeeper_tests::{Server, client, connect_info_peer};
    use ratekeeper_tower::extract::ClientIp;
    use ratekeeper_tower::{RateLimitLayer, Rule};

    let redis = server("a_fail_open_route_on_redis_6_2_is_limited_over_tcp");
    let layer = RateLimitLayer::new(Limiter::new(standalone(&redis.url()))).rule(
        Rule::new(
            Limit::fixed_window("compat-open", 2, Duration::from_secs(60)).unwrap(),
            ClientIp::new().peer_source(connect_info_peer),
        )
        .on_store_error(FailurePolicy::Open),
    );
    let app = Router::new().route("/", get(|| async { "ok" }).route_layer(layer));
    let server = Server::start(app).await.unwrap();
    let http = client();
    let mut statuses = Vec::new();
    for _ in 0..3 {
        statuses.push(
            http.get(server.url("/"))
                .send()
                .await
                .unwrap()
                .status()
                .as_u16(),
        );
    }
    assert_eq!(statuses, [200, 200, 429]);
}
