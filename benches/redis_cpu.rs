//! Redis CPU per check for chains of 1, 2 and 4 limits (issue #13, item 4): redis-server's
//! own CPU time (user + system, `/proc/PID/stat`) over a fixed number of checks through the
//! Redis store, per check, with the round trips counted (`INFO commandstats`: `evalsha`
//! calls per check; the commands a script runs inside are not round trips).
//!
//! Each length twice: every check its own call (`coalesce(0)`), and coalesced (the
//! default: checks that arrive while two calls are in flight ride the next one).
//!
//! A last pair of cases puts a ban ([`Limit::ban`]) in front of the one-check chain: what
//! a ban rule costs Redis on an admitted request (one more key read, no write).
//!
//! A last line is the yardstick (issue #25, item 3): the same number of one-check "checks"
//! as plain commands, pipelined 32 to a round trip as the coalesced calls are: a `TIME` per
//! round trip and a `GET` and a `SET … PX` per check, on keys and values shaped like the
//! store's. The script's Redis CPU ÷ this is what the script adds over its own I/O.
//!
//! `cargo bench -p ratekeeper-benches --bench redis_cpu` (`CHECKS=` to change the count;
//! `REDIS_CPU_SERVER=redis-6.2|redis-7.0|valkey-8.0|valkey-9.1` to run it on another server
//! of the compatibility matrix, which `scripts/servers.sh` installs)

#![allow(clippy::too_many_lines, reason = "a bench reads top to bottom")]

use std::sync::Arc;
use std::time::{Duration, Instant};

use ratekeeper_core::{Chain, Limit, Principal, RedisStore, Store};
use ratekeeper_testkit::redis::RedisServer;
use ratekeeper_testkit::redis::versions::Matrix;

/// A server of the one `REDIS_CPU_SERVER` names (unset: `redis-server` on the `PATH`).
fn server() -> RedisServer {
    let kind = match std::env::var("REDIS_CPU_SERVER").as_deref() {
        Err(_) => return RedisServer::start(),
        Ok("redis-6.2") => Matrix::Redis6_2,
        Ok("redis-7.0") => Matrix::Redis7_0,
        Ok("valkey-8.0") => Matrix::Valkey8_0,
        Ok("valkey-9.1") => Matrix::Valkey9_1,
        Ok(other) => {
            panic!("REDIS_CPU_SERVER={other}: redis-6.2, redis-7.0, valkey-8.0 or valkey-9.1")
        }
    };
    kind.start("redis_cpu")
}

fn main() {
    let checks: u64 = std::env::var("CHECKS")
        .ok()
        .and_then(|k| k.parse().ok())
        .unwrap_or(300_000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let minute = Duration::from_secs(60);
    // Quotas no check reaches: every check admits and writes its keys.
    let all = [
        Limit::token_bucket("burst", 1_000_000, 1_000_000, minute).unwrap(),
        Limit::fixed_window("minute", 1_000_000, minute).unwrap(),
        Limit::sliding_window("hour", 1_000_000, Duration::from_secs(3_600)).unwrap(),
        Limit::fixed_window("day", 10_000_000, Duration::from_secs(86_400)).unwrap(),
    ];
    let probe = server();
    let info = probe.cli(&["INFO", "server"]);
    let version = |f: &str| {
        info.lines()
            .find_map(|l| l.strip_prefix(f))
            .map(str::trim)
            .unwrap_or("")
            .to_owned()
    };
    drop(probe);
    println!(
        "{checks} checks over 10 000 principals, 64 tasks; server CPU ÷ checks; redis_version {} valkey_version {}",
        version("redis_version:"),
        version("valkey_version:")
    );
    let ban = Limit::ban("ban", 5, minute, minute).unwrap();
    let cases = [1usize, 2, 4]
        .into_iter()
        .map(|n| (n, false))
        .chain([(1, true)])
        .flat_map(|(n, banned)| [(n, banned, 0), (n, banned, 32)]);
    for (n, with_ban, coalesce) in cases {
        let server = server();
        let mut chosen = all[..n].to_vec();
        if with_ban {
            chosen.insert(0, ban.clone());
        }
        let limits = Arc::new(chosen);
        let store = rt.block_on(async {
            let s = RedisStore::builder(server.url())
                .deny_cache(0)
                .coalesce(coalesce)
                .build()
                .unwrap();
            s.health().await.unwrap();
            s
        });
        server.cli(&["CONFIG", "RESETSTAT"]);
        let bytes0 = net_bytes(&server);
        let cpu0 = server.cpu_time();
        let t0 = Instant::now();
        rt.block_on(async {
            let tasks: Vec<_> = (0..64u64)
                .map(|t| {
                    let (store, limits) = (store.clone(), limits.clone());
                    tokio::spawn(async move {
                        let mut i = t;
                        while i < checks {
                            let p = Principal::user(format!("u{}", i % 10_000));
                            let chain = limits
                                .iter()
                                .fold(Chain::new(), |c, l| c.check(l, p.clone()));
                            store.check(&chain).await.expect("Redis answers");
                            i += 64;
                        }
                    })
                })
                .collect();
            for t in tasks {
                t.await.unwrap();
            }
        });
        let wall = t0.elapsed();
        let cpu = server.cpu_time().saturating_sub(cpu0);
        let calls = server.command_calls("evalsha") + server.command_calls("eval");
        // What crossed the wire, both ways (`INFO stats`; the two `INFO` replies and the
        // `commandstats` read are in it, a few KB over all the checks).
        let bytes = net_bytes(&server).map(|b| {
            let b0 = bytes0.map_or(0, |b0| b0.0 + b0.1);
            (b.0 + b.1).saturating_sub(b0) as f64 / checks as f64
        });
        // Redis's own timing of the script alone, without reading and writing sockets.
        let usec_per_call = server
            .cli(&["INFO", "commandstats"])
            .lines()
            .find_map(|l| {
                l.strip_prefix("cmdstat_evalsha:")?
                    .split(',')
                    .find_map(|f| f.strip_prefix("usec_per_call="))
                    .and_then(|v| v.parse::<f64>().ok())
            })
            .unwrap_or(0.0);
        let how = if coalesce > 1 {
            "coalesced"
        } else {
            "one call each"
        };
        let n = if with_ban {
            format!("{n} + a ban")
        } else {
            n.to_string()
        };
        println!(
            "chain of {n}, {how:>13}: {:>5.2} µs of Redis CPU per check (script alone {usec_per_call:.2} µs), \
             {:.4} round trips per check, {} bytes per check, {:.0} checks/s",
            cpu.as_secs_f64() * 1e6 / checks as f64,
            calls as f64 / checks as f64,
            bytes.map_or_else(|| "-".to_owned(), |b| format!("{b:.0}")),
            checks as f64 / wall.as_secs_f64()
        );
    }
    plain(&rt, checks);
}

/// The server's `total_net_input_bytes` and `total_net_output_bytes`.
fn net_bytes(server: &RedisServer) -> Option<(u64, u64)> {
    let stats = server.cli(&["INFO", "stats"]);
    let field = |name: &str| {
        stats
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse::<u64>().ok())
    };
    Some((
        field("total_net_input_bytes:")?,
        field("total_net_output_bytes:")?,
    ))
}

/// The yardstick: `TIME` + per check `GET` + `SET … PX`, 32 checks a pipeline, two tasks
/// (so that one pipeline is in flight while the other is answered, as coalesced calls are).
fn plain(rt: &tokio::runtime::Runtime, checks: u64) {
    const BATCH: u64 = 32;
    let server = RedisServer::start();
    let client = redis::Client::open(server.url()).unwrap();
    server.cli(&["CONFIG", "RESETSTAT"]);
    let cpu0 = server.cpu_time();
    rt.block_on(async {
        let tasks: Vec<_> = (0..2u64)
            .map(|t| {
                let client = client.clone();
                tokio::spawn(async move {
                    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
                    let mut i = t * BATCH;
                    while i < checks {
                        let mut pipe = redis::pipe();
                        pipe.cmd("TIME");
                        for j in i..(i + BATCH).min(checks) {
                            // As the store's key and a token bucket's encoded state.
                            let key = format!("rl:{{u:u{}}}:burst", j % 10_000);
                            pipe.cmd("GET").arg(&key).ignore();
                            pipe.cmd("SET")
                                .arg(&key)
                                .arg("999999|1799971200000000")
                                .arg("PX")
                                .arg(61_000)
                                .ignore();
                        }
                        let _: redis::Value = pipe.query_async(&mut conn).await.unwrap();
                        i += 2 * BATCH;
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
    });
    let cpu = server.cpu_time().saturating_sub(cpu0);
    println!(
        "plain TIME + GET + SET, 32 a pipeline: {:>5.2} µs of Redis CPU per check",
        cpu.as_secs_f64() * 1e6 / checks as f64
    );
}
