//! `directkv bench soak`: every hostile client of issue 19 at once against one server while
//! well-behaved clients measure PING and GET latency and check that no acknowledged write is
//! lost (issue 19, "How it is checked"; `scripts/soak.sh` runs it for ten minutes).
//!
//! ```text
//!   set-up:  AUTH; SET the 1 MiB key and the GET key; the writer's keys and counters;
//!            fill the arena with 64 KiB values until the server answers out of memory
//!   then, one thread each, until --duration or an abort:
//!     hostile::ATTACKS (14 loops, reconnecting)       good::latency  PING + GET every 1 ms
//!     RSS sampler: VmRSS of the server every 100 ms   good::writer   SET / INCR every 1 ms
//!   end:     stop every thread; good::verify reads back every acknowledged write;
//!            INFO `panics`; is the cross-protocol key there; the criteria
//! ```
//!
//! Criteria, each printed with its limit, what was measured and pass or FAIL (the command
//! exits non-zero when one fails): 0 panics; server VmRSS <= arena + `RSS_HEADROOM_BYTES` at
//! every sample; well-behaved PING and GET p99 <= `LATENCY_P99_MAX_US` (a reply that never
//! came counts as `good::REPLY_PATIENCE`); no acknowledged write lost and every counter exact.
//!
//! One server takes every attack, as the issue asks: it is started with `--requirepass` (for
//! the attacks before and after AUTH) and `--udp yes --ocsm yes --udp-insecure` (for the UDP
//! ones), so its RSS is the one figure the memory criterion judges.
//!
//! Safety: a server that balloons could take the machine's memory from everything else, so
//! when its VmRSS passes `rss_abort_bytes` the soak stops every client at once and reports the
//! run as aborted (the memory criterion failed). Non-goals: throughput under attack; attacks
//! beyond issue 19's list.

pub mod good;
pub mod hostile;
pub(crate) mod wire;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use directkv_proto::resp::Reply;
use serde::Serialize;

use good::{LatencyStats, WriteCheck};
use hostile::{Counters, HostileStats};
use wire::Resp;

/// How far above the arena the server's VmRSS may go (issue 19: arena + 256 MiB).
pub const RSS_HEADROOM_BYTES: u64 = 256 << 20;
/// The well-behaved clients' p99 limit, microseconds (issue 19: 10 ms).
pub const LATENCY_P99_MAX_US: u64 = 10_000;
/// How often the server's VmRSS is read.
pub const RSS_SAMPLE_INTERVAL: Duration = Duration::from_millis(100);
/// Default of how far above the arena the server may grow before the soak stops, bytes.
pub const RSS_ABORT_HEADROOM_DEFAULT_BYTES: u64 = 4 << 30;
/// The longest soak accepted.
pub const DURATION_MAX: Duration = Duration::from_secs(24 * 3600);
/// The most connections the flood may hold (the soak's own descriptors are the limit).
pub const FLOOD_CONNECTIONS_MAX: usize = 100_000;
/// Bytes of the large value the hostile reads ask for, and its key.
pub const BIG_VALUE_BYTES: usize = 1 << 20;
pub const BIG_KEY: &[u8] = b"soak:big";
/// Values the set-up fills the arena with, bytes.
const FILL_VALUE_BYTES: usize = 64 << 10;

/// The server under attack.
#[derive(Debug, Clone)]
pub struct SoakTarget {
    /// RESP and native TCP, and native UDP when `udp`.
    pub addr: SocketAddr,
    pub udp: bool,
    pub ocsm: Option<SocketAddr>,
    /// Empty when the server has none.
    pub password: String,
    /// For VmRSS.
    pub pid: u32,
    /// The server's arena (`--memory`), bytes.
    pub arena_bytes: u64,
}

/// A soak in progress: its settings and the stop flag every client watches.
#[derive(Debug)]
pub struct Soak {
    pub target: SoakTarget,
    pub duration: Duration,
    pub flood_connections: usize,
    /// VmRSS at which the soak stops early, bytes.
    pub rss_abort_bytes: u64,
    pub seed: u64,
    /// The hostile clients to run (`hostile::ATTACKS` names); all when empty.
    pub only: Vec<String>,
    stop: AtomicBool,
}

impl Soak {
    pub fn new(
        target: SoakTarget,
        duration: Duration,
        flood_connections: usize,
        rss_abort_bytes: u64,
        seed: u64,
    ) -> Result<Soak, String> {
        if duration.is_zero() || duration > DURATION_MAX {
            return Err(format!(
                "--duration {duration:?} outside (0, {} h]",
                DURATION_MAX.as_secs() / 3600
            ));
        }
        if flood_connections == 0 || flood_connections > FLOOD_CONNECTIONS_MAX {
            return Err(format!(
                "--flood-connections {flood_connections} outside 1..={FLOOD_CONNECTIONS_MAX}"
            ));
        }
        Ok(Soak {
            target,
            duration,
            flood_connections,
            rss_abort_bytes,
            seed,
            only: Vec::new(),
            stop: AtomicBool::new(false),
        })
    }

    /// Runs only the hostile clients named in `names` (for finding which attack does what).
    pub fn with_only(mut self, names: Vec<String>) -> Result<Soak, String> {
        check_hostile_names(&names)?;
        self.only = names;
        Ok(self)
    }

    /// Whether hostile client `name` runs in this soak.
    fn runs(&self, name: &str) -> bool {
        let asked = self.only.is_empty() || self.only.iter().any(|n| n == name);
        asked && (name != "udp-4096-gets" || self.target.udp)
    }

    /// Whether the clients should stop.
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    fn rss_limit_bytes(&self) -> u64 {
        self.target.arena_bytes + RSS_HEADROOM_BYTES
    }
}

/// An error naming the first of `names` that is not a hostile client.
pub fn check_hostile_names(names: &[String]) -> Result<(), String> {
    for n in names {
        if !hostile::ATTACKS.iter().any(|(a, _)| a == n) {
            let all: Vec<&str> = hostile::ATTACKS.iter().map(|(a, _)| *a).collect();
            return Err(format!(
                "unknown hostile client {n:?} (one of {})",
                all.join(", ")
            ));
        }
    }
    Ok(())
}

/// The server's VmRSS over the run.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RssTrace {
    pub samples: u64,
    pub max_bytes: u64,
    pub samples_over_limit: u64,
    /// Seconds into the run of the first sample over the limit.
    pub first_over_limit_sec: Option<f64>,
}

/// One pass/fail line.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Criterion {
    pub name: String,
    pub limit: String,
    pub measured: String,
    pub pass: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SoakReport {
    pub seconds_planned: f64,
    pub seconds_run: f64,
    /// Why the run stopped before `seconds_planned`, if it did.
    pub aborted: Option<String>,
    pub arena_bytes: u64,
    pub rss_limit_bytes: u64,
    pub rss: RssTrace,
    /// 64 KiB values the set-up stored before the arena was full.
    pub fill_values: u64,
    /// INFO `panics` at the end (None: unreadable).
    pub panics: Option<u64>,
    pub ping: LatencyStats,
    pub get: LatencyStats,
    pub writes: WriteCheck,
    /// Whether `pwned-by-http` (the HTTP POST attack's write) exists at the end.
    pub http_write_stored: Option<bool>,
    pub hostile: Vec<HostileStats>,
    pub criteria: Vec<Criterion>,
}

impl SoakReport {
    /// Names of the criteria that failed.
    pub fn failed(&self) -> Vec<&str> {
        self.criteria
            .iter()
            .filter(|c| !c.pass)
            .map(|c| c.name.as_str())
            .collect()
    }
}

/// The password of the server `start_server` starts.
pub const OWN_PASSWORD: &str = "soakpw";

/// Starts `exe serve` with an arena of `arena_bytes`, the password `OWN_PASSWORD`, and native
/// UDP and OCSM on (with `--udp-insecure`), so that one server takes every attack. It is
/// stopped by PID when the returned guard drops.
pub fn start_server(
    exe: &std::path::Path,
    arena_bytes: u64,
) -> Result<(directkv_sys::process::ServerProcess, SoakTarget), String> {
    let ocsm_port = std::net::UdpSocket::bind("127.0.0.1:0")
        .and_then(|u| u.local_addr())
        .map_err(|e| format!("no free UDP port for OCSM: {e}"))?
        .port();
    let (memory, ocsm) = (arena_bytes.to_string(), ocsm_port.to_string());
    let flags = [
        "--memory",
        &memory,
        "--requirepass",
        OWN_PASSWORD,
        "--udp",
        "yes",
        "--ocsm",
        "yes",
        "--udp-insecure",
        "--ocsm-port",
        &ocsm,
    ];
    let server = directkv_sys::process::ServerProcess::directkv_serve(exe, &flags, None)?;
    let target = SoakTarget {
        addr: server.addr,
        udp: true,
        ocsm: Some(SocketAddr::new(server.addr.ip(), ocsm_port)),
        password: OWN_PASSWORD.to_string(),
        pid: server.pid(),
        arena_bytes,
    };
    Ok((server, target))
}

/// Runs the soak against `soak.target` and returns its report (criteria included, passed or
/// not); an error only when the set-up cannot run.
pub fn run(soak: &Soak) -> Result<SoakReport, String> {
    let mut setup = Resp::connect(soak.target.addr, &soak.target.password)
        .map_err(|e| format!("set-up connection: {e}"))?;
    let patience = Duration::from_secs(10);
    let big = vec![b'B'; BIG_VALUE_BYTES];
    for (key, value) in [(BIG_KEY, &big[..]), (good::GET_KEY, &b"soak-get-value"[..])] {
        match setup.cmd(&[b"SET", key, value], patience)? {
            Reply::Simple(_) => {}
            other => return Err(format!("set-up SET answered {other:?}")),
        }
    }
    good::prepare(&mut setup)?;
    let fill_values = fill_arena(&mut setup, soak.target.arena_bytes)?;
    drop(setup);

    let counters: Vec<Counters> = hostile::ATTACKS
        .iter()
        .map(|_| Counters::default())
        .collect();
    let start = Instant::now();
    let rss = Mutex::new(RssTrace::default());
    let aborted: Mutex<Option<String>> = Mutex::new(None);
    let ((ping, get), log) = std::thread::scope(|scope| {
        for ((name, attack), c) in hostile::ATTACKS.iter().zip(&counters) {
            if !soak.runs(name) {
                continue;
            }
            std::thread::Builder::new()
                .name(format!("soak-{name}"))
                .spawn_scoped(scope, move || attack(soak, c))
                .expect("a soak thread starts");
        }
        let latency = scope.spawn(|| good::latency(soak));
        let writer = scope.spawn(|| good::writer(soak));
        sample_rss(soak, start, &rss, &aborted);
        soak.stop();
        (
            latency.join().expect("the latency client does not panic"),
            writer.join().expect("the writer does not panic"),
        )
    });
    let seconds_run = start.elapsed().as_secs_f64();
    let rss = rss.into_inner().expect("no sampler panicked");
    let aborted = aborted.into_inner().expect("no sampler panicked");

    // The end checks, on fresh connections; a server that does not answer fails each of them
    // within a bounded time (`good::VERIFY_TIME_MAX`, a few seconds for the others).
    let writes = good::verify(soak, &log);
    let mut end = Resp::connect(soak.target.addr, &soak.target.password).ok();
    let panics = end.as_mut().and_then(info_panics);
    let http_write_stored = end.as_mut().and_then(|c| {
        match c.cmd(&[b"EXISTS", b"pwned-by-http"], Duration::from_secs(5)) {
            Ok(Reply::Integer(n)) => Some(n > 0),
            _ => None,
        }
    });
    let hostile = hostile::ATTACKS
        .iter()
        .zip(&counters)
        .map(|((name, _), c)| c.stats(name))
        .collect();
    let mut report = SoakReport {
        seconds_planned: soak.duration.as_secs_f64(),
        seconds_run,
        aborted,
        arena_bytes: soak.target.arena_bytes,
        rss_limit_bytes: soak.rss_limit_bytes(),
        rss,
        fill_values,
        panics,
        ping,
        get,
        writes,
        http_write_stored,
        hostile,
        criteria: Vec::new(),
    };
    report.criteria = criteria(&report);
    Ok(report)
}

/// Stores `FILL_VALUE_BYTES` values until the server answers with an error (out of memory);
/// bounded by twice the values the arena could hold. Returns how many it stored.
fn fill_arena(c: &mut Resp, arena_bytes: u64) -> Result<u64, String> {
    let value = vec![b'f'; FILL_VALUE_BYTES];
    let bound = 2 * arena_bytes / FILL_VALUE_BYTES as u64 + 16;
    for i in 0..bound {
        let key = format!("soak:fill:{i}");
        match c.cmd(&[b"SET", key.as_bytes(), &value], Duration::from_secs(10))? {
            Reply::Simple(_) => {}
            Reply::Error(_) => return Ok(i),
            other => return Err(format!("fill SET answered {other:?}")),
        }
    }
    Err(format!(
        "the arena took {bound} values of {FILL_VALUE_BYTES} bytes without running out of memory: is --arena-bytes right?"
    ))
}

/// Reads VmRSS every `RSS_SAMPLE_INTERVAL` until the duration ends, the server is gone, or it
/// passes the abort size.
fn sample_rss(
    soak: &Soak,
    start: Instant,
    trace: &Mutex<RssTrace>,
    aborted: &Mutex<Option<String>>,
) {
    let limit = soak.rss_limit_bytes();
    let mut next = start;
    while start.elapsed() < soak.duration {
        let abort = |why: String| *aborted.lock().expect("not poisoned") = Some(why);
        match directkv_sys::process::rss_bytes(soak.target.pid) {
            Ok(bytes) => {
                let mut t = trace.lock().expect("not poisoned");
                t.samples += 1;
                t.max_bytes = t.max_bytes.max(bytes);
                if bytes > limit {
                    t.samples_over_limit += 1;
                    t.first_over_limit_sec
                        .get_or_insert(start.elapsed().as_secs_f64());
                }
                if bytes > soak.rss_abort_bytes {
                    abort(format!(
                        "server VmRSS {} MiB passed the abort size {} MiB",
                        bytes >> 20,
                        soak.rss_abort_bytes >> 20
                    ));
                    return;
                }
            }
            Err(e) => {
                abort(format!("the server process is gone ({e})"));
                return;
            }
        }
        next += RSS_SAMPLE_INTERVAL;
        if let Some(wait) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
    }
}

/// INFO's `panics` field.
fn info_panics(c: &mut Resp) -> Option<u64> {
    let Ok(Reply::Bulk(Some(text))) = c.cmd(&[b"INFO"], Duration::from_secs(5)) else {
        return None;
    };
    String::from_utf8_lossy(&text)
        .lines()
        .find_map(|l| l.strip_prefix("panics:"))
        .and_then(|v| v.trim().parse().ok())
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1 << 20) as f64)
}

fn p99_criterion(name: &str, l: &LatencyStats) -> Criterion {
    Criterion {
        name: format!("well-behaved {name} p99"),
        limit: format!("<= {} us", LATENCY_P99_MAX_US),
        measured: format!(
            "{} us (p50 {} us, max {} us, {} requests, {} errors)",
            l.p99_us, l.p50_us, l.max_us, l.count, l.errors
        ),
        pass: l.count > 0 && l.p99_us <= LATENCY_P99_MAX_US,
    }
}

fn criteria(r: &SoakReport) -> Vec<Criterion> {
    let w = &r.writes;
    vec![
        Criterion {
            name: "panics".to_string(),
            limit: "0".to_string(),
            measured: r
                .panics
                .map_or("unreadable (INFO failed)".to_string(), |p| p.to_string()),
            pass: r.panics == Some(0),
        },
        Criterion {
            name: "server RSS".to_string(),
            limit: format!("<= {} (arena + 256 MiB) at every sample", mib(r.rss_limit_bytes)),
            measured: format!(
                "max {}, {} of {} samples over{}{}",
                mib(r.rss.max_bytes),
                r.rss.samples_over_limit,
                r.rss.samples,
                r.rss
                    .first_over_limit_sec
                    .map_or(String::new(), |s| format!(", first at {s:.1} s")),
                r.aborted
                    .as_ref()
                    .map_or(String::new(), |a| format!("; aborted: {a}"))
            ),
            pass: r.rss.samples > 0 && r.rss.samples_over_limit == 0 && r.aborted.is_none(),
        },
        p99_criterion("PING", &r.ping),
        p99_criterion("GET", &r.get),
        Criterion {
            name: "acknowledged writes lost".to_string(),
            limit: "0 (INCR counters exact)".to_string(),
            measured: format!(
                "{} keys lost, {} counters wrong of {} acknowledged writes ({} refused, {} unanswered; {} reads of the check failed){}",
                w.keys_lost,
                w.counters_wrong,
                w.acked,
                w.rejected,
                w.unknown,
                w.read_errors,
                if w.examples.is_empty() {
                    String::new()
                } else {
                    format!(": {}", w.examples.join("; "))
                }
            ),
            pass: w.acked > 0 && w.keys_lost == 0 && w.counters_wrong == 0,
        },
    ]
}

/// The terminal report.
pub fn table(r: &SoakReport) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "soak: {:.1} of {:.1} s, arena {}, filled with {} values of 64 KiB before the attacks",
        r.seconds_run,
        r.seconds_planned,
        mib(r.arena_bytes),
        r.fill_values
    );
    let _ = writeln!(
        s,
        "{:<24} {:>10} {:>14} {:>14} {:>10}",
        "hostile client", "attempts", "server closed", "connect failed", "notes"
    );
    for h in &r.hostile {
        let note = match h.name.as_str() {
            "connection-flood" => format!("held {}", h.held_max),
            "mset-at-oom" => format!("{} partial", h.partial_writes),
            _ => String::new(),
        };
        let _ = writeln!(
            s,
            "{:<24} {:>10} {:>14} {:>14} {:>10}",
            h.name, h.attempts, h.server_closed, h.connect_failed, note
        );
    }
    let _ = writeln!(
        s,
        "cross-protocol write (pwned-by-http) stored: {}",
        r.http_write_stored
            .map_or("unknown".to_string(), |b| if b { "YES" } else { "no" }
                .to_string())
    );
    let _ = writeln!(s, "criteria:");
    for c in &r.criteria {
        let _ = writeln!(
            s,
            "  {:<4} {:<26} limit {:<40} measured {}",
            if c.pass { "pass" } else { "FAIL" },
            c.name,
            c.limit,
            c.measured
        );
    }
    let failed = r.failed();
    if failed.is_empty() {
        let _ = writeln!(s, "soak passed");
    } else {
        let _ = writeln!(s, "soak FAILED: {}", failed.join(", "));
    }
    s
}
