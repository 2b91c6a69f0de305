//! `directkv bench compare`: the same workload, data and depth against directkv, redis-server
//! and memcached, each started here, one after the other, on one core.
//!
//! ```text
//!   core 0: this process (load generator)        core 1: one server at a time
//!   for each target:
//!     start server (taskset -c 1) ─ connect ─ RSS₀ ─ load every key ─ RSS₁ ─ warm-up run
//!       ─ CPU₀ ─ measured run ─ CPU₁ ─ stop server (SIGTERM by PID; also on error, by Drop)
//!   report: ops/s, p50/p99, (CPU₁ − CPU₀) / ops × 10⁶ split into user and system time,
//!     (RSS₁ − RSS₀) / keys, and the kernel bound 1 / (system seconds per operation)
//!   then (unless turned off) the loopback echo reference: an echo pair on the same two cores
//!   and connections exchanging directkv-native's batch bytes with no work (`loopback`), times
//!   the depth
//! ```
//!
//! The bound: a server pinned to one core has at most one CPU second per second, and the
//! kernel's part of it (`stime`) is work done for that server's system calls, packets and
//! wake-ups. So ops/s <= 1 / (system seconds per operation): a server that makes the kernel
//! work as much per operation as this run did could not answer more even if its own code took
//! no time. It holds in the run it was measured in by construction, and it is the figure to
//! argue "N x a peer is out of reach" with. The echo reference is not a bound (issue 19 item
//! 17: directkv-native has beaten it at depths 1 to 16; its epoll use and polling differ from
//! the server's and the load generator's), so it is printed as a reference ratio only.
//!
//! Servers run one at a time so that they never compete for the server core. Memory per key is
//! the growth of `VmRSS` (`/proc/PID/status`) over the load phase divided by the key count, so
//! it counts what the data costs (index, item headers, allocator slack) and not the empty
//! process; a server that reserves and touches its memory up front (none of the three does)
//! would show less than it uses. directkv's arena is sized so the data fills `utilization` of
//! it, as the seeds measure. CPU is `utime + stime` (`/proc/PID/stat`) over the measured run.
//!
//! Co-located runs (`directkv bench compare --co-located`, issue 20 item 6) pin nothing and
//! let the load generator sleep in epoll between replies: the servers and the generator share
//! both cores as a server and its clients on one machine do, and a server that spins takes CPU
//! the generator needs. With `--depth 1 --connections 50` it is the unpipelined profile that
//! redis-benchmark's defaults (`-c 50 -P 1`) measure. CPU per operation is then the figure to
//! compare, since no server is held to one core. directkv then runs with its own defaults too
//! (one shard per core, the default arena), as redis-server and memcached run with theirs.
//!
//! `directkv-memcache` (issue 21) is directkv reached through its memcached port by the same
//! memcached driver as `memcached` (multi-key `get` batches, `noreply` sets), started as the
//! other directkv targets; its arena is sized for memcached items, which carry flags and a CAS
//! (`DIRECTKV_MEMCACHE_ITEM_EXTRA_BYTES`). It is not among the default targets.
//!
//! A target that cannot run the workload (vector workloads on redis-server or memcached, or a
//! driver that reports `Unsupported` when created) is listed under `skipped` with the reason,
//! and the other targets still run.
//!
//! Persistence (issue 22 item 6): `redis-aof` is redis-server with its append-only file on
//! (`--appendonly yes --appendfsync X --save ""`) and `directkv-aof` / `directkv-native-aof`
//! are directkv with its log on (`--appendonly yes --appendfsync X`), `X` from `--appendfsync`
//! (`AppendFsync`, default everysec), each in a fresh temporary directory (`DataDir`) removed
//! after the server stops. The in-memory directkv targets get `--appendonly no` and a
//! temporary `--dir` of their own, so they measure no disk and leave nothing behind, when the
//! binary has those flags (`directkv_has_persistence`: its `serve --help` names
//! `--appendonly`); a binary without them is started as before and its `-aof` targets are
//! skipped with the reason.

use std::path::PathBuf;
use std::time::Duration;

use crate::dist::Distribution;
use crate::machine::loopback::{self, EchoConfig};
use crate::net::driver::{DataShape, DriverError, Target};
use crate::net::run::{self, ProgressFactory};
use crate::net::runner::{self, Pacing, RunConfig};
use crate::net::workload::{WorkloadKind, WorkloadSpec};
use crate::report::{CompareReport, CompareRow, EchoReference, LoadSummary, RunResult, Skipped};
use directkv_sys::process::ServerProcess;

/// The CPU the load generator runs on; servers get `SERVER_CPU`.
pub const LOAD_CPU: usize = 0;
pub const SERVER_CPU: usize = 1;
/// The smallest arena directkv is started with, bytes.
pub const DIRECTKV_MEMORY_MIN_BYTES: u64 = 16 << 20;
/// What a memcached item costs directkv beyond its key and value, bytes: it is a record (never
/// inline) with a 2-byte header and 12 bytes of flags and CAS (ARCHITECTURE.md, "memcache
/// items"); the arena of `directkv-memcache` is sized and tuned with it.
pub const DIRECTKV_MEMCACHE_ITEM_EXTRA_BYTES: usize = 14;
/// memcached's item memory per key, bytes, when sizing `-m` (its item header is about 50 bytes
/// plus key and value, rounded up to a slab class; four times that leaves ample room).
const MEMCACHED_BYTES_PER_KEY_BUDGET: u64 = 256;
/// The smallest item memory memcached is started with, MiB.
const MEMCACHED_MEMORY_MIN_MB: u64 = 64;

/// A server kind compare can start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetKind {
    /// directkv over its native protocol; skipped (with the driver's reason) in builds without
    /// the native driver.
    DirectkvNative,
    DirectkvResp,
    Redis,
    Memcached,
    /// directkv over memcached's text protocol on its memcached port (issue 21): the same
    /// memcached driver as `Memcached`, started as the other directkv targets.
    DirectkvMemcache,
    /// redis-server with its append-only file (`--appendfsync` of the compare).
    RedisAof,
    /// directkv over RESP with its log on (`--appendfsync` of the compare): the same driver as
    /// `RedisAof` and `DirectkvResp`.
    DirectkvAof,
    /// directkv over its native protocol with its log on.
    DirectkvNativeAof,
}

impl TargetKind {
    pub const ALL: [TargetKind; 8] = [
        TargetKind::DirectkvNative,
        TargetKind::DirectkvResp,
        TargetKind::Redis,
        TargetKind::Memcached,
        TargetKind::DirectkvMemcache,
        TargetKind::RedisAof,
        TargetKind::DirectkvAof,
        TargetKind::DirectkvNativeAof,
    ];

    pub fn name(&self) -> &'static str {
        match self {
            TargetKind::DirectkvNative => "directkv-native",
            TargetKind::DirectkvResp => "directkv-resp",
            TargetKind::Redis => "redis",
            TargetKind::Memcached => "memcached",
            TargetKind::DirectkvMemcache => "directkv-memcache",
            TargetKind::RedisAof => "redis-aof",
            TargetKind::DirectkvAof => "directkv-aof",
            TargetKind::DirectkvNativeAof => "directkv-native-aof",
        }
    }

    /// Whether this target is directkv (started from `CompareArgs::directkv_exe`).
    pub fn is_directkv(&self) -> bool {
        !matches!(
            self,
            TargetKind::Redis | TargetKind::Memcached | TargetKind::RedisAof
        )
    }

    /// Whether this target keeps an append-only file (in a temporary `DataDir`).
    pub fn is_aof(&self) -> bool {
        matches!(
            self,
            TargetKind::RedisAof | TargetKind::DirectkvAof | TargetKind::DirectkvNativeAof
        )
    }

    /// Whether this server can run `workload`: only directkv has vector operations.
    pub fn supports(&self, workload: WorkloadKind) -> Result<(), String> {
        let vector = matches!(
            workload,
            WorkloadKind::VectorUpdate | WorkloadKind::VectorReduce | WorkloadKind::VectorFilter
        );
        let directkv = matches!(
            self,
            TargetKind::DirectkvNative
                | TargetKind::DirectkvResp
                | TargetKind::DirectkvAof
                | TargetKind::DirectkvNativeAof
        );
        if vector && !directkv {
            return Err(format!("{} has no vector operations", self.name()));
        }
        Ok(())
    }

    pub fn parse(s: &str) -> Result<TargetKind, String> {
        TargetKind::ALL
            .into_iter()
            .find(|t| t.name() == s.trim())
            .ok_or_else(|| {
                format!(
                    "unknown compare target {s:?} (directkv-native, directkv-resp, redis, memcached, directkv-memcache) or with an append-only file (redis-aof, directkv-aof, directkv-native-aof)"
                )
            })
    }
}

#[derive(Debug, Clone)]
pub struct CompareArgs {
    /// The directkv binary to start (normally this very executable).
    pub directkv_exe: PathBuf,
    pub targets: Vec<TargetKind>,
    pub workload: WorkloadKind,
    pub dist: Distribution,
    pub keys: u64,
    pub shape: DataShape,
    pub depth: usize,
    pub connections: usize,
    pub warmup: Duration,
    pub measure: Duration,
    pub seed: u64,
    /// directkv's arena is sized so the data fills this share of it.
    pub utilization: f64,
    pub load_depth: usize,
    /// Pin servers and the load generator to separate cores.
    pub pin: bool,
    /// Busy-poll the load generator's sockets during measured runs (`RunConfig::busy_poll`).
    pub busy_poll: bool,
    /// Also measure the loopback echo reference (`loopback::echo`) with the same connections
    /// and directkv-native's batch sizes, for `measure`, after the targets.
    pub echo_reference: bool,
    /// Start directkv with its own defaults (one shard per core, the default arena, no tuning
    /// flags), as a user runs it: the co-located profile. Otherwise one shard on one core with
    /// an arena sized for the data.
    pub server_defaults: bool,
    /// The fsync policy of the `-aof` targets.
    pub appendfsync: AppendFsync,
}

/// When a server with an append-only file makes it durable (Redis's `appendfsync`, which
/// directkv's `serve --appendfsync` mirrors).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AppendFsync {
    /// fdatasync before the replies of a write leave.
    Always,
    /// fdatasync about once a second.
    #[default]
    Everysec,
    /// never; the kernel writes back when it likes.
    No,
}

impl AppendFsync {
    pub fn name(&self) -> &'static str {
        match self {
            AppendFsync::Always => "always",
            AppendFsync::Everysec => "everysec",
            AppendFsync::No => "no",
        }
    }

    pub fn parse(s: &str) -> Result<AppendFsync, String> {
        [AppendFsync::Always, AppendFsync::Everysec, AppendFsync::No]
            .into_iter()
            .find(|p| p.name() == s.trim())
            .ok_or_else(|| format!("unknown appendfsync {s:?} (always, everysec, no)"))
    }
}

pub fn compare(
    args: &CompareArgs,
    progress: &dyn ProgressFactory,
) -> Result<CompareReport, String> {
    let config = RunConfig {
        connections: args.connections,
        depth: args.depth,
        warmup: Duration::ZERO,
        measure: args.measure,
        pacing: Pacing::Closed,
        busy_poll: args.busy_poll,
    };
    config.validate()?;
    if args.keys == 0 {
        return Err("--keys must be at least 1".to_string());
    }
    if !(args.utilization > 0.0 && args.utilization <= 1.0) {
        return Err(format!(
            "--utilization must be in (0, 1], got {}",
            args.utilization
        ));
    }
    let format = args.workload.value_format(args.shape)?;
    let pinned = args.pin && pin_self(LOAD_CPU);
    let server_cpu = pinned.then_some(SERVER_CPU);
    // The runtime is built after pinning so that its threads inherit the load core.
    let rt = run::runtime()?;
    let spec = WorkloadSpec {
        kind: args.workload,
        dist: args.dist,
        keys: args.keys,
        shape: args.shape,
        seed: args.seed,
    };
    let mut rows = Vec::new();
    let mut skipped = Vec::new();
    let persistence = args.targets.iter().any(TargetKind::is_directkv)
        && directkv_has_persistence(&args.directkv_exe);
    for &kind in &args.targets {
        let runnable = kind.supports(args.workload).and_then(|()| {
            if kind.is_directkv() && kind.is_aof() && !persistence {
                return Err(format!(
                    "{} serve has no --appendonly (persistence, issue 22, is not in this build)",
                    args.directkv_exe.display()
                ));
            }
            Ok(())
        });
        if let Err(reason) = runnable {
            skipped.push(Skipped {
                name: kind.name().to_string(),
                reason,
            });
            continue;
        }
        let started = start(kind, args, server_cpu, persistence)
            .map_err(|e| format!("{}: {e}", kind.name()))?;
        let server = &started.server;
        let target = match kind {
            TargetKind::DirectkvNative | TargetKind::DirectkvNativeAof => {
                Target::Native(server.addr)
            }
            TargetKind::DirectkvResp
            | TargetKind::Redis
            | TargetKind::RedisAof
            | TargetKind::DirectkvAof => Target::Resp(server.addr),
            TargetKind::Memcached => Target::Memcache(server.addr),
            TargetKind::DirectkvMemcache => Target::Memcache(
                server
                    .memcache_addr()
                    .ok_or("directkv-memcache: directkv did not report a memcached port")?,
            ),
        };
        let connected = rt.block_on(run::connect_all(
            target,
            args.connections,
            args.shape,
            format,
        ));
        let mut drivers = match connected {
            Ok(drivers) => drivers,
            Err(DriverError::Unsupported(reason)) => {
                skipped.push(Skipped {
                    name: kind.name().to_string(),
                    reason,
                });
                continue;
            }
            Err(e) => return Err(format!("{}: {e}", kind.name())),
        };
        let rss_before = server.settled_rss_bytes()?;
        let shown = progress.loading(args.keys);
        let load: LoadSummary = rt.block_on(run::load(&mut drivers, &spec, args.load_depth))?;
        drop(shown);
        progress.finish();
        let rss_after = server.rss_bytes()?;
        let label = format!("{} depth {}", kind.name(), args.depth);
        if !args.warmup.is_zero() {
            let warm = RunConfig {
                measure: args.warmup,
                ..config
            };
            let shown = progress.measuring(&format!("{label} warm-up"), args.warmup);
            rt.block_on(runner::run(&mut drivers, &spec, &warm, shown))
                .map_err(|e| format!("{}: {e}", kind.name()))?;
            progress.finish();
        }
        let cpu_before = cpu_split(server.pid())?;
        let shown = progress.measuring(&label, args.measure);
        let stats = rt
            .block_on(runner::run(&mut drivers, &spec, &config, shown))
            .map_err(|e| format!("{}: {e}", kind.name()))?;
        progress.finish();
        let cpu_after = cpu_split(server.pid())?;
        drop(drivers);
        let run = RunResult::new(&config, &stats);
        let mops = run.ops.max(1) as f64 / 1e6;
        let user = (cpu_after.0 - cpu_before.0) / mops;
        let sys = (cpu_after.1 - cpu_before.1) / mops;
        rows.push(CompareRow {
            name: kind.name().to_string(),
            target: target.url(),
            version: version(kind),
            server_cpu_sec_per_mop: user + sys,
            server_user_sec_per_mop: user,
            server_sys_sec_per_mop: sys,
            server_cpu_share: (user + sys) * mops / stats.seconds.max(f64::MIN_POSITIVE),
            kernel_bound_ops_per_sec: (sys > 0.0).then(|| 1e6 / sys),
            rss_bytes_per_key: (rss_after as f64 - rss_before as f64) / args.keys as f64,
            rss_before_load_bytes: rss_before,
            rss_after_load_bytes: rss_after,
            run,
            load,
        });
        drop(started);
    }
    // The targets' results stand without the echo: if it cannot be measured (a depth above
    // one native frame's operations, no loopback port), it is listed as skipped with the reason.
    let loopback_echo_reference = if args.echo_reference {
        let shown = progress.measuring("loopback echo reference", args.measure);
        let echo = loopback_echo(args, pinned);
        drop(shown);
        progress.finish();
        echo.map_err(|reason| {
            skipped.push(Skipped {
                name: "loopback echo reference".to_string(),
                reason,
            })
        })
        .ok()
    } else {
        None
    };
    Ok(CompareReport {
        workload: args.workload.name().to_string(),
        dist: args.dist.name(),
        keys: args.keys,
        key_size: args.shape.key_size,
        value_size: args.shape.value_size,
        depth: args.depth,
        connections: args.connections,
        seconds: args.measure.as_secs_f64(),
        seed: args.seed,
        pinned,
        load_generator_busy_poll: args.busy_poll,
        rows,
        skipped,
        loopback_echo_reference,
    })
}

/// The echo pair of `loopback::echo` on the compare's cores and connections, with the bytes of
/// directkv-native's GET batches at the compare's depth and sizes (both ends busy-poll when the
/// load generator does, as directkv's server does by default).
fn loopback_echo(args: &CompareArgs, pinned: bool) -> Result<EchoReference, String> {
    let (request_bytes, response_bytes) =
        loopback::native_batch_bytes(args.depth, args.shape.key_size, args.shape.value_size)?;
    let echo = loopback::echo(&EchoConfig {
        connections: args.connections,
        request_bytes,
        response_bytes,
        measure: args.measure,
        busy_poll: args.busy_poll,
        cpus: pinned.then_some((LOAD_CPU, SERVER_CPU)),
        fsync: None,
        work_lines: 0,
    })
    .map_err(|e| format!("loopback echo: {e}"))?;
    Ok(EchoReference {
        ops_per_sec: echo.ops_per_sec(args.depth),
        echo,
    })
}

/// (user, system) CPU seconds of process `pid` so far: `utime` and `stime` of
/// `/proc/PID/stat`.
fn cpu_split(pid: u32) -> Result<(f64, f64), String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map_err(|e| format!("cannot read /proc/{pid}/stat: {e}"))?;
    let hz = directkv_sys::cpu::clock_ticks_per_sec().max(1) as f64;
    user_sys_ticks(&text)
        .map(|(u, s)| (u as f64 / hz, s as f64 / hz))
        .ok_or_else(|| format!("unexpected /proc/{pid}/stat"))
}

/// utime and stime of a `/proc/PID/stat` line, in clock ticks.
fn user_sys_ticks(text: &str) -> Option<(u64, u64)> {
    // The command name (field 2) may hold spaces and parentheses; utime and stime are fields
    // 14 and 15, the 12th and 13th after the last ')'.
    let rest = text.rsplit_once(')').map(|(_, r)| r)?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok());
    Some((ticks(11)?, ticks(12)?))
}

/// A started target and the temporary directory its files go to (if it has one); dropped in
/// that order, so the server stops before its directory is removed.
struct Started {
    server: ServerProcess,
    _dir: Option<DataDir>,
}

fn start(
    kind: TargetKind,
    args: &CompareArgs,
    cpu: Option<usize>,
    persistence: bool,
) -> Result<Started, String> {
    let data = args.keys * (args.shape.key_size + args.shape.value_size) as u64;
    let dir = (kind.is_aof() || (kind.is_directkv() && persistence))
        .then(|| DataDir::create(kind.name()))
        .transpose()?;
    let server = match kind {
        TargetKind::Redis => ServerProcess::redis(cpu)?,
        TargetKind::RedisAof => {
            let dir = dir.as_ref().expect("an aof target has a directory");
            ServerProcess::redis_aof(&dir.path, args.appendfsync.name(), &[], cpu)?
        }
        TargetKind::Memcached => {
            let mb = (args.keys * MEMCACHED_BYTES_PER_KEY_BUDGET + data) >> 20;
            ServerProcess::memcached(mb.max(MEMCACHED_MEMORY_MIN_MB), cpu)?
        }
        _ => {
            let mut flags = if args.server_defaults {
                Vec::new()
            } else {
                directkv_sizing_flags(kind, args)
            };
            if let Some(dir) = &dir {
                let appendonly = if kind.is_aof() { "yes" } else { "no" };
                flags.extend(["--appendonly".to_string(), appendonly.to_string()]);
                if kind.is_aof() {
                    let policy = args.appendfsync.name().to_string();
                    flags.extend(["--appendfsync".to_string(), policy]);
                }
                flags.extend(["--dir".to_string(), dir.path.display().to_string()]);
            }
            let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
            ServerProcess::directkv_serve(&args.directkv_exe, &flags, cpu)?
        }
    };
    Ok(Started { server, _dir: dir })
}

/// One shard with an arena sized so the data fills `utilization` of it, tuned for the pairs
/// (what `ServerProcess::directkv` passes), for a directkv target of a pinned run.
fn directkv_sizing_flags(kind: TargetKind, args: &CompareArgs) -> Vec<String> {
    // A memcached item is a record with its flags and CAS: sized and tuned as such.
    let meta = match kind {
        TargetKind::DirectkvMemcache => DIRECTKV_MEMCACHE_ITEM_EXTRA_BYTES,
        _ => 0,
    };
    let kv = args.shape.key_size + args.shape.value_size + meta;
    let data = args.keys * kv as u64;
    let bytes = ((data as f64 / args.utilization) as u64).max(DIRECTKV_MEMORY_MIN_BYTES);
    let u = args.utilization.min(0.95);
    [
        "--shards",
        "1",
        "--memory",
        &bytes.to_string(),
        "--kv-size",
        &kv.to_string(),
        "--utilization",
        &u.to_string(),
    ]
    .map(String::from)
    .to_vec()
}

/// Whether `exe serve` has persistence flags (`--appendonly` in its `serve --help`): the
/// server side of issue 22 landed in that build.
pub fn directkv_has_persistence(exe: &std::path::Path) -> bool {
    std::process::Command::new(exe)
        .args(["serve", "--help"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains("--appendonly"))
        .unwrap_or(false)
}

/// A fresh, empty temporary directory for one server's files, removed (with what the server
/// left in it) when dropped.
pub struct DataDir {
    pub path: PathBuf,
}

impl DataDir {
    /// `$TMPDIR/directkv-bench-NAME-PID-N`, created empty (an old one of that name is removed
    /// first: its process is gone, since the PID is ours).
    pub fn create(name: &str) -> Result<DataDir, String> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path =
            std::env::temp_dir().join(format!("directkv-bench-{name}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(DataDir { path })
    }
}

impl Drop for DataDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// The server's version line, for the report (best effort).
fn version(kind: TargetKind) -> String {
    if kind.is_directkv() {
        return env!("CARGO_PKG_VERSION").to_string();
    }
    let (program, flag) = match kind {
        TargetKind::Redis | TargetKind::RedisAof => ("redis-server", "--version"),
        _ => ("memcached", "-V"),
    };
    std::process::Command::new(program)
        .arg(flag)
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.lines().next().unwrap_or("").trim().to_string())
        .unwrap_or_default()
}

/// Pins the calling thread (and the threads it starts later) to `cpu`; false when the machine
/// has fewer than two CPUs or the call fails, in which case nothing is pinned.
fn pin_self(cpu: usize) -> bool {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    cpus >= 2 && cpu < cpus && directkv_sys::cpu::pin_current_thread(cpu)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn persistent_targets_and_fsync_policies_parse_by_name() {
        for kind in TargetKind::ALL {
            assert_eq!(TargetKind::parse(kind.name()), Ok(kind));
        }
        let aof = [
            TargetKind::RedisAof,
            TargetKind::DirectkvAof,
            TargetKind::DirectkvNativeAof,
        ];
        for kind in TargetKind::ALL {
            assert_eq!(kind.is_aof(), aof.contains(&kind), "{kind:?}");
        }
        assert!(!TargetKind::RedisAof.is_directkv() && TargetKind::DirectkvAof.is_directkv());
        for p in [AppendFsync::Always, AppendFsync::Everysec, AppendFsync::No] {
            assert_eq!(AppendFsync::parse(p.name()), Ok(p));
        }
        assert_eq!(AppendFsync::default(), AppendFsync::Everysec);
        assert!(AppendFsync::parse("sometimes")
            .unwrap_err()
            .contains("always, everysec, no"));
    }

    #[test]
    fn a_data_dir_is_created_empty_and_removed_when_dropped() {
        let d = DataDir::create("unit").unwrap();
        let path = d.path.clone();
        std::fs::write(path.join("file"), b"x").unwrap();
        drop(d);
        assert!(!path.exists());
    }

    #[test]
    fn user_and_system_ticks_come_from_fields_14_and_15() {
        let line = "42 (a (b) c) S 1 2 3 4 5 6 7 8 9 10 111 222 13 14 15";
        assert_eq!(user_sys_ticks(line), Some((111, 222)));
        assert_eq!(user_sys_ticks("42 (x) S 1 2"), None);
        let (user, sys) = cpu_split(std::process::id()).unwrap();
        assert!(user >= 0.0 && sys >= 0.0);
    }
}
