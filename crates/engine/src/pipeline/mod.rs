//! The batched, out-of-order pipeline (seed 002, "Out-of-Order Execution Engine"), in software:
//! the batch driver. `Engine::execute` hands it a batch; it cuts the batch into windows of up
//! to `window` operations (default 256) and sends each window down one of three roads.
//!
//! ```text
//!  batch ──> window of up to `window` ops
//!   forward mode, only valid GETs, only valid GETs and PUTs, or only memcache operations
//!   with valid keys (a scan decides: `simple_window`)
//!     └─> direct.rs: no station; one loop compiled out of line hashes each key PREFETCH_AHEAD
//!         ops ahead and prefetches its main bucket
//!           GETs only       each answered from its main bucket; the undecided few (chain,
//!                           record) finish in a second pass
//!           GETs and PUTs   each op to completion in request order (a same-length replace
//!                           of an inline value in place)
//!           memcache        each op to completion in request order (`run_single`)
//!   anything else (and every window in stall mode)
//!     stage 1  mod.rs      hash every key (xxh3-64), prefetch the main buckets of the first
//!                          PREFETCH_AHEAD, mark runs of one key; then, in forward mode with
//!                          GETs, a bit per station slot of the window's writes
//!     stage 2  station.rs  validate; a GET no write of the window touches -> free list;
//!                          reservation station (1024 station slots, hash bits 41..51):
//!                            same key as the previous op  -> joins its entry's run
//!                            same key already in flight   -> follower of its leader (forward)
//!                                                         -> cut the window here    (stall)
//!                            else                         -> leader
//!              direct.rs   the free GETs, the read-only way (main bucket, second pass)
//!     stage 3  retire.rs   leaders in order: prefetch the main bucket PREFETCH_AHEAD leaders
//!                          ahead, the chained bucket and records half that; a lone leader
//!                          runs alone (GET probe, same-length inline PUT or counter add in
//!                          place, else lookup/apply/store); a group runs against the
//!                          forwarded value, then one write-back
//!   results  Results: one (status, data range) per op, in request order
//! ```
//!
//! Files: this one drives windows and runs stage 1; `station.rs` holds the in-flight ring and
//! the reservation station and runs stage 2; `direct.rs` the station-free windows and GETs,
//! each compiled for x86-64-v3 and baseline; `retire.rs` stage 3 (lone leaders, groups,
//! forwarding, write-back, replay). What one operation does to one value is `apply.rs`'s.
//!
//! Why the direct roads are safe: with no write in a window every order of its GETs gives the
//! same results; with only GETs and PUTs (or memcache operations) run in request order, a later
//! operation on a key sees the earlier ones' effects with nothing to serialize. What the station would add is
//! forwarding, which saves a key's later lookups in the window; those hit the cache anyway.
//! Atomics, vector operations and the rest, where forwarding merges a hot key's operations into
//! one write-back, always go through the station. In a window with other writes, the GETs whose
//! keys none of those writes touch (checked against the write bits per station slot) are
//! answered the read-only way and skip the station.
//!
//! Operations on the same key one after the other in the batch (a hot counter's run) share one
//! ring entry: stage 2 extends the previous operation's entry, stage 3 walks the run by index.
//! Unlike the FPGA, software can afford to compare full keys, so operations on different keys
//! that share a station slot are never falsely serialized.
//!
//! Forwarding stores only a group's net effect: a value put and then deleted (or replaced) by
//! later operations on the same key in the same window is never written, so it cannot run out
//! of memory, where stall mode, which stores every value, reports the error. Both outcomes are
//! linearizable and leave the same store. A group whose final write-back runs out of memory is
//! replayed operation by operation, so each gets the result it would have had alone.
//!
//! The empty key (Redis allows it) is always a record (`index::bucket`), and the main-bucket
//! shortcuts (the direct roads, the free GETs, a lone leader's GET probe, in-place PUT and
//! counter add) search inline entries by a key's bytes: they are never given it. A window that
//! holds it goes through the station, which makes it a leader of its own, and its leader runs
//! the general lookup. The test is the key-length check those roads made anyway (1..=max), so
//! they pay nothing for it.
//!
//! Prefetching only a distance ahead, between executions, keeps about as many misses in flight
//! as the core's miss buffers hold while the work goes on: the software form of the seed's 256
//! in-flight DMAs. A stage that prefetched a whole window first would stall on full miss
//! buffers with nothing else to do.

mod direct;
mod retire;
mod station;

pub(crate) use station::Station;

use crate::apply::validate_value;
use crate::config::{Limits, WINDOW_MAX};
use crate::hash::{key_hash, STATION_SLOTS};
use crate::index::{key_eq, Access, KeyMatch, MainProbe, Table};
use crate::op::{Op, OpKind, Results};
use crate::ops::FunctionRegistry;
#[cfg(target_arch = "x86_64")]
use crate::simd::Avx2;
use crate::simd::{Baseline, ByteMatch};
use crate::stats::Stats;

const RING_MASK: usize = WINDOW_MAX - 1;
/// How many operations ahead stage 3 prefetches main buckets while it executes (stage 1
/// prefetches only the first ones): enough misses in flight to keep the memory system busy,
/// issued between executions so that waiting for a free miss buffer overlaps with work
/// instead of stalling a prefetch-only loop. Chained buckets and records are prefetched half
/// that distance ahead, once their main bucket has had time to arrive.
const PREFETCH_AHEAD: usize = 24;
/// "No ring position": the end of a list of leaders or followers.
const NONE: u32 = u32::MAX;

/// Which loop a window of operations can take without the reservation station.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Simple {
    /// Only GETs with valid keys.
    Gets,
    /// Only GETs and PUTs (plain or replace-only) with valid keys and values.
    GetsPuts,
    /// Only memcache operations (`op::mc`) with valid keys: memcached's gets and sets.
    Memcache,
    /// Anything else: the general pipeline.
    No,
}

/// Classifies a window; the scans stop at the first operation that rules a class out.
#[inline(always)]
fn simple_window(win: &[Op], limits: &Limits) -> Simple {
    // A key of 1..=key_len_max bytes: the empty key takes the general road (see the module
    // comment), and so does a window that holds it.
    let key_ok = |op: &Op| op.key.len().wrapping_sub(1) < limits.key_len_max;
    let valid_get = |op: &Op| (op.kind == OpKind::Get) & key_ok(op);
    let Some(first_other) = win.iter().position(|op| !valid_get(op)) else {
        return Simple::Gets;
    };
    let simple = win[first_other..].iter().all(|op| {
        matches!(op.kind, OpKind::Get | OpKind::Put | OpKind::PutXx)
            && key_ok(op)
            && validate_value(op, limits).is_ok()
    });
    if simple {
        Simple::GetsPuts
    } else if win[0].kind.is_memcache() && win.iter().all(|op| op.kind.is_memcache() && key_ok(op))
    {
        // Asked last, and only of a window that starts with one: another protocol's batch
        // never holds memcache operations, so its windows pay one test at most.
        Simple::Memcache
    } else {
        Simple::No
    }
}

/// Answers GET `op` (operation `i`) from its main-bucket probe; `false` when the probe could
/// not decide (chain or record: the general lookup's job).
#[inline(always)]
fn finish_get(probe: MainProbe<'_>, op: &Op, i: usize, out: &mut Results) -> bool {
    match probe {
        MainProbe::Found(v) => out.finish_found(i, v, op.no_return),
        MainProbe::Missing => out.finish_missing(i),
        MainProbe::Elsewhere => return false,
    }
    true
}

/// Everything the pipeline mutates, borrowed from the engine.
pub(crate) struct Pipeline<'e> {
    pub(crate) table: &'e mut Table,
    pub(crate) registry: &'e FunctionRegistry,
    pub(crate) stats: &'e mut Stats,
    pub(crate) station: &'e mut Station,
    /// A group's value between its operations (data forwarding), written back once.
    pub(crate) forwarded: &'e mut Vec<u8>,
    /// Where `apply` builds a new value.
    pub(crate) scratch: &'e mut Vec<u8>,
    /// The lines the current operation read and wrote, charged to its kind's counters.
    pub(crate) access: &'e mut Access,
    pub(crate) limits: Limits,
    /// Stall mode: an operation on a key already in the window cuts the window.
    pub(crate) stall: bool,
    /// The batch's time in ms since the Unix epoch (`Engine::set_now`): keys whose deadline
    /// is at or before it are expired.
    pub(crate) now: u64,
    /// Keys removed for their deadline by this batch, length-prefixed
    /// (`Engine::reclaimed_keys`).
    pub(crate) reclaimed: &'e mut Vec<u8>,
    /// The CAS unique of the batch's first operation (`Engine::cas_next`): operation `i`'s is
    /// this plus `i` (`memcache::cas_at`).
    pub(crate) cas_base: u64,
}

impl Pipeline<'_> {
    /// Runs a batch window by window. Stage 1 is a tight loop (hash, prefetch) so that the CPU's
    /// out-of-order window holds many of its cache and TLB misses at once; stages 2 and 3 then
    /// find their buckets in cache.
    pub(crate) fn execute(&mut self, ops: &[Op], out: &mut Results) {
        self.run_batch(ops, out, Baseline);
    }

    /// [`Pipeline::execute`] compiled for x86-64-v3 (AVX2, BMI1/2, LZCNT, POPCNT): the whole
    /// data path is inlined here, so the bucket search, hashing and bit scans use the wider
    /// instructions. Callers check the CPU has them ([`crate::simd::wide_cpu`]).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,bmi1,bmi2,lzcnt,popcnt")]
    pub(crate) fn execute_wide(&mut self, ops: &[Op], out: &mut Results) {
        // SAFETY: this function is compiled for AVX2, and callers check the CPU has it.
        let simd = unsafe { Avx2::new_unchecked() };
        self.run_batch(ops, out, simd);
    }

    #[inline(always)]
    fn run_batch<S: ByteMatch>(&mut self, ops: &[Op], out: &mut Results, simd: S) {
        assert!(ops.len() < u32::MAX as usize, "batch too large");
        out.reset(ops.len(), self.limits.results_bytes_max);
        self.stats.batches += 1;
        let w = self.station.window;
        let records = self.table.has_records();
        let mut base = 0usize;
        while base < ops.len() {
            let end = (base + w).min(ops.len());
            // A window of nothing but GETs and PUTs (forward mode) takes its own compiled
            // loop, without the reservation station; the scans stop at the first other
            // operation.
            let kind = if self.stall {
                Simple::No
            } else {
                simple_window(&ops[base..end], &self.limits)
            };
            if kind == Simple::Memcache {
                self.memcache_window_out_of_line::<S>(ops, base, end, out);
                base = end;
                continue;
            }
            if kind != Simple::No {
                if S::WIDE {
                    #[cfg(target_arch = "x86_64")]
                    // SAFETY: `S::WIDE` holds only for `Avx2`, whose values exist only where
                    // the CPU has the wide build's features. Called through an opaque pointer:
                    // LLVM inlined the function into this one despite `inline(never)`, and the
                    // loop's registers were then shared with the general pipeline's (GET 219
                    // instructions per op inlined, 216 out of line, before the loops' other
                    // changes).
                    unsafe {
                        let f: unsafe fn(&mut Self, &[Op], usize, usize, Simple, &mut Results) =
                            Self::simple_window_wide;
                        std::hint::black_box(f)(self, ops, base, end, kind, out)
                    };
                } else {
                    self.simple_window_baseline(ops, base, end, kind, out);
                }
                base = end;
                continue;
            }
            let gets = self.prefetch_window(ops, base, end);
            // GETs can leave the station only in forward mode, and only if no write of the
            // window is to their key.
            let free_gets = gets > 0 && !self.stall;
            if free_gets {
                self.mark_write_station_slots(ops, base, end);
            }
            let cut = self.reserve(ops, base, end, free_gets, out);
            // GETs that no write of the window can affect first, the read-only way.
            let nf = self.station.free_len;
            if nf > 0 {
                for k in 0..PREFETCH_AHEAD.min(nf) {
                    let p = self.station.free[k] as usize;
                    if p >= PREFETCH_AHEAD {
                        self.table.prefetch_bucket(self.station.ring[p].hash);
                    }
                }
                self.get_window(ops, base, nf, records, out, simd);
            }
            let nl = self.station.leaders_len;
            // Every position leads (no same-key operation, no error, no GET taken out):
            // walk the positions themselves; otherwise the leader list, which skips followers.
            if nl == cut - base {
                self.retire_window(ops, nl, records, out, simd, |_, li| li);
            } else {
                self.retire_window(ops, nl, records, out, simd, |st, li| {
                    st.leaders[li] as usize
                });
            }
            self.station.clear();
            if free_gets {
                self.station.write_slots = [0; STATION_SLOTS / 64];
            }
            base = cut;
        }
    }

    /// Stage 1: hash every key of the window and prefetch its main bucket. Returns how many
    /// operations of the window are GETs.
    #[inline(always)]
    fn prefetch_window(&mut self, ops: &[Op], base: usize, end: usize) -> usize {
        let key_len_max = self.limits.key_len_max;
        let mut gets = 0usize;
        let mut p = 0usize;
        let mut rest = ops[base..end].iter();
        while let Some(op) = rest.next() {
            let klen = op.key.len();
            gets += usize::from(op.kind == OpKind::Get);
            // Invalid keys are rejected in stage 2; do not hash what may be huge.
            let too_long = klen > key_len_max;
            let h = if too_long { 0 } else { key_hash(op.key) };
            let entry = &mut self.station.ring[p & RING_MASK];
            entry.hash = h;
            entry.same_key = false;
            if p < PREFETCH_AHEAD {
                self.table.prefetch_bucket(h);
            }
            p += 1;
            let after = rest.as_slice();
            if !too_long && after.first().is_some_and(|next| key_eq(next.key, op.key)) {
                // A run of operations on this key (a hot counter): they take its hash.
                let (n, run_gets) = self.stage1_run(after, p, op.key, h);
                gets += run_gets;
                p += n;
                rest = after[n..].iter();
            }
        }
        gets
    }

    /// Stage 1 for the operations at the start of `after` (ring positions from `p` on) whose
    /// key is `key` (at least the first): they take its hash `h` and are marked as having the
    /// key of the operation before them. Kept out of line, so that the loop of operations on
    /// different keys stays tight. Returns how many there were and how many are GETs.
    #[inline(never)]
    fn stage1_run(&mut self, after: &[Op], p: usize, key: &[u8], h: u64) -> (usize, usize) {
        let same = KeyMatch::new(key);
        let mut gets = 0usize;
        let mut n = 0usize;
        for op in after {
            if !same.matches(op.key) {
                break;
            }
            gets += usize::from(op.kind == OpKind::Get);
            let entry = &mut self.station.ring[(p + n) & RING_MASK];
            entry.hash = h;
            entry.same_key = true;
            n += 1;
        }
        (n, gets)
    }
}
