//! The calling thread's CPU placement, priority and involuntary context switches, and the
//! kernel's clock tick and page size.
//!
//! Pinning is best effort everywhere: a refusal (a CPU outside the process's allowed set, a
//! container without the capability) leaves the thread where the scheduler puts it, and the
//! caller only loses locality.

/// CPUs the calling thread may run on (its affinity mask, e.g. narrowed by `taskset`), in
/// increasing order; empty if the kernel does not say.
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data for which all-zero is the empty set.
    let mut allowed: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: sched_getaffinity writes at most size_of::<cpu_set_t>() bytes into `allowed`.
    let rc = unsafe { libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &mut allowed) };
    if rc != 0 {
        return Vec::new();
    }
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: CPU_ISSET reads bit `c` of the set, `c` < CPU_SETSIZE.
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &allowed) })
        .collect()
}

/// Pins the calling thread to `cpu`; false if the kernel refused (or `cpu` is out of range).
pub fn pin_current_thread(cpu: usize) -> bool {
    if cpu >= libc::CPU_SETSIZE as usize {
        return false;
    }
    // SAFETY: all-zero is the empty cpu_set_t.
    let mut one: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: CPU_SET writes bit `cpu` of the set, checked above to be inside it.
    unsafe { libc::CPU_SET(cpu, &mut one) };
    // SAFETY: sched_setaffinity reads size_of::<cpu_set_t>() bytes from the live set.
    unsafe { libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &one) == 0 }
}

/// Pins the calling thread to the `index`-th CPU it may run on, wrapping around (a process
/// restricted by `taskset` to fewer CPUs than threads shares them); false if not pinned.
pub fn pin_current_thread_to_nth_allowed(index: usize) -> bool {
    let cpus = allowed_cpus();
    if cpus.is_empty() {
        return false;
    }
    pin_current_thread(cpus[index % cpus.len()])
}

/// The calling thread's resource usage (`getrusage(RUSAGE_THREAD)`), if the kernel says.
fn thread_usage() -> Option<libc::rusage> {
    // SAFETY: rusage is plain data for which all-zero is valid.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes one rusage into `usage`, which lives across the call.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) };
    (rc == 0).then_some(usage)
}

/// Times the calling thread gave up its CPU to wait (`ru_nvcsw` of `getrusage(RUSAGE_THREAD)`):
/// each is followed by a wake-up, which may take the core from a thread running on it. 0 if
/// the kernel does not say.
pub fn thread_voluntary_switches() -> u64 {
    thread_usage().map_or(0, |u| u.ru_nvcsw.max(0) as u64)
}

/// Times the calling thread lost its CPU while it could still run (`ru_nivcsw` of
/// `getrusage(RUSAGE_THREAD)`): preempted by the scheduler, or switched out by a
/// `sched_yield` that found another thread waiting for the core. A busy poller reads it to see
/// that its core is wanted. 0 if the kernel does not say.
pub fn thread_involuntary_switches() -> u64 {
    thread_usage().map_or(0, |u| u.ru_nivcsw.max(0) as u64)
}

/// CPU time the calling thread has used (`CLOCK_THREAD_CPUTIME_ID`: user and system, to the
/// nanosecond); zero if the kernel does not say. A system call (no vDSO for this clock).
pub fn thread_cpu_time() -> std::time::Duration {
    // SAFETY: timespec is plain data for which all-zero is valid.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: clock_gettime writes one timespec into `ts`, which lives across the call.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return std::time::Duration::ZERO;
    }
    std::time::Duration::new(
        ts.tv_sec.max(0) as u64,
        ts.tv_nsec.clamp(0, 999_999_999) as u32,
    )
}

/// Sets the calling thread's nice value; false if the kernel refused.
pub fn set_nice(nice: i32) -> bool {
    // SAFETY: setpriority has no memory effects; who = 0 is the calling thread.
    unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, nice) == 0 }
}

/// Clock ticks per second of the CPU times in `/proc` (`_SC_CLK_TCK`), at least 1.
pub fn clock_ticks_per_sec() -> u64 {
    // SAFETY: sysconf has no memory effects.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    hz.max(1) as u64
}

/// Bytes of a memory page.
pub fn page_bytes() -> usize {
    // SAFETY: sysconf has no memory effects.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    page.max(1) as usize
}

/// Physical memory not in use right now, in bytes (`_SC_AVPHYS_PAGES` pages); 0 if unknown.
pub fn available_physical_bytes() -> u64 {
    // SAFETY: sysconf has no memory effects.
    let pages = unsafe { libc::sysconf(libc::_SC_AVPHYS_PAGES) };
    (pages.max(0) as u64).saturating_mul(page_bytes() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_can_be_pinned_to_a_cpu_it_may_use() {
        let cpus = allowed_cpus();
        assert!(!cpus.is_empty());
        let ok = std::thread::spawn(|| pin_current_thread_to_nth_allowed(1))
            .join()
            .unwrap();
        assert!(ok);
        assert!(!pin_current_thread(usize::MAX));
    }

    #[test]
    fn a_threads_cpu_time_counts_its_work_and_not_its_sleep() {
        let (work, sleep) = std::thread::spawn(|| {
            let t0 = thread_cpu_time();
            let spin_until = std::time::Instant::now() + std::time::Duration::from_millis(30);
            let mut x = 0u64;
            while std::time::Instant::now() < spin_until {
                x = std::hint::black_box(x.wrapping_add(1));
            }
            let t1 = thread_cpu_time();
            std::thread::sleep(std::time::Duration::from_millis(50));
            (t1 - t0, thread_cpu_time() - t1)
        })
        .join()
        .unwrap();
        // The spin used CPU (at least a little of its 30 ms even on a busy machine); the
        // sleep used well under its 50 ms.
        assert!(work >= std::time::Duration::from_millis(1), "{work:?}");
        assert!(sleep < std::time::Duration::from_millis(20), "{sleep:?}");
    }

    #[test]
    fn clock_and_page_sizes_are_sane() {
        assert!(clock_ticks_per_sec() >= 1);
        assert!(page_bytes().is_power_of_two());
    }
}
