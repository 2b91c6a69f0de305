//! `directkv bench ocsm`: the seed 004 measurements in software. For each server path (plain,
//! batched) it starts `directkv serve` pinned to one core, preloads keys, and offers OCSM load
//! open loop at increasing rates from a generator pinned to another core, 45 messages per
//! datagram, each datagram stamped with a sequence number.
//!
//! Reported like the paper: the fraction of messages answered at each offered rate, the highest
//! rate with every message answered ("lossless rate", the paper's throughput), the latency
//! distribution (table and PNG), and server CPU microseconds per message (the software stand-in
//! for the paper's energy per message: `/proc/PID/stat` utime + stime over the step, divided by
//! the messages answered).
//!
//! ```text
//!   for run in 1..=runs:                   (paths interleaved, so noise hits both alike)
//!     for path in [plain, batched, ...]:
//!       start server (taskset -c SERVER_CPU) ─► preload keys ─► rate ladder:
//!         step(rate) = 1 s open loop + drain ─► answered %, latency, CPU µs/message
//!         stop after STOP_AFTER_LOSSY steps in a row below LOSSY_FRACTION answered, or
//!         STOP_AFTER_GENERATOR_LIMITED steps the generator could not reach
//!       stop server
//!   summary: per path, medians over runs of the lossless rate and CPU µs/message there
//! ```
//!
//! ```text
//!   mod.rs        the arguments, the rate ladder, the preload (this file)
//!   generator.rs  one open-loop step: sendmmsg/recvmmsg, GSO/GRO, latency by sequence number
//!   server.rs     the server under test, started through `ServerProcess`
//!   report.rs     step, run and summary reports; the terminal tables
//!   chart.rs      the PNG
//! ```
//!
//! Non-goals: multi-server setups, the seed's 64-byte table (the generator sends 32-byte
//! messages, as the paper's search benchmark does).

mod chart;
pub mod generator;
pub mod report;
pub mod server;

use std::net::{SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::time::Duration;

use directkv_proto::ocsm::{decode_response, OcsmLimits, Opcode, Response, Status};
use directkv_sys::process;

use report::{median, step_report, OcsmReport, PathRun, PathSummary};
use server::ServerSpec;

/// Messages per datagram: the seed's 45 32-byte messages in a 1514-byte frame.
pub const MSGS_PER_DATAGRAM_DEFAULT: usize = 45;
/// First rate of the default ladder (messages per second) and the factor between steps.
const LADDER_START_MSGS_PER_SEC: f64 = 50_000.0;
const LADDER_FACTOR: f64 = 1.2;
const LADDER_STEPS_MAX: usize = 40;
/// A step below this answered fraction counts as lossy for stopping the ladder.
const LOSSY_FRACTION: f64 = 0.99;
const STOP_AFTER_LOSSY: usize = 3;
/// Steps in a row the generator could not reach before the ladder stops (higher rates would
/// measure the generator, not the server).
const STOP_AFTER_GENERATOR_LIMITED: usize = 2;
/// Retries of a preload datagram before the bench gives up.
const PRELOAD_TRIES: usize = 20;

#[derive(Debug, Clone)]
pub struct OcsmBenchArgs {
    /// An already running server's OCSM address (no server is started; paths are not switched).
    pub target: Option<SocketAddr>,
    /// With `target`: the server's PID, for CPU time.
    pub server_pid: Option<u32>,
    pub paths: Vec<String>,
    /// Offered rates in messages per second; empty = the default ladder.
    pub rates: Vec<f64>,
    pub seconds: f64,
    pub drain_ms: u64,
    pub keys: u64,
    pub update_ratio: f64,
    pub msgs_per_datagram: usize,
    pub runs: usize,
    pub server_cpu: Option<usize>,
    pub client_cpu: Option<usize>,
    pub shards: usize,
    pub memory: String,
    pub burst: Option<usize>,
    /// Nice value for the server and the generator (0 = unchanged). On a shared machine a
    /// negative value keeps other processes' CPU share out of the comparison (needs root).
    pub nice: i32,
    pub png: Option<PathBuf>,
    pub seed: u64,
}

/// Runs the whole benchmark; `progress` receives one line per step.
pub fn run(a: &OcsmBenchArgs, mut progress: impl FnMut(&str)) -> Result<OcsmReport, String> {
    if a.msgs_per_datagram == 0
        || a.msgs_per_datagram
            > OcsmLimits::DEFAULT.messages_per_datagram_max(directkv_proto::ocsm::MessageSize::B32)
    {
        return Err(format!(
            "--msgs-per-datagram {} not in 1..=45",
            a.msgs_per_datagram
        ));
    }
    if a.keys == 0 {
        return Err("--keys must be positive".into());
    }
    if let Some(png) = &a.png {
        chart::check_font()
            .map_err(|e| format!("{e} (or pass --no-png); chart {}", png.display()))?;
    }
    if let Some(cpu) = a.client_cpu {
        if !directkv_sys::cpu::pin_current_thread(cpu) {
            progress(&format!("warning: cannot pin the generator to CPU {cpu}"));
        }
    }
    if a.nice != 0 && !directkv_sys::cpu::set_nice(a.nice) {
        progress(&format!(
            "warning: cannot set the generator's nice value to {}",
            a.nice
        ));
    }
    let paths: Vec<String> = if a.target.is_some() {
        vec!["target".into()]
    } else {
        a.paths.clone()
    };
    let mut runs = Vec::new();
    for run in 1..=a.runs.max(1) {
        for path in &paths {
            let r = run_path(a, path, run, &mut progress)?;
            progress(&format!(
                "run {run} {path}: lossless {} msgs/s, {} CPU µs/msg there{}",
                r.lossless_msgs_per_sec
                    .map_or("none".into(), |v| format!("{v:.0}")),
                r.cpu_us_per_msg_at_lossless
                    .map_or("-".into(), |v| format!("{v:.3}")),
                if r.generator_limited {
                    " (generator-limited at some rates)"
                } else {
                    ""
                }
            ));
            runs.push(r);
        }
    }
    let summary: Vec<PathSummary> = paths
        .iter()
        .map(|p| {
            let mine: Vec<&PathRun> = runs.iter().filter(|r| &r.path == p).collect();
            PathSummary {
                path: p.clone(),
                runs: mine.len(),
                lossless_msgs_per_sec_median: median(
                    mine.iter()
                        .map(|r| r.lossless_msgs_per_sec.unwrap_or(0.0))
                        .collect(),
                ),
                lossless_msgs_per_sec_all: mine.iter().map(|r| r.lossless_msgs_per_sec).collect(),
                cpu_us_per_msg_at_lossless_median: median(
                    mine.iter()
                        .filter_map(|r| r.cpu_us_per_msg_at_lossless)
                        .collect(),
                ),
            }
        })
        .collect();
    let med = |p: &str| {
        summary
            .iter()
            .find(|s| s.path == p)
            .and_then(|s| s.lossless_msgs_per_sec_median)
    };
    let batched_over_plain = match (med("batched"), med("plain")) {
        (Some(b), Some(p)) if p > 0.0 => Some(b / p),
        _ => None,
    };
    let mut report = OcsmReport {
        msgs_per_datagram: a.msgs_per_datagram,
        keys: a.keys,
        update_ratio: a.update_ratio,
        seconds_per_step: a.seconds,
        server_cpu: a.server_cpu,
        client_cpu: a.client_cpu,
        shards: a.shards,
        nice: a.nice,
        runs,
        summary,
        batched_over_plain,
        png: None,
    };
    if let Some(png) = &a.png {
        chart::draw(&report, png)?;
        report.png = Some(png.display().to_string());
    }
    Ok(report)
}

fn run_path(
    a: &OcsmBenchArgs,
    path: &str,
    run: usize,
    progress: &mut impl FnMut(&str),
) -> Result<PathRun, String> {
    let (proc_, target, pid) = match a.target {
        Some(t) => (None, t, a.server_pid),
        None => {
            let p = server::start(&ServerSpec {
                path: path.to_string(),
                cpu: a.server_cpu,
                shards: a.shards,
                memory: a.memory.clone(),
                burst: a.burst,
                nice: a.nice,
            })?;
            let (t, pid) = (p.addr, p.pid());
            (Some(p), t, Some(pid))
        }
    };
    preload(target, a.keys, a.msgs_per_datagram)?;
    let rates: Vec<f64> = if a.rates.is_empty() {
        (0..LADDER_STEPS_MAX)
            .map(|i| LADDER_START_MSGS_PER_SEC * LADDER_FACTOR.powi(i as i32))
            .collect()
    } else {
        a.rates.clone()
    };
    let mut steps = Vec::new();
    let mut lossy_in_a_row = 0;
    let mut limited_in_a_row = 0;
    for (i, &rate) in rates.iter().enumerate() {
        let cpu0 = pid.map(process::cpu_us).transpose()?;
        let t0 = std::time::Instant::now();
        let r = generator::run_step(&generator::Step {
            target,
            msgs_per_sec: rate,
            msgs_per_datagram: a.msgs_per_datagram,
            duration: Duration::from_secs_f64(a.seconds),
            drain: Duration::from_millis(a.drain_ms),
            keys: a.keys,
            update_ratio: a.update_ratio,
            seed: a.seed ^ (run as u64) << 32 ^ i as u64,
        })?;
        let wall_us = t0.elapsed().as_micros() as f64;
        let cpu1 = pid.map(process::cpu_us).transpose()?;
        let cpu = cpu0.zip(cpu1).map(|(x, y)| y.saturating_sub(x) as f64);
        let step = step_report(&r, cpu, wall_us);
        progress(&format!(
            "run {run} {path:>8}: offered {:>10.0} sent {:>10.0} msgs/s  answered {:>7.3}%  p50 {:>6} µs  p99 {:>7} µs  CPU {} µs/msg",
            step.offered_msgs_per_sec,
            step.sent_msgs_per_sec,
            step.answered_fraction * 100.0,
            step.latency_us_p50,
            step.latency_us_p99,
            step.server_cpu_us_per_msg.map_or("-".into(), |v| format!("{v:.3}"))
        ));
        lossy_in_a_row = if step.answered_fraction < LOSSY_FRACTION {
            lossy_in_a_row + 1
        } else {
            0
        };
        limited_in_a_row = if step.generator_limited {
            limited_in_a_row + 1
        } else {
            0
        };
        steps.push(step);
        let stop =
            lossy_in_a_row >= STOP_AFTER_LOSSY || limited_in_a_row >= STOP_AFTER_GENERATOR_LIMITED;
        if stop && a.rates.is_empty() {
            break;
        }
    }
    if let Some(p) = proc_ {
        p.stop();
    }
    let mut r = PathRun {
        path: path.to_string(),
        run,
        generator_limited: steps.iter().any(|s| s.generator_limited),
        steps,
        lossless_msgs_per_sec: None,
        cpu_us_per_msg_at_lossless: None,
    };
    if let Some((rate, cpu)) = r
        .lossless_step()
        .map(|s| (s.sent_msgs_per_sec, s.server_cpu_us_per_msg))
    {
        r.lossless_msgs_per_sec = Some(rate);
        r.cpu_us_per_msg_at_lossless = cpu;
    }
    Ok(r)
}

/// Inserts keys `0..keys` (45 per datagram, closed loop, retried on loss).
fn preload(target: SocketAddr, keys: u64, per: usize) -> Result<(), String> {
    let sock = UdpSocket::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    sock.connect(target).map_err(|e| e.to_string())?;
    let mut req = Vec::new();
    let ids: Vec<u64> = (0..keys).collect();
    for (seq, chunk) in ids.chunks(per).enumerate() {
        generator::datagram(seq as u32, Opcode::Insert, chunk, &mut req);
        let reply = generator::exchange(&sock, &req, PRELOAD_TRIES)?;
        match decode_response(&reply, &OcsmLimits::DEFAULT) {
            Ok(Response::Messages(d)) => {
                if let Some(m) = d
                    .messages()
                    .find(|m| !matches!(m.status(), Some(Status::Ok | Status::Exists)))
                {
                    return Err(format!("preload failed: status {:?}", m.status()));
                }
            }
            Ok(Response::Error { code, .. }) => return Err(format!("preload refused: {code:?}")),
            Err(e) => return Err(format!("preload reply: {e}")),
        }
    }
    Ok(())
}
