//! Coalescing: checks that arrive while two calls are in flight ride the next call together
//! (on a Cluster, chains of one slot). Each chain must stay atomic and all-or-nothing on
//! its own, a chain with bad arguments must fail alone, and one call must write each key
//! once.

use std::time::Duration;

use ratekeeper_core::{AnyStore, Chain, Limit, MemoryStore, Principal, Store};
use ratekeeper_tests::redis::{RedisCluster, RedisServer};

use crate::support::{clear_of_boundary, cluster, standalone};

/// 400 concurrent in-order chains `[user: 1 per hour, everyone: 100 per hour]`, each for
/// its own user: exactly 100 are admitted, and no refused chain charged its user's key.
async fn all_or_nothing_each(store: AnyStore) -> (u32, u32) {
    let hour = Duration::from_secs(3_600);
    // Hour windows aligned to the clock: the few seconds below must not straddle two.
    clear_of_boundary(hour, Duration::from_secs(30)).await;
    let user = Limit::fixed_window("co-user", 1, hour).unwrap();
    let everyone = Limit::fixed_window("co-everyone", 100, hour).unwrap();
    let tasks: Vec<_> = (0..400)
        .map(|i| {
            let store = store.clone();
            let chain = Chain::new()
                .check(&user, Principal::user(format!("u{i}")))
                .check(&everyone, Principal::global());
            tokio::spawn(async move { store.check(&chain).await.expect("answers").is_allowed() })
        })
        .collect();
    let mut admitted = Vec::new();
    for (i, t) in tasks.into_iter().enumerate() {
        admitted.push((i, t.await.unwrap()));
    }
    let mut uncharged = 0;
    for (i, ok) in &admitted {
        let left = store
            .peek(&user.key(Principal::user(format!("u{i}"))))
            .await
            .unwrap()
            .remaining();
        if *ok {
            assert_eq!(left, 0, "u{i} was admitted and charged");
        } else {
            assert_eq!(left, 1, "u{i} was refused: its own key must be as it was");
            uncharged += 1;
        }
    }
    let n = admitted.iter().filter(|(_, ok)| *ok).count();
    (u32::try_from(n).unwrap(), uncharged)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_chains_stay_all_or_nothing_each_on_every_store() {
    let memory = all_or_nothing_each(AnyStore::Memory(MemoryStore::new())).await;
    assert_eq!(memory, (100, 300), "memory");

    let server = RedisServer::start();
    let store = standalone(&server.url());
    if let AnyStore::Redis(r) = &store {
        r.health().await.unwrap(); // the script is loaded: every call is one EVALSHA
    }
    server.cli(&["CONFIG", "RESETSTAT"]);
    assert_eq!(all_or_nothing_each(store).await, (100, 300), "standalone");
    // 400 chains plus 400 peeks, in fewer calls; the shared key written once per call.
    let calls = server.command_calls("evalsha");
    let sets = server.command_calls("set");
    println!("standalone: 800 chains in {calls} calls, {sets} SETs");
    assert!(calls < 800, "{calls} calls: nothing was coalesced");
    assert!(
        sets <= 100 + calls,
        "{sets} SETs for 100 user keys in {calls} calls"
    );

    // On a Cluster each chain is two slot groups (the user's slot, then the global one);
    // the global groups of concurrent chains share calls.
    let c = RedisCluster::start();
    let store = cluster(&c.urls());
    if let AnyStore::Redis(r) = &store {
        r.health().await.unwrap();
    }
    for n in c.nodes() {
        n.cli(&["CONFIG", "RESETSTAT"]);
    }
    assert_eq!(all_or_nothing_each(store).await, (100, 300), "cluster");
    let calls: u64 = c.nodes().iter().map(|n| n.command_calls("evalsha")).sum();
    // One call each would be 1 500: 400 user groups, 400 global groups (every user group
    // admits), 300 refunds of the refused chains' user groups (another script, also an
    // EVALSHA) and 400 peeks, one after another.
    println!("cluster: 400 chains and 400 peeks in {calls} script calls (1 500 uncoalesced)");
    assert!(
        calls <= 1_400,
        "{calls} calls: nothing was coalesced on the Cluster"
    );
}

/// The script itself, as Redis runs it: a call of three chains whose second has bad
/// arguments answers the other two, and writes nothing for the bad one.
#[test]
fn a_chain_with_bad_arguments_fails_alone_in_its_call() {
    use crate::support::CHAIN_LUA;
    let server = RedisServer::start();
    // An algorithm the script does not have (9), and none at all (0).
    for bad in [9.0, 0.0] {
        server.cli(&["FLUSHALL"]);
        // KEYS a's windows (of T - 15 s and the next), b, c; slack 1000 ms; 3 chains of one
        // check each, in order: a fixed window of 5 per minute; chain 2's algorithm is
        // `bad`; a token bucket of 10; T the server's time. The numbers as one string of
        // little-endian doubles.
        let time = server.cli(&["TIME"]);
        let mut parts = time.lines().map(|l| l.trim().parse::<u64>().unwrap());
        let t = parts.next().unwrap() * 1_000_000 + parts.next().unwrap();
        let first = (t - 15_000_000) / 60_000_000;
        let (a0, a1) = (format!("a:{first}"), format!("a:{}", first + 1));
        let args: Vec<u8> = [
            1000.0,
            3.0,
            t as f64, //
            0.0,
            1.0,
            1.0,
            5.0,
            60_000_000.0,
            1.0, //
            0.0,
            1.0,
            bad,
            5.0,
            60_000_000.0,
            1.0, //
            0.0,
            1.0,
            4.0,
            10.0,
            1_000_000.0,
            2.0_f64,
        ]
        .iter()
        .flat_map(|n| n.to_le_bytes())
        .collect();
        let reply = server.cli_with_last(&["EVAL", CHAIN_LUA, "4", &a0, &a1, "b", "c"], &args);
        // One string of 8-byte little-endian doubles (then redis-cli's newline).
        let packed = reply.strip_suffix(b"\n").unwrap_or(&reply);
        assert_eq!(packed.len() % 8, 0, "{reply:?}");
        let nums: Vec<i64> = packed
            .chunks_exact(8)
            .map(|b| f64::from_le_bytes(b.try_into().unwrap()) as i64)
            .collect();
        // now, 3 chains; (0, 1, six numbers); (1, 0); (0, 1, six numbers)
        assert_eq!(nums.len(), 2 + 8 + 2 + 8, "{nums:?}");
        assert_eq!(&nums[1..4], &[3, 0, 1], "chain 1 answered: {nums:?}");
        assert_eq!(nums[4], 0, "chain 1 allowed");
        assert_eq!(&nums[10..12], &[1, 0], "chain 2 failed alone: {nums:?}");
        assert_eq!(&nums[12..14], &[0, 1], "chain 3 answered: {nums:?}");
        assert_eq!(nums[15], 10, "chain 3's capacity");
        assert_eq!(nums[16], 8, "chain 3 charged 2 of 10");
        assert_eq!(
            server.cli(&["EXISTS", &a0, &a1, "b", "c"]).trim(),
            "2",
            "{bad}"
        );
        assert_eq!(
            server.cli(&["EXISTS", "b"]).trim(),
            "0",
            "the bad chain wrote nothing"
        );
    }
}

/// A store built in a runtime that has shut down answers "not sent" (the limiter's
/// policies then apply), never panics or hangs.
#[test]
fn a_store_whose_runtime_has_shut_down_fails_as_not_sent() {
    use ratekeeper_core::RedisStore;
    use ratekeeper_core::store::StoreErrorKind;

    let server = RedisServer::start();
    let short = tokio::runtime::Runtime::new().unwrap();
    let store = short.block_on(async { RedisStore::builder(server.url()).build().unwrap() });
    drop(short);
    let serving = tokio::runtime::Runtime::new().unwrap();
    let limit = Limit::fixed_window("co-rt", 5, Duration::from_secs(60)).unwrap();
    let chain = Chain::new().check(&limit, Principal::user("u"));
    let err = serving
        .block_on(async { tokio::time::timeout(Duration::from_secs(5), store.check(&chain)).await })
        .expect("answers at once")
        .unwrap_err();
    assert_eq!(err.kind(), StoreErrorKind::NotExecuted, "{err}");
}

/// One call with more keys than Lua can `unpack` at once (its C stack holds 8 000
/// results): what a large `coalesce` maximum can make of many chains. Answered, all of it.
#[tokio::test]
async fn a_call_of_nine_thousand_keys_is_answered() {
    let server = RedisServer::start();
    // What is tested is the answer, not its speed: 9 000 keys in one script take Redis
    // ~100 ms on a quiet machine and can pass the default budget on a busy one.
    let store = ratekeeper_core::RedisStore::builder(server.url())
        .coalesce(0)
        .response_timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    // An hour's window: the two calls can never straddle its end.
    let hour = Duration::from_secs(3_600);
    let limits: Vec<Limit> = (0..9_000)
        .map(|i| Limit::fixed_window(&format!("wide{i}"), 1, hour).unwrap())
        .collect();
    let chain = limits
        .iter()
        .fold(Chain::new(), |c, l| c.check(l, Principal::user("u")));
    let first = store.check(&chain).await.expect("answered");
    assert!(first.is_allowed());
    assert_eq!(first.decisions().len(), 9_000);
    assert!(
        !store.check(&chain).await.unwrap().is_allowed(),
        "each key counted"
    );
}

/// A check whose caller gave up (its timeout, a dropped request) while it waited behind a
/// call in flight is never sent: it did not run, so nothing may be charged for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_check_whose_caller_gave_up_before_its_call_left_is_not_sent() {
    use ratekeeper_tests::redis::LatencyProxy;

    let server = RedisServer::start();
    // 100 ms each way: every call takes at least 200 ms.
    let slow = LatencyProxy::start(server.port(), Duration::from_millis(100));
    let store = ratekeeper_core::RedisStore::builder(slow.url())
        .response_timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    store.health().await.unwrap(); // connected, script loaded
    server.cli(&["CONFIG", "RESETSTAT"]);
    let limit = Limit::fixed_window("co-gave-up", 5, Duration::from_secs(3_600)).unwrap();
    let chain = |u: &str| Chain::new().check(&limit, Principal::user(u));
    // Two calls in flight (the most a lane keeps), then b waits for a place in the next.
    let first: Vec<_> = ["a", "a2"]
        .into_iter()
        .map(|u| {
            let (store, chain) = (store.clone(), chain(u));
            tokio::spawn(async move { store.check(&chain).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(50)).await; // both calls are in flight
    let gave_up = tokio::time::timeout(Duration::from_millis(20), store.check(&chain("b"))).await;
    assert!(gave_up.is_err(), "b waits behind the calls in flight");
    for call in first {
        assert!(call.await.unwrap().unwrap().is_allowed());
    }
    // Anything the store would still send has reached Redis by now.
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(
        server.command_calls("evalsha"),
        2,
        "only a's and a2's calls were sent"
    );
    let held =
        |u: &str| crate::support::stored(&server, &store.key_names(&limit.key(Principal::user(u))));
    assert_eq!(held("a"), "1");
    assert_eq!(held("b"), "", "b charged nothing");
}
