//! The server under test as a child process: `directkv serve` started from this very binary
//! (`std::env::current_exe()`), pinned with `taskset`, found ready by polling it over OCSM, its
//! CPU time read from `/proc/PID/stat`, and stopped by PID (SIGTERM, then SIGKILL).
//!
//! Why a child process and not an in-process server: its CPU time is then exactly the server's
//! (the paper's energy per message becomes CPU microseconds per message), and pinning it to one
//! core leaves the other to the load generator.

use std::net::{SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use directkv_proto::ocsm::Opcode;

use super::gen;

/// How long a started server may take to answer its first OCSM datagram.
const READY_TIMEOUT: Duration = Duration::from_secs(20);
/// How long a stopped server may take to exit after SIGTERM before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(5);

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

pub struct ServerProc {
    child: Child,
    pub pid: u32,
    pub ocsm: SocketAddr,
    log: PathBuf,
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

impl ServerProc {
    pub fn start(spec: &ServerSpec) -> Result<ServerProc, String> {
        let exe = std::env::current_exe().map_err(|e| format!("cannot find own binary: {e}"))?;
        let port = free_udp_port()?;
        let log = std::env::temp_dir().join(format!(
            "directkv-bench-ocsm-{}-{port}.log",
            std::process::id()
        ));
        let log_file =
            std::fs::File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
        // `nice` and `taskset` exec what follows, so the child's PID is the server's.
        let mut argv: Vec<std::ffi::OsString> = Vec::new();
        if spec.nice != 0 {
            argv.extend(["nice".into(), "-n".into(), spec.nice.to_string().into()]);
        }
        if let Some(cpu) = spec.cpu {
            argv.extend(["taskset".into(), "-c".into(), cpu.to_string().into()]);
        }
        argv.push(exe.clone().into());
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..]);
        cmd.args(["serve", "--port", "0", "--metrics-port", "0"])
            .args(["--ocsm-port", &port.to_string(), "--ocsm-path", &spec.path])
            .args([
                "--shards",
                &spec.shards.to_string(),
                "--memory",
                &spec.memory,
            ]);
        if let Some(b) = spec.burst {
            let cfg = std::env::temp_dir().join(format!("directkv-bench-ocsm-{port}.toml"));
            std::fs::write(&cfg, format!("ocsm_burst_datagrams_max = {b}\n"))
                .map_err(|e| e.to_string())?;
            cmd.arg("--config").arg(cfg);
        }
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(log_file))
            .spawn()
            .map_err(|e| format!("cannot start the server ({}): {e}", exe.display()))?;
        let mut s = ServerProc {
            pid: child.id(),
            child,
            ocsm: SocketAddr::from(([127, 0, 0, 1], port)),
            log,
        };
        s.wait_ready()?;
        Ok(s)
    }

    /// Polls with a one-message search until the server answers, it exits, or time runs out.
    fn wait_ready(&mut self) -> Result<(), String> {
        let sock = UdpSocket::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
        sock.connect(self.ocsm).map_err(|e| e.to_string())?;
        let mut req = Vec::new();
        gen::datagram(1, Opcode::Search, &[0], &mut req);
        let deadline = Instant::now() + READY_TIMEOUT;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!("the server exited ({status}): {}", self.log_tail()));
            }
            if gen::exchange(&sock, &req, 1).is_ok() {
                return Ok(());
            }
        }
        Err(format!(
            "the server did not answer OCSM within {READY_TIMEOUT:?}: {}",
            self.log_tail()
        ))
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(5)..].join(" | ")
    }

    /// Stops the server: SIGTERM, then SIGKILL after `STOP_TIMEOUT`.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        if let Ok(Some(_)) = self.child.try_wait() {
            return;
        }
        // SAFETY: kill(2) on our own child's PID, which has not been reaped yet.
        unsafe {
            libc::kill(self.pid as libc::pid_t, libc::SIGTERM);
        }
        let deadline = Instant::now() + STOP_TIMEOUT;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                let _ = std::fs::remove_file(&self.log);
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for ServerProc {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// User plus system CPU time of process `pid`, in microseconds (from `/proc/PID/stat`).
pub fn cpu_us(pid: u32) -> Result<u64, String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map_err(|e| format!("cannot read /proc/{pid}/stat: {e}"))?;
    // Fields after the command name (which may hold spaces) start at field 3, "state";
    // utime and stime are fields 14 and 15.
    let rest = text.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| -> Result<u64, String> {
        f.get(i)
            .and_then(|v| v.parse::<u64>().ok())
            .ok_or_else(|| format!("unexpected /proc/{pid}/stat"))
    };
    let total = ticks(11)? + ticks(12)?;
    // SAFETY: sysconf has no memory effects.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Ok(total * 1_000_000 / hz)
}
