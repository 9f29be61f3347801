//! A sliding log on Redis is a sorted set: an entry `t:c` scored `t` per charge of `c`
//! units at the server's time `t`, and `#` scored minus their sum, so a check reads the sum
//! and the entries that left the window, not the whole log. What it stores, on real
//! servers: the entries and their sum after charges, refunds and a window's turn; two
//! calls in one microsecond (a server whose clock stands still) kept as one entry of both;
//! past the quota (charging every limit), only the entries a decision can still need.

use std::time::Duration;

use ratekeeper_core::{
    AnyStore, Chain, ChainMode, FailurePolicy, Limit, Limiter, Principal, RedisStore, Store,
};
use ratekeeper_tests::redis::RedisServer;

/// The set's entries as (time, units), oldest first, and the sum `#` holds.
fn entries(server: &RedisServer, key: &str) -> (Vec<(u64, u64)>, i64) {
    let out = server.cli(&["ZRANGE", key, "0", "-1", "WITHSCORES"]);
    let lines: Vec<&str> = out.lines().map(str::trim).collect();
    let (mut list, mut sum) = (Vec::new(), None);
    for pair in lines.chunks(2) {
        let [member, score] = pair else {
            panic!("{out}")
        };
        if *member == "#" {
            sum = Some(score.parse::<i64>().unwrap());
            continue;
        }
        let (t, c) = member.split_once(':').unwrap();
        let t: u64 = t.parse().unwrap();
        assert_eq!(
            score.parse::<u64>().unwrap(),
            t,
            "{member} scored by its time"
        );
        list.push((t, c.parse().unwrap()));
    }
    (list, -sum.unwrap_or_else(|| panic!("no sum in {out}")))
}

fn units(list: &[(u64, u64)]) -> i64 {
    list.iter().map(|&(_, c)| c as i64).sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_keeps_an_entry_per_charge_and_their_sum() {
    let server = RedisServer::start();
    let redis = RedisStore::builder(server.url())
        .deny_cache(0)
        .build()
        .unwrap();
    let limiter = Limiter::new(AnyStore::Redis(redis.clone()));
    let limit = Limit::sliding_log("set-log", 10, Duration::from_secs(60)).unwrap();
    let who = Principal::user("s");
    let key = redis.key_name(&limit.key(who.clone()));
    // Something not a set under the key: no state, replaced by the first charge.
    server.cli(&["SET", &key, "1 2 3"]);
    let two = Chain::new().check_cost(&limit, who.clone(), 2);
    let three = Chain::new().check_cost(&limit, who.clone(), 3);
    let first = limiter.check(&two, FailurePolicy::Closed).await;
    let second = limiter.check(&three, FailurePolicy::Closed).await;
    assert!(first.is_allowed() && second.is_allowed());
    let (list, sum) = entries(&server, &key);
    assert_eq!(list.iter().map(|e| e.1).collect::<Vec<_>>(), [2, 3]);
    assert_eq!(sum, 5);
    let ttl: u64 = server.cli(&["PTTL", &key]).trim().parse().unwrap();
    assert!(
        ttl > 59_000 && ttl <= 61_000,
        "{ttl} ms: the window and the slack"
    );
    // The three units given back: their entry goes, the sum follows.
    limiter
        .give_back(second.reservation(&three).unwrap())
        .await
        .unwrap();
    let (list, sum) = entries(&server, &key);
    assert_eq!((list.len(), sum), (1, 2));
    let d = redis.peek(&limit.key(who)).await.unwrap();
    assert_eq!(d.remaining(), 8);

    // A window of a second: a charge more than a second after another finds that one
    // gone from the sum, and removes it.
    let short = Limit::sliding_log("set-short", 10, Duration::from_secs(1)).unwrap();
    let who = Principal::user("t");
    let key = redis.key_name(&short.key(who.clone()));
    let one = Chain::new().check(&short, who);
    assert!(
        limiter
            .check(&one, FailurePolicy::Closed)
            .await
            .is_allowed()
    );
    let (before, _) = entries(&server, &key);
    tokio::time::sleep(Duration::from_millis(1_010)).await;
    assert!(
        limiter
            .check(&one, FailurePolicy::Closed)
            .await
            .is_allowed()
    );
    let (list, sum) = entries(&server, &key);
    assert_eq!((list.len(), sum), (1, 1), "{list:?}");
    assert!(list[0].0 > before[0].0 + 1_000_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_charges_in_one_microsecond_are_one_entry_of_both() {
    let server = RedisServer::start_with_frozen_clock("2026-12-06 10:00:00");
    let redis = crate::support::one_call_a_check(server.url());
    let limiter = Limiter::new(AnyStore::Redis(redis.clone()));
    let limit = Limit::sliding_log("still", 100, Duration::from_secs(60)).unwrap();
    let who = Principal::user("u");
    let key = redis.key_name(&limit.key(who.clone()));
    let one = Chain::new().check(&limit, who.clone());
    let mut kept = Vec::new();
    for n in 1..=7 {
        let d = limiter.check(&one, FailurePolicy::Closed).await;
        assert!(d.is_allowed());
        kept.push(d);
        let (list, sum) = entries(&server, &key);
        assert_eq!((sum, units(&list)), (n, n), "{list:?}");
        let t = list[0].0;
        assert!(list.iter().all(|e| e.0 == t), "one microsecond: {list:?}");
    }
    assert_eq!(
        redis
            .peek(&limit.key(who.clone()))
            .await
            .unwrap()
            .remaining(),
        93
    );
    // Refunds find the microsecond and take from its entries, the sum with them.
    for (n, d) in kept.iter().enumerate() {
        limiter
            .give_back(d.reservation(&one).unwrap())
            .await
            .unwrap();
        let (list, sum) = entries(&server, &key);
        assert_eq!(
            (sum, units(&list)),
            (6 - n as i64, 6 - n as i64),
            "{list:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn charged_past_the_quota_a_log_keeps_what_a_decision_can_need() {
    let server = RedisServer::start();
    let redis = crate::support::one_call_a_check(server.url());
    let store = AnyStore::Redis(redis.clone());
    let memory = AnyStore::Memory(ratekeeper_core::MemoryStore::new());
    let limit = Limit::sliding_log("over", 3, Duration::from_secs(60)).unwrap();
    let who = Principal::user("u");
    let key = redis.key_name(&limit.key(who.clone()));
    let chain = Chain::new()
        .mode(ChainMode::ChargeAll)
        .check(&limit, who.clone());
    let (on_redis, _) = crate::support::run(&store, &chain, 10).await;
    let (on_memory, _) = crate::support::run(&memory, &chain, 10).await;
    assert_eq!(on_redis, "AAADDDDDDD");
    assert_eq!(on_redis, on_memory);
    // Ten charged, but only the newest four can change a decision: one more than the
    // quota (the oldest's leaving still leaves the quota used).
    let (list, sum) = entries(&server, &key);
    assert_eq!(units(&list), sum);
    assert!((4..=4 + 1).contains(&sum), "{list:?}");
    let d = store.peek(&limit.key(who)).await.unwrap();
    assert_eq!(d.remaining(), 0);
}

/// A refusal's retry-after reads the oldest entries a page (64) at a time until the cost
/// fits: with 100 entries and a cost of 70, the answer lies on the second page. Both the
/// fast script (in order) and the chain script (charging every limit) agree with the
/// entries' times, within the server's clock before and after the check.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_after_past_the_first_page_of_entries_is_exact() {
    let server = RedisServer::start();
    let redis = crate::support::one_call_a_check(server.url());
    let store = AnyStore::Redis(redis.clone());
    let w = 60_000_000u64;
    let limit = Limit::sliding_log("paged", 100, Duration::from_micros(w)).unwrap();
    let who = Principal::user("u");
    let key = redis.key_name(&limit.key(who.clone()));
    let one = Chain::new().check(&limit, who.clone());
    let (admitted, _) = crate::support::run(&store, &one, 100).await;
    assert_eq!(admitted, "A".repeat(100));
    let (list, sum) = entries(&server, &key);
    assert_eq!(sum, 100);
    // The entry whose leaving lets 70 units fit: the one that brings what stays to 30.
    let mut left = 100i64;
    let due = list
        .iter()
        .find(|&&(_, c)| {
            left -= c as i64;
            left + 70 <= 100
        })
        .unwrap()
        .0;
    assert!(
        list.iter().position(|e| e.0 == due).unwrap() >= 64,
        "{list:?}"
    );
    for mode in [ChainMode::InOrder, ChainMode::ChargeAll] {
        let seventy = Chain::new().mode(mode).check_cost(&limit, who.clone(), 70);
        let before = crate::support::server_now(&server);
        let d = store.check(&seventy).await.unwrap();
        let after = crate::support::server_now(&server);
        let retry = d.denied_by().unwrap().1.retry_after().unwrap();
        let retry = u64::try_from(retry.as_micros()).unwrap();
        assert!(
            (due + w - after..=due + w - before).contains(&retry),
            "{mode:?}: {retry} us, not within [{}, {}]",
            due + w - after,
            due + w - before
        );
    }
}
