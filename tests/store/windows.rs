//! Fixed and sliding windows keep a key per window, named by the instance from its
//! estimate of the server's clock and picked by the server's `TIME`. An instance whose
//! clock is an hour off the server's (libfaketime moves the server's) still counts in the
//! server's windows, exactly: its first call finds no key named for the server's window,
//! charges nothing, and is sent again with the server's time. And the fast script for
//! in-order chains of windows decides as the chain script does.

use std::time::Duration;

use ratekeeper_core::{Chain, Limit, Principal, RedisStore, Store};
use ratekeeper_tests::redis::RedisServer;

use crate::support::server_now;

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
        let store = crate::support::one_call_a_check(server.url());
        // The script cached, so that each call is one EVALSHA.
        use crate::support::CHAIN_LUA;
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
            // A sliding window's key is a hash: `c` its count.
            let count = if i == 0 {
                server.cli(&["GET", &key])
            } else {
                server.cli(&["HGET", &key, "c"])
            };
            assert_eq!(count.trim(), "5", "{offset}: {key}");
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

/// One call of `script` (its text) on `keys` with `nums` as packed doubles: the answer's
/// numbers.
fn call(server: &RedisServer, script: &str, keys: &[String], nums: &[u64]) -> Vec<u64> {
    let args: Vec<u8> = nums
        .iter()
        .flat_map(|&n| (n as f64).to_le_bytes())
        .collect();
    let mut cmd = vec!["EVAL", script];
    let n = keys.len().to_string();
    cmd.push(&n);
    cmd.extend(keys.iter().map(String::as_str));
    let reply = server.cli_with_last(&cmd, &args);
    let packed = reply.strip_suffix(b"\n").unwrap_or(&reply);
    assert_eq!(packed.len() % 8, 0, "{}", String::from_utf8_lossy(&reply));
    packed
        .chunks_exact(8)
        .map(|b| f64::from_le_bytes(b.try_into().unwrap()) as u64)
        .collect()
}

/// `window.lua`, the fast script for in-order chains of windows, logs and buckets, decides
/// as `chain.lua` does: the same calls (one to three chains of one to three fixed windows,
/// sliding windows, sliding logs, token buckets or calendar quotas of a day, costs from 0
/// to 3, quotas from 1 to 6, three
/// principals, so chains of one call share keys) on keys of their own answer the same
/// outcomes, limits, remaining units and windows, and leave the same counts (a bucket's
/// time, which starts from each call's own clock, within a second).
#[test]
fn the_fast_script_decides_as_the_chain_script() {
    const CHAIN: &str = crate::support::CHAIN_LUA;
    const WINDOW: &str = crate::support::WINDOW_LUA;
    let server = RedisServer::start();
    let w = 3_600_000_000u64;
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let mut admitted = 0;
    for round in 0..100 {
        let t = server_now(&server);
        let first = (t - w / 4) / w;
        let (mut nums, mut names) = (vec![1000, 0, t], Vec::new());
        let chains = 1 + next(3);
        nums[1] = chains;
        for _ in 0..chains {
            let n = 1 + next(3);
            nums.extend([0, n]);
            for _ in 0..n {
                let (algo, user) = ([1, 2, 3, 4, 6][next(5) as usize], next(3));
                let (quota, cost) = (1 + next(6), next(4));
                if algo == 6 {
                    // A calendar quota of a UTC day: the candidates of T less six hours
                    // and the next, each 86 400 s (the instance's periods.rs names them).
                    let day = 86_400_000_000u64;
                    let a = (t - day / 4) / day;
                    let code = 6 + 16 * (86_400 + (86_400 << 22));
                    nums.extend([code, quota, (a + 1) * day, cost]);
                    names.push(vec![
                        format!("{{u{user}}}:l6:{a}"),
                        format!("{{u{user}}}:l6:{}", a + 1),
                    ]);
                    continue;
                }
                if algo == 4 {
                    // An emission interval of 10 minutes: nothing comes back in the test.
                    nums.extend([algo, quota, 600_000_000, cost]);
                    names.push(vec![format!("{{u{user}}}:l4")]);
                    continue;
                }
                if algo == 3 {
                    nums.extend([algo, quota, w, cost]);
                    names.push(vec![format!("{{u{user}}}:l3")]);
                    continue;
                }
                nums.extend([algo, quota, w, cost]);
                let from = if algo == 2 { first - 1 } else { first };
                names.push(
                    (from..=first + 1)
                        .map(|x| format!("{{u{user}}}:l{algo}:{x}"))
                        .collect::<Vec<_>>(),
                );
            }
        }
        let keys = |prefix: &str| -> Vec<String> {
            names
                .iter()
                .flatten()
                .map(|k| format!("{prefix}{k}"))
                .collect()
        };
        let slow = call(&server, CHAIN, &keys("a"), &nums);
        let fast = call(&server, WINDOW, &keys("b"), &nums);
        // now, chains; then per chain status, n, six numbers per check: all but the times
        // (reset, retry) exactly; those measured from each call's own `now`.
        assert_eq!(slow.len(), fast.len(), "round {round}: {slow:?} {fast:?}");
        let mut i = 2;
        while i < slow.len() {
            assert_eq!(
                slow[i..i + 2],
                fast[i..i + 2],
                "round {round}: {slow:?} {fast:?}"
            );
            for c in 0..slow[i + 1] as usize {
                let at = i + 2 + c * 6;
                for j in [0, 1, 2, 5] {
                    assert_eq!(
                        slow[at + j],
                        fast[at + j],
                        "round {round}, check {c}: {slow:?} {fast:?}"
                    );
                }
                admitted += u32::from(slow[at] == 0);
            }
            i += 2 + slow[i + 1] as usize * 6;
        }
        for k in names.iter().flatten() {
            let (a, b) = (
                server.cli(&["GET", &format!("a{k}")]),
                server.cli(&["GET", &format!("b{k}")]),
            );
            if k.ends_with(":l3") {
                // A sorted set: the same sum and the same charges, oldest first (each
                // entry named by its own call's time).
                let units = |name: String| -> Vec<String> {
                    let out = server.cli(&["ZRANGE", &name, "0", "-1", "WITHSCORES"]);
                    let lines: Vec<&str> = out
                        .lines()
                        .map(str::trim)
                        .filter(|l| !l.is_empty())
                        .collect();
                    lines
                        .chunks(2)
                        .map(|e| match e {
                            ["#", sum] => format!("sum {sum}"),
                            [member, _] => member.rsplit(':').next().unwrap().to_owned(),
                            _ => panic!("{out}"),
                        })
                        .collect()
                };
                assert_eq!(
                    units(format!("a{k}")),
                    units(format!("b{k}")),
                    "round {round}: {k}"
                );
            } else if k.contains(":l2:") {
                // A hash (`c`, `p`): field by field, and gone from both or from neither.
                assert_eq!(
                    server.cli(&["HGETALL", &format!("a{k}")]),
                    server.cli(&["HGETALL", &format!("b{k}")]),
                    "round {round}: {k}"
                );
            } else if k.ends_with(":l4") && !a.trim().is_empty() {
                let (a, b): (i64, i64) = (a.trim().parse().unwrap(), b.trim().parse().unwrap());
                assert!((a - b).abs() < 1_000_000, "round {round}: {k}: {a} {b}");
            } else {
                assert_eq!(a, b, "round {round}: {k}");
            }
        }
    }
    assert!(
        admitted > 50 && admitted < 600,
        "{admitted}: both admissions and refusals"
    );
}

/// Units given back reach the window they were charged in: a sliding window's count, and,
/// once the next window's key was made (copying that count, the charged window's key then
/// deleted), the copy the next window's key holds. On a real server, windows of 2 s; a
/// phase the server's clock carried across a boundary runs again with a new principal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn units_given_back_reach_the_window_they_were_charged_in() {
    use ratekeeper_core::{AnyStore, FailurePolicy, Limiter};

    let server = RedisServer::start();
    let redis = RedisStore::builder(server.url())
        .deny_cache(0)
        .build()
        .unwrap();
    let limiter = Limiter::new(AnyStore::Redis(redis.clone()));
    let w = 2_000_000u64;
    let window = Duration::from_micros(w);
    let limit = Limit::sliding_window("gb-sw", 10, window).unwrap();
    for attempt in 0.. {
        assert!(attempt < 5, "every attempt straddled a window boundary");
        let user = format!("g{attempt}");
        let chain = Chain::new().check_cost(&limit, Principal::user(user.as_str()), 4);
        let name = redis.key_name(&limit.key(Principal::user(user.as_str())));
        crate::support::clear_of_boundary(window, Duration::from_millis(1_500)).await;
        let during = server_now(&server) / w;
        let key = format!("{name}:{during}");
        // Charged, then given back: the window's count is back at nothing.
        let first = limiter.check(&chain, FailurePolicy::Closed).await;
        assert!(first.is_allowed());
        assert_eq!(server.cli(&["HGET", &key, "c"]).trim(), "4");
        limiter
            .give_back(first.reservation(&chain).unwrap())
            .await
            .unwrap();
        assert_eq!(server.cli(&["HGET", &key, "c"]).trim(), "0");
        // Charged again, kept into the next window, whose first check copies the count.
        let kept = limiter.check(&chain, FailurePolicy::Closed).await;
        assert!(kept.is_allowed());
        if server_now(&server) / w != during {
            continue;
        }
        crate::support::clear_of_boundary(window, window).await;
        let next = format!("{name}:{}", during + 1);
        let one = Chain::new().check_cost(&limit, Principal::user(user.as_str()), 1);
        assert!(
            limiter
                .check(&one, FailurePolicy::Closed)
                .await
                .is_allowed()
        );
        if server_now(&server) / w != during + 1 {
            continue;
        }
        assert_eq!(server.cli(&["HGET", &next, "p"]).trim(), "4");
        assert_eq!(
            server.cli(&["EXISTS", &key]).trim(),
            "0",
            "the charged window's key went"
        );
        // The earlier window's units given back: the copy in the next window's key.
        limiter
            .give_back(kept.reservation(&chain).unwrap())
            .await
            .unwrap();
        assert_eq!(server.cli(&["HGET", &next, "p"]).trim(), "0");
        assert_eq!(server.cli(&["HGET", &next, "c"]).trim(), "1");
        break;
    }
}
