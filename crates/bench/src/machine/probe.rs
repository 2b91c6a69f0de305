//! Probe: how many random cache lines per second this machine can read.
//!
//! What: a calibration loop that reads one `u64` from a random 64-byte line of a region, over and
//! over, for a fixed time, and reports lines read per second. Over a region much larger than the
//! last-level cache this is the memory system's random-access ceiling, the number a KV-Direct
//! style store is judged against (each GET costs at least one random line read). Over an engine's
//! own arena it shows the ceiling for that exact mapping (page size, NUMA placement).
//!
//! ```text
//!   xorshift ──> 64 line indices ──> prefetch all 64 ──> read all 64 ──> sum (black_box)
//!        ^                                                                   │
//!        └──────────── repeat; look at the clock every 4096 reads ───────────┘
//! ```
//!
//! Goals:
//! - Measure the memory-level parallelism limit, not latency: addresses come from a xorshift
//!   that never depends on loaded data, and a window of software prefetches is issued ahead of
//!   the reads, so many misses are in flight at once.
//! - Keep the loop's own cost small: no allocation, no bounds checks in the inner loop, one
//!   `Instant::now` per 4096 reads.
//!
//! Non-goals: per-access latency (a pointer chase measures that), bandwidth of sequential
//! streams, writes, multi-threaded scaling (callers run one probe per thread if they want it),
//! or NUMA placement control.

use std::hint::black_box;
use std::time::{Duration, Instant};

use directkv_sys::mapping::Mapping;

/// Bytes per cache line; one read per line.
const LINE_BYTES: usize = 64;

/// Line addresses generated, prefetched, then read per window. Large enough to cover the
/// line-fill buffers and the L2 miss queue of current cores, small enough to stay in registers
/// and L1.
const WINDOW_LINES: usize = 64;

/// Windows between clock reads: 64 windows of 64 lines is 4096 reads, microseconds of work.
const WINDOWS_PER_CLOCK_CHECK: usize = 64;

/// Pages are touched every this many bytes so each one is backed by real memory (and not by the
/// shared zero page) before timing starts. 4 KiB is the smallest page size on the platforms we
/// run on; larger pages are touched several times, which is harmless.
const TOUCH_STRIDE_BYTES: usize = 4096;

/// The longest measurement accepted, so a typo cannot run a benchmark for hours.
const SECONDS_MAX: f64 = 600.0;

/// Maps `bytes` of anonymous memory (mmap + madvise(MADV_HUGEPAGE), `directkv_sys::mapping`), touches every page, then for `seconds`
/// reads one u64 from a random 64-byte line at a time (addresses from a fast xorshift, independent of loaded data
/// so the CPU overlaps misses; software prefetch a window ahead, e.g. generate 64 addresses, prefetch all, then read all)
/// and returns lines read per second. Unmaps before returning.
///
/// Panics if `bytes` is below one line, `seconds` is not in (0, `SECONDS_MAX`], or mmap fails.
pub fn line_reads_per_sec(bytes: usize, seconds: f64) -> f64 {
    assert!(
        bytes >= LINE_BYTES,
        "probe region of {bytes} bytes is below one line"
    );
    let mapping = touched_mapping(bytes);
    // SAFETY: the mapping is readable for `bytes` bytes and lives until the end of this function,
    // past the call.
    unsafe { line_reads_per_sec_at(mapping.as_ptr(), bytes, seconds) }
}

/// Same but over caller memory (e.g. an engine arena): `base` must be valid for `bytes` bytes of reads.
///
/// Only whole 64-byte lines inside the region, aligned to 64 bytes, are read. Memory that was
/// never written may be backed by the shared zero page and measure as cache-resident.
///
/// # Safety
/// base..base+bytes readable.
pub unsafe fn line_reads_per_sec_at(base: *const u8, bytes: usize, seconds: f64) -> f64 {
    assert!(!base.is_null(), "probe region is null");
    assert!(
        seconds > 0.0 && seconds <= SECONDS_MAX,
        "probe duration {seconds} s outside (0, {SECONDS_MAX}]"
    );
    let skip = base.align_offset(LINE_BYTES);
    let lines = bytes.saturating_sub(skip) / LINE_BYTES;
    assert!(
        lines >= 1,
        "probe region of {bytes} bytes holds no aligned line"
    );
    // SAFETY: `skip + lines * LINE_BYTES <= bytes`, so the first line starts inside the region
    // the caller vouched for.
    let first_line = unsafe { base.add(skip) };
    // SAFETY: `first_line .. first_line + lines * LINE_BYTES` lies within the caller's readable
    // region and is 64-byte aligned.
    unsafe { read_random_lines(first_line, lines, Duration::from_secs_f64(seconds)) }
}

/// The measurement loop.
///
/// # Safety
/// `first_line` is 64-byte aligned and `lines * LINE_BYTES` bytes from it are readable.
unsafe fn read_random_lines(first_line: *const u8, lines: usize, duration: Duration) -> f64 {
    let mut rng = XorShift64::new(0x9e37_79b9_7f4a_7c15 ^ lines as u64);
    let mut offsets = [0usize; WINDOW_LINES];
    let mut sum = 0u64;
    let mut reads = 0u64;
    let start = Instant::now();
    let deadline = start + duration;
    loop {
        for _ in 0..WINDOWS_PER_CLOCK_CHECK {
            for offset in offsets.iter_mut() {
                *offset = rng.below(lines) * LINE_BYTES;
                // SAFETY: `offset < lines * LINE_BYTES`, inside the region; prefetch only hints.
                prefetch(unsafe { first_line.add(*offset) });
            }
            for &offset in offsets.iter() {
                // SAFETY: `offset` is a multiple of 64 below `lines * LINE_BYTES`, so the u64 at
                // it is aligned and inside the readable region.
                let word = unsafe { first_line.add(offset).cast::<u64>().read() };
                sum = sum.wrapping_add(word);
            }
        }
        reads += (WINDOWS_PER_CLOCK_CHECK * WINDOW_LINES) as u64;
        if Instant::now() >= deadline {
            break;
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    black_box(sum);
    reads as f64 / elapsed
}

/// Physical memory free right now (free pages; the page cache, which the kernel could also give
/// back, is not counted, so this errs on the side of refusing), so callers can refuse a region
/// that could only swap.
pub fn available_bytes() -> usize {
    directkv_sys::cpu::available_physical_bytes() as usize
}

/// How much core time one random line access costs when it is prefetched ahead and overlapped
/// with computation, as a store's operation overlaps its bucket read with hashing and key
/// comparison. Per iteration: `work` steps of a dependent multiply chain (the computation), and
/// optionally one random line of the region, prefetched `OVERLAP_AHEAD` iterations ahead and
/// read. A memory system that hides the access makes both loops equally fast; the difference is
/// the access's cost that computation cannot hide (page walks, miss-queue stalls).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Overlap {
    pub work_steps: u32,
    /// Nanoseconds per iteration of the computation alone.
    pub work_ns: f64,
    /// Nanoseconds per iteration of the computation plus one prefetched random line read.
    pub work_and_line_ns: f64,
    /// `work_and_line_ns - work_ns`: the exposed cost of one line access.
    pub exposed_line_ns: f64,
}

/// Iterations a line is prefetched ahead of its read in `overlap`.
const OVERLAP_AHEAD: usize = 24;

/// Measures `Overlap` for each of `works` over a fresh region of `bytes`, each loop for
/// `seconds`, alternating the two loops three times and keeping each one's fastest run.
///
/// Panics as `line_reads_per_sec` does.
pub fn overlap(bytes: usize, works: &[u32], seconds: f64) -> Vec<Overlap> {
    assert!(
        bytes >= LINE_BYTES,
        "probe region of {bytes} bytes is below one line"
    );
    assert!(
        seconds > 0.0 && seconds <= SECONDS_MAX,
        "probe duration {seconds} s outside (0, {SECONDS_MAX}]"
    );
    let mapping = touched_mapping(bytes);
    let lines = bytes / LINE_BYTES;
    let each = Duration::from_secs_f64(seconds / 3.0);
    works
        .iter()
        .map(|&work| {
            let (mut alone, mut with) = (f64::MAX, f64::MAX);
            for _ in 0..3 {
                // SAFETY: the mapping is readable for `lines` whole lines and outlives the calls.
                alone =
                    alone.min(unsafe { overlap_loop(mapping.as_ptr(), lines, work, false, each) });
                // SAFETY: as above.
                with = with.min(unsafe { overlap_loop(mapping.as_ptr(), lines, work, true, each) });
            }
            Overlap {
                work_steps: work,
                work_ns: alone,
                work_and_line_ns: with,
                exposed_line_ns: with - alone,
            }
        })
        .collect()
}

/// One timed loop of `overlap`; returns nanoseconds per iteration.
///
/// # Safety
/// `base` is readable for `lines * LINE_BYTES` bytes.
unsafe fn overlap_loop(base: *const u8, lines: usize, work: u32, line: bool, d: Duration) -> f64 {
    // Addresses are drawn ahead into a ring so the one prefetched and the one read agree.
    let mut rng = XorShift64::new(0x2545_f491_4f6c_dd1d ^ lines as u64);
    let mut ring = [0usize; OVERLAP_AHEAD];
    for slot in ring.iter_mut() {
        *slot = rng.below(lines) * LINE_BYTES;
    }
    let (mut y, mut sum, mut iters) = (1u64, 0u64, 0u64);
    let start = Instant::now();
    loop {
        for i in 0..4096usize {
            let slot = i % OVERLAP_AHEAD;
            if line {
                let ahead = rng.below(lines) * LINE_BYTES;
                let now = ring[slot];
                // SAFETY: `ahead` is below `lines * LINE_BYTES`, inside the region the caller
                // vouches for; prefetch only hints.
                prefetch(unsafe { base.add(ahead) });
                // SAFETY: `ring[slot]` was drawn below `lines * LINE_BYTES`, so the byte read lies
                // inside the readable region.
                sum = sum.wrapping_add(unsafe { base.add(now).read() } as u64);
                ring[slot] = ahead;
            }
            for _ in 0..work {
                y = opaque(y.wrapping_mul(0x5851_f42d_4c95_7f2d).wrapping_add(1));
            }
        }
        iters += 4096;
        if start.elapsed() >= d {
            break;
        }
    }
    black_box((y, sum));
    start.elapsed().as_nanos() as f64 / iters as f64
}

/// `x`, hidden from the optimizer at no cost on x86_64 (a register constraint, no memory
/// round trip as `black_box` may make), so a chain of multiplies stays a chain.
#[inline(always)]
fn opaque(mut x: u64) -> u64 {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: an empty asm block that only claims to read and write a register.
    unsafe {
        core::arch::asm!("/* {0} */", inout(reg) x, options(nomem, nostack, preserves_flags));
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        x = black_box(x);
    }
    x
}

/// Hints the CPU to pull the line at `ptr` into L1; a no-op off x86_64.
#[inline(always)]
fn prefetch(ptr: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetch never faults, whatever the address; SSE is part of the x86_64 baseline.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(ptr.cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = ptr;
}

/// Marsaglia's xorshift64: three shifts per number, no dependence on memory.
struct XorShift64(u64);

impl XorShift64 {
    fn new(seed: u64) -> XorShift64 {
        // Zero is xorshift's only fixed point.
        XorShift64(seed.max(1))
    }

    /// Uniform-enough in `[0, n)`: the high half of `x * n`, no division.
    #[inline(always)]
    fn below(&mut self, n: usize) -> usize {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        ((u128::from(x) * n as u128) >> 64) as usize
    }
}

/// Maps `len` bytes (huge pages asked for: they keep TLB misses from dominating random reads)
/// and faults every page in, so no page is the shared zero page when timing starts; the
/// mapping is unmapped on drop, also when a panic unwinds through the probe.
fn touched_mapping(len: usize) -> Mapping {
    let mut mapping =
        Mapping::new(len).unwrap_or_else(|e| panic!("probe: mmap of {len} bytes failed: {e}"));
    mapping.touch(TOUCH_STRIDE_BYTES);
    mapping
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: usize = 1 << 20;

    #[test]
    fn small_run_reports_a_positive_finite_rate() {
        let rate = line_reads_per_sec(64 * MIB, 0.2);
        assert!(rate.is_finite() && rate > 0.0, "rate {rate}");
    }

    #[test]
    fn cache_resident_region_is_faster_than_a_gibibyte() {
        let cached = line_reads_per_sec(4096, 0.3);
        let dram = line_reads_per_sec(1024 * MIB, 0.3);
        assert!(
            cached > dram,
            "4 KiB: {cached:.3e} lines/s, 1 GiB: {dram:.3e} lines/s"
        );
    }

    #[test]
    fn caller_memory_unaligned_base_reads_only_whole_lines() {
        let buffer = vec![7u8; 4096 + 100];
        // SAFETY: the slice is readable for its length; the probe reads within it.
        let rate = unsafe { line_reads_per_sec_at(buffer.as_ptr().wrapping_add(3), 4096, 0.05) };
        assert!(rate.is_finite() && rate > 0.0, "rate {rate}");
    }

    #[test]
    #[should_panic(expected = "no aligned line")]
    fn caller_memory_without_a_whole_line_is_rejected() {
        let buffer = [0u64; 16];
        let base = buffer.as_ptr().cast::<u8>();
        let skip = base.align_offset(LINE_BYTES);
        // Start one byte past an aligned boundary and stop before the next one.
        let start = base.wrapping_add(skip + 1);
        // SAFETY: 63 bytes from `start` stay within the 128-byte buffer, which is 8-aligned, so
        // `skip <= 56` and `skip + 1 + 63 <= 120`.
        unsafe { line_reads_per_sec_at(start, 63, 0.01) };
    }

    #[test]
    fn overlap_times_the_computation_and_the_line_reads() {
        let r = overlap(64 * MIB, &[0, 30], 0.3);
        assert_eq!(r.len(), 2);
        assert_eq!((r[0].work_steps, r[1].work_steps), (0, 30));
        // A chain of 30 dependent multiplies takes at least 30 cycles (over 5 ns below 6 GHz),
        // so the chain was not folded away; reading lines takes time of its own.
        assert!(r[1].work_ns > 5.0, "{r:?}");
        assert!(r[0].work_and_line_ns > 0.1, "{r:?}");
        for o in &r {
            assert!(
                o.work_ns.is_finite() && o.work_and_line_ns.is_finite(),
                "{o:?}"
            );
            assert_eq!(o.exposed_line_ns, o.work_and_line_ns - o.work_ns);
        }
    }

    /// Prints the DRAM random-read ceiling: `cargo test --release -- --ignored --nocapture probe`.
    #[test]
    #[ignore = "prints measurements; takes about 2 s and 3 GiB of touched memory"]
    fn print_dram_line_rates() {
        for (label, bytes) in [
            ("4 KiB", 4096),
            ("64 MiB", 64 * MIB),
            ("1 GiB", 1024 * MIB),
            ("2 GiB", 2048 * MIB),
        ] {
            let rate = line_reads_per_sec(bytes, 0.5);
            println!("{label:>7}: {:.1} M lines/s", rate / 1e6);
        }
    }
}
