//! The bench crate's process- and thread-level system calls shared by its subcommands: pinning a
//! thread to a core, its nice value, and a process's CPU time. `bench compare`, the loopback
//! ceiling and `bench ocsm` all pin their load-generating thread, and both server-process
//! readers need CPU time, so each call is written once, here.
//!
//! Goals: one copy of each call inside bench, each `unsafe` block with its `// SAFETY:` reason.
//! Non-goals: the socket-level calls of the OCSM generator (recvmmsg/sendmmsg, UDP GRO/GSO,
//! buffer sizing), which stay beside the loop that uses them; the workspace-wide home of all of
//! this is the `crates/sys` crate of issue 18.

/// Pins the calling thread to `cpu` (best effort; false if the kernel refused).
pub fn pin_current_thread(cpu: usize) -> bool {
    // SAFETY: cpu_set_t is plain data; sched_setaffinity reads the given set.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

/// Sets the calling thread's nice value; false if the kernel refused.
pub fn set_nice(nice: i32) -> bool {
    // SAFETY: setpriority has no memory effects; who = 0 is the calling thread.
    unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, nice) == 0 }
}

/// Clock ticks per second of `/proc/PID/stat`'s time fields (at least 1).
pub fn clock_ticks_per_sec() -> u64 {
    // SAFETY: sysconf has no preconditions and no memory effects.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    hz.max(1) as u64
}

/// Whether this process runs as root (effective user id 0).
pub fn running_as_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}
