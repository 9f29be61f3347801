//! The rules curve's plot (`scripts/rules-curve.sh`): instructions per allowed request over
//! bare axum against the number of rules, one line per store, from the script's CSV
//! (`store,rules,instructions`).

use std::collections::BTreeMap;

use plotters::prelude::*;

/// `LAYER_PLOT=<csv>:<svg>`: reads the CSV, writes the SVG.
pub(super) fn plot(spec: &str) {
    let Some((csv, svg)) = spec.split_once(':') else {
        eprintln!("LAYER_PLOT=<csv>:<svg>");
        return;
    };
    match std::fs::read_to_string(csv)
        .map_err(Into::into)
        .and_then(|text| draw(&parse(&text), svg))
    {
        Ok(()) => println!("plot: {svg}"),
        Err(e) => eprintln!("plot not written ({svg}): {e}"),
    }
}

/// Each store's points, in the CSV's order of stores.
fn parse(text: &str) -> Vec<(String, Vec<(u32, f64)>)> {
    let mut order: Vec<String> = Vec::new();
    let mut points: BTreeMap<String, Vec<(u32, f64)>> = BTreeMap::new();
    for line in text.lines().skip(1) {
        let mut cols = line.split(',');
        let (Some(store), Some(Ok(rules)), Some(Ok(cost))) = (
            cols.next(),
            cols.next().map(str::parse::<u32>),
            cols.next().map(str::parse::<f64>),
        ) else {
            continue;
        };
        if !order.iter().any(|s| s == store) {
            order.push(store.to_owned());
        }
        points
            .entry(store.to_owned())
            .or_default()
            .push((rules, cost));
    }
    order
        .into_iter()
        .map(|s| {
            let p = points.remove(&s).unwrap_or_default();
            (s, p)
        })
        .collect()
}

fn draw(
    series: &[(String, Vec<(u32, f64)>)],
    path: &str,
) -> Result<(), Box<dyn std::error::Error>> {
    let all = series.iter().flat_map(|(_, p)| p.iter());
    let top = all.clone().map(|p| p.1).fold(0.0, f64::max) * 1.1;
    let last = all.map(|p| p.0).max().unwrap_or(1);
    let root = SVGBackend::new(path, (800, 480)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "Client instructions per allowed request over bare axum",
            ("sans-serif", 20),
        )
        .margin(16)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d(1u32..last, 0f64..top)?;
    chart
        .configure_mesh()
        .x_desc("rules on the request")
        .y_desc("instructions")
        .x_labels(usize::try_from(last).unwrap_or(8))
        .y_label_formatter(&|v| format!("{v:.0}"))
        .draw()?;
    for (i, (store, points)) in series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(
                points.iter().copied(),
                color.stroke_width(2),
            ))?
            .label(store.as_str())
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], color.stroke_width(2)));
        chart.draw_series(points.iter().map(|&p| Circle::new(p, 3, color.filled())))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}
