//! The one way this crate starts a server as a child process: `directkv serve`, `redis-server`
//! and `memcached` for `bench compare` and the tests, and `directkv serve` with OCSM for
//! `bench ocsm`; optionally niced and pinned to one core; stopped by process id. Plus the
//! `/proc` readings the benchmarks report (CPU time and resident memory).
//!
//! ```text
//!   ServerProcess::spawn ──[nice -n N] [taskset -c CPU] program args──> child (same PID after exec)
//!         │  wait_until(probe): poll the probe until it answers (deadline), fail fast if the
//!         │  child exits
//!         └─ stop / Drop: SIGTERM by PID, wait up to STOP_GRACE, then SIGKILL by PID, reap
//! ```
//!
//! Readiness is the caller's probe: a TCP connect for the three TCP servers, an OCSM search
//! datagram for `bench ocsm` (`ocsm/server.rs`). A child's stderr is discarded, piped (directkv,
//! whose start-up line gives the address it bound; the pipe is drained afterwards) or written to
//! a log file whose last lines explain a failed start.
//!
//! Ports: directkv takes `--port 0` and prints the port it bound; redis-server and memcached
//! treat port 0 as "no TCP", so they get a port the OS just handed out to a probe listener (a
//! tiny window in which another process could take it; start-up then fails with a clear error).
//!
//! Resident memory is `VmRSS` from `/proc/PID/status` (pages of the process in RAM, shared ones
//! included); CPU time is `utime + stime` from `/proc/PID/stat`, which sum over every thread.
//!
//! Non-goals: restarting a server, talking its protocol (drivers do that), more than one host.

use std::ffi::OsString;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a server may take from spawn to accepting connections.
pub const START_TIMEOUT: Duration = Duration::from_secs(20);
/// How long a stopped server may take to exit after SIGTERM before it is killed.
pub const STOP_GRACE: Duration = Duration::from_secs(5);
/// Lines of directkv's start-up log searched for the address it bound.
const START_LINES_MAX: usize = 20;
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
    child: Child,
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
            child,
            log,
        })
    }

    /// `directkv serve --port 0 --metrics-port 0 FLAGS` from `exe`: the address comes from its
    /// start-up line, and it is ready when that address accepts a TCP connection.
    pub fn directkv_serve(
        exe: &Path,
        flags: &[&str],
        cpu: Option<usize>,
    ) -> Result<ServerProcess, String> {
        let mut args: Vec<OsString> = ["serve", "--port", "0", "--metrics-port", "0"]
            .iter()
            .map(OsString::from)
            .collect();
        args.extend(flags.iter().map(OsString::from));
        let launch = Launch {
            name: "directkv".to_string(),
            program: exe.to_path_buf(),
            args,
            cpu,
            nice: 0,
        };
        let unknown = SocketAddr::from(([127, 0, 0, 1], 0));
        let mut server = ServerProcess::spawn(&launch, unknown, Stderr::Piped)?;
        let mut err = BufReader::new(server.child.stderr.take().expect("piped stderr"));
        let mut line = String::new();
        let mut addr = None;
        for _ in 0..START_LINES_MAX {
            line.clear();
            if err.read_line(&mut line).unwrap_or(0) == 0 {
                break;
            }
            addr = parse_bound_addr(&line);
            if addr.is_some() {
                break;
            }
        }
        // Keep draining the log so the server never blocks on a full pipe.
        std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
        server.addr =
            addr.ok_or_else(|| format!("directkv serve did not report its address: {line:?}"))?;
        server.wait_until("accept connections", tcp_accepts)?;
        Ok(server)
    }

    /// directkv with one shard of `memory` bytes (a size like "256M"), tuned for `kv_size`-byte
    /// pairs at `utilization`.
    pub fn directkv(
        exe: &Path,
        memory: &str,
        kv_size: usize,
        utilization: f64,
        cpu: Option<usize>,
    ) -> Result<ServerProcess, String> {
        let (kv_size, utilization) = (kv_size.to_string(), utilization.to_string());
        let flags = [
            "--shards",
            "1",
            "--memory",
            memory,
            "--kv-size",
            &kv_size,
            "--utilization",
            &utilization,
        ];
        ServerProcess::directkv_serve(exe, &flags, cpu)
    }

    /// `redis-server` without persistence.
    pub fn redis(cpu: Option<usize>) -> Result<ServerProcess, String> {
        let exe = find_program("redis-server", "redis-server")?;
        let port = free_port()?;
        let args = [
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ]
        .map(OsString::from);
        ServerProcess::start_tcp("redis", exe, args.to_vec(), cpu, port)
    }

    /// `memcached` with one worker thread, no UDP and `memory_mb` of item memory.
    pub fn memcached(memory_mb: u64, cpu: Option<usize>) -> Result<ServerProcess, String> {
        let exe = find_program("memcached", "memcached")?;
        let port = free_port()?;
        let mut args: Vec<OsString> = [
            "-l",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "-U",
            "0",
            "-t",
            "1",
            "-m",
            &memory_mb.to_string(),
        ]
        .map(OsString::from)
        .to_vec();
        // memcached refuses to run as root without a user to switch to.
        if crate::sys::running_as_root() {
            args.extend(["-u".into(), "root".into()]);
        }
        ServerProcess::start_tcp("memcached", exe, args, cpu, port)
    }

    /// A server told its TCP `port` on the command line, ready when the port accepts.
    fn start_tcp(
        name: &str,
        program: PathBuf,
        args: Vec<OsString>,
        cpu: Option<usize>,
        port: u16,
    ) -> Result<ServerProcess, String> {
        let launch = Launch {
            name: name.to_string(),
            program,
            args,
            cpu,
            nice: 0,
        };
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let mut server = ServerProcess::spawn(&launch, addr, Stderr::Discard)?;
        server.wait_until("accept connections", tcp_accepts)?;
        Ok(server)
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
        cpu_seconds(self.pid())
    }

    /// Resident set size (VmRSS), bytes.
    pub fn rss_bytes(&self) -> Result<u64, String> {
        rss_bytes(self.pid())
    }

    /// Stops the server now (what dropping it does).
    pub fn stop(self) {}
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let pid = self.child.id() as libc::pid_t;
        if matches!(self.child.try_wait(), Ok(Some(_))) {
            return;
        }
        // SAFETY: kill(2) on the PID of our own, not yet reaped, child.
        unsafe { libc::kill(pid, libc::SIGTERM) };
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

/// The full path of `program` on PATH, or an error that names the Debian package to install.
pub fn find_program(program: &str, package: &str) -> Result<PathBuf, String> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin".into(), "/usr/bin".into()])
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
        .ok_or_else(|| {
            format!("{program} not found: install it with `sudo apt-get install {package}` (scripts/test.sh does)")
        })
}

/// A TCP port on 127.0.0.1 that was free a moment ago.
fn free_port() -> Result<u16, String> {
    let probe = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("no free port: {e}"))?;
    probe
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| format!("no free port: {e}"))
}

/// The first `HOST:PORT` word (or `name=HOST:PORT` field of a structured log line) in one of
/// directkv's start-up lines; the listening address comes before the metrics one.
fn parse_bound_addr(line: &str) -> Option<SocketAddr> {
    line.split_whitespace().find_map(|word| {
        let value = word.rsplit_once('=').map_or(word, |(_, v)| v);
        value.parse::<SocketAddr>().ok()
    })
}

/// User plus system CPU time of process `pid` in clock ticks, from `/proc/PID/stat`.
fn cpu_ticks(pid: u32) -> Result<u64, String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map_err(|e| format!("cannot read /proc/{pid}/stat: {e}"))?;
    // The command name (field 2) may hold spaces and parentheses; fields after the last ')'
    // start with field 3, so utime (14) and stime (15) are the 12th and 13th of them.
    let after = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest)
        .ok_or_else(|| format!("unexpected /proc/{pid}/stat"))?;
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| -> Result<u64, String> {
        fields
            .get(i)
            .and_then(|f| f.parse().ok())
            .ok_or_else(|| format!("unexpected /proc/{pid}/stat"))
    };
    Ok(ticks(11)? + ticks(12)?)
}

/// User plus system CPU seconds of process `pid`, from `/proc/PID/stat`.
pub fn cpu_seconds(pid: u32) -> Result<f64, String> {
    Ok(cpu_ticks(pid)? as f64 / crate::sys::clock_ticks_per_sec() as f64)
}

/// User plus system CPU time of process `pid`, whole microseconds, from `/proc/PID/stat`.
pub fn cpu_us(pid: u32) -> Result<u64, String> {
    Ok(cpu_ticks(pid)? * 1_000_000 / crate::sys::clock_ticks_per_sec())
}

/// VmRSS of process `pid`, bytes, from `/proc/PID/status`.
pub fn rss_bytes(pid: u32) -> Result<u64, String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map_err(|e| format!("cannot read /proc/{pid}/status: {e}"))?;
    status
        .lines()
        .find_map(|line| {
            let kb = line.strip_prefix("VmRSS:")?.trim().strip_suffix("kB")?;
            kb.trim().parse::<u64>().ok()
        })
        .map(|kb| kb * 1024)
        .ok_or_else(|| format!("no VmRSS in /proc/{pid}/status"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_readings_of_this_process_are_sane() {
        let pid = std::process::id();
        assert!(rss_bytes(pid).unwrap() > 100 << 10);
        let before = cpu_seconds(pid).unwrap();
        let spin = Instant::now();
        let mut x = 0u64;
        while spin.elapsed() < Duration::from_millis(200) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        assert!(cpu_seconds(pid).unwrap() > before);
    }

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

    #[test]
    fn the_bound_address_is_found_in_directkvs_start_up_line() {
        let line = "directkv 0.1.0 serving RESP and native on 127.0.0.1:40123 (metrics 127.0.0.1:1) with 1 shards";
        assert_eq!(
            parse_bound_addr(line),
            Some("127.0.0.1:40123".parse().unwrap())
        );
        let log = "2026-11-22T03:00:45Z  INFO directkv_server: directkv started addr=127.0.0.1:42311 shards=1 metrics=Some(127.0.0.1:1)";
        assert_eq!(
            parse_bound_addr(log),
            Some("127.0.0.1:42311".parse().unwrap())
        );
        assert!(find_program("no-such-program-xyz", "some-package")
            .unwrap_err()
            .contains("apt-get install some-package"));
    }
}
