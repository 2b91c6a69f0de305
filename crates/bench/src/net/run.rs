//! `directkv bench run`: one workload against one running target, at one or several depths.
//!
//! ```text
//!   resolve keys (--keys, or --utilization × the server's arena_bytes from INFO, or
//!                 KEYS_DEFAULT)
//!     -> connect `connections` drivers
//!     -> refuse a target that already holds keys (unless --load-anyway or --skip-load)
//!     -> load every key once (pipelined, --load-depth)
//!     -> for each depth: warm-up + measured run (closed or open loop) -> RunReport
//! ```
//!
//! The defaults suit a user trying the README's command against the server they just started:
//! a modest key count (a fill of the server's memory is asked for with --utilization), and no
//! writes into a server that holds data the user may care about. The key count comes from
//! `DBSIZE` on the target's address, for native targets too (directkv serves RESP and native on
//! one port), and from memcached's `stats` (`curr_items`).
//!
//! Everything runs on one current-thread tokio runtime, which is the right host for one
//! load-generator core. The progress bar (indicatif, on stderr) is the caller's choice.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::dist::Distribution;
use crate::net::driver::{resp::RespDriver, DataShape, Driver, DriverError, Target};
use crate::net::runner::{self, Pacing, Progress, RunConfig};
use crate::net::workload::{keys_for_utilization, ValueFormat, WorkloadKind, WorkloadSpec};
use crate::report::{LoadSummary, RunReport, RunResult};

/// Operations per batch in the load phase when not given.
pub const LOAD_DEPTH_DEFAULT: usize = 256;
/// Keys loaded when neither a key count nor a utilization is given: a few MB on the server,
/// loaded in seconds even on a busy machine, and more keys than a CPU cache holds.
pub const KEYS_DEFAULT: u64 = 100_000;
/// How long the target has to say how many keys it holds before the load phase.
pub const KEY_COUNT_TIMEOUT: Duration = Duration::from_secs(5);

/// Everything `bench run` needs.
#[derive(Debug, Clone)]
pub struct NetRunArgs {
    pub target: Target,
    pub workload: WorkloadKind,
    pub dist: Distribution,
    /// Fixed key count; `None` fills `utilization` of the server's memory (directkv only) when
    /// that is given, else loads `KEYS_DEFAULT` keys.
    pub keys: Option<u64>,
    pub utilization: Option<f64>,
    pub shape: DataShape,
    /// One measured run per depth, in order.
    pub depths: Vec<usize>,
    pub connections: usize,
    pub warmup: Duration,
    pub measure: Duration,
    /// Open loop at this many operations per second; closed loop when `None`.
    pub rate: Option<f64>,
    pub seed: u64,
    /// Skip the load phase (the target already holds the keys).
    pub skip_load: bool,
    /// Load even into a target that already holds keys (refused otherwise).
    pub load_anyway: bool,
    pub load_depth: usize,
    /// Busy-poll the sockets during measured runs (`RunConfig::busy_poll`).
    pub busy_poll: bool,
}

/// Builds progress displays: one for the load, one per measured run.
pub trait ProgressFactory {
    fn loading(&self, keys: u64) -> Arc<dyn Progress>;
    fn measuring(&self, label: &str, duration: Duration) -> Arc<dyn Progress>;
    /// The phase that the last display belonged to has ended.
    fn finish(&self) {}
}

/// Shows nothing.
pub struct Silent;

impl ProgressFactory for Silent {
    fn loading(&self, _keys: u64) -> Arc<dyn Progress> {
        Arc::new(runner::NoProgress)
    }
    fn measuring(&self, _label: &str, _duration: Duration) -> Arc<dyn Progress> {
        Arc::new(runner::NoProgress)
    }
}

/// The runtime every network benchmark runs on.
pub fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the tokio runtime: {e}"))
}

/// The runner's configuration for one depth of `args` (validated up front, used per depth).
fn run_config(args: &NetRunArgs, depth: usize) -> RunConfig {
    RunConfig {
        connections: args.connections,
        depth,
        warmup: args.warmup,
        measure: args.measure,
        pacing: pacing(args.rate),
        busy_poll: args.busy_poll,
    }
}

pub fn run(args: &NetRunArgs, progress: &dyn ProgressFactory) -> Result<RunReport, String> {
    let format = args.workload.value_format(args.shape)?;
    for &depth in &args.depths {
        run_config(args, depth).validate()?;
    }
    if args.load_depth == 0 || args.load_depth > runner::DEPTH_MAX {
        return Err(format!(
            "load depth must be 1..={}, got {}",
            runner::DEPTH_MAX,
            args.load_depth
        ));
    }
    runtime()?.block_on(run_async(args, format, progress))
}

fn pacing(rate: Option<f64>) -> Pacing {
    match rate {
        Some(ops_per_sec) => Pacing::Open { ops_per_sec },
        None => Pacing::Closed,
    }
}

async fn run_async(
    args: &NetRunArgs,
    format: ValueFormat,
    progress: &dyn ProgressFactory,
) -> Result<RunReport, String> {
    let keys = match (args.keys, args.utilization) {
        (Some(_), Some(_)) => {
            return Err("give --keys or --utilization, not both".to_string());
        }
        (Some(0), None) => return Err("--keys must be at least 1".to_string()),
        (Some(k), None) => k,
        (None, Some(u)) => keys_from_server(args.target, u, args.shape).await?,
        (None, None) => KEYS_DEFAULT,
    };
    if !args.skip_load && !args.load_anyway {
        refuse_a_target_with_keys(args.target, keys, args.shape).await?;
    }
    let spec = WorkloadSpec {
        kind: args.workload,
        dist: args.dist,
        keys,
        shape: args.shape,
        seed: args.seed,
    };
    let mut drivers = connect_all(args.target, args.connections, args.shape, format)
        .await
        .map_err(|e| format!("{}: {e}", args.target.url()))?;
    let load = if args.skip_load {
        None
    } else {
        let _shown = progress.loading(keys);
        let summary = load(&mut drivers, &spec, args.load_depth).await?;
        progress.finish();
        Some(summary)
    };
    let mut runs = Vec::with_capacity(args.depths.len());
    for &depth in &args.depths {
        let config = run_config(args, depth);
        let shown = progress.measuring(&format!("depth {depth}"), args.warmup + args.measure);
        let stats = runner::run(&mut drivers, &spec, &config, shown)
            .await
            .map_err(|e| format!("{}: {e}", args.target.url()))?;
        progress.finish();
        runs.push(RunResult::new(&config, &stats));
    }
    Ok(RunReport {
        target: args.target.url(),
        workload: args.workload.name().to_string(),
        dist: args.dist.name(),
        keys,
        key_size: args.shape.key_size,
        value_size: args.shape.value_size,
        seed: args.seed,
        warmup_seconds: args.warmup.as_secs_f64(),
        load_generator_busy_poll: args.busy_poll,
        load,
        runs,
    })
}

/// Connects `connections` drivers to `target`.
pub async fn connect_all(
    target: Target,
    connections: usize,
    shape: DataShape,
    format: ValueFormat,
) -> Result<Vec<Driver>, DriverError> {
    let mut drivers = Vec::with_capacity(connections);
    for _ in 0..connections {
        drivers.push(Driver::connect(&target, shape, format).await?);
    }
    Ok(drivers)
}

/// Writes every key once and times it.
pub async fn load(
    drivers: &mut Vec<Driver>,
    spec: &WorkloadSpec,
    depth: usize,
) -> Result<LoadSummary, String> {
    let started = Instant::now();
    runner::load(drivers, spec, depth)
        .await
        .map_err(|e| format!("load phase: {e}"))?;
    let seconds = started.elapsed().as_secs_f64();
    Ok(LoadSummary {
        keys: spec.keys,
        seconds,
        ops_per_sec: spec.keys as f64 / seconds.max(f64::MIN_POSITIVE),
    })
}

/// Keys that fill `utilization` of a directkv server's arena, read from `INFO memory`.
async fn keys_from_server(
    target: Target,
    utilization: f64,
    shape: DataShape,
) -> Result<u64, String> {
    if !(utilization > 0.0 && utilization <= 1.0) {
        return Err(format!(
            "--utilization must be in (0, 1], got {utilization}"
        ));
    }
    let Target::Resp(addr) = target else {
        return Err(format!(
            "{}: give --keys (only a directkv RESP target reports its memory for --utilization)",
            target.url()
        ));
    };
    let mut driver = RespDriver::connect(addr, shape, ValueFormat::Bytes)
        .await
        .map_err(|e| format!("{}: {e}", target.url()))?;
    let arena = driver
        .info_field("memory", "arena_bytes")
        .await
        .map_err(|e| format!("{}: {e}", target.url()))?
        .ok_or_else(|| {
            format!(
                "{}: the server reports no arena_bytes (not directkv?): give --keys",
                target.url()
            )
        })?;
    let arena: u64 = arena
        .parse()
        .map_err(|_| format!("{}: bad arena_bytes {arena:?}", target.url()))?;
    Ok(keys_for_utilization(arena, utilization, shape))
}

/// Errs, naming the flags that go on, when `target` already holds keys: the load phase would
/// write `keys` keys into a server the user may keep other data in.
async fn refuse_a_target_with_keys(
    target: Target,
    keys: u64,
    shape: DataShape,
) -> Result<(), String> {
    let held = tokio::time::timeout(KEY_COUNT_TIMEOUT, keys_held(target, shape))
        .await
        .map_err(|_| {
            format!(
                "{}: no answer to the key count within {KEY_COUNT_TIMEOUT:?} (not a key-value \
                 server of this scheme?)",
                target.url()
            )
        })?
        .map_err(|e| format!("{}: cannot count the keys it holds: {e}", target.url()))?;
    if held == 0 {
        return Ok(());
    }
    Err(format!(
        "{} holds {held} key{} already: the load phase would write {keys} keys of its own into \
         it. Point it at an empty server, pass --load-anyway to load all the same, or --skip-load \
         if the server holds this benchmark's keys from an earlier run",
        target.url(),
        if held == 1 { "" } else { "s" },
    ))
}

/// Keys the target holds: `DBSIZE` for RESP and native targets (directkv answers RESP on its
/// native port), `curr_items` of `stats` for memcached.
async fn keys_held(target: Target, shape: DataShape) -> Result<u64, String> {
    match target {
        Target::Resp(addr) | Target::Native(addr) => {
            let mut driver = RespDriver::connect(addr, shape, ValueFormat::Bytes)
                .await
                .map_err(|e| e.to_string())?;
            driver.dbsize().await.map_err(|e| e.to_string())
        }
        Target::Memcache(addr) => crate::net::driver::memcache::curr_items(addr)
            .await
            .map_err(|e| e.to_string()),
    }
}
