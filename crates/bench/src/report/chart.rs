//! PNG charts of benchmark reports, drawn with plotters' bitmap backend.
//!
//! ```text
//!   bench run      ┌ ops/s per depth (bars) ┐┌ p50 / p99 per depth (lines) ┐
//!   bench compare  ┌ ops/s per target ┐┌ p50 / p99 per target ┐
//!                  ┌ server CPU s/M ops ┐┌ RSS bytes per key ┐
//! ```
//!
//! Text needs a TrueType font. plotters' `ab_glyph` feature renders from font bytes we hand it,
//! which avoids fontconfig and freetype: the font is DejaVu Sans from Debian's
//! `fonts-dejavu-core` (installed by scripts/test.sh), or the file `DIRECTKV_FONT` names.
//! Without either, charts fail with an error that says which package to install; the table,
//! JSON and CSV outputs never need a font.

use std::path::Path;
use std::sync::OnceLock;

use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;

use crate::report::{CompareReport, RunReport};

/// Where Debian's fonts-dejavu-core puts DejaVu Sans.
pub const FONT_PATH_DEFAULT: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";
/// Environment variable naming another TrueType font file.
pub const FONT_PATH_ENV: &str = "DIRECTKV_FONT";
/// Size of one chart panel, pixels.
const PANEL_WIDTH: u32 = 640;
const PANEL_HEIGHT: u32 = 400;
/// The panel's width less its y label area and margins, pixels.
const PLOT_WIDTH_APPROX: u32 = PANEL_WIDTH - 100;

const COLORS: [RGBColor; 4] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
];

/// Registers the font once per process; later calls return the first outcome.
pub(crate) fn ensure_font() -> Result<(), String> {
    static REGISTERED: OnceLock<Result<(), String>> = OnceLock::new();
    REGISTERED
        .get_or_init(|| {
            let path = std::env::var(FONT_PATH_ENV).unwrap_or_else(|_| FONT_PATH_DEFAULT.to_string());
            let bytes = std::fs::read(&path).map_err(|e| {
                format!(
                    "PNG charts need a TrueType font and {path} cannot be read ({e}): install Debian's fonts-dejavu-core (`sudo apt-get install fonts-dejavu-core`) or set {FONT_PATH_ENV} to a .ttf file"
                )
            })?;
            // plotters keeps registered fonts for the life of the process, so the bytes must
            // live that long too; this happens once.
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            plotters::style::register_font("sans-serif", FontStyle::Normal, bytes)
                .map_err(|_| format!("{path} is not a usable TrueType font"))
        })
        .clone()
}

/// One bar chart panel: a bar per label, in one or more series side by side.
struct Bars<'a> {
    title: &'a str,
    y_label: &'a str,
    labels: &'a [String],
    /// (series name, one value per label).
    series: Vec<(&'a str, Vec<f64>)>,
}

fn draw_bars(
    area: &DrawingArea<BitMapBackend<'_>, plotters::coord::Shift>,
    bars: &Bars<'_>,
) -> Result<(), String> {
    // plotters' segmented axis over 0..k has k segments; it needs k >= 1, so a single bar
    // shares its axis with one empty segment.
    let n = (bars.labels.len() as i32).max(2);
    let y_max = bars
        .series
        .iter()
        .flat_map(|(_, v)| v.iter().copied())
        .fold(0.0f64, f64::max)
        .max(f64::MIN_POSITIVE)
        * 1.15;
    let mut chart = ChartBuilder::on(area)
        .caption(bars.title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(72)
        .build_cartesian_2d((0..n - 1).into_segmented(), 0.0..y_max)
        .map_err(draw_error)?;
    let labels = bars.labels;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .y_desc(bars.y_label)
        .x_labels(labels.len())
        .x_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) | SegmentValue::Exact(i) => {
                labels.get(*i as usize).cloned().unwrap_or_default()
            }
            SegmentValue::Last => String::new(),
        })
        .y_label_formatter(&|y| short_number(*y))
        .light_line_style(WHITE)
        .label_style(("sans-serif", 14))
        .draw()
        .map_err(draw_error)?;
    let groups = bars.series.len().max(1) as u32;
    for (s, (name, values)) in bars.series.iter().enumerate() {
        let color = COLORS[s % COLORS.len()];
        let series = chart
            .draw_series(values.iter().enumerate().map(|(i, &v)| {
                let i = i as i32;
                let mut bar = Rectangle::new(
                    [
                        (SegmentValue::Exact(i), 0.0),
                        (SegmentValue::Exact(i + 1), v),
                    ],
                    color.filled(),
                );
                // Split the segment among the series, with a gap at each side. Margins are
                // pixels, so they come from the plot's approximate width; `left + each` never
                // exceeds `segment`, so `right` cannot underflow.
                let segment = PLOT_WIDTH_APPROX / (n as u32);
                let width = segment * 7 / 10;
                let each = width / groups;
                let left = (segment - width) / 2 + each * s as u32;
                let right = segment - left - each;
                bar.set_margin(0, 0, left, right);
                bar
            }))
            .map_err(draw_error)?;
        if bars.series.len() > 1 {
            series.label(*name).legend(move |(x, y)| {
                Rectangle::new([(x, y - 5), (x + 10, y + 5)], color.filled())
            });
        }
    }
    if bars.series.len() > 1 {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .label_font(("sans-serif", 14))
            .draw()
            .map_err(draw_error)?;
    }
    Ok(())
}

/// `bench run`: throughput and latency for every depth of the report.
pub fn run_chart(report: &RunReport, path: &Path) -> Result<(), String> {
    ensure_font()?;
    let root = BitMapBackend::new(path, (PANEL_WIDTH * 2, PANEL_HEIGHT)).into_drawing_area();
    root.fill(&WHITE).map_err(draw_error)?;
    let panels = root.split_evenly((1, 2));
    let labels: Vec<String> = report
        .runs
        .iter()
        .map(|r| format!("depth {}", r.depth))
        .collect();
    let title = format!("{} {} on {}", report.workload, report.dist, report.target);
    draw_bars(
        &panels[0],
        &Bars {
            title: &title,
            y_label: "ops/s",
            labels: &labels,
            series: vec![("ops/s", report.runs.iter().map(|r| r.ops_per_sec).collect())],
        },
    )?;
    draw_bars(
        &panels[1],
        &Bars {
            title: "latency per operation",
            y_label: "microseconds",
            labels: &labels,
            series: vec![
                (
                    "p50",
                    report.runs.iter().map(|r| r.latency.p50_us).collect(),
                ),
                (
                    "p99",
                    report.runs.iter().map(|r| r.latency.p99_us).collect(),
                ),
            ],
        },
    )?;
    root.present().map_err(draw_error)
}

/// `bench compare`: throughput, latency, CPU and memory per target.
pub fn compare_chart(report: &CompareReport, path: &Path) -> Result<(), String> {
    ensure_font()?;
    let root = BitMapBackend::new(path, (PANEL_WIDTH * 2, PANEL_HEIGHT * 2)).into_drawing_area();
    root.fill(&WHITE).map_err(draw_error)?;
    let panels = root.split_evenly((2, 2));
    let labels: Vec<String> = report.rows.iter().map(|r| r.name.clone()).collect();
    let of = |f: fn(&crate::report::CompareRow) -> f64| report.rows.iter().map(f).collect();
    let title = format!(
        "{} {}, {} keys, depth {}: ops/s",
        report.workload, report.dist, report.keys, report.depth
    );
    // The ops/s panel ends with the loopback echo reference, when it was measured: what an echo
    // pair over loopback TCP exchanged at this depth with no work (a reference, not a bound).
    let mut ops_labels = labels.clone();
    let mut ops: Vec<f64> = of(|r| r.run.ops_per_sec);
    if let Some(c) = &report.loopback_echo_reference {
        ops_labels.push("loopback echo (reference)".to_string());
        ops.push(c.ops_per_sec);
    }
    draw_bars(
        &panels[0],
        &Bars {
            title: &title,
            y_label: "ops/s",
            labels: &ops_labels,
            series: vec![("ops/s", ops)],
        },
    )?;
    draw_bars(
        &panels[1],
        &Bars {
            title: "latency per operation",
            y_label: "microseconds",
            labels: &labels,
            series: vec![
                ("p50", of(|r| r.run.latency.p50_us)),
                ("p99", of(|r| r.run.latency.p99_us)),
            ],
        },
    )?;
    draw_bars(
        &panels[2],
        &Bars {
            title: "server CPU per million operations",
            y_label: "CPU seconds",
            labels: &labels,
            series: vec![("cpu", of(|r| r.server_cpu_sec_per_mop))],
        },
    )?;
    draw_bars(
        &panels[3],
        &Bars {
            title: "resident memory per key",
            y_label: "bytes",
            labels: &labels,
            series: vec![("rss", of(|r| r.rss_bytes_per_key.max(0.0)))],
        },
    )?;
    root.present().map_err(draw_error)
}

fn draw_error<E: std::fmt::Display>(e: E) -> String {
    format!("cannot draw the chart: {e}")
}

/// 1234567 -> "1.23M", 0.5 -> "0.5".
fn short_number(y: f64) -> String {
    let a = y.abs();
    if a >= 1e9 {
        format!("{:.2}G", y / 1e9)
    } else if a >= 1e6 {
        format!("{:.2}M", y / 1e6)
    } else if a >= 1e4 {
        format!("{:.0}k", y / 1e3)
    } else if a >= 10.0 || a == 0.0 {
        format!("{y:.0}")
    } else {
        format!("{y:.2}")
    }
}
