//! Fixed and sliding windows keep a key per window, named by the instance from its
//! estimate of the server's clock and picked by the server's `TIME`. An instance whose
//! clock is an hour off the server's (libfaketime moves the server's) still counts in the
//! server's windows, exactly: its first call finds no key named for the server's window,
//! charges nothing, and is sent again with the server's time.

use std::time::Duration;

use ratekeeper_core::{Chain, Limit, Principal, RedisStore, Store};
use ratekeeper_tests::redis::RedisServer;

/// The server's time, in microseconds.
fn server_now(server: &RedisServer) -> u64 {
    let time = server.cli(&["TIME"]);
    let mut parts = time.lines().map(|l| l.trim().parse::<u64>().unwrap());
    parts.next().unwrap() * 1_000_000 + parts.next().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_an_hour_off_the_servers_clock_counts_in_the_servers_windows() {
    for offset in ["+1h", "-1h"] {
        let server = RedisServer::start_with_clock_offset(offset);
        let mine = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_micros();
        let theirs = u128::from(server_now(&server));
        let apart = theirs.abs_diff(mine);
        assert!(
            apart > 3_500_000_000,
            "{offset}: the server's clock is {apart} us off, not an hour"
        );
        let store = RedisStore::builder(server.url())
            .deny_cache(0)
            .coalesce(1)
            .build()
            .unwrap();
        // The script cached, so that each call is one EVALSHA.
        const CHAIN_LUA: &str = include_str!("../../rate-limit-core/src/store/redis/chain.lua");
        server.cli(&["SCRIPT", "LOAD", CHAIN_LUA]);
        let minute = Duration::from_secs(60);
        let w = 60_000_000u64;
        let fixed = Limit::fixed_window("skew-fw", 5, minute).unwrap();
        let sliding = Limit::sliding_window("skew-sw", 5, minute).unwrap();
        for (i, limit) in [&fixed, &sliding].into_iter().enumerate() {
            let chain = Chain::new().check(limit, Principal::user("u"));
            server.cli(&["CONFIG", "RESETSTAT"]);
            let mut admitted = 0;
            let before = server_now(&server) / w;
            for _ in 0..8 {
                admitted += u32::from(store.check(&chain).await.unwrap().is_allowed());
            }
            if server_now(&server) / w != before {
                // The server's minute turned meanwhile: no exact count to compare.
                continue;
            }
            assert_eq!(admitted, 5, "{offset} {}: exactly the quota", limit.name());
            // The first call of all was sent twice (it named the instance's windows); the
            // estimate learned from its answer named the server's after that.
            assert_eq!(
                server.command_calls("evalsha"),
                if i == 0 { 9 } else { 8 },
                "{offset} {}",
                limit.name()
            );
            // The count is in the key of the server's window, and nowhere else.
            let name = store.key_name(&limit.key(Principal::user("u")));
            let key = format!("{name}:{before}");
            assert_eq!(server.cli(&["GET", &key]).trim(), "5", "{offset}: {key}");
            let all = server.cli(&["--scan", "--pattern", &format!("{name}:*")]);
            assert_eq!(all.lines().count(), 1, "{offset}: {all}");
            // Its TTL: the window's end by the server's clock (two for the sliding
            // window, whose count is the next window's previous), plus the slack (1 s).
            let pttl: u64 = server.cli(&["PTTL", &key]).trim().parse().unwrap();
            let life = if limit.name() == "skew-sw" { 2 * w } else { w };
            assert!(
                pttl > 0 && pttl <= (life + 1_000_000) / 1_000,
                "{offset}: {key} lives {pttl} ms"
            );
        }
    }
}
