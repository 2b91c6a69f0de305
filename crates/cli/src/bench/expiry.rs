//! `directkv bench expiry`: the expiry-lag target of issue 20 (1 M keys, 10% expiring within a
//! minute, YCSB-B for 70 s; p99 lag < 1 s, expired keys never returned). Without `--target` it
//! starts its own `directkv serve` with default flags and stops it by PID. Exits non-zero when
//! the target is missed. The measuring is `directkv_bench::expiry`.

use std::net::{SocketAddr, ToSocketAddrs};

use clap::Args;
use directkv_bench::dist::Distribution;
use directkv_bench::expiry::{self, ExpirySpec};

use crate::flags::{duration_flag, parse_dist};

#[derive(Args)]
pub struct ExpiryFlags {
    /// A running server (HOST:PORT of native and RESP) instead of starting one.
    #[arg(long)]
    target: Option<String>,
    /// The --target server's password.
    #[arg(long, default_value = "")]
    password: String,
    #[arg(long, default_value_t = 1_000_000)]
    keys: u64,
    /// Share of the keys given a deadline.
    #[arg(long, default_value_t = 0.1)]
    expiring: f64,
    /// Seconds over which the deadlines are spread, from the end of the load.
    #[arg(long, default_value_t = 60.0)]
    window: f64,
    /// Seconds of YCSB-B from the end of the load (at least --window).
    #[arg(long, default_value_t = 70.0)]
    seconds: f64,
    #[arg(long, default_value_t = 8)]
    key_size: usize,
    #[arg(long, default_value_t = 8)]
    value_size: usize,
    /// Operations per batch (at most 64).
    #[arg(long, default_value_t = 64)]
    depth: usize,
    /// Load threads, each with its own client.
    #[arg(long, default_value_t = 2)]
    connections: usize,
    /// uniform | zipf | ycsb-zipf (Zipf constant 0.99; `zipf:0.9` for another)
    #[arg(long, default_value = "ycsb-zipf", value_parser = parse_dist)]
    dist: Distribution,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
}

pub fn run(f: ExpiryFlags) -> Result<(), String> {
    let spec = ExpirySpec {
        keys: f.keys,
        expiring_fraction: f.expiring,
        window: duration_flag("window", f.window, false)?,
        run: duration_flag("seconds", f.seconds, false)?,
        key_size: f.key_size,
        value_size: f.value_size,
        depth: f.depth,
        connections: f.connections,
        dist: f.dist,
        seed: f.seed,
    };
    // The server this run starts, kept until the report is printed and then stopped by PID.
    let mut own = None;
    let addr: SocketAddr = match &f.target {
        Some(t) => t
            .to_socket_addrs()
            .map_err(|e| format!("--target {t}: {e}"))?
            .next()
            .ok_or_else(|| format!("--target {t}: no address"))?,
        None => {
            let exe = std::env::current_exe()
                .map_err(|e| format!("cannot find this executable to start directkv: {e}"))?;
            let server = expiry::start_server(&exe)?;
            let addr = server.addr;
            own = Some(server);
            addr
        }
    };
    let report = expiry::run(addr, &f.password, &spec)?;
    drop(own);
    if f.json {
        println!("{}", serde_json::to_string(&report).expect("serializable"));
    } else {
        print!("{}", expiry::table(&report));
    }
    if report.passed {
        Ok(())
    } else {
        Err("the expiry target was missed".into())
    }
}
