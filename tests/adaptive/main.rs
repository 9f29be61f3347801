//! AIMD against an upstream that answers 429 above a fixed rate, on a controlled clock.

mod client;
mod hostile;
mod shared;

use std::time::Duration;

use ratekeeper_core::clock::FakeClock;
use ratekeeper_core::pace::{Adaptive, Aimd, Pace};
use ratekeeper_core::{Chain, Limit, MemoryStore, Principal};

const T0: u64 = 1_799_971_200_000_000;

#[test]
fn the_rate_settles_between_60_and_100_percent_of_the_upstream_and_never_overshoots() {
    let upstream_rate = 20u64; // calls per second, then 429
    let step = 1.0;
    let clock = FakeClock::at_micros(T0);
    // The upstream: an exact sliding log of 20 per second, on the same clock.
    let upstream = MemoryStore::builder().clock(clock.clone()).build().unwrap();
    let limit = Limit::sliding_log("upstream", upstream_rate, Duration::from_secs(1)).unwrap();
    let site = Chain::new().check(&limit, Principal::global());
    let pacer = Adaptive::with_clock(
        Aimd {
            initial: 2.0,
            increase: step,
            ..Aimd::default()
        },
        clock.clone(),
    )
    .unwrap();

    let seconds = 200u64;
    let mut sent = vec![0u64; seconds as usize];
    while clock_secs(&clock) < seconds {
        match pacer.acquire("site") {
            Pace::Wait(d) => clock.advance(d),
            Pace::Go => {
                sent[clock_secs(&clock) as usize] += 1;
                let d = upstream.check_now(&site);
                if d.is_allowed() {
                    pacer.success("site");
                } else {
                    pacer.rejected("site", d.denied_by().unwrap().1.retry_after());
                }
            }
        }
    }
    let last = &sent[sent.len() - 20..];
    let avg = last.iter().sum::<u64>() as f64 / 20.0;
    println!("calls per second, last 20: {last:?}; average {avg:.1} of {upstream_rate}");
    assert!(
        avg >= 0.6 * upstream_rate as f64 && avg <= upstream_rate as f64,
        "{avg}"
    );
    let worst = *sent.iter().max().unwrap();
    assert!(
        worst as f64 <= upstream_rate as f64 + step,
        "a second with {worst} calls"
    );
}

fn clock_secs(clock: &FakeClock) -> u64 {
    use ratekeeper_core::clock::Clock;
    (clock.now_micros() - T0) / 1_000_000
}
