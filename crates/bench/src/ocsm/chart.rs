//! The OCSM benchmark's PNG: fraction answered against offered rate (left) and the latency
//! distribution at each path's lossless rate (right), one line per path, like the seed's
//! figures.
//!
//! Text is drawn with plotters' pure-Rust `ab_glyph` renderer and DejaVu Sans read from the
//! system (Debian: `fonts-dejavu-core`), so no fontconfig or freetype is needed; a missing font
//! is a clear error before any measurement starts.

use std::path::Path;

use plotters::prelude::*;

use super::report::{median_run, OcsmReport};

const SIZE_PX: (u32, u32) = (1400, 560);
const COLORS: [RGBColor; 3] = [
    RGBColor(200, 60, 40),
    RGBColor(30, 90, 200),
    RGBColor(40, 150, 60),
];

/// Registers the charts' font once per process (shared with `bench run`/`compare` charts), or
/// says what to install.
pub fn check_font() -> Result<(), String> {
    crate::report::chart::ensure_font()
}

fn err(e: impl std::fmt::Display) -> String {
    format!("chart: {e}")
}

pub fn draw(report: &OcsmReport, path: &Path) -> Result<(), String> {
    check_font()?;
    let paths: Vec<&str> = report.summary.iter().map(|s| s.path.as_str()).collect();
    let runs: Vec<_> = paths.iter().filter_map(|p| median_run(report, p)).collect();
    let root = BitMapBackend::new(path, SIZE_PX).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let (left, right) = root.split_horizontally(SIZE_PX.0 / 2);

    let x_max = runs
        .iter()
        .flat_map(|r| r.steps.iter().map(|s| s.sent_msgs_per_sec))
        .fold(1.0f64, f64::max)
        / 1e6
        * 1.05;
    let mut c = ChartBuilder::on(&left)
        .caption(
            "OCSM: messages answered vs offered rate",
            ("sans-serif", 22),
        )
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(55)
        .build_cartesian_2d(0f64..x_max, 0f64..105f64)
        .map_err(err)?;
    c.configure_mesh()
        .x_desc("offered rate (million messages/s, 45 per datagram)")
        .y_desc("answered (%)")
        .draw()
        .map_err(err)?;
    for (i, r) in runs.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let pts: Vec<(f64, f64)> = r
            .steps
            .iter()
            .map(|s| (s.sent_msgs_per_sec / 1e6, s.answered_fraction * 100.0))
            .collect();
        c.draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
            .map_err(err)?
            .label(format!(
                "{} (lossless {:.2} M/s)",
                r.path,
                r.lossless_msgs_per_sec.unwrap_or(0.0) / 1e6
            ))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        c.draw_series(pts.into_iter().map(|p| Circle::new(p, 3, color.filled())))
            .map_err(err)?;
    }
    c.configure_series_labels()
        .position(SeriesLabelPosition::LowerLeft)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;

    let dists: Vec<(&str, Vec<(u64, f64)>)> = runs
        .iter()
        .filter_map(|r| Some((r.path.as_str(), r.lossless_step()?.latency_buckets.clone())))
        .collect();
    let lat_max = dists
        .iter()
        .flat_map(|(_, b)| b.iter().filter(|(_, f)| *f > 0.0).map(|(u, _)| *u))
        .max()
        .unwrap_or(2)
        .max(2) as f64;
    let mut c = ChartBuilder::on(&right)
        .caption("Latency at the lossless rate", ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(55)
        .build_cartesian_2d((1f64..lat_max * 2.0).log_scale(), 0f64..100f64)
        .map_err(err)?;
    c.configure_mesh()
        .x_desc("latency bucket upper bound (µs, from intended send time)")
        .y_desc("datagrams (%)")
        .draw()
        .map_err(err)?;
    for (i, (name, b)) in dists.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let pts: Vec<(f64, f64)> = b.iter().map(|(u, f)| (*u as f64, f * 100.0)).collect();
        c.draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
            .map_err(err)?
            .label(name.to_string())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        c.draw_series(pts.into_iter().map(|p| Circle::new(p, 3, color.filled())))
            .map_err(err)?;
    }
    c.configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}
