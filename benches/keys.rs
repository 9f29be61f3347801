//! Key encoding: building a principal, its key (the 128-bit digest the memory store
//! indexes by) and the Redis key name, for the principals a layer builds per request.
//!
//! `cargo bench -p ratekeeper-benches --bench keys`

use std::hint::black_box;
use std::net::IpAddr;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use ratekeeper_core::{Chain, Limit, Principal, PrincipalKind, RedisStore};

fn keys(c: &mut Criterion) {
    let limit = Limit::sliding_window("per-user", 100, Duration::from_secs(60)).unwrap();
    let custom = PrincipalKind::custom("visitor-game").unwrap();
    let v4: IpAddr = "203.0.113.9".parse().unwrap();
    let v6: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
    let mut g = c.benchmark_group("principal");
    g.bench_function("user, literal", |b| {
        b.iter(|| Principal::user(black_box("user-00000000000000042")))
    });
    g.bench_function("custom kind, literal", |b| {
        b.iter(|| Principal::new(custom.clone(), black_box("p-42")))
    });
    g.bench_function("ipv4", |b| b.iter(|| Principal::ip(black_box(v4))));
    g.bench_function("ipv6 /64", |b| b.iter(|| Principal::ip(black_box(v6))));
    g.bench_function("api key, hashed", |b| {
        b.iter(|| Principal::api_key(black_box("sk_live_0123456789abcdef0123456789")))
    });
    g.bench_function("composite of two", |b| {
        b.iter(|| Principal::composite(custom.clone(), black_box(["203.0.113.9", "quiz-7"])))
    });
    g.finish();

    let mut g = c.benchmark_group("key");
    let p = Principal::user("user-00000000000000042");
    g.bench_function("Limit::key (digest)", |b| {
        b.iter(|| limit.key(black_box(p.clone())))
    });
    g.bench_function("principal + key + one-check chain", |b| {
        b.iter(|| Chain::new().check(&limit, Principal::user(black_box("user-00000000000000042"))))
    });
    // Building the store needs a runtime (it connects lazily); nothing connects here.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let _entered = rt.enter();
    let redis = RedisStore::builder("redis://127.0.0.1:1/").build().unwrap();
    let key = limit.key(p);
    g.bench_function("Redis key name", |b| {
        b.iter(|| redis.key_name(black_box(&key)))
    });
    g.finish();
}

criterion_group!(benches, keys);
criterion_main!(benches);
