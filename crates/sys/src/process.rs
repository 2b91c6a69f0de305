//! Processes: asking a child to stop, how much CPU a process has used, who we run as.

/// Sends SIGTERM to process `pid` (the caller's own child, not yet reaped, so the PID cannot
/// name another process); false if the kernel refused.
pub fn terminate(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: kill(2) has no memory effects; the caller vouches that `pid` is its child.
    unsafe { libc::kill(pid, libc::SIGTERM) == 0 }
}

/// User plus system CPU time of process `pid`, in microseconds (from `/proc/PID/stat`).
pub fn cpu_us(pid: u32) -> Result<u64, String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map_err(|e| format!("cannot read /proc/{pid}/stat: {e}"))?;
    cpu_us_of_stat(&text, crate::cpu::clock_ticks_per_sec())
        .ok_or_else(|| format!("unexpected /proc/{pid}/stat"))
}

/// utime + stime of a `/proc/PID/stat` line, in microseconds at `hz` ticks per second.
fn cpu_us_of_stat(text: &str, hz: u64) -> Option<u64> {
    // Fields after the command name (which may hold spaces) start at field 3, "state"; utime
    // and stime are fields 14 and 15.
    let rest = text.rsplit_once(')').map(|(_, r)| r)?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok());
    Some((ticks(11)? + ticks(12)?) * 1_000_000 / hz.max(1))
}

/// Whether the process runs as root (effective user id 0).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
