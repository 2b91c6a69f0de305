//! `directkv bench loopback`: the network alone, an echo pair over loopback TCP exchanging
//! directkv-native batch bytes with no work; prints one line or one JSON object. With
//! `--fsync-dir`, the echo answers a round of every connection's batch only after one
//! fdatasync of their records: the bound of `appendfsync always` for a server with no work.

use clap::Args;
use directkv_bench::machine::loopback;

use crate::flags::duration_flag;

#[derive(Args)]
pub struct LoopbackFlags {
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
    /// Answer each round of batches (one per connection) only after writing a record per
    /// batch to a file in this directory and fdatasyncing it.
    #[arg(long)]
    fsync_dir: Option<std::path::PathBuf>,
    /// Random 64-byte lines of a 64 MiB table the echo end reads per request before answering
    /// (a stand-in for a store's work: calibrate it against the server in memory).
    #[arg(long, default_value_t = 0)]
    work_lines: usize,
    /// With `--fsync-dir`: a second thread on the echo's core makes each fdatasync (as a
    /// server's sync thread does) instead of the echo thread itself.
    #[arg(long, requires = "fsync_dir")]
    handoff: bool,
    /// Bytes of the record written per batch with `--fsync-dir`.
    #[arg(long, default_value_t = 1024)]
    record_bytes: usize,
    /// Print one JSON object instead of a line.
    #[arg(long)]
    json: bool,
}

pub fn run(f: LoopbackFlags) -> Result<(), String> {
    let (request, response) = loopback::native_batch_bytes(f.depth, f.key_size, f.value_size)?;
    let two_cores = std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2;
    let r = loopback::echo(&loopback::EchoConfig {
        connections: f.connections,
        request_bytes: f.request_bytes.unwrap_or(request),
        response_bytes: f.response_bytes.unwrap_or(response),
        measure: duration_flag("seconds", f.seconds, false)?,
        busy_poll: !f.no_busy_poll,
        cpus: (!f.no_pin && two_cores).then_some((0, 1)),
        fsync: f.fsync_dir.map(|dir| loopback::EchoFsync {
            dir,
            record_bytes: f.record_bytes,
            handoff: f.handoff,
        }),
        work_lines: f.work_lines,
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
            "{} connections, {}-byte requests, {}-byte responses{}{}: {:.0} round trips/s = {:.0} ops/s at depth {}",
            r.connections,
            r.request_bytes,
            r.response_bytes,
            if r.busy_poll { ", busy polling" } else { "" },
            if f.work_lines > 0 { format!(", {} line reads per request", f.work_lines) } else { String::new() },
            r.round_trips_per_sec,
            ops,
            f.depth
        );
        if let (Some(n), Some(us)) = (r.fsyncs, r.fsync_mean_us) {
            println!(
                "  answered after fdatasync of {}-byte records per batch: {n} fdatasyncs, mean {us:.0} us",
                f.record_bytes
            );
        }
    }
    Ok(())
}
