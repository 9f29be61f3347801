//! Heavy hitters for the fleet: a flooder spread over three instances, under each one's
//! own loudest principal, is the top of the merged report, with the three instances named
//! as contributors and the error bound stated; a report lapses when its instance stops.
//! Redis and a Cluster; on the memory store, the instance's own.

use std::time::Duration;

use ratekeeper_core::fleet::Fleet;
use ratekeeper_core::{AnyStore, Chain, FailurePolicy, Limit, Limiter, MemoryStore, Principal};
use ratekeeper_tests::redis::{RedisCluster, RedisServer};

const EVERY: Duration = Duration::from_millis(200);

struct Reporter {
    limit: Limit,
    limiter: Limiter,
    fleet: Fleet,
    run: tokio::task::JoinHandle<()>,
}

async fn reporter(store: AnyStore, name: &str, instance: &str) -> Reporter {
    let limit = Limit::fixed_window(name, 1_000, Duration::from_secs(60)).unwrap();
    let fleet = Fleet::new(store.clone(), [limit.clone()])
        .named(instance)
        .unwrap()
        .hitters_every(EVERY);
    let run = tokio::spawn(fleet.clone().run(Duration::from_millis(100)));
    let limiter = Limiter::builder(store).heavy_hitters().build().unwrap();
    Reporter {
        limit,
        limiter,
        fleet,
        run,
    }
}

async fn send(r: &Reporter, who: &str, n: usize) {
    for _ in 0..n {
        let chain = Chain::new().check(&r.limit, Principal::participant(who));
        r.limiter.check(&chain, FailurePolicy::Closed).await;
    }
}

async fn the_flooder_tops_the_merged_report(store: impl Fn() -> AnyStore, name: &str) {
    let mut rs = Vec::new();
    for i in ["a", "b", "c"] {
        let r = reporter(store(), name, &format!("{name}-{i}")).await;
        // Each instance's own loudest (50) is louder there than the flooder (40).
        send(&r, &format!("loud-{i}"), 50).await;
        send(&r, "flooder", 40).await;
        send(&r, &format!("quiet-{i}"), 5).await;
        let local = r.limit.heavy_hitters(1).unwrap();
        assert_eq!(local.by_use[0].principal().as_str(), format!("p:loud-{i}"));
        rs.push(r);
    }
    let t0 = std::time::Instant::now();
    let merged = loop {
        let m = rs[0].fleet.heavy_hitters(name, 3).await.unwrap().unwrap();
        // Each instance's report published after its requests.
        if m.instances.len() == 3 && m.report.used == 3 * 95 {
            break m;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(3),
            "not all reported: {m:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let top = &merged.report.by_use[0];
    println!(
        "{name}: merged top {} count {} (≥ {}), next {} count {}, unlisted ≤ {}, from {:?}",
        top.principal().as_str(),
        top.count(),
        top.guaranteed(),
        merged.report.by_use[1].principal().as_str(),
        merged.report.by_use[1].count(),
        merged.report.unlisted_use,
        merged
            .instances
            .iter()
            .map(|c| &c.instance)
            .collect::<Vec<_>>()
    );
    assert_eq!(top.principal().as_str(), "p:flooder");
    assert_eq!(top.guaranteed(), 120, "40 on each of three");
    let mut names: Vec<&str> = merged
        .instances
        .iter()
        .map(|c| c.instance.as_str())
        .collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            format!("{name}-a"),
            format!("{name}-b"),
            format!("{name}-c")
        ]
    );
    // An instance that stops: its report lapses within three periods.
    let gone = rs.pop().unwrap();
    gone.run.abort();
    let t0 = std::time::Instant::now();
    loop {
        let m = rs[0].fleet.heavy_hitters(name, 3).await.unwrap().unwrap();
        if m.instances.len() == 2 {
            break;
        }
        assert!(
            t0.elapsed() < EVERY * 3 + Duration::from_secs(1),
            "never lapsed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for r in rs {
        r.run.abort();
    }
}

#[tokio::test]
async fn a_flooder_spread_over_three_instances_tops_the_merged_report_on_redis() {
    let redis = RedisServer::start();
    the_flooder_tops_the_merged_report(|| redis.store(), "top-redis").await;
    let ttl = redis.cli(&["PTTL", "rl:v3:{x.top}:top-redis:top-redis-a"]);
    let ttl: i64 = ttl.trim().parse().unwrap();
    assert!(ttl > 0 && ttl <= 600, "every report has a TTL: {ttl}");
}

#[tokio::test]
async fn a_flooder_spread_over_three_instances_tops_the_merged_report_on_a_cluster() {
    let cluster = RedisCluster::start();
    the_flooder_tops_the_merged_report(|| cluster.store(), "top-cluster").await;
}

#[tokio::test]
async fn on_the_memory_store_the_report_is_the_instances_own() {
    let r = reporter(AnyStore::Memory(MemoryStore::new()), "top-mem", "solo").await;
    send(&r, "x", 3).await;
    let m = r.fleet.heavy_hitters("top-mem", 3).await.unwrap().unwrap();
    assert_eq!(m.instances.len(), 1);
    assert_eq!(m.report.by_use[0].count(), 3);
    assert!(r.fleet.heavy_hitters("no-such", 3).await.is_err());
    r.run.abort();
}
