//! The station-free roads: windows of only GETs or only GETs and PUTs, and the GETs of a mixed
//! window that none of its writes touch.
//!
//! The two whole-window loops are compiled twice, each out of line: `simple_window_wide` for
//! x86-64-v3 (AVX2, BMI1/2, LZCNT, POPCNT) and `simple_window_baseline` for every CPU. Out of
//! line, their loops have the registers to themselves instead of sharing them with the general
//! pipeline's. Each hashes a key `PREFETCH_AHEAD` operations ahead of the one it executes and
//! prefetches its main bucket; a GET its main bucket cannot decide (a chain or a record) is
//! finished in a second pass (`finish_gets`) after its next line was prefetched.
//!
//! Why no station is needed is in `mod.rs`.

use std::mem::MaybeUninit;

use super::{finish_get, Pipeline, Simple, PREFETCH_AHEAD, RING_MASK};
use crate::apply::validate_value;
use crate::config::WINDOW_MAX;
use crate::hash::key_hash;
use crate::op::{Op, OpKind, Results, Status};
#[cfg(target_arch = "x86_64")]
use crate::simd::Avx2;
use crate::simd::{Baseline, ByteMatch};

impl Pipeline<'_> {
    /// A window of nothing but GETs and PUTs of valid keys and values, in forward mode,
    /// compiled for x86-64-v3 on its own: out of line, its loops have the registers to
    /// themselves instead of sharing them with the general pipeline's.
    ///
    /// # Safety
    /// The CPU must have AVX2, BMI1, BMI2, LZCNT and POPCNT.
    #[inline(never)]
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,bmi1,bmi2,lzcnt,popcnt")]
    pub(super) unsafe fn simple_window_wide(
        &mut self,
        ops: &[Op],
        base: usize,
        end: usize,
        kind: Simple,
        out: &mut Results,
    ) {
        // SAFETY: this function is compiled for AVX2, and callers check the CPU has it.
        let simd = unsafe { Avx2::new_unchecked() };
        self.simple_window(ops, base, end, kind, out, simd);
    }

    /// [`Pipeline::simple_window_wide`] for every CPU.
    #[inline(never)]
    pub(super) fn simple_window_baseline(
        &mut self,
        ops: &[Op],
        base: usize,
        end: usize,
        kind: Simple,
        out: &mut Results,
    ) {
        self.simple_window(ops, base, end, kind, out, Baseline);
    }

    #[inline(always)]
    fn simple_window(
        &mut self,
        ops: &[Op],
        base: usize,
        end: usize,
        kind: Simple,
        out: &mut Results,
        simd: impl ByteMatch,
    ) {
        let records = self.table.has_records();
        // Each loop twice: `PLAIN` without the per-key tests of deadlines and reference bits,
        // when the table needs neither (`Table::plain_hits`; GETs and plain PUTs cannot make
        // it false), and with them.
        match (kind, self.table.plain_hits()) {
            (Simple::Gets, true) => self.gets_window::<true>(ops, base, end, records, out, simd),
            (Simple::Gets, false) => self.gets_window::<false>(ops, base, end, records, out, simd),
            (Simple::GetsPuts, true) => {
                self.in_order_window::<true>(ops, base, end, records, out, simd)
            }
            (Simple::GetsPuts, false) => {
                self.in_order_window::<false>(ops, base, end, records, out, simd)
            }
            (Simple::Memcache | Simple::No, _) => unreachable!("not a GET or PUT window"),
        }
    }

    /// A window of GETs and PUTs of valid keys and values (`ops[base..end]`), in forward mode,
    /// without the reservation station: each operation runs to completion in request order,
    /// so later operations on a key see the earlier ones' effects with nothing to
    /// serialize. The station's forwarding would save the lookups of a key's later operations
    /// in the window, but after the first one its bucket is in cache anyway. Main buckets are
    /// prefetched `PREFETCH_AHEAD` operations ahead and, where there are chains or records,
    /// what they point to half that distance ahead.
    /// Runs `visit(self, p, op, hash)` on each operation of `win` in order, with its main
    /// bucket prefetched `PREFETCH_AHEAD` operations ahead (hashes kept in a ring) and, when
    /// `second`, what that bucket points to (chain, records when `records`) half that distance
    /// ahead: the walk `in_order_window` and `memcache_window` share.
    #[inline(always)]
    fn prefetched_walk(
        &mut self,
        win: &[Op],
        second: bool,
        records: bool,
        mut visit: impl FnMut(&mut Self, usize, &Op, u64),
    ) {
        const HALF: usize = PREFETCH_AHEAD / 2;
        // Uninitialized, as in `gets_window`.
        let mut hashes = [const { MaybeUninit::<u64>::uninit() }; WINDOW_MAX];
        for (p, op) in win.iter().take(PREFETCH_AHEAD).enumerate() {
            let h = key_hash(op.key);
            hashes[p & RING_MASK].write(h);
            self.table.prefetch_bucket(h);
        }
        for (p, op) in win.iter().enumerate() {
            if let Some(next) = win.get(p + PREFETCH_AHEAD) {
                let h = key_hash(next.key);
                hashes[(p + PREFETCH_AHEAD) & RING_MASK].write(h);
                self.table.prefetch_bucket(h);
            }
            if second && p + HALF < win.len() {
                // SAFETY: position p + HALF < p + PREFETCH_AHEAD was written above.
                let h = unsafe { hashes[(p + HALF) & RING_MASK].assume_init() };
                self.table.prefetch_second(h, records);
            }
            // SAFETY: written by the first loop or PREFETCH_AHEAD iterations ago.
            let h = unsafe { hashes[p & RING_MASK].assume_init() };
            visit(self, p, op, h);
        }
    }

    #[inline(always)]
    fn in_order_window<const PLAIN: bool>(
        &mut self,
        ops: &[Op],
        base: usize,
        end: usize,
        records: bool,
        out: &mut Results,
        simd: impl ByteMatch,
    ) {
        let second = self.table.counts().chained_buckets > 0 || records;
        self.prefetched_walk(&ops[base..end], second, records, |this, p, op, h| {
            let i = base + p;
            let c = &mut this.stats.kinds[op.kind as usize];
            c.ops += 1;
            if op.kind == OpKind::Get {
                let probe = this.table.main_index().probe_as::<PLAIN>(op.key, h, simd);
                if finish_get(probe, op, i, out) {
                    c.reads += 1;
                    c.line_reads += 1;
                    return;
                }
                // Without records (asked now: a PUT of this window may have stored one), the
                // rest is a walk down the main bucket's chain, prefetched HALF ahead.
                if !this.table.has_records() {
                    let (v, hops) = this.table.get_in_chain(op.key, h, simd);
                    match v {
                        Some(v) => out.finish_found(i, v, op.no_return),
                        None => out.finish_missing(i),
                    }
                    c.reads += 1 + hops;
                    c.line_reads += 1 + hops;
                    return;
                }
            } else if let Some(read) = this
                .table
                .replace_inline_as::<PLAIN>(op.key, h, op.arg, simd)
            {
                // A PUT over an inline value of the same length, the common replace: the
                // value changes in place in its bucket.
                c.reads += read;
                c.line_reads += read;
                c.writes += 1;
                c.line_writes += 1;
                let m = out.mark();
                out.finish(i, Status::Ok, m);
                return;
            }
            this.run_single(ops, i, h, out);
        });
    }

    /// [`Pipeline::memcache_window`] out of line, compiled for x86-64-v3 where the CPU has it
    /// (`S::WIDE`), as the GET and PUT windows are: kept apart from their loops, which inlining
    /// it into `simple_window_wide` made the native protocol pay for (6 instructions per
    /// operation, callgrind).
    #[inline(always)]
    pub(super) fn memcache_window_out_of_line<S: ByteMatch>(
        &mut self,
        ops: &[Op],
        base: usize,
        end: usize,
        out: &mut Results,
    ) {
        if S::WIDE {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `S::WIDE` holds only for `Avx2`, whose values exist only where the CPU
            // has the wide build's features. Called through an opaque pointer, as
            // `simple_window_wide` is, so that LLVM does not inline it.
            unsafe {
                let f: unsafe fn(&mut Self, &[Op], usize, usize, &mut Results) =
                    Self::memcache_window_wide;
                std::hint::black_box(f)(self, ops, base, end, out)
            };
        } else {
            self.memcache_window_baseline(ops, base, end, out);
        }
    }

    /// # Safety
    /// The CPU must have AVX2, BMI1, BMI2, LZCNT and POPCNT.
    #[inline(never)]
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,bmi1,bmi2,lzcnt,popcnt")]
    unsafe fn memcache_window_wide(
        &mut self,
        ops: &[Op],
        base: usize,
        end: usize,
        out: &mut Results,
    ) {
        let records = self.table.has_records();
        self.memcache_window(ops, base, end, records, out);
    }

    #[inline(never)]
    fn memcache_window_baseline(&mut self, ops: &[Op], base: usize, end: usize, out: &mut Results) {
        let records = self.table.has_records();
        self.memcache_window(ops, base, end, records, out);
    }

    /// A window of memcache operations of valid keys (`ops[base..end]`), in forward mode,
    /// without the reservation station: each runs to completion in request order
    /// (`run_single`), as `in_order_window`'s do, for the same reason. A memcached get that
    /// only reads is answered there the read-only way; the station would only have grouped a
    /// key's operations, which at depth are a hot key's few (issue 21: the station was 97 of
    /// the memcached port's 1167 instructions per operation, callgrind). A CAS unique goes by
    /// position in the batch (`cas_at`), so it does not depend on the order either. Main
    /// buckets are prefetched `PREFETCH_AHEAD` operations ahead and what they point to (items
    /// with meta are records) half that distance ahead.
    #[inline(always)]
    fn memcache_window(
        &mut self,
        ops: &[Op],
        base: usize,
        end: usize,
        records: bool,
        out: &mut Results,
    ) {
        self.prefetched_walk(&ops[base..end], true, records, |this, p, op, h| {
            let i = base + p;
            this.stats.kinds[op.kind as usize].ops += 1;
            // memcached's get, most of the operations: the read road, with no value to check.
            if crate::memcache::mc_get_reads_always(op) {
                this.mc_read(op, i, h, out);
                return;
            }
            // The key's length was checked by `simple_window`; the value's is checked here,
            // as stage 2 checks it.
            if let Err(e) = validate_value(op, &this.limits) {
                this.stats.errors += 1;
                let m = out.mark();
                out.finish(i, Status::Error(e), m);
                return;
            }
            this.run_single(ops, i, h, out);
        });
    }

    /// A window of nothing but GETs of valid keys (`ops[base..end]`), in forward mode, without
    /// the reservation station: with no write in the window, every order of its GETs gives
    /// the same results, so there is nothing to serialize or forward, and no need to look for
    /// runs on one key. One loop hashes each key `PREFETCH_AHEAD` operations ahead of the GET
    /// it answers, and prefetches its main bucket. The hashes and the undecided GETs are kept
    /// in local arrays, which nothing else can write, so the loop keeps the table's fields in
    /// registers.
    #[inline(always)]
    fn gets_window<const PLAIN: bool>(
        &mut self,
        ops: &[Op],
        base: usize,
        end: usize,
        records: bool,
        out: &mut Results,
        simd: impl ByteMatch,
    ) {
        let win = &ops[base..end];
        // Uninitialized: a window is at most WINDOW_MAX operations, and position p's hash is
        // written PREFETCH_AHEAD positions before it is read (or by the first loop).
        let mut hashes = [const { MaybeUninit::<u64>::uninit() }; WINDOW_MAX];
        let mut undecided = [const { MaybeUninit::<u32>::uninit() }; WINDOW_MAX];
        let mut nu = 0usize;
        let table = self.table.main_index();
        for (p, op) in win.iter().take(PREFETCH_AHEAD).enumerate() {
            let h = key_hash(op.key);
            hashes[p & RING_MASK].write(h);
            table.prefetch(h);
        }
        for (p, op) in win.iter().enumerate() {
            if let Some(next) = win.get(p + PREFETCH_AHEAD) {
                let h = key_hash(next.key);
                hashes[(p + PREFETCH_AHEAD) & RING_MASK].write(h);
                table.prefetch(h);
            }
            // SAFETY: written above, by the first loop (p < PREFETCH_AHEAD) or by iteration
            // p - PREFETCH_AHEAD of this one; the window has at most WINDOW_MAX positions.
            let h = unsafe { hashes[p & RING_MASK].assume_init() };
            if !finish_get(table.probe_as::<PLAIN>(op.key, h, simd), op, base + p, out) {
                self.table.prefetch_second(h, records);
                undecided[nu & RING_MASK].write(p as u32);
                nu += 1;
            }
        }
        for (d, u) in undecided[..nu].iter().enumerate() {
            // SAFETY: the first `nu` entries were written by the loop above, and every
            // position of the window has its hash (the window is at most WINDOW_MAX long).
            let (p, h) = unsafe {
                let p = u.assume_init() as usize & RING_MASK;
                (p, hashes[p].assume_init())
            };
            self.station.deferred[d] = p as u32;
            self.station.ring[p].hash = h;
        }
        self.finish_gets(ops, base, win.len(), nu, out, simd);
    }

    /// Stages 2 and 3 of the `n` GETs of a window with writes that none of those writes can
    /// affect (their ring positions are in `station.free`), in forward mode, without the
    /// reservation station: with no write to its key in the window, a GET sees the same stored
    /// value whenever it runs. Each GET reads its own bucket and counts it (a repeated key is
    /// a cache hit, but still one line read by that operation).
    ///
    /// The first pass answers every GET whose main bucket decides it, which is nearly all at
    /// moderate utilization, and prefetches the chained bucket or record of the others; the
    /// second pass finishes those.
    #[inline(always)]
    pub(super) fn get_window(
        &mut self,
        ops: &[Op],
        base: usize,
        n: usize,
        records: bool,
        out: &mut Results,
        simd: impl ByteMatch,
    ) {
        let mut deferred = 0usize;
        for k in 0..n {
            if k + PREFETCH_AHEAD < n {
                let ahead = self.station.free[k + PREFETCH_AHEAD] as usize;
                self.table
                    .prefetch_bucket(self.station.ring[ahead & RING_MASK].hash);
            }
            let p = self.station.free[k] as usize;
            self.get_main(&ops[base + p], base, p, records, out, simd, &mut deferred);
        }
        self.finish_gets(ops, base, n, deferred, out, simd);
    }

    /// A GET at ring position `p` against its main bucket: answered there, or deferred
    /// (its chained bucket or record prefetched) to `get_window`'s second pass.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn get_main(
        &mut self,
        op: &Op,
        base: usize,
        p: usize,
        records: bool,
        out: &mut Results,
        simd: impl ByteMatch,
        deferred: &mut usize,
    ) {
        let h = self.station.ring[p & RING_MASK].hash;
        if !finish_get(self.table.probe_main(op.key, h, simd), op, base + p, out) {
            self.table.prefetch_second(h, records);
            self.station.deferred[*deferred & RING_MASK] = p as u32;
            *deferred += 1;
        }
    }

    /// The second pass over `n` GETs of a window: the `deferred` ones whose main bucket did
    /// not decide them (ring positions in `station.deferred`), then the GET counters.
    #[inline(always)]
    fn finish_gets(
        &mut self,
        ops: &[Op],
        base: usize,
        n: usize,
        deferred: usize,
        out: &mut Results,
        simd: impl ByteMatch,
    ) {
        // Without records, the rest is a walk down the main bucket's chain, whose every
        // bucket is one more read. (Asked again here: `records` was true or false at the start
        // of the batch, and an earlier window may have stored one since.)
        let records = self.table.has_records();
        let mut read = (n - deferred) as u64;
        for d in 0..deferred {
            let p = self.station.deferred[d & RING_MASK] as usize;
            let h = self.station.ring[p & RING_MASK].hash;
            let i = base + p;
            if records {
                self.run_single(ops, i, h, out);
                continue;
            }
            let op = &ops[i];
            let (v, hops) = self.table.get_in_chain(op.key, h, simd);
            match v {
                Some(v) => out.finish_found(i, v, op.no_return),
                None => out.finish_missing(i),
            }
            read += 1 + hops;
        }
        let c = &mut self.stats.kinds[OpKind::Get as usize];
        c.ops += n as u64;
        c.reads += read;
        c.line_reads += read;
    }
}
