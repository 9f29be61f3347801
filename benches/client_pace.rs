//! The client pacing layer's pace over time: three workers through `PaceLayer` against a
//! local upstream of 50 calls a second, for 12 s each case: the upstream saying so (IETF
//! fields) with the pace on the memory store and on a `redis-server` of its own, and an
//! upstream that only answers 429 with `Retry-After` and no other field (AIMD from 30/s,
//! +5 a second per quiet second, halved on a refusal). Prints calls admitted and refused per
//! second, and plots admitted calls a second (per 250 ms) to `$CLIENT_PACE_SVG` or
//! `target/client-pace.svg`.
//!
//! `cargo bench -p ratekeeper-benches --bench client_pace`

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use http::StatusCode;
use plotters::prelude::*;
use ratekeeper_core::pace::{Aimd, SharedPacer};
use ratekeeper_core::{AnyStore, MemoryStore};
use ratekeeper_testkit::redis::RedisServer;
use ratekeeper_tests::reqwest_service;
use ratekeeper_tower::HeaderStyle;
use ratekeeper_tower::client::PaceLayer;
use tokio::time::Instant;
use tower::{Service, ServiceBuilder, ServiceExt};

const RATE: u64 = 50;
const RUN: Duration = Duration::from_secs(12);
const BIN: Duration = Duration::from_millis(250);
const BINS: usize = 48;

/// Admitted and refused calls per bin.
type Bins = Arc<Vec<(AtomicU64, AtomicU64)>>;

async fn worker(pacer: SharedPacer, url: String, start: Instant, bins: Bins) {
    let mut c = ServiceBuilder::new()
        .layer(PaceLayer::new(pacer))
        .service(reqwest_service());
    while start.elapsed() < RUN {
        let req = http::Request::get(&url).body(String::new()).unwrap();
        let Ok(answer) = c.ready().await.unwrap().call(req).await else {
            continue;
        };
        let bin = (start.elapsed().as_millis() / BIN.as_millis()) as usize;
        if let Some((ok, refused)) = bins.get(bin) {
            match answer.status() {
                StatusCode::OK => ok.fetch_add(1, Ordering::Relaxed),
                _ => refused.fetch_add(1, Ordering::Relaxed),
            };
        }
    }
}

async fn case(store: impl Fn() -> AnyStore, style: HeaderStyle, name: &str) -> Vec<(u64, u64)> {
    let up = ratekeeper_tests::upstream(RATE, style).await;
    let bins: Bins = Arc::new((0..BINS).map(|_| Default::default()).collect());
    let start = Instant::now();
    // An upstream that says its limit sets the pace from its first answer; one that says
    // nothing is found by AIMD: from 30/s, 5 more a second per quiet second, halved on a
    // refusal.
    let aimd = match style {
        HeaderStyle::None => Aimd {
            initial: 30.0,
            increase: 5.0,
            period: Duration::from_secs(1),
            ..Aimd::default()
        },
        _ => Aimd {
            initial: 5.0,
            period: Duration::from_secs(1),
            ..Aimd::default()
        },
    };
    let workers: Vec<_> = (0..3)
        .map(|_| {
            let pacer = SharedPacer::new(store(), name, aimd).unwrap();
            tokio::spawn(worker(pacer, up.url("/items"), start, bins.clone()))
        })
        .collect();
    for w in workers {
        w.await.unwrap();
    }
    bins.iter()
        .map(|(ok, refused)| (ok.load(Ordering::Relaxed), refused.load(Ordering::Relaxed)))
        .collect()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let redis = RedisServer::start();
    let memory = AnyStore::Memory(MemoryStore::new());
    let mem = memory.clone();
    let silent = AnyStore::Memory(MemoryStore::new());
    let cases = [
        (
            "stated, memory",
            case(move || mem.clone(), HeaderStyle::Ietf, "stated-memory").await,
        ),
        (
            "stated, Redis",
            case(|| redis.store(), HeaderStyle::Ietf, "stated-redis").await,
        ),
        (
            "silent (AIMD), memory",
            case(move || silent.clone(), HeaderStyle::None, "silent").await,
        ),
    ];
    println!("3 workers, an upstream of {RATE}/s; per second: admitted/refused");
    for (name, bins) in &cases {
        let per_second: Vec<String> = bins
            .chunks(4)
            .map(|c| {
                let (ok, no) = c.iter().fold((0, 0), |(a, b), (x, y)| (a + x, b + y));
                format!("{ok}/{no}")
            })
            .collect();
        let after: (u64, u64) = bins[4..]
            .iter()
            .fold((0, 0), |(a, b), (x, y)| (a + x, b + y));
        println!(
            "{name:>22}: {} | after the first second {:.1}/s admitted ({:.0}% of {RATE}), {:.2}% refused",
            per_second.join(" "),
            after.0 as f64 / 11.0,
            after.0 as f64 / 11.0 / RATE as f64 * 100.0,
            after.1 as f64 / (after.0 + after.1).max(1) as f64 * 100.0
        );
    }
    let path = std::env::var("CLIENT_PACE_SVG").unwrap_or_else(|_| {
        concat!(env!("CARGO_MANIFEST_DIR"), "/../target/client-pace.svg").to_owned()
    });
    match draw(&cases, &path) {
        Ok(()) => println!("\nplot: {path}"),
        Err(e) => println!("\nplot not written ({path}): {e}"),
    }
}

fn draw(cases: &[(&str, Vec<(u64, u64)>)], path: &str) -> Result<(), Box<dyn std::error::Error>> {
    let per_s = |n: u64| n as f64 * 1_000.0 / BIN.as_millis() as f64;
    let root = SVGBackend::new(path, (900, 460)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "Three paced workers against an upstream of 50 calls/s",
            ("sans-serif", 20),
        )
        .margin(16)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..RUN.as_secs_f64(), 0f64..80f64)?;
    chart
        .configure_mesh()
        .x_desc("seconds")
        .y_desc("calls admitted per second (per 250 ms)")
        .draw()?;
    chart
        .draw_series(LineSeries::new(
            [(0.0, 50.0), (RUN.as_secs_f64(), 50.0)],
            BLACK.mix(0.4),
        ))?
        .label("the upstream's limit")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], BLACK.mix(0.4)));
    for (i, (name, bins)) in cases.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let line = bins
            .iter()
            .enumerate()
            .map(|(b, (ok, _))| (b as f64 * BIN.as_secs_f64(), per_s(*ok)));
        chart
            .draw_series(LineSeries::new(line, color.stroke_width(2)))?
            .label(*name)
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], color.stroke_width(2)));
        let refused = bins
            .iter()
            .enumerate()
            .filter(|(_, (_, no))| *no > 0)
            .map(|(b, (_, no))| Cross::new((b as f64 * BIN.as_secs_f64(), per_s(*no)), 4, color));
        chart.draw_series(refused)?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}
