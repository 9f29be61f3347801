//! Header rendering: the rate-limit headers of one response, for one limit and for four,
//! in each style, into a header map that already holds what axum puts there.
//!
//! `cargo bench -p ratekeeper-benches --bench headers`

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use http::{HeaderMap, HeaderValue};
use ratekeeper_core::{Answer, Chain, ChainDecision, Decision, Limit, Outcome, Principal};
use ratekeeper_tower::{Answering, HeaderStyle, Verdict};

fn decision(remaining: u64) -> Decision {
    Decision::from_parts(
        Outcome::Allowed,
        1_000,
        remaining,
        42_000_000,
        0,
        60_000_000,
    )
}

fn chain(n: usize) -> Chain {
    let mut chain = Chain::new();
    for i in 0..n {
        let limit =
            Limit::fixed_window(&format!("limit-{i}"), 1_000, Duration::from_secs(60)).unwrap();
        chain = chain.check(&limit, Principal::user("u"));
    }
    chain
}

fn response_headers() -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    h.insert(CONTENT_LENGTH, HeaderValue::from_static("2"));
    h
}

fn headers(c: &mut Criterion) {
    let mut g = c.benchmark_group("headers");
    for n in [1usize, 4] {
        let chain = chain(n);
        let d = ChainDecision::new((0..n).map(|i| decision(900 - i as u64)).collect());
        for (style, name) in [
            (HeaderStyle::Both, "both"),
            (HeaderStyle::Trio, "trio"),
            (HeaderStyle::Ietf, "ietf"),
        ] {
            let answering = Answering::new().headers(style);
            let Verdict::Proceed(Some(info)) =
                answering.verdict_for(Answer::Store(d.clone()), &chain)
            else {
                panic!("an allowed chain proceeds with headers");
            };
            g.bench_with_input(BenchmarkId::new(name, n), &info, |b, info| {
                b.iter_batched_ref(
                    response_headers,
                    |h| answering.write(black_box(info), h),
                    criterion::BatchSize::SmallInput,
                )
            });
        }
    }
    g.finish();
}

criterion_group!(benches, headers);
criterion_main!(benches);
