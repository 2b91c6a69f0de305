//! Reports of network benchmark runs (`bench run`, `bench compare`): the serde structures
//! `--json` prints, the terminal tables and the CSV rows, here; PNG charts in `chart.rs`; the
//! progress bar shown while a run is measured in `progress.rs`.
//!
//! Goals: pure functions of the measured numbers, so every format is testable without a
//! server. Non-goals: measuring anything; the OCSM benchmark's report (`ocsm/`), which has its
//! own shape.
//!
//! Units are in the field names: `_us` microseconds, `_per_sec` per second, `_bytes` bytes.
//! Latencies are per operation (each operation of a batch gets the batch's latency).

pub mod chart;
pub mod progress;

use std::fmt::Write as _;

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::net::runner::{Pacing, RunConfig, RunStats};

/// The percentiles every report gives, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LatencySummary {
    pub p5_us: f64,
    pub p50_us: f64,
    pub p95_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub mean_us: f64,
    pub max_us: f64,
}

impl LatencySummary {
    /// From a histogram of nanoseconds; all zero when it is empty.
    pub fn from_ns(h: &Histogram<u64>) -> LatencySummary {
        let us = |ns: u64| ns as f64 / 1_000.0;
        LatencySummary {
            p5_us: us(h.value_at_quantile(0.05)),
            p50_us: us(h.value_at_quantile(0.50)),
            p95_us: us(h.value_at_quantile(0.95)),
            p99_us: us(h.value_at_quantile(0.99)),
            p999_us: us(h.value_at_quantile(0.999)),
            mean_us: h.mean() / 1_000.0,
            max_us: us(h.max()),
        }
    }
}

/// One measured run at one depth.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunResult {
    /// "closed" or "open".
    pub mode: &'static str,
    pub depth: usize,
    pub connections: usize,
    /// The open loop's offered rate; `None` in closed loop.
    pub offered_ops_per_sec: Option<f64>,
    pub ops: u64,
    pub ok: u64,
    pub missed: u64,
    pub failed: u64,
    pub batches: u64,
    pub seconds: f64,
    /// Successful operations (`ok + missed`) per second; failed ones are not throughput.
    pub ops_per_sec: f64,
    /// Whether any operation failed: such a run is not ranked (its table row gets a warning
    /// line, `bench compare` leaves it out of its ratios).
    pub has_failures: bool,
    pub latency: LatencySummary,
}

impl RunResult {
    pub fn new(config: &RunConfig, stats: &RunStats) -> RunResult {
        let (mode, offered) = match config.pacing {
            Pacing::Closed => ("closed", None),
            Pacing::Open { ops_per_sec } => ("open", Some(ops_per_sec)),
        };
        RunResult {
            mode,
            depth: config.depth,
            connections: config.connections,
            offered_ops_per_sec: offered,
            ops: stats.outcome.total(),
            ok: stats.outcome.ok,
            missed: stats.outcome.missed,
            failed: stats.outcome.failed,
            batches: stats.batches,
            seconds: stats.seconds,
            ops_per_sec: stats.ops_per_sec(),
            has_failures: stats.outcome.failed > 0,
            latency: LatencySummary::from_ns(&stats.latency_ns),
        }
    }
}

/// How the load phase went.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LoadSummary {
    pub keys: u64,
    pub seconds: f64,
    pub ops_per_sec: f64,
}

/// `directkv bench run`'s report: one workload on one target, one result per depth.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunReport {
    pub target: String,
    pub workload: String,
    pub dist: String,
    pub keys: u64,
    pub key_size: usize,
    pub value_size: usize,
    pub seed: u64,
    pub warmup_seconds: f64,
    /// Whether the load generator busy-polled its sockets (`--no-busy-poll` turns it off).
    pub load_generator_busy_poll: bool,
    pub load: Option<LoadSummary>,
    pub runs: Vec<RunResult>,
}

/// One target of `directkv bench compare`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompareRow {
    /// "directkv-resp", "redis", "memcached", "directkv-native".
    pub name: String,
    pub target: String,
    pub version: String,
    pub run: RunResult,
    /// Server user+system CPU over the measured interval, seconds per million operations.
    pub server_cpu_sec_per_mop: f64,
    /// The user-time part of `server_cpu_sec_per_mop` (`utime` of `/proc/PID/stat`).
    pub server_user_sec_per_mop: f64,
    /// The system-time part (`stime`): the kernel's work for this server's system calls,
    /// packets and wake-ups, busy polls included.
    pub server_sys_sec_per_mop: f64,
    /// Server CPU seconds per second of the measured run (1.0: its core was never idle).
    pub server_cpu_share: f64,
    /// 1 / (system seconds per operation): the operations per second this server could answer
    /// on its one core if its own code took no time and the kernel's work per operation stayed
    /// as measured. None when no system time was measured (too short a run for the clock
    /// tick).
    pub kernel_bound_ops_per_sec: Option<f64>,
    /// (VmRSS after the load − VmRSS before it) / keys.
    pub rss_bytes_per_key: f64,
    pub rss_before_load_bytes: u64,
    pub rss_after_load_bytes: u64,
    pub load: LoadSummary,
}

/// `directkv bench compare`'s report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompareReport {
    pub workload: String,
    pub dist: String,
    pub keys: u64,
    pub key_size: usize,
    pub value_size: usize,
    pub depth: usize,
    pub connections: usize,
    pub seconds: f64,
    pub seed: u64,
    /// Whether servers and the load generator were pinned to separate cores.
    pub pinned: bool,
    /// Whether the load generator busy-polled its sockets (`--no-busy-poll` turns it off).
    pub load_generator_busy_poll: bool,
    pub rows: Vec<CompareRow>,
    /// Targets that were asked for but could not run, with the reason.
    pub skipped: Vec<Skipped>,
    /// The loopback echo measured after the targets (`bench compare --no-echo-reference`:
    /// none). A reference, not a bound: see `EchoReference`.
    pub loopback_echo_reference: Option<EchoReference>,
}

/// What an echo pair over loopback TCP exchanged at the compare's depth with native batch bytes
/// (`loopback::echo`). Not a bound on the targets: its epoll and polling differ from the server's
/// and the load generator's, it runs once after them, and directkv-native has beaten it at depths
/// 1 to 16 (issue 19 item 17). The bound `bench compare` reports is each row's
/// `kernel_bound_ops_per_sec`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EchoReference {
    /// Round trips per second times the depth.
    pub ops_per_sec: f64,
    pub echo: crate::machine::loopback::EchoResult,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Skipped {
    pub name: String,
    pub reason: String,
}

/// The terminal table of a `bench run` report.
pub fn run_table(r: &RunReport) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "target {}  workload {}  dist {}  keys {}  kv {}+{} bytes",
        r.target, r.workload, r.dist, r.keys, r.key_size, r.value_size
    );
    if let Some(load) = r.load {
        let _ = writeln!(
            s,
            "load: {} keys in {:.2} s ({:.0} ops/s)",
            load.keys, load.seconds, load.ops_per_sec
        );
    }
    let _ = writeln!(
        s,
        "{:>6} {:>5} {:>6} {:>13} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8}",
        "depth",
        "conns",
        "mode",
        "ops/s",
        "p5 us",
        "p50 us",
        "p95 us",
        "p99 us",
        "p99.9 us",
        "mean us",
        "missed",
        "failed"
    );
    for run in &r.runs {
        let l = &run.latency;
        let _ = writeln!(
            s,
            "{:>6} {:>5} {:>6} {:>13.0} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>8} {:>8}",
            run.depth,
            run.connections,
            run.mode,
            run.ops_per_sec,
            l.p5_us,
            l.p50_us,
            l.p95_us,
            l.p99_us,
            l.p999_us,
            l.mean_us,
            run.missed,
            run.failed
        );
        if let Some(w) = failure_warning(run) {
            let _ = writeln!(s, "{w}");
        }
    }
    s
}

/// The warning line of a run with failed operations (none for a clean run).
fn failure_warning(run: &RunResult) -> Option<String> {
    run.has_failures.then(|| {
        format!(
            "warning: {} of {} operations failed; ops/s counts the others, and the run is not ranked",
            run.failed, run.ops
        )
    })
}

/// The CSV of a `bench run` report: a header and one row per run.
pub fn run_csv(r: &RunReport) -> String {
    let mut s = String::from(
        "target,workload,dist,keys,key_size,value_size,mode,depth,connections,offered_ops_per_sec,ops,ok,missed,failed,seconds,ops_per_sec,p5_us,p50_us,p95_us,p99_us,p999_us,mean_us,max_us\n",
    );
    for run in &r.runs {
        let l = &run.latency;
        let _ = writeln!(
            s,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{:.3},{:.1},{:.2},{:.2},{:.2},{:.2},{:.2},{:.2},{:.2}",
            r.target,
            r.workload,
            r.dist,
            r.keys,
            r.key_size,
            r.value_size,
            run.mode,
            run.depth,
            run.connections,
            run.offered_ops_per_sec.map_or(String::new(), |x| format!("{x:.0}")),
            run.ops,
            run.ok,
            run.missed,
            run.failed,
            run.seconds,
            run.ops_per_sec,
            l.p5_us,
            l.p50_us,
            l.p95_us,
            l.p99_us,
            l.p999_us,
            l.mean_us,
            l.max_us
        );
    }
    s
}

/// The terminal table of a `bench compare` report.
pub fn compare_table(r: &CompareReport) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "workload {}  dist {}  keys {}  kv {}+{} bytes  depth {}  connections {}  {} s{}{}",
        r.workload,
        r.dist,
        r.keys,
        r.key_size,
        r.value_size,
        r.depth,
        r.connections,
        r.seconds,
        if r.pinned {
            "  (servers on core 1, load generator on core 0)"
        } else {
            "  (not pinned)"
        },
        if r.load_generator_busy_poll {
            ""
        } else {
            "  (load generator sleeps between replies)"
        }
    );
    let _ = writeln!(
        s,
        "{:<16} {:>13} {:>9} {:>9} {:>12} {:>11} {:>10} {:>6} {:>12} {:>8} {:>8}",
        "target",
        "ops/s",
        "p50 us",
        "p99 us",
        "cpu s/M ops",
        "user us/op",
        "sys us/op",
        "cpu",
        "RSS B/key",
        "missed",
        "failed"
    );
    for row in &r.rows {
        let _ = writeln!(
            s,
            "{:<16} {:>13.0} {:>9.1} {:>9.1} {:>12.3} {:>11.3} {:>10.3} {:>5.0}% {:>12.1} {:>8} {:>8}",
            row.name,
            row.run.ops_per_sec,
            row.run.latency.p50_us,
            row.run.latency.p99_us,
            row.server_cpu_sec_per_mop,
            row.server_user_sec_per_mop,
            row.server_sys_sec_per_mop,
            100.0 * row.server_cpu_share,
            row.rss_bytes_per_key,
            row.run.missed,
            row.run.failed
        );
    }
    for row in r.rows.iter().filter(|row| row.run.has_failures) {
        if let Some(w) = failure_warning(&row.run) {
            let _ = writeln!(s, "warning: {}: {}", row.name, &w["warning: ".len()..]);
        }
    }
    for skipped in &r.skipped {
        let _ = writeln!(s, "{:<16} skipped: {}", skipped.name, skipped.reason);
    }
    kernel_bound_lines(r, &mut s);
    if let Some(c) = &r.loopback_echo_reference {
        let _ = writeln!(
            s,
            "loopback echo reference {:.0} ops/s (echo of {}/{}-byte native batches, no work; a reference, not a bound)",
            c.ops_per_sec, c.echo.request_bytes, c.echo.response_bytes
        );
        let ratios: Vec<String> = r
            .rows
            .iter()
            // A run with failures is not ranked: it gets no ratio.
            .filter(|row| !row.run.has_failures)
            .map(|row| {
                format!(
                    "{} {:.2}",
                    row.name,
                    row.run.ops_per_sec / c.ops_per_sec.max(f64::MIN_POSITIVE)
                )
            })
            .collect();
        let _ = writeln!(
            s,
            "ratio to the echo reference (not a bound; native batch bytes for every row): {}",
            ratios.join(", ")
        );
    }
    s
}

/// One line per ranked row: its kernel bound, and how many times each ranked peer's operations
/// per CPU second that bound is (peer CPU per op / row system CPU per op): the most this row
/// could do per core-second next to that peer while the kernel works as much per operation as
/// it did in this run. Per CPU second, not per second of the run, so a server that did not get
/// its whole core on a busy machine is still compared fairly.
fn kernel_bound_lines(r: &CompareReport, s: &mut String) {
    let ranked: Vec<&CompareRow> = r.rows.iter().filter(|row| !row.run.has_failures).collect();
    let _ = writeln!(
        s,
        "kernel bound = 1 / (server sys s per op): ops/s on its one core if its own code took no time; x peer = peer CPU per op / sys per op{}",
        if r.pinned {
            ""
        } else {
            " (servers not pinned: per core of system time)"
        }
    );
    for row in &ranked {
        let Some(bound) = row.kernel_bound_ops_per_sec else {
            let _ = writeln!(
                s,
                "kernel bound {:<16} none (no system time measured)",
                row.name
            );
            continue;
        };
        let over: Vec<String> = ranked
            .iter()
            .filter(|peer| peer.name != row.name && peer.server_cpu_sec_per_mop > 0.0)
            .map(|peer| {
                format!(
                    "{:.2} x {}",
                    peer.server_cpu_sec_per_mop / row.server_sys_sec_per_mop,
                    peer.name
                )
            })
            .collect();
        let _ = writeln!(
            s,
            "kernel bound {:<16} {:>13.0} ops/s{}{}",
            row.name,
            bound,
            if over.is_empty() {
                ""
            } else {
                " per CPU second = "
            },
            over.join(", ")
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::runner::new_histogram;

    fn run_with(ok: u64, missed: u64, failed: u64) -> RunResult {
        use crate::net::driver::BatchOutcome;
        use crate::net::runner::RunStats;
        use std::time::Duration;
        let config = RunConfig {
            connections: 1,
            depth: 8,
            warmup: Duration::ZERO,
            measure: Duration::from_secs(2),
            pacing: Pacing::Closed,
            busy_poll: false,
        };
        let mut h = new_histogram();
        h.record_n(100_000, ok + missed + failed).unwrap();
        let stats = RunStats {
            outcome: BatchOutcome { ok, missed, failed },
            batches: 1,
            seconds: 2.0,
            last_reply: None,
            latency_ns: h,
        };
        RunResult::new(&config, &stats)
    }

    #[test]
    fn failed_operations_are_not_throughput_and_mark_the_run() {
        // Issue 19 item 18: a driver that reports failures.
        let r = run_with(600, 200, 1200);
        assert_eq!(r.ops, 2000);
        // Successful operations only: ok + missed (a miss is an answered GET) over 2 s.
        assert_eq!(r.ops_per_sec, 400.0);
        let j = serde_json::to_value(&r).unwrap();
        assert_eq!(j["has_failures"], serde_json::Value::Bool(true), "{j}");
        let report = RunReport {
            target: "t".into(),
            workload: "get".into(),
            dist: "uniform".into(),
            keys: 1,
            key_size: 1,
            value_size: 1,
            seed: 1,
            warmup_seconds: 0.0,
            load_generator_busy_poll: false,
            load: None,
            runs: vec![r, run_with(10, 0, 0)],
        };
        let t = run_table(&report);
        assert!(t.contains("warning: 1200 of 2000 operations failed"), "{t}");
        assert_eq!(t.matches("warning").count(), 1, "{t}");
        let clean = serde_json::to_value(&report.runs[1]).unwrap();
        assert_eq!(clean["has_failures"], serde_json::Value::Bool(false));
        assert_eq!(report.runs[1].ops_per_sec, 5.0);
    }

    #[test]
    fn compare_marks_a_run_with_failures_and_leaves_it_out_of_ratios() {
        let row = |name: &str, run: RunResult| CompareRow {
            name: name.into(),
            target: "t".into(),
            version: "v".into(),
            run,
            server_cpu_sec_per_mop: 0.0,
            server_user_sec_per_mop: 0.0,
            server_sys_sec_per_mop: 0.0,
            server_cpu_share: 0.0,
            kernel_bound_ops_per_sec: None,
            rss_bytes_per_key: 0.0,
            rss_before_load_bytes: 0,
            rss_after_load_bytes: 0,
            load: LoadSummary {
                keys: 1,
                seconds: 1.0,
                ops_per_sec: 1.0,
            },
        };
        let report = CompareReport {
            workload: "get".into(),
            dist: "uniform".into(),
            keys: 1,
            key_size: 1,
            value_size: 1,
            depth: 8,
            connections: 1,
            seconds: 2.0,
            seed: 1,
            pinned: false,
            load_generator_busy_poll: true,
            rows: vec![
                row("good", run_with(100, 0, 0)),
                row("bad", run_with(0, 0, 100)),
            ],
            skipped: vec![],
            loopback_echo_reference: Some(EchoReference {
                ops_per_sec: 100.0,
                echo: crate::machine::loopback::EchoResult {
                    connections: 1,
                    request_bytes: 1,
                    response_bytes: 1,
                    busy_poll: true,
                    seconds: 1.0,
                    round_trips_per_sec: 1.0,
                    server_round_trips: 1,
                    round_trips: 1,
                    fsyncs: None,
                    fsync_mean_us: None,
                },
            }),
        };
        let t = compare_table(&report);
        assert!(
            t.contains("warning: bad: 100 of 100 operations failed"),
            "{t}"
        );
        let ratio = t
            .lines()
            .find(|l| l.starts_with("ratio to the echo"))
            .unwrap();
        assert!(ratio.contains("good 0.50"), "{t}");
        assert!(!ratio.contains("bad"), "{t}");
        assert!(!t.lines().any(|l| l.starts_with("kernel bound bad")), "{t}");
    }

    #[test]
    fn percentiles_come_from_the_histogram_in_microseconds() {
        let mut h = new_histogram();
        for us in 1..=1000u64 {
            h.record(us * 1_000).unwrap();
        }
        let l = LatencySummary::from_ns(&h);
        // Three significant digits: within 0.1% of the exact order statistics.
        for (got, want) in [
            (l.p5_us, 50.0),
            (l.p50_us, 500.0),
            (l.p99_us, 990.0),
            (l.p999_us, 999.0),
            (l.mean_us, 500.5),
        ] {
            assert!((got - want).abs() <= want * 0.002, "{got} vs {want}");
        }
        assert!(l.p5_us <= l.p50_us && l.p95_us <= l.p99_us && l.p99_us <= l.p999_us);
    }
}
