//! `ServerProcess`: a server this program started as a child, optionally niced and pinned to
//! one core, found ready by the caller's probe, stopped by process id.
//!
//! ```text
//!   ServerProcess::spawn ──[nice -n N] [taskset -c CPU] program args──> child (same PID after exec)
//!         │  wait_until(probe): poll the probe until it answers (deadline), fail fast if the
//!         │  child exits
//!         └─ stop / Drop: SIGTERM by PID, wait up to STOP_GRACE, then SIGKILL by PID, reap
//! ```
//!
//! Readiness is the caller's probe: a TCP connect for the three TCP servers (`servers.rs`), an
//! OCSM search datagram for `bench ocsm`. A child's stderr is discarded, piped (directkv, whose
//! start-up line gives the address it bound; the pipe is drained afterwards) or written to a
//! log file whose last lines explain a failed start.
//!
//! CPU time and resident memory come from `/proc` (`super::cpu_seconds`, `super::rss_bytes`):
//! `utime + stime` sum over every thread, `VmRSS` counts shared pages too.
//!
//! Non-goals: restarting a server, talking its protocol (callers' drivers do that), more than
//! one host.

use std::ffi::OsString;
use std::fs::File;
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a server may take from spawn to accepting connections.
pub const START_TIMEOUT: Duration = Duration::from_secs(20);
/// How long a stopped server may take to exit after SIGTERM before it is killed.
pub const STOP_GRACE: Duration = Duration::from_secs(5);
/// `settled_rss_bytes`: how often RSS is read, the change under which it counts as settled,
/// and how long it may take.
pub const RSS_SETTLE_INTERVAL: Duration = Duration::from_millis(50);
pub const RSS_SETTLE_BYTES: u64 = 256 << 10;
pub const RSS_SETTLE_MAX: Duration = Duration::from_secs(3);
/// Pause between readiness probes and between checks that a stopped server has exited.
const POLL_INTERVAL: Duration = Duration::from_millis(10);
/// Lines of a server's log quoted when it fails to start.
const LOG_TAIL_LINES: usize = 5;

/// What to run: `[nice -n NICE] [taskset -c CPU] program args`. `nice` and `taskset` exec what
/// follows, so the child's PID is the server's.
pub struct Launch {
    /// Name used in errors and reports ("directkv", "redis", "memcached").
    pub name: String,
    pub program: PathBuf,
    pub args: Vec<OsString>,
    /// The core to pin the server to.
    pub cpu: Option<usize>,
    /// Nice value (0 = unchanged; negative needs root).
    pub nice: i32,
}

/// Where a child's stderr goes.
pub enum Stderr {
    Discard,
    /// To this file, created (or truncated) at start; quoted when start-up fails and removed
    /// after a clean stop.
    Log(PathBuf),
    /// Kept as a pipe for the caller to read (and then drain).
    Piped,
}

/// A server process this program started; stopped by PID when stopped or dropped.
pub struct ServerProcess {
    pub name: String,
    /// The address the benchmark drives and readiness is probed on.
    pub addr: SocketAddr,
    /// The stderr lines read while looking for the address (`directkv_serve` only): the
    /// start-up log up to the line naming the address.
    pub start_log: Vec<String>,
    pub(super) child: Child,
    log: Option<PathBuf>,
}

impl ServerProcess {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Starts `launch` with stdin and stdout closed and stderr as asked; not yet known ready.
    pub fn spawn(
        launch: &Launch,
        addr: SocketAddr,
        stderr: Stderr,
    ) -> Result<ServerProcess, String> {
        let mut argv: Vec<OsString> = Vec::new();
        if launch.nice != 0 {
            argv.extend(["nice".into(), "-n".into(), launch.nice.to_string().into()]);
        }
        if let Some(cpu) = launch.cpu {
            argv.extend(["taskset".into(), "-c".into(), cpu.to_string().into()]);
        }
        argv.push(launch.program.clone().into());
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..]).args(&launch.args);
        cmd.stdin(Stdio::null()).stdout(Stdio::null());
        let log = match stderr {
            Stderr::Discard => {
                cmd.stderr(Stdio::null());
                None
            }
            Stderr::Piped => {
                cmd.stderr(Stdio::piped());
                None
            }
            Stderr::Log(path) => {
                let file = File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?;
                cmd.stderr(Stdio::from(file));
                Some(path)
            }
        };
        let child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", launch.program.display()))?;
        Ok(ServerProcess {
            name: launch.name.clone(),
            addr,
            start_log: Vec::new(),
            child,
            log,
        })
    }

    /// Polls `ready(addr)` until it is true, the child exits, or `START_TIMEOUT` passes; `what`
    /// names what the probe waits for, for the error ("accept connections", "answer OCSM").
    pub fn wait_until(
        &mut self,
        what: &str,
        mut ready: impl FnMut(SocketAddr) -> bool,
    ) -> Result<(), String> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if ready(self.addr) {
                return Ok(());
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                // Its log says why; without one, a taken port is the usual reason.
                let why = match &self.log {
                    Some(_) => self.log_tail(),
                    None => format!("; is port {} taken?", self.addr.port()),
                };
                return Err(format!(
                    "{} exited during start-up ({status}){why}",
                    self.name
                ));
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "{} did not {what} on {} within {:?}{}",
                    self.name,
                    self.addr,
                    START_TIMEOUT,
                    self.log_tail()
                ));
            }
            std::thread::sleep(POLL_INTERVAL);
        }
    }

    /// The last lines of the server's log file (" | "-joined, after ": "), or nothing.
    fn log_tail(&self) -> String {
        let Some(log) = &self.log else {
            return String::new();
        };
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        format!(
            ": {}",
            lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join(" | ")
        )
    }

    /// User plus system CPU time of the whole process so far, seconds.
    pub fn cpu_seconds(&self) -> Result<f64, String> {
        super::cpu_seconds(self.pid())
    }

    /// Resident set size (VmRSS), bytes.
    pub fn rss_bytes(&self) -> Result<u64, String> {
        super::rss_bytes(self.pid())
    }

    /// Resident set size once it stops growing: read every `RSS_SETTLE_INTERVAL` until two
    /// readings are within `RSS_SETTLE_BYTES`, for at most `RSS_SETTLE_MAX`. A server that
    /// faults its memory in at start in the background (directkv's index pre-fault) would
    /// otherwise be measured before it, and that memory counted as the data's.
    pub fn settled_rss_bytes(&self) -> Result<u64, String> {
        let deadline = Instant::now() + RSS_SETTLE_MAX;
        let mut last = self.rss_bytes()?;
        loop {
            std::thread::sleep(RSS_SETTLE_INTERVAL);
            let now = self.rss_bytes()?;
            if now.abs_diff(last) < RSS_SETTLE_BYTES || Instant::now() >= deadline {
                return Ok(now);
            }
            last = now;
        }
    }

    /// Stops the server now (what dropping it does).
    pub fn stop(self) {}
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(Some(_))) {
            return;
        }
        // Our own child, not yet reaped (try_wait just said it runs), so the PID is its.
        super::terminate(self.child.id());
        let deadline = Instant::now() + STOP_GRACE;
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                // A clean stop leaves nothing to read in the log.
                if let Some(log) = &self.log {
                    let _ = std::fs::remove_file(log);
                }
                return;
            }
            std::thread::sleep(POLL_INTERVAL);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The readiness probe of a TCP server: `addr` accepts a connection.
pub fn tcp_accepts(addr: SocketAddr) -> bool {
    TcpStream::connect(addr).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn sh(name: &str, script: &str) -> Launch {
        Launch {
            name: name.to_string(),
            program: PathBuf::from("/bin/sh"),
            args: vec!["-c".into(), script.into()],
            cpu: None,
            nice: 0,
        }
    }

    #[test]
    fn a_server_that_exits_during_start_up_is_reported_with_its_log() {
        let log = std::env::temp_dir().join(format!("directkv-sp-test-{}.log", std::process::id()));
        let addr = SocketAddr::from(([127, 0, 0, 1], 1));
        let mut p = ServerProcess::spawn(
            &sh("failing", "echo cannot bind >&2; exit 3"),
            addr,
            Stderr::Log(log.clone()),
        )
        .unwrap();
        let err = p.wait_until("answer", |_| false).unwrap_err();
        assert!(err.starts_with("failing exited during start-up"), "{err}");
        assert!(err.contains("cannot bind"), "{err}");
        drop(p);
        let _ = std::fs::remove_file(log);
    }

    #[test]
    fn a_running_server_is_stopped_by_pid_when_dropped() {
        let addr = SocketAddr::from(([127, 0, 0, 1], 1));
        let mut p =
            ServerProcess::spawn(&sh("sleeper", "exec sleep 30"), addr, Stderr::Discard).unwrap();
        let mut polls = 0;
        p.wait_until("start", |_| {
            polls += 1;
            polls > 2
        })
        .unwrap();
        let pid = p.pid();
        let stopped = Instant::now();
        drop(p);
        assert!(
            stopped.elapsed() < STOP_GRACE,
            "SIGTERM should end sleep at once"
        );
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists(),
            "child {pid} reaped"
        );
    }
}
