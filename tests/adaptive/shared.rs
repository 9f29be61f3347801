//! The shared pacer: worker tasks that take their calls from one token bucket in the store,
//! against an upstream with a hard limit, on the memory store, a real `redis-server` and a
//! real Cluster (real time); and its local fallback when the store dies.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ratekeeper_core::clock::Clock;
use ratekeeper_core::pace::{Aimd, Pace, SharedPacer, Turn};
use ratekeeper_core::{AnyStore, Chain, Limit, MemoryStore, Principal};
use ratekeeper_tests::redis::{RedisCluster, RedisServer};

/// The upstream's hard limit: calls per second (an exact sliding log), then 429 with the
/// exact wait.
const LIMIT: u64 = 50;

struct Upstream {
    store: MemoryStore,
    site: Chain,
    /// (when, admitted) per call, from the start.
    calls: Mutex<Vec<(Duration, bool)>>,
    start: Instant,
}

impl Upstream {
    fn new() -> Arc<Self> {
        let limit = Limit::sliding_log("upstream", LIMIT, Duration::from_secs(1)).unwrap();
        Arc::new(Self {
            store: MemoryStore::new(),
            site: Chain::new().check(&limit, Principal::global()),
            calls: Mutex::new(Vec::new()),
            start: Instant::now(),
        })
    }

    fn call(&self) -> Result<(), Option<Duration>> {
        let d = self.store.check_now(&self.site);
        let ok = d.is_allowed();
        self.calls.lock().unwrap().push((self.start.elapsed(), ok));
        if ok {
            Ok(())
        } else {
            Err(d.denied_by().unwrap().1.retry_after())
        }
    }

    /// (calls, admitted, refused) per second over [from, to).
    fn between(&self, from: Duration, to: Duration) -> (f64, f64, usize) {
        let calls = self.calls.lock().unwrap();
        let window: Vec<bool> = calls
            .iter()
            .filter(|(t, _)| *t >= from && *t < to)
            .map(|&(_, ok)| ok)
            .collect();
        let secs = (to - from).as_secs_f64();
        let admitted = window.iter().filter(|ok| **ok).count();
        (
            window.len() as f64 / secs,
            admitted as f64 / secs,
            window.len() - admitted,
        )
    }
}

fn aimd() -> Aimd {
    Aimd {
        initial: 10.0,
        min: 1.0,
        max: 1_000.0,
        increase: 10.0,
        decrease: 0.5,
        period: Duration::from_millis(500),
    }
}

/// One worker: paces, calls, reports, until `until` (from the upstream's start).
async fn worker(pacer: SharedPacer, upstream: Arc<Upstream>, until: Duration) {
    while upstream.start.elapsed() < until {
        match pacer.acquire("example.org").await {
            Pace::Wait(d) => tokio::time::sleep(d).await,
            Pace::Go => match upstream.call() {
                Ok(()) => pacer.success("example.org"),
                Err(retry) => pacer.rejected("example.org", retry).await,
            },
        }
    }
}

/// Three workers for 8 s, then a fourth for 4 s more.
async fn three_then_four(store: AnyStore) {
    let upstream = Upstream::new();
    let pacer = || SharedPacer::new(store.clone(), "harvest", aimd()).unwrap();
    let s = Duration::from_secs;
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..3 {
        tasks.spawn(worker(pacer(), Arc::clone(&upstream), s(12)));
    }
    tokio::time::sleep(s(8)).await;
    let fourth = pacer();
    tasks.spawn(worker(fourth.clone(), Arc::clone(&upstream), s(12)));
    while let Some(r) = tasks.join_next().await {
        r.unwrap();
    }
    let limit = LIMIT as f64;
    let (start_calls, _, _) = upstream.between(s(0), s(2));
    let (three_calls, three_ok, three_refused) = upstream.between(s(4), s(8));
    let (four_calls, four_ok, four_refused) = upstream.between(s(8), s(12));
    let (_, _, refused) = upstream.between(s(0), s(12));
    let total = upstream.calls.lock().unwrap().len();
    eprintln!(
        "{}: first 2 s {start_calls:.1}/s; 3 workers {three_ok:.1} of {three_calls:.1}/s \
         ({three_refused} refused); 4 workers {four_ok:.1} of {four_calls:.1}/s \
         ({four_refused} refused); {refused} of {total} refused; the 4th saw {} workers",
        store.describe(),
        fourth.workers("example.org"),
    );
    // The combined rate settles between 60% and 100% of the upstream's limit.
    for ok in [three_ok, four_ok] {
        assert!(ok >= 0.6 * limit && ok <= limit, "{ok:.1} of {limit}");
    }
    // The fourth worker takes a share of the same rate: the calls do not jump.
    assert!(
        four_calls <= limit * 1.1,
        "{four_calls:.1} calls/s with 4 workers"
    );
    assert_eq!(fourth.workers("example.org"), 4);
    // Few 429s: under 5% of the calls.
    assert!(refused * 20 <= total, "{refused} of {total} refused");
}

/// Three workers reserve in turn at 20 a second: each is told its own slot, 50 ms after
/// the one before it, in the order they asked; a slot past a caller's bound is not taken.
/// Real time: each slot is known within the call's round trip (the store's clock reads
/// between the ask and the answer), and the spacing is checked within those bounds.
async fn reservations(store: AnyStore) {
    let fixed = Aimd {
        initial: 20.0,
        min: 20.0,
        max: 20.0,
        ..aimd()
    };
    let workers: Vec<SharedPacer> = (0..3)
        .map(|_| SharedPacer::new(store.clone(), "reserve", fixed).unwrap())
        .collect();
    let interval = Duration::from_millis(50);
    let within = Duration::from_secs(10);
    // Each slot as [earliest, latest] on this process's clock.
    let mut slots: Vec<(Instant, Instant)> = Vec::new();
    for k in 0..9 {
        let asked = Instant::now();
        let slot = workers[k % 3].reserve("example.org", within).await;
        let answered = Instant::now();
        let wait = match slot {
            Turn::Now => Duration::ZERO,
            Turn::After(d) => d,
            Turn::Beyond(d) => panic!("slot {k} beyond {within:?}: {d:?}"),
        };
        slots.push((asked + wait, answered + wait));
    }
    let tolerance = Duration::from_millis(1); // the stores count in µs, rounded up
    for k in 1..slots.len() {
        let ((lo0, hi0), (lo1, hi1)) = (slots[k - 1], slots[k]);
        assert!(hi1 + tolerance >= lo0 + interval, "slot {k}: {slots:?}");
        assert!(lo1 <= hi0 + interval + tolerance, "slot {k}: {slots:?}");
    }
    // The next free slot is 450 ms on from the first: past a bound of 1 ms nothing is
    // taken, and the next caller within its bound gets that same slot.
    let asked = Instant::now();
    let Turn::Beyond(d) = workers[0]
        .reserve("example.org", Duration::from_millis(1))
        .await
    else {
        panic!("a slot past the bound was taken");
    };
    assert!(asked + d >= slots[8].0 + interval - tolerance, "{d:?}");
    let asked = Instant::now();
    let Turn::After(again) = workers[1].reserve("example.org", within).await else {
        panic!("no slot within the bound");
    };
    let answered = Instant::now();
    assert!(
        answered + again + tolerance >= slots[8].0 + interval,
        "{again:?}"
    );
    assert!(
        asked + again <= slots[8].1 + interval + tolerance,
        "{again:?}"
    );
}

#[tokio::test]
async fn shared_pacer_memory() {
    let store = || AnyStore::Memory(MemoryStore::new());
    three_then_four(store()).await;
    reservations(store()).await;
}

#[tokio::test]
async fn shared_pacer_standalone_redis() {
    let redis = RedisServer::start();
    three_then_four(redis.store()).await;
    reservations(redis.store()).await;
}

#[tokio::test]
async fn shared_pacer_redis_cluster() {
    let cluster = RedisCluster::start();
    three_then_four(cluster.store()).await;
    reservations(cluster.store()).await;
}

/// Redis killed: each worker paces on its own at its share of the last rate, and goes
/// back to the shared rate once Redis is back.
#[tokio::test]
async fn a_dead_store_leaves_each_worker_its_share_of_the_last_rate() {
    let mut redis = RedisServer::start();
    let aimd = Aimd {
        initial: 30.0,
        ..aimd()
    };
    let workers: Vec<SharedPacer> = (0..3)
        .map(|_| SharedPacer::new(redis.store(), "harvest", aimd).unwrap())
        .collect();
    for w in &workers {
        // Every worker registers (and the slots are taken: 30 a second).
        let _ = w.acquire("example.org").await;
    }
    assert_eq!(workers[2].workers("example.org"), 3);
    redis.kill();
    let w = &workers[2];
    let began = Instant::now();
    let mut went = 0;
    while began.elapsed() < Duration::from_millis(900) {
        match w.acquire("example.org").await {
            Pace::Go => went += 1,
            Pace::Wait(d) => tokio::time::sleep(d).await,
        }
    }
    assert!(w.is_local("example.org"));
    assert!((w.rate("example.org") - 10.0).abs() < 1e-9, "a third of 30");
    // About 10 calls a second: the first at once, then one every 100 ms.
    assert!((8..=11).contains(&went), "{went} calls in 0.9 s");
    redis.restart();
    // The store is asked again a second after each failure (the first command on a
    // reconnecting connection may fail too).
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_millis(1_100)).await;
        let _ = w.acquire("example.org").await;
        if !w.is_local("example.org") {
            break;
        }
    }
    assert!(!w.is_local("example.org"), "back on the shared rate");
}

/// Hours: a period of an hour, on a fake clock. Rejections from two workers within the
/// hour decrease the shared rate once; an hour later, once more; an hour's worth of
/// successes (from both workers) adds one step; the state outlives a quiet night.
#[tokio::test]
async fn periods_of_hours_on_a_fake_clock() {
    let clock = ratekeeper_core::clock::FakeClock::at_micros(1_799_971_200_000_000);
    let store = AnyStore::Memory(MemoryStore::builder().clock(clock.clone()).build().unwrap());
    let hour = Duration::from_secs(3_600);
    // 120 calls an hour to start, 60 more per quiet hour.
    let aimd = Aimd {
        initial: 120.0 / 3_600.0,
        min: 1.0 / 3_600.0,
        max: 10.0,
        increase: 60.0 / 3_600.0,
        decrease: 0.5,
        period: hour,
    };
    let a = SharedPacer::new(store.clone(), "hourly", aimd).unwrap();
    let b = SharedPacer::new(store.clone(), "hourly", aimd).unwrap();
    // A worker that stays counted for a day after its one call (the default: 60 s).
    let c = SharedPacer::new(store, "hourly", aimd)
        .unwrap()
        .registration(24 * hour);
    let per_hour = |p: &SharedPacer| (p.rate("site") * 3_600.0 * 1e6).round() / 1e6;
    assert_eq!(a.acquire("site").await, Pace::Go);
    assert!(matches!(c.acquire("site").await, Pace::Wait(_))); // registered all the same
    a.rejected("site", None).await;
    clock.advance(Duration::from_secs(1_800));
    b.rejected("site", None).await;
    let _ = b.acquire("site").await;
    assert_eq!(per_hour(&b), 60.0, "one decrease within the hour");
    clock.advance(Duration::from_secs(1_801));
    a.rejected("site", None).await;
    let _ = a.acquire("site").await;
    assert_eq!(per_hour(&a), 30.0, "an hour later, one more");
    // An hour of calls at the pace the two workers are given, every one a success: one
    // step, from 30 to about 90 an hour.
    let start = clock.now_micros();
    let mut calls = 0;
    while clock.now_micros() - start < 3_600_000_000 {
        let w = if calls % 2 == 0 { &a } else { &b };
        match w.acquire("site").await {
            Pace::Wait(d) => clock.advance(d),
            Pace::Go => {
                calls += 1;
                w.success("site");
            }
        }
    }
    let _ = b.acquire("site").await;
    let _ = a.acquire("site").await;
    let rate = per_hour(&a);
    assert!(
        (85.0..=92.0).contains(&rate),
        "{rate} an hour after {calls} calls"
    );
    // A quiet night: the rate is remembered (6 h by default, from the last call).
    clock.advance(5 * hour);
    let _ = a.acquire("site").await;
    assert!((per_hour(&a) - rate).abs() < 1e-6);
    // Quiet for longer than that: forgotten, back to the initial rate.
    clock.advance(7 * hour);
    let _ = a.acquire("site").await;
    assert_eq!(per_hour(&a), 120.0);
    // b's registration lapsed a minute after its last call; c's lasts a day.
    assert_eq!(a.workers("site"), 2);
}
