//! Start-up pre-fault of a shard's hash index, on a background thread, so the first requests
//! do not pay for first-touch page faults.
//!
//! ```text
//!   shard thread:    start ── serve requests ──────────────────────────────────────>
//!   prefault thread: madvise(MADV_POPULATE_WRITE) index[0..32M) [32M..64M) ... done, exit
//!                    (nice 19: it gets a core only when nothing else wants one)
//! ```
//!
//! Why (issue 20 item 6): the arena is one `MADV_HUGEPAGE` mapping of which the hash index is
//! the first third or so (about 357 MiB of a 1 GiB arena at the default tuning), and keys hash
//! to random buckets, so the first tens of thousands of inserts each touch a new 2 MiB page:
//! a fault that zeroes 2 MiB in the shard's thread, while its clients wait. Measured with
//! redis-benchmark -c 50 -r 1000000 on a fresh 1 GiB shard (BENCHMARKS "Start-up"), the
//! first 20 000 SETs took 0.4-1.1 s of mostly kernel time instead of 0.2 s. The slab region is
//! not pre-faulted: it fills from its start, so its faults are few and in order.
//!
//! `MADV_POPULATE_WRITE` faults pages in exactly as a write would (zeroed if absent, unchanged
//! if present) without writing, so running it beside the shard that owns the memory cannot
//! change a byte the shard wrote. If the arena is unmapped meanwhile (the server stops) the
//! call fails and the thread ends; a range mapped again at that address is only faulted in,
//! never changed. FLUSHALL gives the arena's pages back in place (`Engine::clear`): a page the
//! thread faults in after that is zero, as the shard would find it; once the thread has ended,
//! the index of a flushed store faults in on demand again. Kernels before 5.14 lack the call:
//! the thread ends at once and the index faults in on demand, as before.
//!
//! Cost: the index becomes resident at start-up (RSS grows by the index's size within about a
//! second), where on-demand faulting brings in the same pages during the first minutes of
//! random inserts. `prefault_index = false` turns it off.

use std::time::Instant;

use directkv_engine::Engine;

/// Bytes populated per call: small enough that a stopping server's thread ends soon after
/// (the thread checks nothing else), large enough that the calls cost nothing.
const CHUNK_BYTES: usize = 32 << 20;
/// The thread's nice value: pre-faulting is worth doing only on a core nobody else wants.
const NICE: i32 = 19;

/// Starts a thread that pre-faults `engine`'s hash index; returns at once.
pub(crate) fn spawn(shard: usize, engine: &Engine) {
    let (base, _) = engine.arena_region();
    let index_bytes = engine.report().index_bytes;
    // The address crosses to the thread as a number: it is only handed to madvise.
    let base = base as usize;
    let spawned = std::thread::Builder::new()
        .name(format!("prefault-{shard}"))
        .spawn(move || {
            directkv_sys::cpu::set_nice(NICE);
            let started = Instant::now();
            let mut done = 0;
            while done < index_bytes {
                let len = CHUNK_BYTES.min(index_bytes - done);
                if let Err(e) =
                    directkv_sys::mapping::populate_write((base + done) as *const u8, len)
                {
                    tracing::debug!(shard, error = %e, "index pre-fault stopped");
                    return;
                }
                done += len;
            }
            tracing::info!(
                shard,
                index_bytes,
                seconds = started.elapsed().as_secs_f64(),
                "index pre-faulted"
            );
        });
    if let Err(e) = spawned {
        tracing::warn!(shard, error = %e, "cannot start the index pre-fault thread");
    }
}
