//! What only Redis can get wrong: key hygiene, one command per chain, expiries kept or set,
//! corrupt or foreign state, the server's clock, de-duplication, the eviction policy.

use std::time::Duration;

use ratekeeper_core::store::Dedupe;
use ratekeeper_core::{
    AnyStore, Chain, Limit, MemoryStore, Outcome, Principal, PrincipalKind, RedisStore, Store,
};
use ratekeeper_tests::redis::RedisServer;

use crate::support::standalone;

/// Every key: a TTL (at most `max_ms`; one that just ran out is fine); a name of at most
/// 200 bytes.
/// Returns how many keys the server holds.
pub(crate) fn assert_key_hygiene(server: &RedisServer, max_ms: i64) -> usize {
    let keys = server.cli(&["--scan"]);
    let keys: Vec<&str> = keys.lines().filter(|k| !k.is_empty()).collect();
    let n = keys.len();
    for k in keys {
        assert!(k.len() <= 200, "{} bytes: {k}", k.len());
        let ttl: i64 = server.cli(&["PTTL", k]).trim().parse().unwrap();
        // -2: expired between the scan and this look (a one-second window's key), and 0:
        // expiring this millisecond, which is what a TTL is for; -1 (none) is the fault.
        assert!(ttl == -2 || (0..=max_ms).contains(&ttl), "{k}: PTTL {ttl}");
    }
    n
}

#[tokio::test]
async fn keys_stay_short_and_literal_input_stays_literal() {
    let server = RedisServer::start();
    let store = standalone(&server.url());
    let l = Limit::fixed_window("hygiene", 5, Duration::from_secs(60)).unwrap();
    let before: u64 = server.cli(&["DBSIZE"]).trim().parse().unwrap();
    for p in [
        Principal::user(vec![b'x'; 1 << 20]),
        Principal::user("\r\n*1\r\n$8\r\nFLUSHALL\r\n"),
        Principal::user("{tag}"),
        Principal::user("a:b"),
        Principal::new(PrincipalKind::Participant, "p1"),
    ] {
        assert!(
            store
                .check(&Chain::new().check(&l, p))
                .await
                .unwrap()
                .is_allowed()
        );
    }
    let after: u64 = server.cli(&["DBSIZE"]).trim().parse().unwrap();
    assert_eq!(
        after - before,
        5,
        "each request wrote its own key and nothing else"
    );
    assert!(assert_key_hygiene(&server, 61_000) >= 5);
}

#[tokio::test]
async fn a_four_limit_chain_over_four_principals_is_one_evalsha() {
    let server = RedisServer::start();
    let redis = RedisStore::builder(server.url()).build().unwrap();
    redis.health().await.unwrap(); // loads the script
    let store = AnyStore::Redis(redis);
    let minute = Duration::from_secs(60);
    let limits = [
        Limit::sliding_window("burst", 1_000, minute).unwrap(),
        Limit::fixed_window("visitor-game", 1_000, Duration::from_secs(86_400)).unwrap(),
        Limit::fixed_window("game", 1_000, Duration::from_secs(86_400)).unwrap(),
        Limit::fixed_window("everyone", 1_000, Duration::from_secs(86_400)).unwrap(),
    ];
    let chain = Chain::new()
        .check(&limits[0], Principal::ip([198, 51, 100, 7].into()))
        .check(
            &limits[1],
            Principal::composite(PrincipalKind::custom("vg").unwrap(), ["198.51.100.7", "g1"]),
        )
        .check(
            &limits[2],
            Principal::new(PrincipalKind::custom("game").unwrap(), "g1"),
        )
        .check(&limits[3], Principal::global());
    server.cli(&["CONFIG", "RESETSTAT"]);
    for _ in 0..50 {
        assert!(store.check(&chain).await.unwrap().is_allowed());
    }
    let calls = server.command_stats();
    // The client sent EVALSHA only; Redis also counts the commands the script runs inside
    // (GET, INCRBY, HGET, HINCRBY, …, TIME), which are not round trips.
    assert_eq!(server.command_calls("evalsha"), 50, "{calls:?}");
    for (name, _) in &calls {
        assert!(
            matches!(
                name.as_str(),
                "evalsha"
                    | "mget"
                    | "get"
                    | "set"
                    | "incrby"
                    | "hget"
                    | "hset"
                    | "hincrby"
                    | "del"
                    | "pexpire"
                    | "time"
                    | "config|resetstat"
            ),
            "unexpected command {name}: {calls:?}"
        );
    }
}

#[tokio::test]
async fn corrupt_foreign_and_future_state_never_panics_or_locks_out() {
    let server = RedisServer::start();
    let redis = RedisStore::builder(server.url()).build().unwrap();
    let minute = Duration::from_secs(60);
    let limits = [
        Limit::fixed_window("c-fixed", 3, minute).unwrap(),
        Limit::sliding_window("c-sliding", 3, minute).unwrap(),
        Limit::sliding_log("c-log", 3, minute).unwrap(),
        Limit::token_bucket("c-bucket", 3, 3, minute).unwrap(),
        Limit::ban("c-ban", 3, minute, minute).unwrap(),
    ];
    for (i, limit) in limits.iter().enumerate() {
        for (j, seed) in [
            ["SET", "abc"],
            ["SET", "9e15"],
            ["SET", "1 2 3 4 5"],
            ["HSET", "f"],
        ]
        .iter()
        .enumerate()
        {
            let p = Principal::ip(std::net::IpAddr::from([10, 0, i as u8, j as u8]));
            // Every key that may hold the state now (a window's: the windows around now).
            for name in redis.key_names(&limit.key(p.clone())) {
                if seed[0] == "HSET" {
                    server.cli(&["HSET", &name, "f", "v"]);
                } else {
                    server.cli(&["SET", &name, seed[1]]);
                }
            }
            let d = redis.check(&Chain::new().check(limit, p)).await.unwrap();
            let decision = d.decisions()[0];
            match decision.outcome() {
                Outcome::Allowed => {}
                // A time from the future may count as debt, but never a huge wait.
                _ => assert!(
                    decision.retry_after().unwrap() <= Duration::from_secs(120),
                    "{limit:?} {seed:?}"
                ),
            }
        }
    }
    // A shared pacer's state, corrupt or from the future: paced, never stalled past the
    // longest pause (an hour).
    let aimd = ratekeeper_core::pace::Aimd {
        initial: 10.0,
        ..ratekeeper_core::pace::Aimd::default()
    };
    let store = ratekeeper_core::AnyStore::Redis(redis.clone());
    for (i, seed) in ["abc", "1 2 x 4", "1e300 9e15 9e15 0", "0 0 0 0"]
        .iter()
        .enumerate()
    {
        let scope = format!("site{i}");
        let name = format!("rl:v3:{{x.pacer:{scope}}}:pacer:harvest");
        server.cli(&["SET", &name, seed]);
        let pacer =
            ratekeeper_core::pace::SharedPacer::new(store.clone(), "harvest", aimd).unwrap();
        let pace = pacer.acquire(&scope).await;
        assert!(
            pace == ratekeeper_core::pace::Pace::Go
                || matches!(pace, ratekeeper_core::pace::Pace::Wait(d) if d <= Duration::from_secs(3_600)),
            "{seed}: {pace:?}"
        );
        assert!(!pacer.is_local(&scope), "{seed}: the store answered");
    }
}

#[tokio::test]
async fn retry_after_comes_from_the_redis_clock() {
    let server = RedisServer::start();
    let redis = RedisStore::builder(server.url()).build().unwrap();
    let hour = Duration::from_secs(3_600);
    let limit = Limit::fixed_window("skew", 5, hour).unwrap();
    let key = redis.key_name(&limit.key(Principal::user("u")));
    // Fill the window of the server's current hour, by the server's own clock.
    let time = server.cli(&["TIME"]);
    let mut parts = time.lines().map(|l| l.trim().parse::<u64>().unwrap());
    let now = parts.next().unwrap() * 1_000_000 + parts.next().unwrap();
    let w = 3_600_000_000u64;
    let window = now / w;
    let chain = Chain::new().check(&limit, Principal::user("u"));
    for _ in 0..5 {
        assert!(redis.check(&chain).await.unwrap().is_allowed());
    }
    // The window's own key, named by the server's window.
    let key = format!("{key}:{window}");
    assert!(
        !server.cli(&["PTTL", &key]).starts_with('-'),
        "{key} is set"
    );
    let d = redis.check(&chain).await.unwrap();
    let retry = d.denied_by().unwrap().1.retry_after().unwrap();
    let expected = Duration::from_micros((window + 1) * w - now);
    assert!(
        retry <= expected && expected - retry < Duration::from_secs(2),
        "{retry:?} vs {expected:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn webhook_deliveries_are_processed_once_across_instances() {
    let server = RedisServer::start();
    let a = RedisStore::builder(server.url()).build().unwrap();
    let b = RedisStore::builder(server.url()).build().unwrap();
    let day = Duration::from_secs(86_400);
    let mut tasks = Vec::new();
    for i in 0..32 {
        let s = if i % 2 == 0 { a.clone() } else { b.clone() };
        tasks.push(tokio::spawn(async move {
            s.first_seen("delivery-42", day).await.unwrap()
        }));
    }
    let mut firsts = 0;
    for t in tasks {
        firsts += u32::from(t.await.unwrap());
    }
    assert_eq!(firsts, 1);
    // Processing failed: release, and the sender's retry is processed.
    a.release("delivery-42").await.unwrap();
    assert!(b.first_seen("delivery-42", day).await.unwrap());
    assert!(!a.first_seen("delivery-42", day).await.unwrap());
    let ttl: i64 = server
        .cli(&["PTTL", "rl:v3:{x.dedupe:delivery-42}"])
        .trim()
        .parse()
        .unwrap();
    assert!(ttl > 86_000_000 && ttl <= 86_400_000, "{ttl}");
}

#[tokio::test]
async fn an_evicting_memory_policy_is_reported() {
    let server = RedisServer::start();
    let redis = RedisStore::builder(server.url()).build().unwrap();
    assert_eq!(redis.check_eviction_policy().await.unwrap(), ["noeviction"]);
    server.cli(&["CONFIG", "SET", "maxmemory-policy", "volatile-lru"]);
    assert_eq!(
        redis.check_eviction_policy().await.unwrap(),
        ["volatile-lru"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_memory_store_deduplicates_too() {
    let store = MemoryStore::new();
    let day = Duration::from_secs(86_400);
    let mut tasks = Vec::new();
    for _ in 0..32 {
        let s = store.clone();
        tasks.push(tokio::spawn(async move {
            s.first_seen("d-1", day).await.unwrap()
        }));
    }
    let mut firsts = 0;
    for t in tasks {
        firsts += u32::from(t.await.unwrap());
    }
    assert_eq!(firsts, 1);
    store.release("d-1").await.unwrap();
    assert!(store.first_seen("d-1", day).await.unwrap());
    // Expired ids are seen afresh.
    assert!(
        store
            .first_seen("short", Duration::from_millis(1))
            .await
            .unwrap()
    );
    tokio::time::sleep(Duration::from_millis(5)).await;
    assert!(store.first_seen("short", day).await.unwrap());
}

#[tokio::test]
async fn a_refused_config_get_is_reported_as_unchecked() {
    // Managed Redis services often disable CONFIG; the check must say it could not look.
    let server = RedisServer::start_with(
        ratekeeper_tests::redis::free_port(),
        &["--rename-command", "CONFIG", ""],
    );
    let redis = RedisStore::builder(server.url()).build().unwrap();
    assert!(redis.check_eviction_policy().await.is_err());
    // Limiting itself does not need CONFIG.
    let l = Limit::fixed_window("no-config", 1, Duration::from_secs(60)).unwrap();
    assert!(
        redis
            .check(&Chain::new().check(&l, Principal::user("u")))
            .await
            .unwrap()
            .is_allowed()
    );
}

/// A window's key is counted with `INCRBY` (a sliding window's, a hash, with `HINCRBY`),
/// which keeps its expiry, and given one (`PEXPIRE`: the window's end plus the slack) only
/// when the charge made it: a later check never pushes the expiry back; the next window is
/// a new key with its own (a sliding window's takes the previous count and deletes its key).
#[tokio::test]
async fn a_write_in_the_same_window_keeps_the_expiry() {
    let window = Duration::from_secs(1);
    crate::support::clear_of_boundary(window, Duration::from_millis(400)).await;
    let server = RedisServer::start();
    let store = standalone(&server.url());
    let fixed = Limit::fixed_window("ttl-fixed", 100, window).unwrap();
    let sliding = Limit::sliding_window("ttl-sliding", 100, window).unwrap();
    let chain = Chain::new()
        .check(&fixed, Principal::user("ada"))
        .check(&sliding, Principal::user("ada"));
    assert!(store.check(&chain).await.unwrap().is_allowed()); // loads the script
    let monitor = crate::monitor::Monitor::start(server.port());
    let pttl = |server: &RedisServer| -> Vec<i64> {
        let keys = server.cli(&["--scan"]);
        let mut keys: Vec<&str> = keys.lines().filter(|k| !k.is_empty()).collect();
        keys.sort_unstable();
        keys.iter()
            .map(|k| server.cli(&["PTTL", k]).trim().parse().unwrap())
            .collect()
    };
    let before = pttl(&server);
    assert_eq!(before.len(), 2, "{before:?}");
    assert!(store.check(&chain).await.unwrap().is_allowed());
    let after = pttl(&server);
    // The next window: a new expiry.
    crate::support::clear_of_boundary(window, window).await;
    assert!(store.check(&chain).await.unwrap().is_allowed());
    let writes: Vec<String> = crate::monitor::commands(&monitor.finish())
        .into_iter()
        .filter(|c| {
            c.by_script
                && ["set", "incrby", "hincrby", "hset", "del", "pexpire"]
                    .iter()
                    .any(|w| c.args[0].eq_ignore_ascii_case(w.as_bytes()))
        })
        .map(|c| {
            let tail = if c.args.len() > 3 && c.args[0].eq_ignore_ascii_case(b"set") {
                &c.args[3][..]
            } else {
                b""
            };
            format!(
                "{} {}",
                String::from_utf8_lossy(&c.args[0]).to_uppercase(),
                String::from_utf8_lossy(tail)
            )
            .trim()
            .to_owned()
        })
        .collect();
    assert_eq!(
        writes,
        // The same window: each count; the next: each count in a new key, then the fixed
        // window's expiry, the sliding window's copy of the previous count, the previous
        // key deleted, its expiry.
        [
            "INCRBY", "HINCRBY", "INCRBY", "HINCRBY", "PEXPIRE", "HSET", "DEL", "PEXPIRE"
        ],
        "same window, then the next"
    );
    for (b, a) in before.iter().zip(&after) {
        assert!(
            a <= b && *a > 0,
            "the expiry moved: {before:?} then {after:?}"
        );
    }
}
