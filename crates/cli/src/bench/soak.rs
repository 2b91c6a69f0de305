//! `directkv bench soak`: every issue 19 attack at once against one server while well-behaved
//! clients measure latency and lost writes; prints the criteria and exits non-zero when one
//! fails. Without `--target` it starts its own `directkv serve` (one server for every attack:
//! a password for the AUTH attacks, UDP and OCSM on for the datagram ones) and stops it by PID.

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use clap::Args;
use directkv_bench::soak::{self, Soak, SoakTarget, RSS_ABORT_HEADROOM_DEFAULT_BYTES};

use crate::flags::parse_bytes;

#[derive(Args)]
pub struct SoakFlags {
    /// How long the attacks run: seconds, or with a unit (500ms, 90s, 10m, 1h).
    #[arg(long, default_value = "600s", value_parser = parse_duration)]
    duration: Duration,
    /// A running server (HOST:PORT of RESP and native TCP) instead of starting one; needs
    /// --server-pid and --arena.
    #[arg(long, requires_all = ["server_pid", "arena"])]
    target: Option<String>,
    /// PID of the --target server, for its VmRSS.
    #[arg(long)]
    server_pid: Option<u32>,
    /// Its arena (`serve --memory`), e.g. 256M; the RSS limit is this + 256 MiB. For the
    /// server the soak starts: its --memory.
    #[arg(long, value_parser = parse_bytes)]
    arena: Option<usize>,
    /// The --target server's password (the server the soak starts gets "soakpw").
    #[arg(long, default_value = "")]
    password: String,
    /// Whether the --target server serves native UDP on its port: yes | no.
    #[arg(long, default_value = "yes", value_parser = parse_yes_no)]
    udp: bool,
    /// The --target server's OCSM UDP port, for the garbage datagrams.
    #[arg(long)]
    ocsm_port: Option<u16>,
    /// Connections the flood opens and holds (the server's connections_max by default).
    #[arg(long, default_value_t = 10_000)]
    flood_connections: usize,
    /// Stop everything when the server's VmRSS passes the arena plus this (protects the
    /// machine from a server that balloons), e.g. 4G.
    #[arg(long, value_parser = parse_bytes)]
    rss_abort_headroom: Option<usize>,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Run only these hostile clients (comma-separated names as in the report).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
}

/// The arena of the server the soak starts, when --arena is not given.
const OWN_ARENA_BYTES_DEFAULT: u64 = 256 << 20;

fn parse_yes_no(s: &str) -> Result<bool, String> {
    match s {
        "yes" => Ok(true),
        "no" => Ok(false),
        _ => Err(format!("{s:?}: give yes or no")),
    }
}

/// "600", "600s", "500ms", "10m", "1h".
fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let (num, unit) = match t.find(|c: char| c.is_ascii_alphabetic()) {
        Some(i) => t.split_at(i),
        None => (t, "s"),
    };
    let n: f64 = num
        .parse()
        .map_err(|_| format!("{s:?}: give a duration like 600s, 10m or 500ms"))?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "s" => n,
        "m" | "min" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(format!("{s:?}: units are ms, s, m, h")),
    };
    if !(secs.is_finite() && secs > 0.0) {
        return Err(format!("{s:?}: give a positive duration"));
    }
    Ok(Duration::from_secs_f64(secs))
}

pub fn run(f: SoakFlags) -> Result<(), String> {
    soak::check_hostile_names(&f.only)?;
    let headroom = f
        .rss_abort_headroom
        .map_or(RSS_ABORT_HEADROOM_DEFAULT_BYTES, |b| b as u64);
    // The server this soak starts, kept until the report is printed and then stopped by PID.
    let mut own = None;
    let target = match &f.target {
        Some(t) => {
            let addr: SocketAddr = t
                .to_socket_addrs()
                .map_err(|e| format!("--target {t}: {e}"))?
                .next()
                .ok_or_else(|| format!("--target {t}: no address"))?;
            SoakTarget {
                addr,
                udp: f.udp,
                ocsm: f.ocsm_port.map(|p| SocketAddr::new(addr.ip(), p)),
                password: f.password.clone(),
                pid: f.server_pid.expect("clap requires it"),
                arena_bytes: f.arena.expect("clap requires it") as u64,
            }
        }
        None => {
            let arena = f.arena.map_or(OWN_ARENA_BYTES_DEFAULT, |b| b as u64);
            let exe = std::env::current_exe()
                .map_err(|e| format!("cannot find this executable to start directkv: {e}"))?;
            let (server, t) = soak::start_server(&exe, arena)?;
            own = Some(server);
            t
        }
    };
    let rss_abort = target.arena_bytes + headroom;
    let s =
        Soak::new(target, f.duration, f.flood_connections, rss_abort, f.seed)?.with_only(f.only)?;
    let report = soak::run(&s)?;
    drop(own);
    if f.json {
        println!("{}", serde_json::to_string(&report).expect("serializable"));
    } else {
        print!("{}", soak::table(&report));
    }
    let failed = report.failed();
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!("soak criteria failed: {}", failed.join(", ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_units() {
        assert_eq!(parse_duration("600").unwrap(), Duration::from_secs(600));
        assert_eq!(parse_duration("90s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("10m").unwrap(), Duration::from_secs(600));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("1h").unwrap(), Duration::from_secs(3600));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("10 parsecs").is_err());
        assert!(parse_duration("-3s").is_err());
    }
}
