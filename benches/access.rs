//! Allow/deny list lookups at 10, 10 000 and 1 000 000 entries (IPv4 /32s spread over the
//! address space, and IPv6 /48s), for an address on the list and one that is not: the
//! cost grows with log₂ of the list (a binary search over merged ranges), not its length.
//!
//! `cargo bench -p ratekeeper-benches --bench access`

use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use ratekeeper_tower::access::List;

/// A multiplicative hash: `n` addresses spread over the space, none adjacent.
fn spread(i: u64) -> u64 {
    i.wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

fn lists(n: u64) -> (List, List, Vec<IpAddr>, Vec<IpAddr>) {
    let v4: Vec<String> = (0..n)
        .map(|i| Ipv4Addr::from((spread(i) >> 32) as u32 | 1).to_string())
        .collect();
    let v6: Vec<String> = (0..n)
        .map(|i| format!("{}/48", Ipv6Addr::from(u128::from(spread(i)) << 64)))
        .collect();
    let on: Vec<IpAddr> = (0..1_000u64)
        .map(|i| IpAddr::V4(Ipv4Addr::from((spread(i % n) >> 32) as u32 | 1)))
        .collect();
    let off: Vec<IpAddr> = (0..1_000u64)
        .map(|i| IpAddr::V6(Ipv6Addr::from((u128::from(spread(i + n)) << 64) | 1 << 90)))
        .collect();
    (
        List::parse(&v4).expect("valid"),
        List::parse(&v6).expect("valid"),
        on,
        off,
    )
}

fn lookups(c: &mut Criterion) {
    let mut g = c.benchmark_group("access");
    for n in [10u64, 10_000, 1_000_000] {
        let (v4, v6, on, off) = lists(n);
        let mut i = 0;
        g.bench_with_input(BenchmarkId::new("ipv4-on-list", n), &v4, |b, l| {
            b.iter(|| {
                i = (i + 1) % on.len();
                black_box(l.contains_ip(black_box(on[i])))
            })
        });
        g.bench_with_input(BenchmarkId::new("ipv6-not-on-list", n), &v6, |b, l| {
            b.iter(|| {
                i = (i + 1) % off.len();
                black_box(l.contains_ip(black_box(off[i])))
            })
        });
    }
    g.finish();
}

criterion_group!(benches, lookups);
criterion_main!(benches);
