//! Processes: the servers directkv starts as children, asking a child to stop, and what `/proc`
//! says about a process (CPU time, resident memory), and who we run as.
//!
//! ```text
//!   mod.rs      SIGTERM by PID, /proc/PID/stat CPU time, /proc/PID/status VmRSS, euid, PATH
//!   child.rs    ServerProcess: spawn [nice] [taskset] program, poll until ready, stop by PID
//!   servers.rs  the three servers' command lines: directkv serve, redis-server, memcached
//! ```
//!
//! Why here and not in the benchmark crate: starting a child, signalling it by PID and reading
//! its `/proc` entries is the operating-system seam, and two crates need it: `bench compare` and
//! `bench ocsm` (the servers they measure), and the server's differential test against
//! redis-server. With one `ServerProcess` they cannot drift in how a child is found, waited for
//! and stopped.
//!
//! Non-goals: supervising or restarting servers, talking their protocols (the callers' drivers
//! and clients do that), remote hosts.

mod child;
mod servers;

pub use child::{tcp_accepts, Launch, ServerProcess, Stderr, START_TIMEOUT, STOP_GRACE};

use std::path::PathBuf;

/// Lets SIGPIPE end the process again, as it does other command-line tools: Rust starts
/// programs with it ignored, so a command whose output goes to a reader that stopped (`| head`)
/// panicked on its next print. For commands that do not serve: their sockets are written
/// through std (`send` with MSG_NOSIGNAL, so a closed connection is still an error, not a
/// signal), and they write to no child's pipe.
pub fn default_sigpipe() {
    // SAFETY: setting a signal's disposition to its default has no memory effects.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// Sends SIGTERM to process `pid` (the caller's own child, not yet reaped, so the PID cannot
/// name another process); false if the kernel refused.
pub fn terminate(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: kill(2) has no memory effects; the caller vouches that `pid` is its child.
    unsafe { libc::kill(pid, libc::SIGTERM) == 0 }
}

/// Sends SIGKILL to process `pid` (the caller's own child, not yet reaped, so the PID cannot
/// name another process): the crash of the kill -9 tests, which nothing in the server can
/// intercept; false if the kernel refused.
pub fn kill_now(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: kill(2) has no memory effects; the caller vouches that `pid` is its child.
    unsafe { libc::kill(pid, libc::SIGKILL) == 0 }
}

/// User plus system CPU time of process `pid`, in microseconds (from `/proc/PID/stat`).
pub fn cpu_us(pid: u32) -> Result<u64, String> {
    Ok(cpu_ticks(pid)? * 1_000_000 / crate::cpu::clock_ticks_per_sec())
}

/// User plus system CPU seconds of process `pid` (from `/proc/PID/stat`).
pub fn cpu_seconds(pid: u32) -> Result<f64, String> {
    Ok(cpu_ticks(pid)? as f64 / crate::cpu::clock_ticks_per_sec() as f64)
}

/// User plus system CPU time of process `pid` in clock ticks, from `/proc/PID/stat`.
fn cpu_ticks(pid: u32) -> Result<u64, String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map_err(|e| format!("cannot read /proc/{pid}/stat: {e}"))?;
    ticks_of_stat(&text).ok_or_else(|| format!("unexpected /proc/{pid}/stat"))
}

/// utime + stime of a `/proc/PID/stat` line, in clock ticks.
fn ticks_of_stat(text: &str) -> Option<u64> {
    // Fields after the command name (which may hold spaces and parentheses) start at field 3,
    // "state"; utime and stime are fields 14 and 15, the 12th and 13th after the last ')'.
    let rest = text.rsplit_once(')').map(|(_, r)| r)?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok());
    Some(ticks(11)? + ticks(12)?)
}

/// utime + stime of a `/proc/PID/stat` line, in microseconds at `hz` ticks per second.
#[cfg(test)]
fn cpu_us_of_stat(text: &str, hz: u64) -> Option<u64> {
    Some(ticks_of_stat(text)? * 1_000_000 / hz.max(1))
}

/// Resident set size (VmRSS: pages of the process in RAM, shared ones included) of process
/// `pid`, bytes, from `/proc/PID/status`.
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

/// Whether the process runs as root (effective user id 0).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// The full path of `program` on PATH (or in /usr/sbin, /usr/bin), or an error that names the
/// Debian package to install.
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn stat_lines_with_spaces_in_the_name_parse() {
        let line = "42 (a b) S 1 2 3 4 5 6 7 8 9 10 250 50 0 0";
        assert_eq!(cpu_us_of_stat(line, 100), Some(3_000_000));
        assert_eq!(cpu_us_of_stat("42 (x) S 1", 100), None);
    }

    #[test]
    fn this_process_has_a_cpu_time() {
        assert!(cpu_us(std::process::id()).is_ok());
    }

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
}
