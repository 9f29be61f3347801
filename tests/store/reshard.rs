//! Slots moved while traffic flows (`redis-cli --cluster reshard`): `MOVED`, `ASK` and
//! `TRYAGAIN` mean the script did not run, and the store re-sends it (to the new owner, with
//! `ASKING` to the importing node, after a pause). No request fails, and no key admits more
//! than its limit: a count is never restarted on the node the keys move to.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use ratekeeper_core::{Chain, Limit, Principal, RedisStore, Store};
use ratekeeper_tests::redis::{RedisCluster, principal_slot};

const BURST: u64 = 300;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slots_moved_under_load_fail_no_request_and_admit_no_more_than_the_limit() {
    let cluster = Arc::new(RedisCluster::start());
    let owners = cluster.slot_owners(0);
    let source_port = cluster.nodes()[0].port();
    let source: Vec<(u16, u16)> = owners
        .iter()
        .find(|(p, _)| *p == source_port)
        .map(|(_, r)| r.clone())
        .expect("node 0 owns slots");
    let on_source = |s: u16| source.iter().any(|&(a, b)| a <= s && s <= b);
    // The principals on node 0 with the lowest slots: redis-cli moves those first.
    let mut candidates: Vec<(u16, Principal)> = (0..20_000)
        .map(|i| Principal::participant(format!("r{i}")))
        .map(|p| (principal_slot(p.as_str()), p))
        .filter(|(s, _)| on_source(*s))
        .collect();
    candidates.sort_by_key(|(s, _)| *s);
    candidates.truncate(150);
    let principals: Arc<Vec<(u16, Principal)>> = Arc::new(candidates);

    // Every check reaches Redis: no deny cache to answer refusals locally.
    let store = RedisStore::cluster_builder(cluster.urls())
        .deny_cache(0)
        .build()
        .unwrap();
    // Two limits of one principal: a two-key script, which a half-migrated slot refuses
    // with TRYAGAIN.
    let burst = Limit::token_bucket("burst", BURST, 1, Duration::from_secs(3600)).unwrap();
    let hour = Limit::token_bucket("hour", 10 * BURST, 1, Duration::from_secs(3600)).unwrap();
    let admitted: Arc<Vec<AtomicU64>> =
        Arc::new((0..principals.len()).map(|_| AtomicU64::new(0)).collect());
    let failed = Arc::new(AtomicU64::new(0));
    let first_error = Arc::new(Mutex::new(None::<String>));
    let stop = Arc::new(AtomicBool::new(false));
    let checks = Arc::new(AtomicU64::new(0));

    let mut tasks = Vec::new();
    for t in 0..8 {
        let (store, principals, admitted) = (store.clone(), principals.clone(), admitted.clone());
        let (failed, first_error, stop, checks) = (
            failed.clone(),
            first_error.clone(),
            stop.clone(),
            checks.clone(),
        );
        let (burst, hour) = (burst.clone(), hour.clone());
        tasks.push(tokio::spawn(async move {
            let mut i = t;
            while !stop.load(Ordering::Relaxed) {
                let k = i % principals.len();
                i += 8;
                let p = &principals[k].1;
                let chain = Chain::new()
                    .check(&burst, p.clone())
                    .check(&hour, p.clone());
                checks.fetch_add(1, Ordering::Relaxed);
                match store.check(&chain).await {
                    Ok(d) if d.is_allowed() => {
                        admitted[k].fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(_) => {}
                    Err(e) => {
                        failed.fetch_add(1, Ordering::Relaxed);
                        first_error
                            .lock()
                            .unwrap()
                            .get_or_insert_with(|| format!("{e:?}"));
                    }
                }
            }
        }));
    }
    // Load first, then slots move from node 0 to node 1 while it runs.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let c = cluster.clone();
    let out = tokio::task::spawn_blocking(move || c.reshard(0, 1, 2_000))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.unwrap();
    }

    let target_port = cluster.nodes()[1].port();
    let after = cluster.slot_owners(0);
    let now_on_target: Vec<(u16, u16)> = after
        .iter()
        .find(|(p, _)| *p == target_port)
        .map(|(_, r)| r.clone())
        .unwrap();
    let moved = principals
        .iter()
        .filter(|(s, _)| now_on_target.iter().any(|&(a, b)| a <= *s && *s <= b))
        .count();
    let counts: Vec<u64> = admitted.iter().map(|a| a.load(Ordering::Relaxed)).collect();
    let (moved_cmd, ask, tryagain) = (
        cluster.errors_sent("MOVED"),
        cluster.errors_sent("ASK"),
        cluster.errors_sent("TRYAGAIN"),
    );
    println!(
        "{} checks, {} failed; {moved} of {} principals moved; Redis sent MOVED {moved_cmd}, \
         ASK {ask}, TRYAGAIN {tryagain}; admitted per principal: min {}, max {} (limit {BURST}); \
         reshard output {} lines",
        checks.load(Ordering::Relaxed),
        failed.load(Ordering::Relaxed),
        principals.len(),
        counts.iter().min().unwrap(),
        counts.iter().max().unwrap(),
        out.lines().count(),
    );
    assert_eq!(
        failed.load(Ordering::Relaxed),
        0,
        "first failure: {:?}",
        first_error.lock().unwrap()
    );
    assert!(
        moved >= 50,
        "the reshard moved {moved} of the principals' slots"
    );
    assert!(
        moved_cmd > 0,
        "no request met a MOVED: the test did not test redirection"
    );
    for (k, n) in counts.iter().enumerate() {
        assert!(
            *n <= BURST,
            "principal {} (slot {}) admitted {n} > {BURST}",
            principals[k].1.as_str(),
            principals[k].0
        );
    }
}
