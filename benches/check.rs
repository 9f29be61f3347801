//! ns per check: the memory store against governor's keyed limiter, in one run.
//!
//! `cargo bench -p ratekeeper-benches --bench check`
//!
//! Both sides check 24-byte string principals chosen pseudo-randomly among N live keys
//! (10k, 100k, 1M), on one thread and on two, on the allowed path (a quota never reached)
//! and the refused path (every key exhausted first). Ours is measured twice: with the
//! chain built ahead (governor's side likewise gets a ready `String`), and with the
//! principal, key and chain built inside the timed loop, as a server does per request.

use std::hint::black_box;
use std::num::NonZeroU32;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use ratekeeper_core::{Chain, Limit, MemoryStore, Principal};

const SIZES: [usize; 3] = [10_000, 100_000, 1_000_000];

fn text(i: usize) -> String {
    format!("user-{i:019}") // 24 bytes
}

/// A fixed pseudo-random walk over `n` keys.
fn walk(n: usize) -> Vec<u32> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..1 << 20)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % n as u64) as u32
        })
        .collect()
}

fn limit(kind: &str, refused: bool) -> Limit {
    let hour = Duration::from_secs(3_600);
    let (q, cap) = if refused {
        (1, 1)
    } else {
        (u64::from(u32::MAX), 4_000_000_000)
    };
    match kind {
        "token_bucket" => Limit::token_bucket(
            "b",
            cap,
            1,
            if refused {
                hour
            } else {
                Duration::from_micros(1_000)
            },
        ),
        // The sliding window's bound is quota × window ≤ 2^52 µs: a million an hour is
        // never reached here either.
        "sliding_window" => Limit::sliding_window("s", q.min(1_000_000), hour),
        _ => Limit::fixed_window("f", q, hour),
    }
    .unwrap()
}

/// Runs `per_thread` on `threads` threads, `iters` calls in all; returns the wall time.
fn timed<F: Fn(u64, usize) + Sync>(threads: usize, iters: u64, f: F) -> Duration {
    let start = Barrier::new(threads + 1);
    std::thread::scope(|s| {
        for t in 0..threads {
            let (f, start) = (&f, &start);
            s.spawn(move || {
                start.wait();
                f(iters / threads as u64, t);
            });
        }
        start.wait();
        let t0 = Instant::now();
        // The scope joins every thread before returning.
        t0
    })
    .elapsed()
}

fn bench(c: &mut Criterion) {
    for &n in &SIZES {
        let texts: Vec<String> = (0..n).map(text).collect();
        let path = walk(n);
        for refused in [false, true] {
            let outcome = if refused { "refused" } else { "allowed" };
            let mut g = c.benchmark_group(format!("check/{outcome}/{n}"));
            g.sample_size(20)
                .warm_up_time(Duration::from_millis(500))
                .measurement_time(Duration::from_secs(2));

            // governor: keyed, DashMap of String → GCRA state.
            let quota = if refused {
                Quota::per_hour(NonZeroU32::MIN)
            } else {
                Quota::per_second(NonZeroU32::MAX)
            };
            let gov: DefaultKeyedRateLimiter<String> = RateLimiter::keyed(quota);
            for t in &texts {
                let _ = gov.check_key(t);
            }
            for threads in [1, 2] {
                g.bench_with_input(BenchmarkId::new("governor", threads), &threads, |b, &th| {
                    b.iter_custom(|iters| {
                        timed(th, iters, |k, t| {
                            for i in 0..k as usize {
                                let idx = path[(i * 2 + t) & (path.len() - 1)] as usize;
                                let _ = black_box(gov.check_key(&texts[idx]));
                            }
                        })
                    })
                });
            }
            drop(gov);

            for kind in ["token_bucket", "sliding_window", "fixed_window"] {
                let store = MemoryStore::builder().max_keys(2_000_000).build().unwrap();
                let l = limit(kind, refused);
                let chains: Vec<Chain> = texts
                    .iter()
                    .map(|t| Chain::new().check(&l, Principal::user(t)))
                    .collect();
                for ch in &chains {
                    store.check_now(ch);
                }
                assert_eq!(store.check_now(&chains[0]).is_allowed(), !refused);
                for threads in [1, 2] {
                    g.bench_with_input(BenchmarkId::new(kind, threads), &threads, |b, &th| {
                        b.iter_custom(|iters| {
                            timed(th, iters, |k, t| {
                                for i in 0..k as usize {
                                    let idx = path[(i * 2 + t) & (path.len() - 1)] as usize;
                                    black_box(store.check_now(&chains[idx]));
                                }
                            })
                        })
                    });
                }
                drop(chains);
                g.bench_function(BenchmarkId::new(format!("{kind}+key"), 1), |b| {
                    b.iter_custom(|iters| {
                        timed(1, iters, |k, _| {
                            for i in 0..k as usize {
                                let idx = path[i & (path.len() - 1)] as usize;
                                let chain = Chain::new().check(&l, Principal::user(&texts[idx]));
                                black_box(store.check_now(&chain));
                            }
                        })
                    })
                });
            }
            g.finish();
        }
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
