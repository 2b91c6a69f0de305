//! `directkv bench run`: one workload against one running target over the network, at one or
//! several depths; a table, JSON, and optionally CSV and a PNG chart.

use clap::Args;
use directkv_bench::net::driver::{DataShape, Target};
use directkv_bench::net::run::{self as net_run, NetRunArgs};
use directkv_bench::report::{self, chart, progress};

use super::NetWorkloadFlags;
use crate::flags::duration_flag;

#[derive(Args)]
pub struct RunFlags {
    /// resp://HOST:PORT (directkv or Redis), memcache://HOST:PORT, native://HOST:PORT
    #[arg(long)]
    target: String,
    #[command(flatten)]
    common: NetWorkloadFlags,
    /// Keys to load [default: 100000, or what --utilization asks for].
    #[arg(long)]
    keys: Option<u64>,
    /// Instead of --keys: load as many keys as fill this share of the server's memory, e.g.
    /// 0.5 (a directkv RESP target, which reports its memory).
    #[arg(long)]
    utilization: Option<f64>,
    /// Run once per depth in this comma-separated list instead of --depth, e.g. 1,4,16,64,256.
    #[arg(long, value_delimiter = ',')]
    depth_sweep: Option<Vec<usize>>,
    /// Open loop at this many operations per second over all connections (default: closed loop).
    #[arg(long)]
    rate: Option<f64>,
    /// The target already holds the keys: skip the load phase.
    #[arg(long)]
    skip_load: bool,
    /// Load the keys even into a server that already holds keys (refused by default, so that
    /// a benchmark does not write into a server whose data someone may need).
    #[arg(long, conflicts_with = "skip_load")]
    load_anyway: bool,
    /// Also write the results as CSV to this file.
    #[arg(long)]
    csv: Option<std::path::PathBuf>,
}

pub fn run(f: RunFlags) -> Result<(), String> {
    let args = NetRunArgs {
        target: Target::parse(&f.target)?,
        workload: f.common.workload,
        dist: f.common.dist,
        keys: f.keys,
        utilization: f.utilization,
        shape: DataShape {
            key_size: f.common.key_size,
            value_size: f.common.value_size,
        },
        depths: f.depth_sweep.unwrap_or_else(|| vec![f.common.depth]),
        connections: f.common.connections,
        warmup: duration_flag("warmup", f.common.warmup, true)?,
        measure: duration_flag("seconds", f.common.seconds, false)?,
        rate: f.rate,
        seed: f.common.seed,
        skip_load: f.skip_load,
        load_anyway: f.load_anyway,
        load_depth: f.common.load_depth,
        busy_poll: !f.common.no_busy_poll,
    };
    let bars = progress::Bars::new(!f.common.json);
    let r = net_run::run(&args, &bars)?;
    if let Some(path) = &f.csv {
        std::fs::write(path, report::run_csv(&r))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    if let Some(path) = &f.common.png {
        chart::run_chart(&r, path)?;
    }
    if f.common.json {
        println!("{}", serde_json::to_string(&r).expect("serializable"));
    } else {
        print!("{}", report::run_table(&r));
    }
    Ok(())
}
