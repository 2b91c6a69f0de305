//! The server under test as a child process: `directkv serve` started from this very binary
//! (`std::env::current_exe()`) through `ServerProcess`, pinned with `taskset`, found ready by
//! polling it over OCSM, its CPU time read from `/proc/PID/stat`, and stopped by PID (SIGTERM,
//! then SIGKILL).
//!
//! Why a child process and not an in-process server: its CPU time is then exactly the server's
//! (the paper's energy per message becomes CPU microseconds per message), and pinning it to one
//! core leaves the other to the load generator.

use std::ffi::OsString;
use std::net::{SocketAddr, UdpSocket};

use directkv_proto::ocsm::Opcode;

use super::generator;
use directkv_sys::process::{Launch, ServerProcess, Stderr};

/// What to start.
pub struct ServerSpec {
    pub path: String,
    pub cpu: Option<usize>,
    pub shards: usize,
    pub memory: String,
    pub burst: Option<usize>,
    /// Nice value for the server (negative = ahead of other work on its core; needs root).
    pub nice: i32,
}

/// A free UDP port on loopback (not 7071, which an ephemeral main port would turn into 0).
fn free_udp_port() -> Result<u16, String> {
    for _ in 0..16 {
        let s = UdpSocket::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
        let p = s.local_addr().map_err(|e| e.to_string())?.port();
        if p != 7071 {
            return Ok(p);
        }
    }
    Err("no free UDP port".into())
}

/// Starts the server `spec` describes; its `addr` is the OCSM address. Its log goes to a file
/// in the temporary directory, quoted if start-up fails.
pub fn start(spec: &ServerSpec) -> Result<ServerProcess, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find own binary: {e}"))?;
    let port = free_udp_port()?;
    let log = std::env::temp_dir().join(format!(
        "directkv-bench-ocsm-{}-{port}.log",
        std::process::id()
    ));
    let mut args: Vec<OsString> = [
        "serve",
        "--port",
        "0",
        "--metrics-port",
        "0",
        "--appendonly",
        "no",
    ]
    .iter()
    .map(OsString::from)
    .collect();
    args.extend(["--ocsm-port".into(), port.to_string().into()]);
    args.extend(["--ocsm-path".into(), spec.path.clone().into()]);
    args.extend(["--shards".into(), spec.shards.to_string().into()]);
    args.extend(["--memory".into(), spec.memory.clone().into()]);
    if let Some(b) = spec.burst {
        let cfg = std::env::temp_dir().join(format!("directkv-bench-ocsm-{port}.toml"));
        std::fs::write(&cfg, format!("ocsm_burst_datagrams_max = {b}\n"))
            .map_err(|e| e.to_string())?;
        args.extend(["--config".into(), cfg.into()]);
    }
    let launch = Launch {
        name: "directkv".to_string(),
        program: exe,
        args,
        cpu: spec.cpu,
        nice: spec.nice,
    };
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut server = ServerProcess::spawn(&launch, addr, Stderr::Log(log))?;
    // Polls with a one-message search until the server answers.
    let sock = UdpSocket::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    sock.connect(addr).map_err(|e| e.to_string())?;
    let mut req = Vec::new();
    generator::datagram(1, Opcode::Search, &[0], &mut req);
    server.wait_until("answer OCSM", |_| {
        generator::exchange(&sock, &req, 1).is_ok()
    })?;
    Ok(server)
}
