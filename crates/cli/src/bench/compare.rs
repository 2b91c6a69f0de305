//! `directkv bench compare`: directkv, redis-server and memcached started here one at a time,
//! the same workload against each; a table or JSON, and optionally a PNG chart.

use clap::Args;
use directkv_bench::net::compare::{self, AppendFsync, CompareArgs, TargetKind};
use directkv_bench::net::driver::DataShape;
use directkv_bench::report::{self, chart, progress};

use super::NetWorkloadFlags;
use crate::flags::duration_flag;

#[derive(Args)]
pub struct CompareFlags {
    #[command(flatten)]
    common: NetWorkloadFlags,
    #[arg(long, default_value_t = 1_000_000)]
    keys: u64,
    /// directkv's arena is sized so the data fills this share of it (at least 16 MiB), and the
    /// engine is tuned for it. 0.6: 8 + 8-byte pairs take about 1.5 memory accesses per GET
    /// there (1.2 at 0.5), and over the network the server's cost per operation is the same.
    #[arg(long, default_value_t = 0.6)]
    utilization: f64,
    /// Comma-separated targets to start: directkv-native, directkv-resp, redis, memcached,
    /// directkv-memcache (directkv's memcached port, with memcached's driver), and with an
    /// append-only file in a temporary directory (--appendfsync): redis-aof, directkv-aof
    /// (RESP), directkv-native-aof.
    #[arg(long, value_delimiter = ',', default_value = "directkv-native,directkv-resp,redis,memcached", value_parser = TargetKind::parse)]
    targets: Vec<TargetKind>,
    /// Do not pin servers and the load generator to separate cores.
    #[arg(long)]
    no_pin: bool,
    /// Run as a client on the same machine would (issue 20): nothing pinned (as --no-pin), and
    /// the load generator sleeps in epoll between replies (as --no-busy-poll), like
    /// redis-benchmark or a YCSB client; each server runs with its own defaults (directkv: one
    /// shard per core and the default arena, not the one-shard sizing of pinned runs). With
    /// `--depth 1 --connections 50` this is the unpipelined co-located profile of BENCHMARKS.
    #[arg(long)]
    co_located: bool,
    /// Skip the loopback echo reference (an echo pair with the same connections and native
    /// batch bytes, no work, run for --seconds after the targets; a reference, not a bound).
    #[arg(long)]
    no_echo_reference: bool,
    /// The fsync policy of the redis-aof, directkv-aof and directkv-native-aof targets:
    /// always, everysec or no (Redis's appendfsync).
    #[arg(long, default_value = "everysec", value_parser = AppendFsync::parse)]
    appendfsync: AppendFsync,
}

pub fn run(f: CompareFlags) -> Result<(), String> {
    let args = CompareArgs {
        directkv_exe: std::env::current_exe()
            .map_err(|e| format!("cannot find this executable to start directkv: {e}"))?,
        targets: f.targets,
        workload: f.common.workload,
        dist: f.common.dist,
        keys: f.keys,
        shape: DataShape {
            key_size: f.common.key_size,
            value_size: f.common.value_size,
        },
        depth: f.common.depth,
        connections: f.common.connections,
        warmup: duration_flag("warmup", f.common.warmup, true)?,
        measure: duration_flag("seconds", f.common.seconds, false)?,
        seed: f.common.seed,
        utilization: f.utilization,
        load_depth: f.common.load_depth,
        pin: !(f.no_pin || f.co_located),
        busy_poll: !(f.common.no_busy_poll || f.co_located),
        echo_reference: !f.no_echo_reference,
        server_defaults: f.co_located,
        appendfsync: f.appendfsync,
    };
    let bars = progress::Bars::new(!f.common.json);
    let r = compare::compare(&args, &bars)?;
    if let Some(path) = &f.common.png {
        chart::compare_chart(&r, path)?;
    }
    if f.common.json {
        println!("{}", serde_json::to_string(&r).expect("serializable"));
    } else {
        print!("{}", report::compare_table(&r));
    }
    Ok(())
}
