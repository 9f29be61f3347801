//! Calendar quotas in real time on every store: a day whose zone is the fixed offset that
//! puts local midnight a few seconds ahead, so a boundary is crossed while the test runs.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ratekeeper_core::calendar::{Calendar, Period};
use ratekeeper_core::{AnyStore, Chain, Limit, MemoryStore, Principal, Store};
use ratekeeper_tests::redis::{RedisCluster, RedisServer};

use crate::support::{cluster, run, server_now, standalone};

const DAY_US: u64 = 86_400_000_000;
/// How far (µs) a store's clock may stand from this process's wall clock: the memory
/// store's is an anchor plus monotonic time, read at a slightly different moment.
const SLACK: u64 = 50_000;

fn now_us() -> u64 {
    u64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_micros(),
    )
    .unwrap()
}

/// A day calendar whose local midnight falls `ahead` seconds from now, rounded to a whole
/// second: the calendar and the boundary (µs since the epoch). The offset is within ±12 h.
fn midnight_in(ahead: u64) -> (Calendar, u64) {
    let boundary = (now_us() / 1_000_000 + ahead) * 1_000_000;
    let utc = (boundary / 1_000_000 % 86_400) as i64;
    // Local time = UTC + offset; midnight at the boundary: offset = -utc (mod a day).
    let mut offset = (86_400 - utc) % 86_400;
    if offset > 43_200 {
        offset -= 86_400;
    }
    let sign = if offset < 0 { '-' } else { '+' };
    let a = offset.unsigned_abs();
    let zone = format!("{sign}{:02}:{:02}:{:02}", a / 3600, a / 60 % 60, a % 60);
    (Calendar::new(Period::Day, &zone).unwrap(), boundary)
}

async fn sleep_until(at: u64) {
    let now = now_us();
    if at > now {
        tokio::time::sleep(Duration::from_micros(at - now)).await;
    }
}

/// What the Redis servers behind a store hold: the period keys' counts and PTTLs.
struct Servers<'a>(Vec<&'a RedisServer>);

impl Servers<'_> {
    /// The count and PTTL (ms) of `key` on whichever server holds it.
    fn read(&self, key: &str) -> Option<(u64, i64)> {
        self.0.iter().find_map(|s| {
            let v = s.cli(&["GET", key]);
            let count = v.trim().parse().ok()?;
            let ttl = s.cli(&["PTTL", key]).trim().parse().ok()?;
            Some((count, ttl))
        })
    }
}

/// The calendar case on one store (`servers`: its Redis servers, none for memory).
async fn crossing(store: &AnyStore, servers: &Servers<'_>, tag: &str) {
    let (cal, boundary) = midnight_in(8);
    let limit = Limit::calendar(&format!("{tag}-day"), 3, cal.clone()).unwrap();
    let p = Principal::user("u");
    let chain = Chain::new().check(&limit, p.clone());
    let redis = match store {
        AnyStore::Redis(r) => Some(r),
        _ => None,
    };
    // The period before the boundary: three admitted, then refused until the boundary.
    let started = now_us();
    let (s, ds) = run(store, &chain, 4).await;
    let after = now_us();
    assert!(after < boundary, "the run ended before the boundary");
    assert_eq!(s, "AAAD", "{tag}");
    let first = ds[0].decisions()[0];
    assert_eq!(first.window(), Duration::from_secs(86_400), "{tag}: a day");
    let refused = ds[3].denied_by().unwrap().1;
    let retry = u64::try_from(refused.retry_after().unwrap().as_micros()).unwrap();
    // Retry-after is the wait to the boundary (as seen between the check's start and end;
    // the memory store's clock, an anchor plus monotonic time, may stand a little apart
    // from this wall clock: `SLACK`).
    assert!(
        retry <= boundary - started + SLACK && retry + SLACK >= boundary - after,
        "{tag}: retry {retry} µs, boundary in {} µs",
        boundary - after
    );
    let refused_reset = u64::try_from(refused.reset_after().as_micros()).unwrap();
    assert_eq!(refused_reset, retry, "{tag}: the reset is the boundary too");
    if let Some(r) = redis {
        let key = &r.key_names(&limit.key(p.clone()))[1];
        let (count, ttl) = servers.read(key).unwrap_or_else(|| {
            let keys: Vec<String> = servers.0.iter().map(|s| s.cli(&["KEYS", "*"])).collect();
            panic!("{tag}: no {key} among {keys:?}")
        });
        let left_ms = i64::try_from((boundary - now_us()) / 1000).unwrap();
        assert_eq!(count, 3, "{tag}: {key}");
        assert!(
            ttl >= left_ms && ttl <= left_ms + 1_000 + 50,
            "{tag}: PTTL {ttl} ms, the boundary in {left_ms} ms, the slack 1 s"
        );
    }

    // Refused again before the boundary: on Redis from the deny cache, which holds a
    // refusal no longer than its retry-after, the boundary (the run after it is admitted).
    let (s, _) = run(store, &chain, 1).await;
    assert!(now_us() < boundary, "{tag}: still before the boundary");
    assert_eq!(s, "D", "{tag}");
    if let Some(r) = redis {
        assert!(r.deny_cache_hits() >= 1, "{tag}: answered from the cache");
    }

    // Across the boundary, two tasks checking all the while: each admitted check counted
    // in one period only (its reset says which), restarting at the boundary.
    sleep_until(boundary - 300_000).await;
    let quota_store = store.clone();
    let big = Limit::calendar(&format!("{tag}-across"), 10_000, cal).unwrap();
    let mut tasks = Vec::new();
    for t in 0..2 {
        let (store, big) = (quota_store.clone(), big.clone());
        tasks.push(tokio::spawn(async move {
            let chain = Chain::new().check(&big, Principal::user("v"));
            let mut seen = Vec::new();
            while now_us() < boundary + 300_000 {
                let d = store.check(&chain).await.unwrap();
                seen.push((t, d.decisions()[0]));
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            seen
        }));
    }
    let mut before = Vec::new();
    let mut after_b = Vec::new();
    for t in tasks {
        for (_, d) in t.await.unwrap() {
            assert!(d.is_allowed(), "{tag}: well under the quota");
            // Counted before the boundary: it resets within a second; after, in a day.
            if d.reset_after() < Duration::from_secs(3600) {
                before.push(d.remaining());
            } else {
                after_b.push(d.remaining());
            }
        }
    }
    for (side, rem) in [("before", &mut before), ("after", &mut after_b)] {
        rem.sort_unstable_by(|a, b| b.cmp(a));
        let expected: Vec<u64> = (0..rem.len() as u64).map(|i| 9_999 - i).collect();
        assert_eq!(
            *rem, expected,
            "{tag}: {side} the boundary, each count once"
        );
    }
    assert!(
        !before.is_empty() && !after_b.is_empty(),
        "{tag}: checks on both sides ({} and {})",
        before.len(),
        after_b.len()
    );
    if let Some(r) = redis {
        let names = r.key_names(&big.key(Principal::user("v")));
        // Named now (after the boundary): the period before, the new one, the next.
        let old = servers.read(&names[0]).expect("the old period's key").0;
        let new = servers.read(&names[1]).expect("the new period's key");
        assert_eq!(
            (old, new.0),
            (before.len() as u64, after_b.len() as u64),
            "{tag}: each key holds its period's checks"
        );
        let day_ms = i64::try_from(DAY_US / 1000).unwrap();
        assert!(
            new.1 > day_ms - 5_000 && new.1 <= day_ms + 1_000,
            "{tag}: the new period's PTTL {} ms: to its end and the slack",
            new.1
        );
    }

    // The first limit restarted at the boundary: three again.
    let (s, ds) = run(store, &chain, 4).await;
    assert_eq!(s, "AAAD", "{tag}: a new period, a new count");
    assert!(ds[3].denied_by().unwrap().1.retry_after().unwrap() > Duration::from_secs(86_000));
    let peek = store.peek(&limit.key(p)).await.unwrap();
    assert_eq!(peek.remaining(), 0, "{tag}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_day_restarts_at_its_boundary_on_memory() {
    crossing(
        &AnyStore::Memory(MemoryStore::new()),
        &Servers(vec![]),
        "mem",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_day_restarts_at_its_boundary_on_redis() {
    let server = RedisServer::start();
    crossing(&standalone(&server.url()), &Servers(vec![&server]), "redis").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_day_restarts_at_its_boundary_on_a_cluster() {
    let c = RedisCluster::start();
    let servers = Servers(c.nodes().iter().collect());
    crossing(&cluster(&c.urls()), &servers, "cluster").await;
}

/// The server's clock, not the instance's, picks the period: a server two days off names
/// a day the instance's clock would not (RELIABILITY: whose clock decides).
#[tokio::test]
async fn an_instance_two_days_off_the_servers_clock_counts_in_the_servers_day() {
    for offset in ["+2d", "-2d"] {
        let server = RedisServer::start_with_clock_offset(offset);
        let store = crate::support::one_call_a_check(server.url());
        server.cli(&["SCRIPT", "LOAD", crate::support::CHAIN_LUA]);
        let cal = Calendar::new(Period::Day, "UTC").unwrap();
        let limit = Limit::calendar("skew-day", 5, cal.clone()).unwrap();
        let chain = Chain::new().check(&limit, Principal::user("u"));
        let day = |t: u64| {
            let at = ratekeeper_core::calendar::Timestamp::from_microsecond(t as i64).unwrap();
            cal.span(at)
        };
        server.cli(&["CONFIG", "RESETSTAT"]);
        let before = day(server_now(&server));
        assert_ne!(
            before.number(),
            day(now_us()).number(),
            "{offset}: the server's day is not this machine's"
        );
        let mut admitted = 0;
        for _ in 0..8 {
            admitted += u32::from(store.check(&chain).await.unwrap().is_allowed());
        }
        if day(server_now(&server)) != before {
            // The server's day turned meanwhile: no exact count to compare.
            continue;
        }
        assert_eq!(admitted, 5, "{offset}: exactly the quota");
        // The first call was sent twice (it named this machine's days); the estimate
        // learned from its answer named the server's after that.
        assert_eq!(server.command_calls("evalsha"), 9, "{offset}");
        let name = store.key_name(&limit.key(Principal::user("u")));
        let key = format!("{name}:{}", before.number());
        assert_eq!(server.cli(&["GET", &key]).trim(), "5", "{offset}: {key}");
        let all = server.cli(&["--scan", "--pattern", &format!("{name}:*")]);
        assert_eq!(all.lines().count(), 1, "{offset}: {all}");
        // Its TTL: the server's day's end by the server's clock, plus the slack (1 s).
        let pttl: u64 = server.cli(&["PTTL", &key]).trim().parse().unwrap();
        let end = u64::try_from(before.end().as_microsecond()).unwrap();
        let left_ms = (end - server_now(&server)) / 1000;
        assert!(
            pttl >= left_ms && pttl <= left_ms + 1_000 + 50,
            "{offset}: PTTL {pttl} ms, the day ends in {left_ms} ms"
        );
    }
}

/// A calendar quota in chains (all or nothing across a Cluster's slots: the principals
/// differ), charged with an overdraw, counted with every limit charged, and reset.
async fn everywhere(store: &AnyStore, tag: &str) {
    let (cal, _) = midnight_in(6 * 3600);
    let plan = Limit::calendar(&format!("{tag}-plan"), 5, cal).unwrap();
    let minute = Duration::from_secs(60);
    let second = Limit::fixed_window(&format!("{tag}-second"), 2, minute).unwrap();
    let (a, b) = (Principal::user("a"), Principal::user("b"));
    crate::support::clear_of_boundary(minute, Duration::from_secs(5)).await;
    // The plan first, then a tighter limit of another principal: its refusal gives the
    // plan's unit back (on a Cluster, the refund script, in the plan's period key).
    let chain = Chain::new()
        .check(&plan, a.clone())
        .check(&second, b.clone());
    let (s, _) = run(store, &chain, 3).await;
    assert_eq!(s, "AAD", "{tag}");
    let left = store.peek(&plan.key(a.clone())).await.unwrap().remaining();
    assert_eq!(left, 3, "{tag}: the refused chain's unit given back");
    // The plan last: its refusal charges nothing before it.
    let wide = Limit::fixed_window(&format!("{tag}-wide"), 100, minute).unwrap();
    let chain = Chain::new().check(&wide, b.clone()).check(&plan, a.clone());
    let (s, _) = run(store, &chain, 5).await;
    assert_eq!(s, "AAADD", "{tag}");
    let wide_left = store.peek(&wide.key(b.clone())).await.unwrap().remaining();
    assert_eq!(wide_left, 97, "{tag}: only the admitted chains charged");
    // Reset: a new count in this period.
    store.reset(&plan.key(a.clone())).await.unwrap();
    assert_eq!(
        store.peek(&plan.key(a.clone())).await.unwrap().remaining(),
        5,
        "{tag}"
    );
    // A cost known after the work overdraws; a chain charging every limit counts too.
    let d = store
        .charge(&ratekeeper_core::Check::new(plan.key(a.clone()), 7))
        .await
        .unwrap();
    assert_eq!(d.remaining(), 0, "{tag}");
    let all = Chain::charge_all()
        .check(&plan, a.clone())
        .check(&wide, b.clone());
    let (s, _) = run(store, &all, 1).await;
    assert_eq!(s, "D", "{tag}");
    let wide_left = store.peek(&wide.key(b)).await.unwrap().remaining();
    assert_eq!(wide_left, 96, "{tag}: charged though the plan refused");
    let peek = store.peek(&plan.key(a)).await.unwrap();
    assert!(!peek.would_admit(1), "{tag}");
}

#[tokio::test]
async fn a_calendar_quota_in_chains_charges_and_resets_on_every_store() {
    everywhere(&AnyStore::Memory(MemoryStore::new()), "mem").await;
    let server = RedisServer::start();
    everywhere(&standalone(&server.url()), "redis").await;
    let c = RedisCluster::start();
    everywhere(&cluster(&c.urls()), "cluster").await;
}

/// Each principal counted from its own billing day: its decisions wait for its own
/// boundary, and on Redis its count is in the key of its own period.
async fn anchors(store: &AnyStore, servers: &Servers<'_>, tag: &str) {
    use ratekeeper_core::Check;
    use ratekeeper_core::calendar::{Anchor, Timestamp};
    let month = Calendar::new(Period::Month, "UTC").unwrap();
    let plan = Limit::calendar(&format!("{tag}-billing"), 3, month.clone()).unwrap();
    let days = [
        ("own", None),
        ("first", Some(Anchor::day(1).unwrap())),
        ("last", Some(Anchor::day(31).unwrap().at(9, 30).unwrap())),
        ("mid", Some(Anchor::day(16).unwrap().at(23, 59).unwrap())),
    ];
    for (who, anchor) in days {
        let mut key = plan.key(Principal::user(who));
        let mut cal = month.clone();
        if let Some(a) = anchor {
            key = key.anchored(a);
            cal = cal.anchored(a);
        }
        let mut chain = Chain::new();
        chain.push(Check::new(key.clone(), 1));
        let before = now_us();
        let d = store.check(&chain).await.unwrap();
        let after = now_us();
        let span = cal.span(Timestamp::from_microsecond(before as i64).unwrap());
        let end = u64::try_from(span.end().as_microsecond()).unwrap();
        let start = u64::try_from(span.start().as_microsecond()).unwrap();
        let d = d.decisions()[0];
        assert!(d.is_allowed(), "{tag} {who}");
        assert_eq!(
            d.window(),
            Duration::from_micros(end - start),
            "{tag} {who}"
        );
        let reset = u64::try_from(d.reset_after().as_micros()).unwrap();
        assert!(
            reset <= end - before + SLACK && reset + SLACK >= end - after,
            "{tag} {who}: reset {reset} µs, the period ends in {} µs",
            end - before
        );
        if let AnyStore::Redis(r) = store {
            let names = r.key_names(&key);
            assert!(
                names[1].ends_with(&format!(":{}", span.number())),
                "{tag} {who}: {names:?}"
            );
            assert_eq!(
                servers.read(&names[1]).map(|(c, _)| c),
                Some(1),
                "{tag} {who}"
            );
        }
    }
}

#[tokio::test]
async fn each_principal_counts_from_its_own_anchor_on_every_store() {
    anchors(
        &AnyStore::Memory(MemoryStore::new()),
        &Servers(vec![]),
        "mem",
    )
    .await;
    let server = RedisServer::start();
    anchors(&standalone(&server.url()), &Servers(vec![&server]), "redis").await;
    let c = RedisCluster::start();
    let servers = Servers(c.nodes().iter().collect());
    anchors(&cluster(&c.urls()), &servers, "cluster").await;
}

/// A customer upgraded mid-period gets its new quota at once, on every instance, counted
/// against what the period has used (its own anchor kept).
async fn upgrade(make: impl Fn() -> AnyStore, tag: &str) {
    use ratekeeper_core::calendar::Anchor;
    use ratekeeper_core::fleet::Fleet;
    use ratekeeper_core::{Check, FailurePolicy, Limiter};
    let month = Calendar::new(Period::Month, "Europe/Berlin").unwrap();
    let name = format!("{tag}-upgrade");
    // Two instances: each its own limit, fleet and limiter (on Redis, its own connection).
    let mut instances = Vec::new();
    for _ in 0..2 {
        let store = make();
        let limit = Limit::calendar(&name, 3, month.clone()).unwrap();
        let fleet = Fleet::new(store.clone(), [limit.clone()]);
        fleet.sync().await.unwrap();
        let run = tokio::spawn(fleet.clone().run(Duration::from_millis(100)));
        instances.push((limit, fleet, Limiter::new(store), run));
    }
    let customer = Principal::user("acme");
    let anchor = Anchor::day(20).unwrap().at(8, 0).unwrap();
    let admitted = |i: usize, n: usize| {
        let (limit, _, limiter, _) = &instances[i];
        let key = limit.key(customer.clone()).anchored(anchor);
        async move {
            let mut s = String::new();
            for _ in 0..n {
                let mut chain = Chain::new();
                chain.push(Check::new(key.clone(), 1));
                let answer = limiter.check(&chain, FailurePolicy::Closed).await;
                s.push(if answer.is_allowed() { 'A' } else { 'D' });
            }
            s
        }
    };
    assert_eq!(admitted(0, 4).await, "AAAD", "{tag}: the plan's 3");
    instances[0]
        .1
        .set_override(&name, &customer, 5)
        .await
        .unwrap();
    // Applied by the other instance within its next read (a notice, or 100 ms).
    let started = std::time::Instant::now();
    while instances[1].0.overrides().is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{tag}: not applied"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // 3 used of 5: two more, on the other instance, in the same period.
    assert_eq!(admitted(1, 3).await, "AAD", "{tag}: the new quota at once");
    assert_eq!(admitted(0, 1).await, "D", "{tag}");
    for (.., run) in instances {
        run.abort();
    }
}

#[tokio::test]
async fn an_upgrade_mid_period_applies_at_once_on_every_store() {
    let memory = MemoryStore::new();
    upgrade(|| AnyStore::Memory(memory.clone()), "mem").await;
    let server = RedisServer::start();
    upgrade(|| standalone(&server.url()), "redis").await;
    let c = RedisCluster::start();
    upgrade(|| cluster(&c.urls()), "cluster").await;
}
