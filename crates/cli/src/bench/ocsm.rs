//! `directkv bench ocsm`: OCSM over UDP, an open-loop rate ladder against the plain and batched
//! server paths (started here, or a running one with --target); tables or one JSON object.

use clap::Args;
use directkv_bench::ocsm;

#[derive(Args)]
pub struct OcsmFlags {
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
    #[arg(long, default_value_t = ocsm::MSGS_PER_DATAGRAM_DEFAULT)]
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

pub fn run(f: OcsmFlags) -> Result<(), String> {
    let cpu = |c: i64| usize::try_from(c).ok();
    let args = ocsm::OcsmBenchArgs {
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
    let r = ocsm::run(&args, |line| eprintln!("{line}"))?;
    if f.json {
        println!("{}", serde_json::to_string(&r).expect("serializable"));
    } else {
        print!("{}", ocsm::report::text(&r));
    }
    Ok(())
}
