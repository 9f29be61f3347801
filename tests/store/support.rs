use std::time::Duration;

use ratekeeper_core::{AnyStore, Chain, ChainDecision, Outcome, RedisStore, Store};

/// The chain script as the store sends it: its files joined.
pub(crate) const CHAIN_LUA: &str = concat!(
    include_str!("../../rate-limit-core/src/store/redis/log.lua"),
    include_str!("../../rate-limit-core/src/store/redis/chain.lua"),
    include_str!("../../rate-limit-core/src/store/redis/chain_run.lua")
);

/// The fast script as the store sends it, after the log's functions.
pub(crate) const WINDOW_LUA: &str = concat!(
    include_str!("../../rate-limit-core/src/store/redis/log.lua"),
    include_str!("../../rate-limit-core/src/store/redis/window.lua")
);

/// What `server` holds under `names` (e.g. [`RedisStore::key_names`]: a window's keys):
/// the values found, joined by spaces; empty when no key exists.
pub(crate) fn stored(server: &ratekeeper_tests::redis::RedisServer, names: &[String]) -> String {
    names
        .iter()
        .map(|n| server.cli(&["GET", n]).trim().to_owned())
        .filter(|v| !v.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// A standalone Redis store for `url`.
pub(crate) fn standalone(url: &str) -> AnyStore {
    AnyStore::Redis(RedisStore::builder(url).build().unwrap())
}

/// A standalone Redis store for `url` that sends each check in a call of its own and
/// caches no refusal: every check reaches the server (tests that count calls or read keys).
pub(crate) fn one_call_a_check(url: String) -> RedisStore {
    RedisStore::builder(url)
        .deny_cache(0)
        .coalesce(1)
        .build()
        .unwrap()
}

/// A cluster store for `urls`.
pub(crate) fn cluster(urls: &[String]) -> AnyStore {
    AnyStore::Redis(
        RedisStore::cluster_builder(urls.iter().cloned())
            .build()
            .unwrap(),
    )
}

/// Outcomes of `n` checks as letters: A(llowed), D(enied), N(ever fits).
pub(crate) async fn run(store: &AnyStore, chain: &Chain, n: usize) -> (String, Vec<ChainDecision>) {
    let mut s = String::new();
    let mut all = Vec::new();
    for _ in 0..n {
        let d = store.check(chain).await.expect("the store answers");
        s.push(match d.denied_by().map(|(_, d)| d.outcome()) {
            None => 'A',
            Some(Outcome::Denied) => 'D',
            Some(_) => 'N',
        });
        all.push(d);
    }
    (s, all)
}

/// Sleeps until `offset` past the next whole multiple of `window` (real time).
pub(crate) async fn align(window: Duration, offset: Duration) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros();
    let w = window.as_micros();
    let wait = w - now % w + offset.as_micros();
    tokio::time::sleep(Duration::from_micros(u64::try_from(wait).unwrap())).await;
}

/// Waits out the end of the current `window` if it ends within `margin` (real time), so a
/// test that needs one whole window for its counts never straddles two.
pub(crate) async fn clear_of_boundary(window: Duration, margin: Duration) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros();
    let left = window.as_micros() - now % window.as_micros();
    if left < margin.as_micros() {
        tokio::time::sleep(Duration::from_micros(u64::try_from(left).unwrap() + 10_000)).await;
    }
}

/// Puts `server` over its memory cap for good under `noeviction`: ~1 MB of data, then
/// `maxmemory` 256 kB. Every write is refused with OOM until `maxmemory` is lifted.
pub(crate) fn over_the_memory_cap(server: &ratekeeper_tests::redis::RedisServer) {
    let filler = "x".repeat(64 * 1024);
    for i in 0..16 {
        server.cli(&["SET", &format!("filler-{i}"), &filler]);
    }
    server.cli(&["CONFIG", "SET", "maxmemory-policy", "noeviction"]);
    server.cli(&["CONFIG", "SET", "maxmemory", "256kb"]);
}

/// In-flight slots held on `servers`: the members of every in-flight set.
pub(crate) fn slots_held(servers: &[ratekeeper_tests::redis::RedisServer]) -> u64 {
    let mut n = 0;
    for server in servers {
        for k in server.cli(&["KEYS", "*in-flight*"]).lines() {
            if !k.trim().is_empty() {
                n += server
                    .cli(&["ZCARD", k.trim()])
                    .trim()
                    .parse::<u64>()
                    .unwrap_or(0);
            }
        }
    }
    n
}

/// `n` checks of `limit` for a principal of its own (`tag`), run again with a fresh one
/// until the run was quick: within 100 ms and one aligned second (at most 10 tries). On a
/// busy machine a slow run says nothing about a one-second limit: a bucket refills and a
/// window rolls while it runs.
pub(crate) async fn quick_run(
    store: &AnyStore,
    limit: &ratekeeper_core::Limit,
    n: usize,
    aligned: bool,
) -> (String, Vec<ratekeeper_core::ChainDecision>, Chain) {
    let second = Duration::from_secs(1);
    let now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
    };
    for attempt in 0.. {
        if aligned {
            align(second, Duration::from_millis(50)).await;
        }
        let chain = Chain::new().check(
            limit,
            ratekeeper_core::Principal::user(format!("u{attempt}")),
        );
        let started = now();
        let (s, ds) = run(store, &chain, n).await;
        let ended = now();
        let quick = ended - started < Duration::from_millis(100);
        if (quick && started.as_secs() == ended.as_secs()) || attempt == 9 {
            return (s, ds, chain);
        }
        println!(
            "{}: a slow run ({:?}), again",
            limit.name(),
            ended - started
        );
    }
    unreachable!()
}

/// The server's time, in microseconds.
pub(crate) fn server_now(server: &ratekeeper_tests::redis::RedisServer) -> u64 {
    let time = server.cli(&["TIME"]);
    let mut parts = time.lines().map(|l| l.trim().parse::<u64>().unwrap());
    parts.next().unwrap() * 1_000_000 + parts.next().unwrap()
}
