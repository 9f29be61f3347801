//! 64 OS threads × 1 000 checks on one key, frozen clock: exactly the limit is admitted.

use std::sync::Barrier;
use std::sync::atomic::{AtomicU64, Ordering};

use ratekeeper_core::clock::FakeClock;
use ratekeeper_core::{Chain, MemoryStore, Principal, Store};

use crate::support::{T0, every_algorithm, store};

const WORKERS: usize = 64;
const CHECKS: usize = 1_000;
const LIMIT: u64 = 100;
const REPETITIONS: usize = 50;

fn hammer(store: &MemoryStore, chains: &[Chain]) -> u64 {
    let allowed = AtomicU64::new(0);
    let start = Barrier::new(WORKERS);
    std::thread::scope(|s| {
        for w in 0..WORKERS {
            let (allowed, start) = (&allowed, &start);
            s.spawn(move || {
                start.wait();
                for i in 0..CHECKS {
                    let chain = &chains[(w + i) % chains.len()];
                    if store.check_now(chain).is_allowed() {
                        allowed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
    });
    allowed.into_inner()
}

#[test]
fn one_key_admits_exactly_the_limit_on_every_algorithm() {
    for rep in 0..REPETITIONS {
        let clock = FakeClock::at_micros(T0);
        let store = store(&clock);
        for limit in every_algorithm(&format!("r{rep}"), LIMIT) {
            let chain = Chain::new().check(&limit, Principal::user("hot"));
            let allowed = hammer(&store, std::slice::from_ref(&chain));
            assert_eq!(allowed, LIMIT, "{} repetition {rep}", limit.name());
        }
    }
}

#[test]
fn two_key_chains_admit_exactly_the_limit_and_never_deadlock() {
    for rep in 0..REPETITIONS {
        let clock = FakeClock::at_micros(T0);
        let store = store(&clock);
        let firsts = every_algorithm(&format!("a{rep}"), LIMIT);
        let seconds = every_algorithm(&format!("b{rep}"), LIMIT);
        for (a, b) in firsts.iter().zip(&seconds) {
            let (pa, pb) = (
                Principal::participant("p1"),
                Principal::ip([10, 0, 0, 1].into()),
            );
            // Half the workers take the keys in the opposite order: a lock-order bug
            // would deadlock here.
            let chains = [
                Chain::new().check(a, pa.clone()).check(b, pb.clone()),
                Chain::new().check(b, pb.clone()).check(a, pa.clone()),
            ];
            let allowed = hammer(&store, &chains);
            assert_eq!(
                allowed,
                LIMIT,
                "{} + {} repetition {rep}",
                a.name(),
                b.name()
            );
            // All or nothing: each counter was charged exactly once per admission.
            let rt = tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap();
            for (limit, p) in [(a, &pa), (b, &pb)] {
                let d = rt.block_on(store.peek(&limit.key(p.clone()))).unwrap();
                assert_eq!(d.remaining(), 0, "{}", limit.name());
                assert!(d.retry_after().is_none(), "{} over-charged", limit.name());
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tasks_on_a_multi_thread_runtime_admit_exactly_the_limit() {
    let clock = FakeClock::at_micros(T0);
    let store = store(&clock);
    for limit in every_algorithm("tasks", LIMIT) {
        let chain = Chain::new().check(&limit, Principal::user("hot"));
        let mut tasks = Vec::new();
        for _ in 0..WORKERS {
            let (store, chain) = (store.clone(), chain.clone());
            tasks.push(tokio::spawn(async move {
                let mut n = 0u64;
                for _ in 0..200 {
                    n += u64::from(store.check(&chain).await.unwrap().is_allowed());
                    tokio::task::yield_now().await;
                }
                n
            }));
        }
        let mut total = 0;
        for t in tasks {
            total += t.await.unwrap();
        }
        assert_eq!(total, LIMIT, "{}", limit.name());
    }
}
