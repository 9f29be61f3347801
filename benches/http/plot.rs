//! The HTTP bench's plot: requests per second per server, allowed and refused traffic side
//! by side.

use plotters::prelude::*;

use super::BenchRow;

/// Where the SVG goes: `$HTTP_BENCH_SVG`, or `target/http-bench.svg`.
pub(super) fn write(table: &[BenchRow]) {
    let path = std::env::var("HTTP_BENCH_SVG").unwrap_or_else(|_| {
        concat!(env!("CARGO_MANIFEST_DIR"), "/../target/http-bench.svg").to_owned()
    });
    match draw(table, &path) {
        Ok(()) => println!("\nplot: {path}"),
        Err(e) => println!("\nplot not written ({path}): {e}"),
    }
}

fn draw(table: &[BenchRow], path: &str) -> Result<(), Box<dyn std::error::Error>> {
    let mut peers: Vec<&str> = Vec::new();
    for r in table {
        if !peers.contains(&r.peer.name()) {
            peers.push(r.peer.name());
        }
    }
    let top = table.iter().map(|r| r.rps).fold(0.0, f64::max) * 1.15;
    let root = SVGBackend::new(path, (900, 480)).into_drawing_area();
    root.fill(&WHITE)?;
    let n = peers.len() as u32;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "HTTP throughput per server (median of rounds)",
            ("sans-serif", 20),
        )
        .margin(16)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d((0u32..n * 3).into_segmented(), 0f64..top)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(peers.len() * 3)
        .x_label_formatter(&|x| match x {
            SegmentValue::CenterOf(i) if i % 3 == 1 => peers
                .get(usize::try_from(i / 3).unwrap_or(0))
                .map_or(String::new(), |p| (*p).to_owned()),
            _ => String::new(),
        })
        .y_desc("requests / s")
        .y_label_formatter(&|v| format!("{v:.0}"))
        .draw()?;
    for (refused, color, label) in [
        (false, BLUE, "10 000 keys, allowed"),
        (true, RED, "one exhausted key (refused)"),
    ] {
        let bars = table
            .iter()
            .filter(|r| r.refused == refused)
            .filter_map(|r| {
                let i = u32::try_from(peers.iter().position(|p| *p == r.peer.name())?).ok()?;
                Some((i * 3 + u32::from(refused), r.rps))
            });
        chart
            .draw_series(
                Histogram::vertical(&chart)
                    .style(color.mix(0.7).filled())
                    .margin(2)
                    .data(bars),
            )?
            .label(label)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], color.filled()));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}
