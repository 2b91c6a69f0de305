//! What `bench ocsm` reports: per step the offered and achieved rates, the answered fraction,
//! latency percentiles and buckets, and server CPU per message; per path and run the lossless
//! rate; over runs the medians. Serialized as is for `--json`, rendered as terminal tables by
//! `text`, drawn by `chart.rs`.
//!
//! Goals: pure functions of the generator's step results, testable without a server.
//! Non-goals: measuring anything (`generator.rs` does), the network benchmark's report
//! (`crate::report`).

use hdrhistogram::Histogram;
use serde::Serialize;

use super::generator;

/// A step whose achieved send rate is below this share of the offered one was limited by the
/// generator, not the server.
const GENERATOR_LIMITED_SHARE: f64 = 0.97;

#[derive(Debug, Clone, Serialize)]
pub struct StepReport {
    pub offered_msgs_per_sec: f64,
    pub sent_msgs_per_sec: f64,
    pub messages_sent: u64,
    pub messages_answered: u64,
    pub answered_fraction: f64,
    pub error_replies: u64,
    /// Answered messages with a failure status; a step with any is not lossless.
    pub failed_messages: u64,
    pub latency_us_p50: u64,
    pub latency_us_p99: u64,
    pub latency_us_p999: u64,
    pub latency_us_max: u64,
    /// Server CPU time over the step divided by the messages answered (None: no PID).
    pub server_cpu_us_per_msg: Option<f64>,
    /// Server CPU time over the step's wall time (1.0 = one core busy).
    pub server_cpu_share: Option<f64>,
    pub generator_limited: bool,
    /// Latency distribution: (upper bound µs, share of answered datagrams).
    pub latency_buckets: Vec<(u64, f64)>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PathRun {
    pub path: String,
    pub run: usize,
    pub steps: Vec<StepReport>,
    /// Highest achieved send rate with every message answered.
    pub lossless_msgs_per_sec: Option<f64>,
    pub cpu_us_per_msg_at_lossless: Option<f64>,
    /// True if the generator could not reach some offered rate.
    pub generator_limited: bool,
}

impl PathRun {
    pub(super) fn lossless_step(&self) -> Option<&StepReport> {
        self.steps
            .iter()
            .filter(|s| {
                s.messages_answered == s.messages_sent
                    && s.error_replies == 0
                    && s.failed_messages == 0
            })
            .max_by(|a, b| a.sent_msgs_per_sec.total_cmp(&b.sent_msgs_per_sec))
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct PathSummary {
    pub path: String,
    pub runs: usize,
    pub lossless_msgs_per_sec_median: Option<f64>,
    pub lossless_msgs_per_sec_all: Vec<Option<f64>>,
    pub cpu_us_per_msg_at_lossless_median: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct OcsmReport {
    pub msgs_per_datagram: usize,
    pub keys: u64,
    pub update_ratio: f64,
    pub seconds_per_step: f64,
    pub server_cpu: Option<usize>,
    pub client_cpu: Option<usize>,
    pub shards: usize,
    pub nice: i32,
    pub runs: Vec<PathRun>,
    pub summary: Vec<PathSummary>,
    /// Median lossless rate of `batched` over `plain`, when both ran.
    pub batched_over_plain: Option<f64>,
    pub png: Option<String>,
}

pub(super) fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// The run of `path` whose lossless rate is the median of its runs (for tables and charts).
pub fn median_run<'r>(report: &'r OcsmReport, path: &str) -> Option<&'r PathRun> {
    let mut mine: Vec<&PathRun> = report.runs.iter().filter(|r| r.path == path).collect();
    mine.sort_by(|a, b| {
        a.lossless_msgs_per_sec
            .unwrap_or(0.0)
            .total_cmp(&b.lossless_msgs_per_sec.unwrap_or(0.0))
    });
    mine.get(mine.len() / 2).copied()
}

pub(super) fn step_report(
    r: &generator::StepResult,
    cpu_us: Option<f64>,
    wall_us: f64,
) -> StepReport {
    let h = &r.latency_us;
    let q = |p: f64| {
        if h.is_empty() {
            0
        } else {
            h.value_at_quantile(p)
        }
    };
    StepReport {
        offered_msgs_per_sec: r.offered_msgs_per_sec,
        sent_msgs_per_sec: r.sent_msgs_per_sec,
        messages_sent: r.messages_sent,
        messages_answered: r.messages_answered,
        answered_fraction: if r.messages_sent == 0 {
            0.0
        } else {
            r.messages_answered as f64 / r.messages_sent as f64
        },
        error_replies: r.error_replies,
        failed_messages: r.failed_messages,
        latency_us_p50: q(0.5),
        latency_us_p99: q(0.99),
        latency_us_p999: q(0.999),
        latency_us_max: if h.is_empty() { 0 } else { h.max() },
        server_cpu_us_per_msg: cpu_us
            .filter(|_| r.messages_answered > 0)
            .map(|c| c / r.messages_answered as f64),
        server_cpu_share: cpu_us.map(|c| c / wall_us.max(1.0)),
        generator_limited: r.sent_msgs_per_sec < GENERATOR_LIMITED_SHARE * r.offered_msgs_per_sec,
        latency_buckets: buckets(h),
    }
}

/// Shares of datagrams per power-of-two latency bucket (upper bounds 1, 2, 4, ... µs).
fn buckets(h: &Histogram<u64>) -> Vec<(u64, f64)> {
    let total = h.len();
    if total == 0 {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut lo = 0u64;
    let mut hi = 1u64;
    while lo <= h.max() {
        let n = h.count_between(lo + 1, hi);
        out.push((hi, n as f64 / total as f64));
        lo = hi;
        hi *= 2;
    }
    out
}

/// The report as terminal tables: per path (its median run) every step, then the latency
/// distribution at each lossless rate side by side, then the summary.
pub fn text(report: &OcsmReport) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let paths: Vec<&str> = report.summary.iter().map(|p| p.path.as_str()).collect();
    let runs: Vec<&PathRun> = paths.iter().filter_map(|p| median_run(report, p)).collect();
    for r in &runs {
        let _ = writeln!(
            s,
            "\n{} (run {}, the median of {} runs)",
            r.path,
            r.run,
            report.runs.iter().filter(|x| x.path == r.path).count()
        );
        let _ = writeln!(
            s,
            "{:>14} {:>14} {:>10} {:>8} {:>8} {:>9} {:>10} {:>8}",
            "offered msg/s",
            "sent msg/s",
            "answered%",
            "p50 µs",
            "p99 µs",
            "p99.9 µs",
            "CPU µs/msg",
            "CPU %"
        );
        for st in &r.steps {
            let _ = writeln!(
                s,
                "{:>14.0} {:>14.0} {:>10.3} {:>8} {:>8} {:>9} {:>10} {:>8}{}",
                st.offered_msgs_per_sec,
                st.sent_msgs_per_sec,
                st.answered_fraction * 100.0,
                st.latency_us_p50,
                st.latency_us_p99,
                st.latency_us_p999,
                st.server_cpu_us_per_msg
                    .map_or("-".into(), |v| format!("{v:.3}")),
                st.server_cpu_share
                    .map_or("-".into(), |v| format!("{:.0}", v * 100.0)),
                if st.generator_limited {
                    "  (generator-limited)"
                } else {
                    ""
                }
            );
        }
    }
    let dists: Vec<(&str, &Vec<(u64, f64)>)> = runs
        .iter()
        .filter_map(|r| Some((r.path.as_str(), &r.lossless_step()?.latency_buckets)))
        .collect();
    if !dists.is_empty() {
        let _ = write!(
            s,
            "\nlatency distribution at the lossless rate (share of datagrams)\n{:>12}",
            "≤ µs"
        );
        for (p, _) in &dists {
            let _ = write!(s, " {p:>10}");
        }
        s.push('\n');
        let rows = dists.iter().map(|(_, b)| b.len()).max().unwrap_or(0);
        for i in 0..rows {
            let bound = dists
                .iter()
                .find_map(|(_, b)| b.get(i).map(|x| x.0))
                .unwrap_or(0);
            let _ = write!(s, "{bound:>12}");
            for (_, b) in &dists {
                let f = b.get(i).map_or(0.0, |x| x.1);
                let _ = write!(s, " {:>9.3}%", f * 100.0);
            }
            s.push('\n');
        }
    }
    let _ = writeln!(
        s,
        "\nsummary ({} runs per path; medians)",
        report.runs.len() / paths.len().max(1)
    );
    for p in &report.summary {
        let all: Vec<String> = p
            .lossless_msgs_per_sec_all
            .iter()
            .map(|v| v.map_or("none".into(), |v| format!("{v:.0}")))
            .collect();
        let _ = writeln!(
            s,
            "{:>8}: lossless {:>10} msgs/s (runs: {}), CPU {} µs/msg at the lossless rate",
            p.path,
            p.lossless_msgs_per_sec_median
                .map_or("-".into(), |v| format!("{v:.0}")),
            all.join(", "),
            p.cpu_us_per_msg_at_lossless_median
                .map_or("-".into(), |v| format!("{v:.3}"))
        );
    }
    if let Some(x) = report.batched_over_plain {
        let _ = writeln!(s, "batched / plain lossless rate: {x:.2}x");
    }
    if report.runs.iter().any(|r| r.generator_limited) {
        let _ = writeln!(
            s,
            "note: the generator could not reach some offered rates (marked above)"
        );
    }
    if let Some(p) = &report.png {
        let _ = writeln!(s, "chart: {p}");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ocsm::chart;

    fn step(sent: f64, answered: f64, lat_us: &[u64]) -> StepReport {
        let mut h = Histogram::<u64>::new_with_bounds(1, generator::LATENCY_US_MAX, 3).unwrap();
        for &l in lat_us {
            h.record(l).unwrap();
        }
        let r = generator::StepResult {
            offered_msgs_per_sec: sent,
            sent_msgs_per_sec: sent,
            datagrams_sent: 100,
            messages_sent: 4500,
            messages_answered: (4500.0 * answered) as u64,
            datagrams_answered: 100,
            error_replies: 0,
            failed_messages: 0,
            latency_us: h,
        };
        step_report(&r, Some(900.0), 1e6)
    }

    fn report() -> OcsmReport {
        let run = |path: &str, run, lossless_top: f64| PathRun {
            path: path.into(),
            run,
            steps: vec![
                step(1e6, 1.0, &[30, 40, 50]),
                step(lossless_top, 1.0, &[60, 70, 900]),
                step(lossless_top * 1.2, 0.9, &[3000]),
            ],
            lossless_msgs_per_sec: Some(lossless_top),
            cpu_us_per_msg_at_lossless: Some(0.2),
            generator_limited: false,
        };
        let runs = vec![
            run("plain", 1, 2e6),
            run("batched", 1, 3e6),
            run("plain", 2, 2.2e6),
        ];
        OcsmReport {
            msgs_per_datagram: 45,
            keys: 10,
            update_ratio: 0.0,
            seconds_per_step: 1.0,
            server_cpu: Some(1),
            client_cpu: Some(0),
            shards: 1,
            nice: 0,
            summary: Vec::new(),
            runs,
            batched_over_plain: None,
            png: None,
        }
    }

    #[test]
    fn steps_give_fractions_percentiles_cpu_and_buckets() {
        let s = step(1e6, 0.5, &[3, 5, 100]);
        assert_eq!(s.answered_fraction, 0.5);
        assert_eq!(s.latency_us_p50, 5);
        assert_eq!(s.server_cpu_us_per_msg, Some(900.0 / 2250.0));
        let total: f64 = s.latency_buckets.iter().map(|b| b.1).sum();
        assert!((total - 1.0).abs() < 1e-9, "{:?}", s.latency_buckets);
        assert_eq!(s.latency_buckets.last().unwrap().0, 128);
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(vec![1.0, 2.0]), Some(1.5));
        let r = report();
        assert_eq!(median_run(&r, "plain").unwrap().run, 2);
        assert_eq!(r.runs[1].lossless_step().unwrap().sent_msgs_per_sec, 3e6);
    }

    #[test]
    fn chart_and_text_render() {
        let mut r = report();
        r.summary = vec![PathSummary {
            path: "plain".into(),
            runs: 2,
            lossless_msgs_per_sec_median: Some(2.1e6),
            lossless_msgs_per_sec_all: vec![Some(2e6), Some(2.2e6)],
            cpu_us_per_msg_at_lossless_median: Some(0.2),
        }];
        assert!(text(&r).contains("lossless    2100000 msgs/s"));
        // scripts/test.sh installs the font; without it `bench ocsm` says so up front, and this
        // check is skipped (or fails, where peers are required).
        if directkv_testkit::peer::require_peer("DejaVu Sans", chart::check_font()).is_none() {
            return;
        }
        let path = std::env::temp_dir().join(format!("ocsm-chart-{}.png", std::process::id()));
        chart::draw(&r, &path).unwrap();
        let png = std::fs::read(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        assert!(png.len() > 10_000);
    }
}
