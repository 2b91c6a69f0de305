//! The `directkv` binary: `serve`, `bench engine` (in-process), `bench run` (one running
//! target over the network) and `bench compare` (directkv, redis-server and memcached started
//! here, side by side).

use std::io::Write;

use clap::{Args, Parser, Subcommand};
use directkv_bench::compare::{self, CompareArgs, TargetKind};
use directkv_bench::dist::Distribution;
use directkv_bench::driver::{DataShape, Target};
use directkv_bench::engine_bench::{self, EngineBenchArgs, Workload};
use directkv_bench::engine_sweep;
use directkv_bench::netbench::{self, NetRunArgs};
use directkv_bench::workload::WorkloadKind;
use directkv_bench::{chart, progress, report};
use directkv_engine::ExecMode;

#[derive(Parser)]
#[command(
    name = "directkv",
    version,
    about = "directkv: a KV-Direct style in-memory key-value store"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run the server (RESP on --port; Ctrl-C or SIGTERM stops it gracefully).
    Serve(ServeFlags),
    /// Benchmarks.
    Bench {
        #[command(subcommand)]
        what: BenchCmd,
    },
}

#[derive(Subcommand)]
enum BenchCmd {
    /// Drive one engine in-process (no network) and compare with the machine's line-read limit.
    Engine(EngineFlags),
    /// OCSM over UDP (seed 004): open-loop rate ladder against the plain and batched server
    /// paths; fraction answered, lossless rate, latency distribution, server CPU µs/message.
    Ocsm(OcsmFlags),
    /// Drive a running server over the network (resp://, memcache://, native:// HOST:PORT).
    Run(RunFlags),
    /// Start directkv, redis-server and memcached one at a time, each pinned to core 1, and run
    /// the same workload against each from core 0.
    Compare(CompareFlags),
    /// The memory system alone: random line reads per second over a region, and how much core
    /// time one prefetched random line access costs next to computation it could overlap with.
    Probe(ProbeFlags),
    /// The network alone: an echo pair over loopback TCP on cores 0 and 1 exchanging
    /// directkv-native batch-sized messages with no work; round trips/s times the depth is the
    /// most operations/s any server could answer here at that depth.
    Loopback(LoopbackFlags),
}

#[derive(Args)]
struct ProbeFlags {
    /// Region sizes, e.g. 256M,2G.
    #[arg(long, default_value = "2G", value_delimiter = ',', value_parser = parse_bytes)]
    memory: Vec<usize>,
    /// Steps of a dependent multiply chain per access (the computation to overlap with).
    #[arg(long, default_value = "0,20,40", value_delimiter = ',')]
    work: Vec<u32>,
    /// Seconds per measurement (each overlap figure alternates its two loops three times).
    #[arg(long, default_value_t = 1.0)]
    seconds: f64,
    /// One JSON object per region instead of a table.
    #[arg(long)]
    json: bool,
}

fn bench_probe(f: ProbeFlags) -> Result<(), String> {
    if !(f.seconds > 0.0 && f.seconds <= 600.0) {
        return Err(format!("--seconds {} outside (0, 600]", f.seconds));
    }
    if let Some(m) = f.memory.iter().find(|&&m| m < 4096) {
        return Err(format!("--memory {m} is below the 4096-byte minimum"));
    }
    // The probe touches every page of its region: more than the free memory would swap or
    // wake the OOM killer rather than measure anything.
    let free = directkv_bench::probe::available_bytes();
    if let Some(m) = f.memory.iter().find(|&&m| m > free) {
        return Err(format!(
            "--memory {m} is more than the {free} bytes of free memory"
        ));
    }
    for &bytes in &f.memory {
        let lines = directkv_bench::probe::line_reads_per_sec(bytes, f.seconds);
        let overlap = directkv_bench::probe::overlap(bytes, &f.work, f.seconds);
        if f.json {
            let j = serde_json::json!({
                "memory": bytes,
                "line_reads_per_sec": lines,
                "overlap": overlap,
            });
            println!("{j}");
            continue;
        }
        println!(
            "region {} MiB: {:.1} M random line reads/s",
            bytes >> 20,
            lines / 1e6
        );
        println!("  work steps   work ns   work+line ns   exposed ns per line");
        for o in &overlap {
            println!(
                "  {:>10}   {:>7.2}   {:>12.2}   {:>19.2}",
                o.work_steps, o.work_ns, o.work_and_line_ns, o.exposed_line_ns
            );
        }
    }
    Ok(())
}

/// Flags shared by `bench run` and `bench compare`.
#[derive(Args)]
struct NetWorkloadFlags {
    /// ycsb-a | ycsb-b | ycsb-c | ycsb-f | atomic-single | atomic-zipf | vector-update |
    /// vector-reduce | vector-filter
    #[arg(long, default_value = "ycsb-b", value_parser = WorkloadKind::parse)]
    workload: WorkloadKind,
    /// uniform | zipf | ycsb-zipf (Zipf constant 0.99; `zipf:0.9` for another)
    #[arg(long, default_value = "ycsb-zipf", value_parser = parse_dist)]
    dist: Distribution,
    #[arg(long, default_value_t = 8)]
    key_size: usize,
    /// Value bytes (atomic workloads store the counter "0" whatever this says).
    #[arg(long, default_value_t = 8)]
    value_size: usize,
    /// Operations per batch (pipeline depth) of each connection.
    #[arg(long, default_value_t = 64)]
    depth: usize,
    /// Connections, each with one batch in flight.
    #[arg(long, default_value_t = 1)]
    connections: usize,
    /// Seconds per measured run.
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// Seconds of warm-up before each measured run (executed, not recorded).
    #[arg(long, default_value_t = 1.0)]
    warmup: f64,
    /// Operations per batch in the load phase.
    #[arg(long, default_value_t = netbench::LOAD_DEPTH_DEFAULT)]
    load_depth: usize,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print one JSON object instead of a table (and hide the progress bar).
    #[arg(long)]
    json: bool,
    /// Write a PNG chart to this file.
    #[arg(long)]
    png: Option<std::path::PathBuf>,
    /// Let the load generator sleep in epoll between replies instead of polling its sockets
    /// (it polls by default: it owns its core, and a sleeping one pays a wake-up per reply).
    #[arg(long)]
    no_busy_poll: bool,
}

#[derive(Args)]
struct RunFlags {
    /// resp://HOST:PORT (directkv or Redis), memcache://HOST:PORT, native://HOST:PORT
    #[arg(long)]
    target: String,
    #[command(flatten)]
    w: NetWorkloadFlags,
    /// Keys to load (default: fill --utilization of the server's memory, directkv only).
    #[arg(long)]
    keys: Option<u64>,
    /// Memory utilization the load phase fills to when --keys is not given.
    #[arg(long, default_value_t = 0.5)]
    utilization: f64,
    /// Run once per depth in this comma-separated list instead of --depth, e.g. 1,4,16,64,256.
    #[arg(long, value_delimiter = ',')]
    depth_sweep: Option<Vec<usize>>,
    /// Open loop at this many operations per second over all connections (default: closed loop).
    #[arg(long)]
    rate: Option<f64>,
    /// The target already holds the keys: skip the load phase.
    #[arg(long)]
    skip_load: bool,
    /// Also write the results as CSV to this file.
    #[arg(long)]
    csv: Option<std::path::PathBuf>,
}

#[derive(Args)]
struct CompareFlags {
    #[command(flatten)]
    w: NetWorkloadFlags,
    #[arg(long, default_value_t = 1_000_000)]
    keys: u64,
    /// directkv's arena is sized so the data fills this share of it (at least 16 MiB), and the
    /// engine is tuned for it. 0.6: 8 + 8-byte pairs take about 1.5 memory accesses per GET
    /// there (1.2 at 0.5), and over the network the server's cost per operation is the same.
    #[arg(long, default_value_t = 0.6)]
    utilization: f64,
    /// Comma-separated targets to start: directkv-native, directkv-resp, redis, memcached.
    #[arg(long, value_delimiter = ',', default_value = "directkv-native,directkv-resp,redis,memcached", value_parser = TargetKind::parse)]
    targets: Vec<TargetKind>,
    /// Do not pin servers and the load generator to separate cores.
    #[arg(long)]
    no_pin: bool,
    /// Skip the loopback ceiling (an echo pair with the same connections and native batch
    /// bytes, no work, run for --seconds after the targets).
    #[arg(long)]
    no_ceiling: bool,
}

#[derive(Args)]
struct LoopbackFlags {
    /// Connections, each with one batch in flight.
    #[arg(long, default_value_t = 4)]
    connections: usize,
    /// Operations per batch: requests and responses are the bytes of directkv's native
    /// frames for this many GETs.
    #[arg(long, default_value_t = 64)]
    depth: usize,
    #[arg(long, default_value_t = 8)]
    key_size: usize,
    #[arg(long, default_value_t = 8)]
    value_size: usize,
    /// Request bytes instead of the native GET batch's.
    #[arg(long)]
    request_bytes: Option<usize>,
    /// Response bytes instead of the native GET batch's.
    #[arg(long)]
    response_bytes: Option<usize>,
    /// Seconds measured (after a 0.2 s warm-up).
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// Both ends sleep in epoll instead of polling it.
    #[arg(long)]
    no_busy_poll: bool,
    /// Do not pin the two ends to cores 0 and 1.
    #[arg(long)]
    no_pin: bool,
    /// Print one JSON object instead of a line.
    #[arg(long)]
    json: bool,
}

fn bench_loopback(f: LoopbackFlags) -> Result<(), String> {
    let (request, response) =
        directkv_bench::loopback::native_batch_bytes(f.depth, f.key_size, f.value_size)?;
    let two_cores = std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2;
    let r = directkv_bench::loopback::echo(&directkv_bench::loopback::EchoConfig {
        connections: f.connections,
        request_bytes: f.request_bytes.unwrap_or(request),
        response_bytes: f.response_bytes.unwrap_or(response),
        measure: duration_flag("seconds", f.seconds, false)?,
        busy_poll: !f.no_busy_poll,
        cpus: (!f.no_pin && two_cores).then_some((0, 1)),
    })?;
    let ops = r.ops_per_sec(f.depth);
    if f.json {
        let j = serde_json::json!({
            "depth": f.depth,
            "ops_per_sec": ops,
            "echo": r,
        });
        println!("{j}");
    } else {
        println!(
            "{} connections, {}-byte requests, {}-byte responses{}: {:.0} round trips/s = {:.0} ops/s at depth {}",
            r.connections,
            r.request_bytes,
            r.response_bytes,
            if r.busy_poll { ", busy polling" } else { "" },
            r.round_trips_per_sec,
            ops,
            f.depth
        );
    }
    Ok(())
}

#[derive(Args)]
struct OcsmFlags {
    /// Server paths to start and compare, e.g. plain,batched.
    #[arg(long = "path", default_value = "plain,batched", value_delimiter = ',')]
    paths: Vec<String>,
    /// Drive an already running server's OCSM address instead of starting one.
    #[arg(long)]
    target: Option<std::net::SocketAddr>,
    /// With --target: the server's PID, for CPU microseconds per message.
    #[arg(long)]
    server_pid: Option<u32>,
    /// Offered rates in messages/s, e.g. 100000,200000 (default: a ladder from 50k, x1.2).
    #[arg(long, value_delimiter = ',')]
    rates: Vec<f64>,
    /// Seconds per offered rate.
    #[arg(long, default_value_t = 1.0)]
    seconds: f64,
    /// Milliseconds to wait for late replies after each step.
    #[arg(long, default_value_t = 200)]
    drain_ms: u64,
    /// Keys preloaded (and searched uniformly).
    #[arg(long, default_value_t = 100_000)]
    keys: u64,
    /// Share of datagrams that are updates (modify) instead of searches.
    #[arg(long, default_value_t = 0.0)]
    update_ratio: f64,
    #[arg(long, default_value_t = directkv_bench::ocsm::MSGS_PER_DATAGRAM_DEFAULT)]
    msgs_per_datagram: usize,
    /// Runs per path (the summary gives medians); paths are interleaved.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// CPU the server is pinned to (taskset); -1 = not pinned.
    #[arg(long, default_value_t = 1, allow_negative_numbers = true)]
    server_cpu: i64,
    /// CPU the generator is pinned to; -1 = not pinned.
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    client_cpu: i64,
    #[arg(long, default_value_t = 1)]
    shards: usize,
    #[arg(long, default_value = "256M")]
    memory: String,
    /// Datagrams per burst on the batched path (server default otherwise).
    #[arg(long)]
    burst: Option<usize>,
    /// Nice value for the server and the generator (e.g. -10 on a busy shared machine; root).
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    nice: i32,
    /// Where to write the chart.
    #[arg(long, default_value = "bench-ocsm.png")]
    png: std::path::PathBuf,
    #[arg(long)]
    no_png: bool,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print one JSON object instead of tables.
    #[arg(long)]
    json: bool,
}

fn bench_ocsm(f: OcsmFlags) -> Result<(), String> {
    let cpu = |c: i64| usize::try_from(c).ok();
    let args = directkv_bench::ocsm::OcsmBenchArgs {
        target: f.target,
        server_pid: f.server_pid,
        paths: f.paths,
        rates: f.rates,
        seconds: f.seconds,
        drain_ms: f.drain_ms,
        keys: f.keys,
        update_ratio: f.update_ratio,
        msgs_per_datagram: f.msgs_per_datagram,
        runs: f.runs,
        server_cpu: cpu(f.server_cpu),
        client_cpu: cpu(f.client_cpu),
        shards: f.shards,
        memory: f.memory,
        burst: f.burst,
        nice: f.nice,
        png: (!f.no_png).then_some(f.png),
        seed: f.seed,
    };
    let r = directkv_bench::ocsm::run(&args, |line| eprintln!("{line}"))?;
    if f.json {
        println!("{}", serde_json::to_string(&r).expect("serializable"));
    } else {
        print!("{}", directkv_bench::ocsm::text(&r));
    }
    Ok(())
}

#[derive(Args)]
struct EngineFlags {
    /// get | put | mixed-a | mixed-b | atomic-single | atomic-zipf | vector
    #[arg(long, default_value = "get", value_parser = parse_workload)]
    workload: Workload,
    /// uniform | zipf | ycsb-zipf (Zipf constant 0.99; `zipf:0.9` for another)
    #[arg(long, default_value = "uniform", value_parser = parse_dist)]
    dist: Distribution,
    /// Keys to load (default: fill --utilization of --memory)
    #[arg(long)]
    keys: Option<u64>,
    #[arg(long, default_value_t = 6)]
    key_size: usize,
    #[arg(long, default_value_t = 4)]
    value_size: usize,
    /// Arena size, e.g. 2G, 256M
    #[arg(long, default_value = "2G", value_parser = parse_bytes)]
    memory: usize,
    /// Operations per batch handed to the engine.
    #[arg(long, default_value_t = 1024)]
    batch: usize,
    /// Seconds per measured run.
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// forward | stall
    #[arg(long, default_value = "forward", value_parser = parse_mode)]
    mode: ExecMode,
    /// Memory utilization the load phase fills to.
    #[arg(long, default_value_t = 0.5)]
    utilization: f64,
    #[arg(long)]
    hash_index_ratio: Option<f64>,
    #[arg(long)]
    inline_threshold: Option<usize>,
    /// Operations in flight in the pipeline.
    #[arg(long, default_value_t = 256)]
    window: usize,
    /// Measured runs (the report gives medians).
    #[arg(long, default_value_t = 1)]
    runs: usize,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
    /// Print accesses per GET/PUT at memory utilizations 0.1, 0.2, ... (one JSON object per line).
    #[arg(long)]
    sweep_utilization: bool,
    /// Fill until out of memory and print the maximum memory utilization.
    #[arg(long)]
    fill_max: bool,
    /// Key-value size for --sweep-utilization and --fill-max.
    #[arg(long, default_value_t = 10)]
    kv_size: usize,
}

#[derive(Args)]
struct ServeFlags {
    /// A TOML file with any server setting (flags override it).
    #[arg(long)]
    config: Option<std::path::PathBuf>,
    /// Address to bind; anything but loopback requires --requirepass.
    #[arg(long)]
    bind: Option<String>,
    #[arg(long)]
    port: Option<u16>,
    /// Port of the Prometheus metrics endpoint (0 = any free port).
    #[arg(long)]
    metrics_port: Option<u16>,
    /// Shard threads (default: one per core).
    #[arg(long)]
    shards: Option<usize>,
    /// Total arena memory, split over the shards, e.g. 1G.
    #[arg(long, value_parser = parse_bytes)]
    memory: Option<usize>,
    /// Expected key + value bytes, for the engine's choice of hash index ratio and inline
    /// threshold (default 32).
    #[arg(long)]
    kv_size: Option<usize>,
    /// Memory utilization the engine is tuned for (default 0.5, as the seeds measure).
    #[arg(long)]
    utilization: Option<f64>,
    #[arg(long)]
    requirepass: Option<String>,
    /// OCSM UDP port (0 = any free port).
    #[arg(long)]
    ocsm_port: Option<u16>,
    /// Do not serve OCSM.
    #[arg(long, conflicts_with = "ocsm_port")]
    no_ocsm: bool,
    /// OCSM server path: plain (recv_from/send_to) | batched (recvmmsg/sendmmsg bursts on
    /// their own thread) | batched-shard (the same bursts inside shard 0's thread).
    #[arg(long, value_parser = parse_ocsm_path)]
    ocsm_path: Option<directkv_server::ocsm::OcsmPath>,
    /// Microseconds a shard keeps polling its sockets without sleeping after a request
    /// (0 = block in epoll at once; default 100).
    #[arg(long)]
    busy_poll_us: Option<u64>,
}

fn parse_ocsm_path(s: &str) -> Result<directkv_server::ocsm::OcsmPath, String> {
    directkv_server::ocsm::OcsmPath::parse(s)
        .ok_or_else(|| format!("unknown OCSM path {s:?} (plain | batched | batched-shard)"))
}

fn serve(f: ServeFlags) -> Result<(), String> {
    // Structured logs on stderr; RUST_LOG=debug (or directkv_server=debug) shows connections.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
    let mut cfg = match &f.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            directkv_server::ServerConfig::from_toml(&text)?
        }
        None => directkv_server::ServerConfig::default(),
    };
    if let Some(b) = f.bind {
        cfg.bind = b;
    }
    if let Some(p) = f.port {
        cfg.port = p;
    }
    if f.metrics_port.is_some() {
        cfg.metrics_port = f.metrics_port;
    }
    if let Some(s) = f.shards {
        cfg.shards = s;
    }
    if let Some(m) = f.memory {
        cfg.memory_bytes = m;
    }
    if let Some(k) = f.kv_size {
        if k == 0 {
            return Err("--kv-size must be at least 1".into());
        }
        cfg.expected_kv_bytes = k;
    }
    if let Some(u) = f.utilization {
        if !(u > 0.0 && u < 1.0) {
            return Err(format!("--utilization must be in (0, 1), got {u}"));
        }
        cfg.target_utilization = u;
    }
    if f.requirepass.is_some() {
        cfg.requirepass = f.requirepass;
    }
    if f.ocsm_port.is_some() {
        cfg.ocsm_port = f.ocsm_port;
    }
    if f.no_ocsm {
        cfg.ocsm_port = None;
    }
    if let Some(p) = f.ocsm_path {
        cfg.ocsm_path = p;
    }
    if let Some(us) = f.busy_poll_us {
        cfg.busy_poll_us = us;
    }
    let server = directkv_server::Server::start(cfg.clone())?;
    let _ = writeln!(
        std::io::stderr(),
        "directkv {} serving RESP and native on {} (metrics {}, OCSM {} {}) with {} shards and {} bytes of memory",
        env!("CARGO_PKG_VERSION"),
        server.addr(),
        server.metrics_addr().map_or("off".to_string(), |a| a.to_string()),
        server.ocsm_addr().map_or("off".to_string(), |a| a.to_string()),
        cfg.ocsm_path.name(),
        cfg.shard_count(),
        cfg.memory_bytes
    );
    server.run_until_signal();
    // A closed stderr (the parent went away) must not turn a clean stop into a panic.
    let _ = writeln!(std::io::stderr(), "directkv stopped");
    Ok(())
}

fn parse_workload(s: &str) -> Result<Workload, String> {
    Workload::parse(s).ok_or_else(|| format!("unknown workload {s:?}"))
}

fn parse_dist(s: &str) -> Result<Distribution, String> {
    Distribution::parse(s).ok_or_else(|| format!("unknown distribution {s:?}"))
}

fn parse_mode(s: &str) -> Result<ExecMode, String> {
    match s {
        "forward" => Ok(ExecMode::Forward),
        "stall" => Ok(ExecMode::Stall),
        _ => Err(format!("unknown mode {s:?} (forward | stall)")),
    }
}

/// "2G", "256M", "64K", "1GiB", or plain bytes.
fn parse_bytes(s: &str) -> Result<usize, String> {
    let t = s.trim().to_ascii_uppercase();
    let t = t.trim_end_matches("IB").trim_end_matches('B');
    let (num, mult) = match t.chars().last() {
        Some('K') => (&t[..t.len() - 1], 1usize << 10),
        Some('M') => (&t[..t.len() - 1], 1 << 20),
        Some('G') => (&t[..t.len() - 1], 1 << 30),
        _ => (t, 1),
    };
    let n: f64 = num.parse().map_err(|_| format!("not a size: {s:?}"))?;
    Ok((n * mult as f64) as usize)
}

fn bench_engine(f: EngineFlags) -> Result<(), String> {
    if f.sweep_utilization {
        return engine_sweep::sweep(f.memory, f.kv_size, |p| {
            println!("{}", serde_json::to_string(p).expect("serializable"))
        });
    }
    if f.fill_max {
        let r = engine_sweep::fill_max(f.memory, f.kv_size)?;
        println!("{}", serde_json::to_string(&r).expect("serializable"));
        return Ok(());
    }
    let args = EngineBenchArgs {
        workload: f.workload,
        dist: f.dist,
        keys: f.keys,
        key_size: f.key_size,
        value_size: f.value_size,
        memory: f.memory,
        batch: f.batch,
        seconds: f.seconds,
        mode: f.mode,
        utilization: f.utilization,
        hash_index_ratio: f.hash_index_ratio,
        inline_threshold: f.inline_threshold,
        window: f.window,
        runs: f.runs,
        seed: f.seed,
    };
    let r = engine_bench::run(&args)?;
    if f.json {
        println!("{}", serde_json::to_string(&r).expect("serializable"));
        return Ok(());
    }
    println!(
        "workload {:?}  dist {}  mode {}  keys {}  kv {}+{} bytes",
        r.workload, r.dist, r.mode, r.keys, r.key_size, r.value_size
    );
    println!(
        "{:<28}{:>16}",
        "ops/s (median)",
        format!("{:.0}", r.ops_per_sec)
    );
    println!(
        "{:<28}{:>16}",
        "line reads/s (median)",
        format!("{:.0}", r.line_reads_per_sec)
    );
    println!("{:<28}{:>16.3}", "ops per line read", r.ops_per_line_read);
    println!("{:<28}{:>16.3}", "accesses/op", r.accesses_per_op);
    println!("{:<28}{:>16.3}", "lines/op", r.lines_per_op);
    println!("{:<28}{:>16.3}", "forwarded share", r.forwarded_share);
    println!("{:<28}{:>16.3}", "memory utilization", r.memory_utilization);
    println!("{:<28}{:>16.3}", "hash index ratio", r.hash_index_ratio);
    println!("{:<28}{:>16}", "inline threshold", r.inline_threshold);
    Ok(())
}

/// Seconds from a flag, or an error naming the flag.
fn duration_flag(
    name: &str,
    seconds: f64,
    allow_zero: bool,
) -> Result<std::time::Duration, String> {
    if !seconds.is_finite() || seconds < 0.0 || (!allow_zero && seconds == 0.0) {
        return Err(format!(
            "--{name} must be a positive number of seconds, got {seconds}"
        ));
    }
    Ok(std::time::Duration::from_secs_f64(seconds))
}

fn bench_run(f: RunFlags) -> Result<(), String> {
    let args = NetRunArgs {
        target: Target::parse(&f.target)?,
        workload: f.w.workload,
        dist: f.w.dist,
        keys: f.keys,
        utilization: f.utilization,
        shape: DataShape {
            key_size: f.w.key_size,
            value_size: f.w.value_size,
        },
        depths: f.depth_sweep.unwrap_or_else(|| vec![f.w.depth]),
        connections: f.w.connections,
        warmup: duration_flag("warmup", f.w.warmup, true)?,
        measure: duration_flag("seconds", f.w.seconds, false)?,
        rate: f.rate,
        seed: f.w.seed,
        skip_load: f.skip_load,
        load_depth: f.w.load_depth,
        busy_poll: !f.w.no_busy_poll,
    };
    let bars = progress::Bars::new(!f.w.json);
    let r = netbench::run(&args, &bars)?;
    if let Some(path) = &f.csv {
        std::fs::write(path, report::run_csv(&r))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    if let Some(path) = &f.w.png {
        chart::run_chart(&r, path)?;
    }
    if f.w.json {
        println!("{}", serde_json::to_string(&r).expect("serializable"));
    } else {
        print!("{}", report::run_table(&r));
    }
    Ok(())
}

fn bench_compare(f: CompareFlags) -> Result<(), String> {
    let args = CompareArgs {
        directkv_exe: std::env::current_exe()
            .map_err(|e| format!("cannot find this executable to start directkv: {e}"))?,
        targets: f.targets,
        workload: f.w.workload,
        dist: f.w.dist,
        keys: f.keys,
        shape: DataShape {
            key_size: f.w.key_size,
            value_size: f.w.value_size,
        },
        depth: f.w.depth,
        connections: f.w.connections,
        warmup: duration_flag("warmup", f.w.warmup, true)?,
        measure: duration_flag("seconds", f.w.seconds, false)?,
        seed: f.w.seed,
        utilization: f.utilization,
        load_depth: f.w.load_depth,
        pin: !f.no_pin,
        busy_poll: !f.w.no_busy_poll,
        ceiling: !f.no_ceiling,
    };
    let bars = progress::Bars::new(!f.w.json);
    let r = compare::compare(&args, &bars)?;
    if let Some(path) = &f.w.png {
        chart::compare_chart(&r, path)?;
    }
    if f.w.json {
        println!("{}", serde_json::to_string(&r).expect("serializable"));
    } else {
        print!("{}", report::compare_table(&r));
    }
    Ok(())
}

fn main() {
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Serve(f) => serve(f),
        Cmd::Bench {
            what: BenchCmd::Engine(f),
        } => bench_engine(f),
        Cmd::Bench {
            what: BenchCmd::Ocsm(f),
        } => bench_ocsm(f),
        Cmd::Bench {
            what: BenchCmd::Run(f),
        } => bench_run(f),
        Cmd::Bench {
            what: BenchCmd::Compare(f),
        } => bench_compare(f),
        Cmd::Bench {
            what: BenchCmd::Probe(f),
        } => bench_probe(f),
        Cmd::Bench {
            what: BenchCmd::Loopback(f),
        } => bench_loopback(f),
    };
    if let Err(e) = r {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
