//! `directkv bench engine`: one engine in-process (a run, `--sweep-utilization` or
//! `--fill-max`), printed as a table or JSON.

use clap::Args;
use directkv_bench::dist::Distribution;
use directkv_bench::engine::run::{self as engine_run, EngineBenchArgs, Workload};
use directkv_bench::engine::sweep;
use directkv_engine::ExecMode;

use crate::flags::{parse_bytes, parse_dist};

#[derive(Args)]
pub struct EngineFlags {
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

fn parse_workload(s: &str) -> Result<Workload, String> {
    Workload::parse(s).ok_or_else(|| format!("unknown workload {s:?}"))
}

fn parse_mode(s: &str) -> Result<ExecMode, String> {
    match s {
        "forward" => Ok(ExecMode::Forward),
        "stall" => Ok(ExecMode::Stall),
        _ => Err(format!("unknown mode {s:?} (forward | stall)")),
    }
}

pub fn run(f: EngineFlags) -> Result<(), String> {
    if f.sweep_utilization {
        return sweep::sweep(f.memory, f.kv_size, |p| {
            println!("{}", serde_json::to_string(p).expect("serializable"))
        });
    }
    if f.fill_max {
        let r = sweep::fill_max(f.memory, f.kv_size)?;
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
    let r = engine_run::run(&args)?;
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
    if r.errors > 0 {
        let ops: u64 = r.runs.iter().map(|run| run.ops).sum();
        println!(
            "warning: {} of {} operations failed; ops/s counts the others",
            r.errors, ops
        );
    }
    Ok(())
}
