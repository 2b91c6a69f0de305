//! Server processes the benchmark starts itself (for `bench compare` and the tests):
//! `directkv serve`, `redis-server` and `memcached` on ephemeral ports, optionally pinned to one
//! core, plus the `/proc` readings compare reports (CPU time and resident memory).
//!
//! ```text
//!   ServerProcess::start ──spawn [taskset -c CPU] program args──> child (same PID after exec)
//!         │  poll TCP connect until ready (deadline), fail fast if the child exits
//!         └─ Drop: SIGTERM by PID, wait up to STOP_GRACE, then SIGKILL by PID, reap
//! ```
//!
//! Ports: directkv takes `--port 0` and prints the port it bound; redis-server and memcached
//! treat port 0 as "no TCP", so they get a port the OS just handed out to a probe listener (a
//! tiny window in which another process could take it; start-up then fails with a clear error).
//!
//! Resident memory is `VmRSS` from `/proc/PID/status` (pages of the process in RAM, shared ones
//! included); CPU time is `utime + stime` from `/proc/PID/stat`, which sum over every thread.

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
/// Pause between readiness probes.
const POLL_INTERVAL: Duration = Duration::from_millis(10);

/// A server process this program started; stopped by PID when dropped.
pub struct ServerProcess {
    pub name: String,
    pub addr: SocketAddr,
    child: Child,
}

impl ServerProcess {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `directkv serve` from `exe` with one shard and `memory` (a size like "256M").
    /// directkv with one shard of `memory` bytes, tuned for `kv_size`-byte pairs at
    /// `utilization`.
    pub fn directkv(
        exe: &Path,
        memory: &str,
        kv_size: usize,
        utilization: f64,
        cpu: Option<usize>,
    ) -> Result<ServerProcess, String> {
        let (kv_size, utilization) = (kv_size.to_string(), utilization.to_string());
        let args: Vec<String> = [
            "serve",
            "--port",
            "0",
            "--metrics-port",
            "0",
            "--shards",
            "1",
            "--memory",
            memory,
            "--kv-size",
            &kv_size,
            "--utilization",
            &utilization,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let mut cmd = pinned(exe, &args, cpu);
        cmd.stdout(Stdio::null()).stderr(Stdio::piped());
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", exe.display()))?;
        let mut err = BufReader::new(child.stderr.take().expect("piped stderr"));
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
        let mut server = ServerProcess {
            name: "directkv".to_string(),
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            child,
        };
        server.addr =
            addr.ok_or_else(|| format!("directkv serve did not report its address: {line:?}"))?;
        server.wait_ready()?;
        Ok(server)
    }

    /// `redis-server` without persistence.
    pub fn redis(cpu: Option<usize>) -> Result<ServerProcess, String> {
        let exe = find_program("redis-server", "redis-server")?;
        let port = free_port()?;
        let args: Vec<String> = [
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        ServerProcess::spawn_on("redis", &exe, &args, cpu, port)
    }

    /// `memcached` with one worker thread, no UDP and `memory_mb` of item memory.
    pub fn memcached(memory_mb: u64, cpu: Option<usize>) -> Result<ServerProcess, String> {
        let exe = find_program("memcached", "memcached")?;
        let port = free_port()?;
        let mut args: Vec<String> = [
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
        .iter()
        .map(|s| s.to_string())
        .collect();
        // memcached refuses to run as root without a user to switch to.
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            args.extend(["-u".to_string(), "root".to_string()]);
        }
        ServerProcess::spawn_on("memcached", &exe, &args, cpu, port)
    }

    fn spawn_on(
        name: &str,
        exe: &Path,
        args: &[String],
        cpu: Option<usize>,
        port: u16,
    ) -> Result<ServerProcess, String> {
        let mut cmd = pinned(exe, args, cpu);
        cmd.stdout(Stdio::null()).stderr(Stdio::null());
        let child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", exe.display()))?;
        let mut server = ServerProcess {
            name: name.to_string(),
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            child,
        };
        server.wait_ready()?;
        Ok(server)
    }

    /// Polls a TCP connect until it succeeds, the child exits, or `START_TIMEOUT` passes.
    fn wait_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if TcpStream::connect(self.addr).is_ok() {
                return Ok(());
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!(
                    "{} exited during start-up ({status}); is port {} taken?",
                    self.name,
                    self.addr.port()
                ));
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "{} did not accept connections on {} within {:?}",
                    self.name, self.addr, START_TIMEOUT
                ));
            }
            std::thread::sleep(POLL_INTERVAL);
        }
    }

    /// User plus system CPU time of the whole process so far, seconds.
    pub fn cpu_seconds(&self) -> Result<f64, String> {
        cpu_seconds(self.pid())
    }

    /// Resident set size (VmRSS), bytes.
    pub fn rss_bytes(&self) -> Result<u64, String> {
        rss_bytes(self.pid())
    }
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
                return;
            }
            std::thread::sleep(POLL_INTERVAL);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `program args`, behind `taskset -c CPU` when a CPU is given (taskset execs the program, so
/// the child's PID is the server's).
fn pinned(program: &Path, args: &[String], cpu: Option<usize>) -> Command {
    match cpu {
        Some(cpu) => {
            let mut cmd = Command::new("taskset");
            cmd.arg("-c").arg(cpu.to_string()).arg(program).args(args);
            cmd
        }
        None => {
            let mut cmd = Command::new(program);
            cmd.args(args);
            cmd
        }
    }
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

/// User plus system CPU seconds of process `pid`, from `/proc/PID/stat`.
pub fn cpu_seconds(pid: u32) -> Result<f64, String> {
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
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    Ok((ticks(11)? + ticks(12)?) as f64 / hz)
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
