//! `directkv bench`: one file per subcommand, each holding its flags (clap `Args`, whose doc
//! comments are the help text) and the function that runs it and prints the result. The
//! measuring itself lives in the `directkv-bench` crate.
//!
//! ```text
//!   engine.rs    bench engine     one engine in-process
//!   ocsm.rs      bench ocsm       OCSM over UDP, rate ladder
//!   run.rs       bench run        one running target over the network
//!   compare.rs   bench compare    directkv, redis-server, memcached side by side
//!   probe.rs     bench probe      the memory system alone
//!   loopback.rs  bench loopback   the network alone
//!   soak.rs      bench soak       every issue 19 attack at once, with well-behaved clients
//!   expiry.rs    bench expiry     the expiry-lag target of issue 20 under YCSB-B
//! ```

mod compare;
mod engine;
mod expiry;
mod loopback;
mod ocsm;
mod probe;
mod run;
mod soak;

use clap::{Args, Subcommand};
use directkv_bench::dist::Distribution;
use directkv_bench::net::run::LOAD_DEPTH_DEFAULT;
use directkv_bench::net::workload::WorkloadKind;

use crate::flags::parse_dist;

#[derive(Subcommand)]
pub enum BenchCmd {
    /// Drive one engine in-process (no network) and compare with the machine's line-read limit.
    Engine(engine::EngineFlags),
    /// OCSM over UDP (seed 004): open-loop rate ladder against the plain and batched server
    /// paths; fraction answered, lossless rate, latency distribution, server CPU µs/message.
    Ocsm(ocsm::OcsmFlags),
    /// Drive a running server over the network (resp://, memcache://, native:// HOST:PORT).
    Run(run::RunFlags),
    /// Start directkv, redis-server and memcached one at a time, each pinned to core 1, and run
    /// the same workload against each from core 0.
    Compare(compare::CompareFlags),
    /// The memory system alone: random line reads per second over a region, and how much core
    /// time one prefetched random line access costs next to computation it could overlap with.
    Probe(probe::ProbeFlags),
    /// The network alone: an echo pair over loopback TCP on cores 0 and 1 exchanging
    /// directkv-native batch-sized messages with no work; round trips/s times the depth, a
    /// reference (not a bound: a server can exchange more than this echo).
    Loopback(loopback::LoopbackFlags),
    /// Every hostile client of issue 19 at once against one server (started here unless
    /// --target) while well-behaved clients measure PING/GET latency and lost writes; exits
    /// non-zero when a criterion fails (0 panics, RSS <= arena + 256 MiB, p99 <= 10 ms, no
    /// acknowledged write lost).
    Soak(soak::SoakFlags),
    /// The expiry-lag target of issue 20: keys with deadlines spread over a minute under a
    /// YCSB-B load; checks that no expired key is returned and reads the server's lag
    /// histogram (p99 < 1 s); exits non-zero when the target is missed.
    Expiry(expiry::ExpiryFlags),
}

/// Runs one `bench` subcommand.
pub fn run(what: BenchCmd) -> Result<(), String> {
    match what {
        BenchCmd::Engine(f) => engine::run(f),
        BenchCmd::Ocsm(f) => ocsm::run(f),
        BenchCmd::Run(f) => run::run(f),
        BenchCmd::Compare(f) => compare::run(f),
        BenchCmd::Probe(f) => probe::run(f),
        BenchCmd::Loopback(f) => loopback::run(f),
        BenchCmd::Soak(f) => soak::run(f),
        BenchCmd::Expiry(f) => expiry::run(f),
    }
}

/// Flags shared by `bench run` and `bench compare`.
#[derive(Args)]
pub struct NetWorkloadFlags {
    /// ycsb-a | ycsb-b | ycsb-c | ycsb-f | atomic-single | atomic-zipf | vector-update |
    /// vector-reduce | vector-filter
    #[arg(long, default_value = "ycsb-b", value_parser = WorkloadKind::parse)]
    pub workload: WorkloadKind,
    /// uniform | zipf | ycsb-zipf (Zipf constant 0.99; `zipf:0.9` for another)
    #[arg(long, default_value = "ycsb-zipf", value_parser = parse_dist)]
    pub dist: Distribution,
    #[arg(long, default_value_t = 8)]
    pub key_size: usize,
    /// Value bytes (atomic workloads store the counter "0" whatever this says).
    #[arg(long, default_value_t = 8)]
    pub value_size: usize,
    /// Operations per batch (pipeline depth) of each connection.
    #[arg(long, default_value_t = 64)]
    pub depth: usize,
    /// Connections, each with one batch in flight.
    #[arg(long, default_value_t = 1)]
    pub connections: usize,
    /// Seconds per measured run.
    #[arg(long, default_value_t = 5.0)]
    pub seconds: f64,
    /// Seconds of warm-up before each measured run (executed, not recorded).
    #[arg(long, default_value_t = 1.0)]
    pub warmup: f64,
    /// Operations per batch in the load phase.
    #[arg(long, default_value_t = LOAD_DEPTH_DEFAULT)]
    pub load_depth: usize,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print one JSON object instead of a table (and hide the progress bar).
    #[arg(long)]
    pub json: bool,
    /// Write a PNG chart to this file.
    #[arg(long)]
    pub png: Option<std::path::PathBuf>,
    /// Let the load generator sleep in epoll between replies instead of polling its sockets
    /// (it polls by default: it owns its core, and a sleeping one pays a wake-up per reply).
    #[arg(long)]
    pub no_busy_poll: bool,
}
