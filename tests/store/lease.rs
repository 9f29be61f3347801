//! Leases: four application instances (four stores, each with its own connection and its
//! own slices) share leased limits on standalone Redis and on a Cluster, offered 1.2× the
//! quota. A fixed window never admits more than its quota; a token bucket's and a sliding
//! window's excess over what the same load gets without leases stays within rate ×
//! lifetime; a chain that mixes leased and plain limits stays all-or-nothing; what a
//! slice did not use goes back; a quota changed at run time reaches the slices.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ratekeeper_core::{AnyStore, Chain, Limit, MemoryStore, Principal, RedisStore, Store};
use ratekeeper_tests::redis::{RedisCluster, RedisServer};

use crate::support::clear_of_boundary;

const LIFETIME: Duration = Duration::from_millis(50);

fn instances(urls: &[String], cluster: bool) -> Vec<RedisStore> {
    (0..4)
        .map(|_| {
            if cluster {
                RedisStore::cluster_builder(urls.iter().cloned())
                    .build()
                    .unwrap()
            } else {
                RedisStore::builder(&urls[0]).build().unwrap()
            }
        })
        .collect()
}

/// What a paced load saw: each admission's call, from when it was asked to when it was
/// answered (from the start: the decision fell somewhere inside), and the most quota
/// other instances held in slices at any refusal.
struct Load {
    start: Instant,
    admitted: Vec<(Duration, Duration)>,
    refused: u64,
    held_at_refusal: u64,
}

/// Offers `rate` checks per second of `limit` (the global principal) for `length`, spread
/// over the four instances (two paced tasks each).
async fn offer(stores: &[RedisStore], limit: &Limit, rate: f64, length: Duration) -> Load {
    let start = Instant::now();
    let period = Duration::from_secs_f64(8.0 / rate);
    let held = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for (i, store) in stores.iter().enumerate() {
        for t in 0..2 {
            let (store, limit, held) = (store.clone(), limit.clone(), held.clone());
            let others: Vec<RedisStore> = stores
                .iter()
                .enumerate()
                .filter(|(j, _)| *j != i)
                .map(|(_, s)| s.clone())
                .collect();
            tasks.push(tokio::spawn(async move {
                // Stagger the eight tasks across one period.
                tokio::time::sleep(period * (i as u32 * 2 + t) / 8).await;
                let mut tick = tokio::time::interval(period);
                let chain = Chain::new().check(&limit, Principal::global());
                let (mut admitted, mut refused) = (Vec::new(), 0);
                while start.elapsed() < length {
                    tick.tick().await;
                    let asked = start.elapsed();
                    let d = store.check(&chain).await.expect("the store answers");
                    if d.is_allowed() {
                        // Decided between asking and answering: on a busy machine that
                        // span can be long, and the oracle counts only what surely fell
                        // inside an interval.
                        admitted.push((asked, start.elapsed()));
                    } else {
                        refused += 1;
                        let key = limit.key(Principal::global());
                        let h: u64 = others.iter().map(|s| s.leased_units(&key)).sum();
                        held.fetch_max(h, Ordering::Relaxed);
                    }
                }
                (admitted, refused)
            }));
        }
    }
    let mut load = Load {
        start,
        admitted: Vec::new(),
        refused: 0,
        held_at_refusal: 0,
    };
    for t in tasks {
        let (a, r) = t.await.unwrap();
        load.admitted.extend(a);
        load.refused += r;
    }
    load.admitted.sort();
    load.held_at_refusal = held.load(Ordering::Relaxed);
    load
}

/// The most admissions in any interval beyond `rate` × its length and what the bucket
/// may have held when the interval began: at most `capacity`, and at most
/// `rate` × the time since it was last empty (`empty` before the load's start, when it
/// was drained first). An admission counts in an interval only when its whole call lies
/// inside it, so a call slowed by a busy machine (asked early, answered late) can never
/// make the count exceed what was decided there; and a load that starts late after the
/// drain is credited the tokens that refilled meanwhile.
fn excess(
    calls: &[(Duration, Duration)],
    rate: f64,
    capacity: f64,
    empty: Option<Duration>,
) -> f64 {
    let mut by_answer = calls.to_vec();
    by_answer.sort_by_key(|c| c.1);
    let mut worst = f64::MIN;
    for &(from, _) in calls {
        let held = empty.map_or(capacity, |e| capacity.min(rate * (from + e).as_secs_f64()));
        // Admissions asked at `from` or later, by when they were answered: the first n
        // lie inside [from, the n-th's answer].
        let mut n = 0.0;
        for &(asked, answered) in &by_answer {
            if asked >= from {
                n += 1.0;
                worst = worst.max(n - held - rate * (answered - from).as_secs_f64());
            }
        }
    }
    worst
}

/// A fixed window of 1 000 per minute leased in slices of up to `max_slice` for 100 ms,
/// its global key, and a chain of that key.
fn global_minute(name: &str, max_slice: u64) -> (Limit, ratekeeper_core::Key, Chain) {
    let limit = Limit::fixed_window(name, 1_000, Duration::from_secs(60))
        .unwrap()
        .leased(max_slice, Duration::from_millis(100))
        .unwrap();
    let key = limit.key(Principal::global());
    let chain = Chain::new().check(&limit, Principal::global());
    (limit, key, chain)
}

async fn wait_for_slices_to_end(stores: &[RedisStore], key: &ratekeeper_core::Key) {
    tokio::time::sleep(LIFETIME + Duration::from_millis(100)).await;
    for s in stores {
        assert_eq!(s.leased_units(key), 0, "a slice outlived its lifetime");
    }
}

/// A fixed window of 500 per 10 s, offered 600 over 1.5 s inside one window.
async fn fixed_window(urls: &[String], cluster: bool, name: &str) {
    let stores = instances(urls, cluster);
    let limit = Limit::fixed_window(name, 500, Duration::from_secs(10))
        .unwrap()
        .leased(25, LIFETIME)
        .unwrap();
    let key = limit.key(Principal::global());
    clear_of_boundary(Duration::from_secs(10), Duration::from_secs(3)).await;
    let load = offer(&stores, &limit, 400.0, Duration::from_millis(1_500)).await;
    let admitted = load.admitted.len() as u64;
    println!(
        "fixed window, {}: offered {}, admitted {admitted} of 500, most held by other instances at a refusal {}",
        if cluster { "cluster" } else { "standalone" },
        admitted + load.refused,
        load.held_at_refusal
    );
    assert!(admitted <= 500, "{admitted} admitted: over the quota");
    assert!(
        admitted >= 400,
        "{admitted} admitted: slices kept too much back"
    );
    assert!(load.refused > 0, "the load never reached the quota");
    // Returned units can undo a refusal before its retry-after: never cached.
    let cached: u64 = stores.iter().map(RedisStore::deny_cache_hits).sum();
    assert_eq!(
        cached, 0,
        "a leased key's refusal was answered from the deny cache"
    );
    // Unused units went back: Redis counts exactly what was admitted.
    wait_for_slices_to_end(&stores, &key).await;
    let d = stores[0].peek(&key).await.unwrap();
    assert_eq!(
        500 - d.remaining(),
        admitted,
        "Redis's count after the slices ended"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_leased_fixed_window_never_admits_more_than_its_quota_across_four_instances() {
    let server = RedisServer::start();
    fixed_window(&[server.url()], false, "lease-fixed").await;
    let c = RedisCluster::start();
    fixed_window(&c.urls(), true, "lease-fixed").await;
}

/// A token bucket (capacity 100, 200 per second), without and with leases (slices of up
/// to 50): emptied first and offered 240 per second for 1.5 s, or full and offered 2 000
/// per second for 0.6 s (the burst). Returns the most admitted in any interval beyond
/// rate × its length, less the capacity when it started full.
async fn bucket(urls: &[String], cluster: bool, full: bool) -> (f64, f64) {
    let mut out = [0.0; 2];
    for (n, leased) in [false, true].into_iter().enumerate() {
        let stores = instances(urls, cluster);
        let mut limit = Limit::token_bucket(
            &format!("lease-bucket-{full}-{n}"),
            100,
            200,
            Duration::from_secs(1),
        )
        .unwrap();
        if leased {
            limit = limit.leased(50, LIFETIME).unwrap();
        }
        let (load, empty) = if full {
            let load = offer(&stores, &limit, 2_000.0, Duration::from_millis(600)).await;
            (load, None)
        } else {
            let drain = Chain::new().check_cost(&limit, Principal::global(), 100);
            let drained = Instant::now();
            assert!(stores[0].check(&drain).await.unwrap().is_allowed());
            let load = offer(&stores, &limit, 240.0, Duration::from_millis(1_500)).await;
            let empty = load.start - drained;
            (load, Some(empty))
        };
        assert!(load.refused > 0, "the load never reached the rate");
        out[n] = excess(&load.admitted, 200.0, 100.0, empty);
    }
    (out[0], out[1])
}

/// A sliding window of 200 per second offered 240 per second for 2.2 s, without and with
/// leases: the most admitted in one whole aligned second (the algorithm's own bound is the
/// quota).
async fn sliding(urls: &[String], cluster: bool) -> (usize, usize) {
    let mut out = [0; 2];
    for (n, leased) in [false, true].into_iter().enumerate() {
        let stores = instances(urls, cluster);
        let mut limit =
            Limit::sliding_window(&format!("lease-sliding-{n}"), 200, Duration::from_secs(1))
                .unwrap();
        if leased {
            limit = limit.leased(10, LIFETIME).unwrap();
        }
        let epoch = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap();
        let length = Duration::from_millis(2_200);
        let load = offer(&stores, &limit, 240.0, length).await;
        assert!(load.refused > 0, "the load never reached the quota");
        // Count per aligned second, whole seconds inside the run only.
        // An admission counts in a second only when its whole call lies inside it.
        let mut per = std::collections::HashMap::<u64, usize>::new();
        for (asked, answered) in &load.admitted {
            let (from, to) = ((epoch + *asked).as_secs(), (epoch + *answered).as_secs());
            if from == to {
                *per.entry(from).or_default() += 1;
            }
        }
        let (first, end) = (epoch.as_secs() + 1, (epoch + length).as_secs());
        out[n] = (first..end)
            .map(|s| per.get(&s).copied().unwrap_or(0))
            .max()
            .unwrap();
    }
    (out[0], out[1])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn leased_buckets_and_sliding_windows_exceed_their_bound_by_at_most_rate_times_lifetime() {
    // 200 per second × 50 ms = 10 units, plus 5 for the bucket's own rounding (each
    // admission counts only where its whole call surely lies: a busy machine stretches the
    // calls and lowers the counts, never raises them).
    let slack = 5.0;
    let lease = 200.0 * LIFETIME.as_secs_f64();
    let server = RedisServer::start();
    let c = RedisCluster::start();
    for (urls, cluster) in [(vec![server.url()], false), (c.urls(), true)] {
        for full in [false, true] {
            let (plain, leased) = bucket(&urls, cluster, full).await;
            println!(
                "token bucket, cluster {cluster}, starting full {full}: most admitted beyond capacity and rate × time {plain:.1} plain, {leased:.1} leased"
            );
            // A bucket admits at most one more than its tokens and rate × time.
            assert!(plain <= 1.0 + slack, "plain bucket: {plain:.1}");
            assert!(leased <= 1.0 + lease + slack, "leased bucket: {leased:.1}");
        }
        let (plain, leased) = sliding(&urls, cluster).await;
        println!(
            "sliding window, cluster {cluster}: most in one aligned second {plain} plain, {leased} leased (quota 200)"
        );
        assert!(
            plain as f64 <= 200.0 + slack,
            "plain sliding window: {plain}"
        );
        assert!(
            leased as f64 <= 200.0 + lease + slack,
            "leased sliding window: {leased}"
        );
    }
}
/// `[user: 1 per hour, everyone (leased): 1 000 per hour]` and the reverse order: 50 users
/// send 3 each, so 100 chains are refused by the user limit. Everyone's count must be
/// exactly the 50 admitted: a leased unit is spent only when the rest of the chain admits.
async fn mixed_chains(stores: Vec<AnyStore>, redis: Option<Vec<RedisStore>>) {
    let hour = Duration::from_secs(3_600);
    for (n, user_first) in [true, false].into_iter().enumerate() {
        // Hour windows aligned to the clock: each round must not straddle two.
        clear_of_boundary(hour, Duration::from_secs(30)).await;
        let user = Limit::fixed_window(&format!("lease-user-{n}"), 1, hour).unwrap();
        let everyone = Limit::fixed_window(&format!("lease-all-{n}"), 1_000, hour)
            .unwrap()
            .leased(20, LIFETIME)
            .unwrap();
        let mut tasks = Vec::new();
        for u in 0..50 {
            let store = stores[u % stores.len()].clone();
            let (user, everyone) = (user.clone(), everyone.clone());
            tasks.push(tokio::spawn(async move {
                let p = Principal::user(format!("m{u}"));
                let chain = if user_first {
                    Chain::new()
                        .check(&user, p)
                        .check(&everyone, Principal::global())
                } else {
                    Chain::new()
                        .check(&everyone, Principal::global())
                        .check(&user, p)
                };
                let mut admitted = 0;
                for _ in 0..3 {
                    if store.check(&chain).await.unwrap().is_allowed() {
                        admitted += 1;
                    }
                }
                admitted
            }));
        }
        let mut admitted = 0;
        for t in tasks {
            admitted += t.await.unwrap();
        }
        assert_eq!(admitted, 50, "each user once");
        let key = everyone.key(Principal::global());
        if let Some(r) = &redis {
            wait_for_slices_to_end(r, &key).await;
        }
        let left = stores[0].peek(&key).await.unwrap().remaining();
        assert_eq!(
            1_000 - left,
            50,
            "everyone's count (user first: {user_first})"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_chain_mixing_leased_and_plain_limits_spends_a_leased_unit_only_when_it_admits() {
    mixed_chains(vec![AnyStore::Memory(MemoryStore::new())], None).await;
    let server = RedisServer::start();
    let r = instances(&[server.url()], false);
    mixed_chains(r.iter().cloned().map(AnyStore::Redis).collect(), Some(r)).await;
    let c = RedisCluster::start();
    let r = instances(&c.urls(), true);
    mixed_chains(r.iter().cloned().map(AnyStore::Redis).collect(), Some(r)).await;
}

/// One instance: a key checked again within the lifetime gets a slice, which doubles while
/// the key stays hot (topped up before it runs dry) up to the largest; answers from it
/// report what the instance knows (Redis's count plus its slice: here, alone, exactly the
/// quota minus what it admitted); a quota lowered at run time ends the slice at the next
/// check, its unused units go back, and exactly the new quota is admitted in all.
async fn slices_and_set_quota(store: RedisStore, server_calls: impl Fn() -> u64) {
    let (limit, key, chain) = global_minute("lease-rt", 64);
    clear_of_boundary(Duration::from_secs(60), Duration::from_secs(3)).await;
    // A quiet key (3 checks per lifetime) is checked plainly: a slice would go back unused.
    let quiet = Chain::new().check(&limit, Principal::user("quiet"));
    let before = server_calls();
    for _ in 0..8 {
        assert!(store.check(&quiet).await.unwrap().is_allowed());
        assert_eq!(store.leased_units(&limit.key(Principal::user("quiet"))), 0);
        tokio::time::sleep(Duration::from_millis(40)).await;
    }
    assert_eq!(
        server_calls() - before,
        8,
        "one call per check of a quiet key"
    );
    let before = server_calls();
    let (mut most_held, mut exact) = (0, 0);
    for i in 0..300 {
        let d = store.check(&chain).await.unwrap();
        assert!(d.is_allowed());
        // Alone, the truth is 999 − i; the instance may not know of units in flight to it
        // (a top-up) or counted after its slice was granted: at most one slice either way.
        let remaining = d.decisions()[0].remaining();
        assert!(remaining.abs_diff(999 - i) <= 64, "check {i}: {remaining}");
        exact += u32::from(remaining == 999 - i);
        most_held = most_held.max(store.leased_units(&key));
    }
    let calls = server_calls() - before;
    println!(
        "300 checks of a hot key: {calls} calls, slices up to {most_held} units, remaining exact in {exact}"
    );
    // Without a lease: 300. With one: 17–29 measured (the slice grows from 2, and a check
    // that finds it empty while a top-up is in flight is sent plainly).
    assert!(calls <= 40, "{calls} calls for 300 checks");
    assert!(most_held > 32, "the slice did not grow: {most_held}");
    assert!(most_held <= 64, "a slice over the largest: {most_held}");
    // The quota drops to 334: the slice's units go back, and exactly 34 more are admitted.
    limit.set_quota(334).unwrap();
    let mut more = 0;
    for _ in 0..100 {
        if store.check(&chain).await.unwrap().is_allowed() {
            more += 1;
        }
    }
    assert_eq!(more, 34, "the new quota reached the slice at once");
    assert_eq!(store.peek(&key).await.unwrap().remaining(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_slice_answers_locally_and_a_changed_quota_reaches_it() {
    let server = RedisServer::start();
    let store = RedisStore::builder(server.url()).build().unwrap();
    store.health().await.unwrap();
    slices_and_set_quota(store, || server.command_calls("evalsha")).await;
    let c = RedisCluster::start();
    let store = RedisStore::cluster_builder(c.urls()).build().unwrap();
    store.health().await.unwrap();
    slices_and_set_quota(store, || {
        c.nodes().iter().map(|n| n.command_calls("evalsha")).sum()
    })
    .await;
}

/// A slice holds what Redis counted: with Redis killed, it keeps answering until it ends,
/// then the store fails as without a lease; a reset drops the slice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slice_answers_while_redis_is_down_until_it_ends_and_a_reset_drops_it() {
    let mut server = RedisServer::start();
    let store = RedisStore::builder(server.url())
        .response_timeout(Duration::from_millis(200))
        .build()
        .unwrap();
    let (_limit, key, chain) = global_minute("lease-down", 50);
    clear_of_boundary(Duration::from_secs(60), Duration::from_secs(2)).await;
    while store.leased_units(&key) < 4 {
        assert!(store.check(&chain).await.unwrap().is_allowed());
    }
    store.reset(&key).await.unwrap();
    assert_eq!(store.leased_units(&key), 0, "a reset drops the slice");
    assert_eq!(store.peek(&key).await.unwrap().remaining(), 1_000);
    while store.leased_units(&key) < 4 {
        assert!(store.check(&chain).await.unwrap().is_allowed());
    }
    server.kill();
    let held = store.leased_units(&key);
    for _ in 0..held {
        let d = store.try_check(&chain).expect("answered from the slice");
        assert!(d.is_allowed());
    }
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert_eq!(store.leased_units(&key), 0, "the slice ended");
    assert!(
        store.check(&chain).await.is_err(),
        "Redis is down and no units are held"
    );
}

#[test]
fn a_lease_that_cannot_work_is_a_config_error() {
    let day = Duration::from_secs(86_400);
    let code = |r: Result<Limit, ratekeeper_core::ConfigError>| r.unwrap_err().code();
    let f = || Limit::fixed_window("l", 100, day).unwrap();
    assert_eq!(code(f().leased(0, LIFETIME)), "limit.lease_invalid");
    assert_eq!(code(f().leased(101, LIFETIME)), "limit.lease_invalid");
    assert_eq!(
        code(f().leased(10, Duration::from_millis(101))),
        "limit.lease_invalid"
    );
    assert_eq!(code(f().leased(10, Duration::ZERO)), "limit.lease_invalid");
    let log = Limit::sliding_log("l", 5, day).unwrap();
    assert_eq!(code(log.leased(1, LIFETIME)), "limit.lease_invalid");
    assert!(f().leased(100, Duration::from_millis(100)).is_ok());
    assert_eq!(
        f().leased(1, LIFETIME).unwrap().lease(),
        None,
        "1: no lease"
    );
}
