//! The batched, out-of-order pipeline and its reservation station (seed 002, "Out-of-Order
//! Execution Engine"), in software.
//!
//! ```text
//!  batch ──> window of up to `window` ops (default 256)
//!            stage 1: validate, hash (xxh3), reservation station insert, prefetch main bucket
//!                     same key already in flight? -> chain behind it (forward mode)
//!                                                  -> cut the window here  (stall mode)
//!            stage 2: for non-inline tables, prefetch records whose secondary hash matches
//!            stage 3: execute each leader in order; its followers run against the forwarded
//!                     value, then one write-back
//! ```
//!
//! Two kinds of window (forward mode only) skip the reservation station, each in a loop
//! compiled out of line (`simple_window_wide`), which hashes and prefetches `PREFETCH_AHEAD`
//! operations ahead of the one it executes:
//! - nothing but valid GETs: with no write in the window every order of its operations gives
//!   the same results; each GET is answered from its main bucket, and only those that need a
//!   chained bucket or a record go through the general lookup, after a prefetch;
//! - nothing but valid GETs and PUTs (plain or replace-only): each runs to completion in
//!   request order, a replace of an inline value of the same length in place, so a later
//!   operation on a key sees the earlier ones' effects with nothing to serialize. What the
//!   station would add is forwarding, which saves a key's later lookups in the window; those
//!   hit the cache anyway. Atomics, vector operations and the rest, where forwarding merges
//!   a hot key's operations into one write-back, always go through the station.
//!
//! In a window with other writes, the GETs whose keys none of those writes touch (checked
//! against a bit per reservation-station slot of the window's writes) are answered the
//! read-only way and skip the station.
//!
//! Operations on the same key one after the other in the batch (a hot counter's run) share one
//! station entry: stage 2 extends the previous operation's entry, stage 3 walks the run by index.
//!
//! The reservation station has 1024 slots indexed by hash bits 41..51, each a chain of the
//! window's leaders with that slot. Unlike the FPGA, software can afford to compare full keys, so
//! operations on different keys that share a slot are never falsely serialized.
//!
//! Forwarding stores only a group's net effect: a value put and then deleted (or replaced) by
//! later operations on the same key in the same window is never written, so it cannot run out
//! of memory, where stall mode, which stores every value, reports the error. Both outcomes are
//! linearizable and leave the same store. A group whose final write-back runs out of memory is
//! replayed operation by operation, so each gets the result it would have had alone.
//!
//! While stage 1 runs, up to `window` bucket fetches are in flight: this is how one core keeps
//! many cache misses outstanding, the software form of the seed's 256 in-flight DMAs.

use std::mem::MaybeUninit;

use crate::config::WINDOW_MAX;
#[cfg(target_arch = "x86_64")]
use crate::index::bucket::Avx2;
use crate::index::bucket::{Baseline, ByteMatch};
use crate::index::{key_eq, Access, KeyMatch, Loc, MainProbe, Table};
use crate::op::{Op, OpKind, Results, Status};
use crate::ops::kernel::Elem;
use crate::ops::{self, FunctionRegistry};
use crate::stats::Stats;

pub const RS_SLOTS: usize = 1024;
const RING_MASK: usize = WINDOW_MAX - 1;
/// How many operations ahead stage 3 prefetches main buckets while it executes (stage 1
/// prefetches only the first ones): enough misses in flight to keep the memory system busy,
/// issued between executions so that waiting for a free miss buffer overlaps with work
/// instead of stalling a prefetch-only loop. Chained buckets and records are prefetched half
/// that distance ahead, once their main bucket has had time to arrive.
const PREFETCH_AHEAD: usize = 24;
const NONE: u32 = u32::MAX;

/// What an operation does to the stored value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Effect {
    Keep,
    /// The new value is in the scratch buffer.
    SetScratch,
    /// The new value is `op.arg`.
    SetArg,
    /// The new value is `op.arg2` (cas).
    SetArg2,
    Delete,
}

/// Limits checked where operations enter the engine.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub key_len_max: usize,
    pub value_len_max: usize,
}

/// One in-flight operation's bookkeeping (one ring position).
#[derive(Clone, Copy)]
struct Slot {
    hash: u64,
    /// Index of the operation in the batch.
    op: u32,
    /// Next leader in the same reservation-station slot.
    rs_next: u32,
    /// How many operations this entry stands for: `op`, `op + 1`, ... on the same key, one
    /// after the other in the batch (a run, e.g. a hot counter's increments), executed in turn.
    run: u32,
    /// First follower of a leader / next follower of a follower.
    follow_next: u32,
    follow_tail: u32,
    /// Stage 1 found this operation's key equal to the previous operation's (a run on one
    /// key, such as a hot counter); stage 2 then takes the previous one's leader directly.
    same_key: bool,
}

const FREE_SLOT: Slot = Slot {
    hash: 0,
    op: 0,
    rs_next: NONE,
    run: 1,
    follow_next: NONE,
    follow_tail: NONE,
    same_key: false,
};

/// The in-flight ring and the reservation station, sized at start-up. Operation `k` of a batch
/// occupies ring position `k % window` from its issue to its retirement. The ring has the
/// largest window's size so that masked indices need no bounds checks.
pub(crate) struct Station {
    window: usize,
    ring: Box<[Slot; WINDOW_MAX]>,
    rs_head: Box<[u32; RS_SLOTS]>,
    /// Reservation-station slots in use in this window, cleared when it retires.
    rs_used: Vec<u16>,
    /// Ring positions of a read-only window whose GET needs more than the main bucket.
    deferred: Box<[u32; WINDOW_MAX]>,
    /// Ring positions of the window's leaders in request order (stage 2 fills it): stage 3
    /// visits only these, and prefetches a distance in leaders, not in positions.
    leaders: Box<[u32; WINDOW_MAX]>,
    leaders_len: usize,
    /// Reservation-station slots of the window's writes (bit per slot), set by stage 1: a GET
    /// whose slot is clear here has no write to its key in the window.
    write_slots: [u64; RS_SLOTS / 64],
    /// Ring positions of the window's GETs that no write in it can affect (stage 2 fills it).
    free: Box<[u32; WINDOW_MAX]>,
    free_len: usize,
}

impl Station {
    pub(crate) fn new(window: usize) -> Station {
        assert!(
            window.is_power_of_two() && window <= WINDOW_MAX,
            "window {window} is not a power of two <= {WINDOW_MAX}"
        );
        Station {
            window,
            ring: Box::new([FREE_SLOT; WINDOW_MAX]),
            rs_head: Box::new([NONE; RS_SLOTS]),
            rs_used: Vec::with_capacity(WINDOW_MAX),
            deferred: Box::new([0; WINDOW_MAX]),
            leaders: Box::new([0; WINDOW_MAX]),
            leaders_len: 0,
            write_slots: [0; RS_SLOTS / 64],
            free: Box::new([0; WINDOW_MAX]),
            free_len: 0,
        }
    }

    /// Empties the reservation station once every operation of the window has retired.
    fn clear(&mut self) {
        for &slot in &self.rs_used {
            self.rs_head[slot as usize] = NONE;
        }
        self.rs_used.clear();
        self.free_len = 0;
    }

    #[inline(always)]
    fn writes_to_slot(&self, slot: usize) -> bool {
        (self.write_slots[slot / 64] >> (slot % 64)) & 1 == 1
    }
}

#[inline(always)]
fn rs_slot(h: u64) -> usize {
    ((h >> 41) as usize) & (RS_SLOTS - 1)
}

/// The hash every component uses for a key (the server takes its shard from bits 52..64).
#[inline(always)]
pub fn key_hash(key: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(key)
}

/// Which loop a window of operations can take without the reservation station.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Simple {
    /// Only GETs with valid keys.
    Gets,
    /// Only GETs and PUTs (plain or replace-only) with valid keys and values.
    GetsPuts,
    /// Anything else: the general pipeline.
    No,
}

/// Classifies a window; the scans stop at the first operation that rules a class out.
#[inline(always)]
fn simple_window(win: &[Op], limits: &Limits) -> Simple {
    let valid_get =
        |op: &Op| (op.kind == OpKind::Get) & (op.key.len().wrapping_sub(1) < limits.key_len_max);
    let Some(first_other) = win.iter().position(|op| !valid_get(op)) else {
        return Simple::Gets;
    };
    let simple = win[first_other..].iter().all(|op| {
        matches!(op.kind, OpKind::Get | OpKind::Put | OpKind::PutXx) && validate(op, limits).is_ok()
    });
    if simple {
        Simple::GetsPuts
    } else {
        Simple::No
    }
}

/// Applies one operation to the current value `cur` (None = missing). Appends the operation's
/// reply data to `out` unless it is "no return". Pure: the caller stores the effect.
pub(crate) fn apply(
    reg: &FunctionRegistry,
    op: &Op,
    cur: Option<&[u8]>,
    scratch: &mut Vec<u8>,
    out: &mut Vec<u8>,
) -> (Status, Effect) {
    let reply = !op.no_return;
    let emit = |out: &mut Vec<u8>, bytes: &[u8]| {
        if reply {
            crate::op::push_small(out, bytes)
        }
    };
    match op.kind {
        OpKind::Get => match cur {
            Some(v) => {
                emit(out, v);
                (Status::Ok, Effect::Keep)
            }
            None => (Status::NotFound, Effect::Keep),
        },
        OpKind::Put => (Status::Ok, Effect::SetArg),
        OpKind::PutNx if cur.is_some() => (Status::NotStored, Effect::Keep),
        OpKind::PutXx if cur.is_none() => (Status::NotStored, Effect::Keep),
        OpKind::PutNx | OpKind::PutXx => (Status::Ok, Effect::SetArg),
        OpKind::Delete if cur.is_some() => (Status::Ok, Effect::Delete),
        OpKind::Delete => (Status::NotFound, Effect::Keep),
        OpKind::Cas => {
            // A missing key matches an empty expected value, so cas can create a key.
            let current = cur.unwrap_or(&[]);
            emit(out, current);
            if current == op.arg && (cur.is_some() || op.arg.is_empty()) {
                (Status::Ok, Effect::SetArg2)
            } else {
                (Status::CasMismatch, Effect::Keep)
            }
        }
        OpKind::UpdateS2S => {
            match ops::update_scalar2scalar(reg, op.func, op.elem, cur, op.arg, scratch) {
                Ok(()) => {
                    match cur {
                        Some(v) => emit(out, v),
                        None => {
                            if reply {
                                out.resize(out.len() + op.elem.width(), 0)
                            }
                        }
                    }
                    (Status::Ok, Effect::SetScratch)
                }
                Err(e) => (Status::Error(e), Effect::Keep),
            }
        }
        OpKind::Append | OpKind::IncrBy | OpKind::IncrByFloat => {
            apply_string(op, cur, scratch, out)
        }
        _ => apply_vector(reg, op, cur, scratch, out),
    }
}

/// A position in a group: operation `i` of the entry at ring position `k`, whose run of
/// operations ends before `end`; `k == NONE` past the group's last operation.
#[derive(Clone, Copy)]
struct GroupCursor {
    k: u32,
    i: usize,
    end: usize,
}

impl GroupCursor {
    /// The first operation of the entry at ring position `k` (or the end, for `NONE`).
    #[inline(always)]
    fn at(ring: &[Slot; WINDOW_MAX], k: u32) -> GroupCursor {
        if k == NONE {
            return GroupCursor { k, i: 0, end: 0 };
        }
        let s = &ring[k as usize & RING_MASK];
        GroupCursor {
            k,
            i: s.op as usize,
            end: s.op as usize + s.run as usize,
        }
    }

    #[inline(always)]
    fn done(&self) -> bool {
        self.k == NONE
    }

    /// The group's next operation: the next one of this run, else the next entry's first.
    #[inline(always)]
    fn advance(&mut self, ring: &[Slot; WINDOW_MAX]) {
        self.i += 1;
        if self.i == self.end {
            *self = GroupCursor::at(ring, ring[self.k as usize & RING_MASK].follow_next);
        }
    }
}

/// The hot counter's fast path inside a group: from cursor `c` on, a run of built-in adds and
/// subtracts of one 4- or 8-byte integer on a present value of that width, done on a register
/// copy of the forwarded value `fwd` and stored back to it once. Same replies (each the value
/// before its operation) and same final value as `apply` one after the other. Leaves `c` at
/// the first operation not run and returns how many ran; 0 means `c`'s operation is not such
/// an operation, and nothing was done.
#[inline(always)]
fn forward_int_run(
    ops: &[Op],
    ring: &[Slot; WINDOW_MAX],
    c: &mut GroupCursor,
    fwd: &mut [u8],
    out: &mut Results,
) -> u64 {
    match fwd.len() {
        8 => int_run::<u64>(ops, ring, c, fwd, out),
        4 => int_run::<u32>(ops, ring, c, fwd, out),
        _ => 0,
    }
}

/// `forward_int_run` for elements of `T`'s width; two's complement lets one wrapping add or
/// subtract serve the signed and the unsigned type of that width. A run's operations are
/// consecutive in the batch, so the inner loop walks them without the ring.
#[inline(always)]
fn int_run<T: Elem>(
    ops: &[Op],
    ring: &[Slot; WINDOW_MAX],
    c: &mut GroupCursor,
    fwd: &mut [u8],
    out: &mut Results,
) -> u64 {
    let mut cur = T::load(fwd);
    let mut ran = 0u64;
    let mut old = [0u8; 8];
    'entries: while !c.done() {
        while c.i < c.end {
            let op = &ops[c.i];
            const { assert!(ops::FN_ADD == 0 && ops::FN_SUB == 1) };
            if op.kind != OpKind::UpdateS2S
                || op.func > ops::FN_SUB
                || !op.elem.is_int_of_width(T::WIDTH)
                || op.arg.len() != T::WIDTH
            {
                break 'entries;
            }
            cur.store(&mut old[..T::WIDTH]);
            out.finish_found(c.i, &old[..T::WIDTH], op.no_return);
            cur = add_or_sub(cur, op);
            ran += 1;
            c.i += 1;
        }
        *c = GroupCursor::at(ring, ring[c.k as usize & RING_MASK].follow_next);
    }
    cur.store(fwd);
    ran
}

/// Operation `i`, a built-in add or subtract of a `T` (checked by the caller), on the stored
/// value `v` of `T`'s width, in place: replies with the value before it, like `apply`.
#[inline(always)]
fn lone_int<T: Elem>(op: &Op, i: usize, v: &mut [u8], out: &mut Results) {
    let cur = T::load(v);
    out.finish_found(i, v, op.no_return);
    add_or_sub(cur, op).store(v);
}

/// `cur` after the built-in add or subtract `op` (its operand a `T`), wrapping.
#[inline(always)]
fn add_or_sub<T: Elem>(cur: T, op: &Op) -> T {
    let d = T::load(op.arg);
    if op.func == ops::FN_ADD {
        cur.op_add(d)
    } else {
        cur.op_sub(d)
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

/// The Redis-style string operations: the new value goes to `scratch`.
fn apply_string(
    op: &Op,
    cur: Option<&[u8]>,
    scratch: &mut Vec<u8>,
    out: &mut Vec<u8>,
) -> (Status, Effect) {
    scratch.clear();
    let r = match op.kind {
        OpKind::Append => {
            scratch.extend_from_slice(cur.unwrap_or(&[]));
            scratch.extend_from_slice(op.arg);
            Ok(())
        }
        OpKind::IncrBy => crate::strings::incr_by(cur, op.arg, scratch),
        _ => crate::strings::incr_by_float(cur, op.arg, scratch),
    };
    if let Err(e) = r {
        return (Status::Error(e), Effect::Keep);
    }
    if !op.no_return {
        match op.kind {
            OpKind::Append => out.extend_from_slice(&(scratch.len() as u64).to_le_bytes()),
            _ => out.extend_from_slice(scratch),
        }
    }
    (Status::Ok, Effect::SetScratch)
}

fn apply_vector(
    reg: &FunctionRegistry,
    op: &Op,
    cur: Option<&[u8]>,
    scratch: &mut Vec<u8>,
    out: &mut Vec<u8>,
) -> (Status, Effect) {
    let Some(v) = cur else {
        return (Status::NotFound, Effect::Keep);
    };
    let r = match op.kind {
        OpKind::UpdateS2V => ops::update_scalar2vector(reg, op.func, op.elem, v, op.arg, scratch),
        OpKind::UpdateV2V => ops::update_vector2vector(reg, op.func, op.elem, v, op.arg, scratch),
        OpKind::Reduce => ops::reduce(reg, op.func, op.elem, v, op.arg, scratch),
        OpKind::Filter => ops::filter(reg, op.func, op.elem, v, op.arg, scratch),
        k => unreachable!("{k:?} is not a vector operation"),
    };
    if let Err(e) = r {
        return (Status::Error(e), Effect::Keep);
    }
    let (data, effect) = match op.kind {
        OpKind::UpdateS2V | OpKind::UpdateV2V => (v, Effect::SetScratch),
        _ => (&scratch[..], Effect::Keep),
    };
    if !op.no_return {
        out.extend_from_slice(data);
    }
    (Status::Ok, effect)
}

/// Checks an operation against the limits before it enters the pipeline.
pub(crate) fn validate(op: &Op, limits: &Limits) -> Result<(), crate::OpError> {
    use crate::OpError;
    let klen = op.key.len();
    if klen.wrapping_sub(1) >= limits.key_len_max {
        return Err(if klen == 0 {
            OpError::KeyEmpty
        } else {
            OpError::KeyTooLong {
                len: klen,
                max: limits.key_len_max,
            }
        });
    }
    validate_value(op, limits)
}

/// The value half of [`validate`], for an operation whose key is known to be valid.
#[inline(always)]
fn validate_value(op: &Op, limits: &Limits) -> Result<(), crate::OpError> {
    use crate::OpError;
    if op.kind.writes() {
        let value_len = match op.kind {
            OpKind::Put | OpKind::PutNx | OpKind::PutXx => op.arg.len(),
            OpKind::Cas => op.arg2.len(),
            _ => 0,
        };
        if value_len > limits.value_len_max {
            return Err(OpError::ValueTooLarge {
                len: value_len,
                max: limits.value_len_max,
            });
        }
    }
    Ok(())
}

/// Everything the pipeline mutates, borrowed from the engine.
pub(crate) struct Pipeline<'e> {
    pub table: &'e mut Table,
    pub reg: &'e FunctionRegistry,
    pub stats: &'e mut Stats,
    pub st: &'e mut Station,
    pub fwd: &'e mut Vec<u8>,
    pub scratch: &'e mut Vec<u8>,
    pub acc: &'e mut Access,
    pub limits: Limits,
    pub stall: bool,
}

/// Whether this CPU runs [`Pipeline::execute_wide`] (checked once per engine).
pub(crate) fn wide_cpu() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("bmi1")
            && std::arch::is_x86_feature_detected!("bmi2")
            && std::arch::is_x86_feature_detected!("lzcnt")
            && std::arch::is_x86_feature_detected!("popcnt")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
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
    /// instructions. Callers check the CPU has them ([`wide_cpu`]).
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
        out.reset(ops.len());
        self.stats.batches += 1;
        let w = self.st.window;
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
                self.mark_write_slots(ops, base, end);
            }
            let cut = self.reserve(ops, base, end, free_gets, out);
            // GETs that no write of the window can affect first, the read-only way.
            let nf = self.st.free_len;
            if nf > 0 {
                for k in 0..PREFETCH_AHEAD.min(nf) {
                    let p = self.st.free[k] as usize;
                    if p >= PREFETCH_AHEAD {
                        self.table.prefetch_bucket(self.st.ring[p].hash);
                    }
                }
                self.get_window(ops, base, nf, records, out, simd);
            }
            let nl = self.st.leaders_len;
            // Every position leads (no same-key operation, no error, no GET taken out):
            // walk the positions themselves; otherwise the leader list, which skips followers.
            if nl == cut - base {
                self.retire_window(ops, nl, records, out, simd, |_, li| li);
            } else {
                self.retire_window(ops, nl, records, out, simd, |st, li| {
                    st.leaders[li] as usize
                });
            }
            self.st.clear();
            if free_gets {
                self.st.write_slots = [0; RS_SLOTS / 64];
            }
            base = cut;
        }
    }

    /// Stage 3 over the window's `nl` leaders, the `li`-th at ring position `leader(st, li)`:
    /// each executes with its followers while main buckets are prefetched `PREFETCH_AHEAD`
    /// leaders ahead and chained buckets and records half that.
    #[inline(always)]
    fn retire_window(
        &mut self,
        ops: &[Op],
        nl: usize,
        records: bool,
        out: &mut Results,
        simd: impl ByteMatch,
        leader: impl Fn(&Station, usize) -> usize,
    ) {
        let second = self.table.counts().chained_buckets > 0 || records;
        const HALF: usize = PREFETCH_AHEAD / 2;
        // Stage 1 prefetched the first positions; leaders among the first ones past them
        // have not been.
        for li in 0..PREFETCH_AHEAD.min(nl) {
            let lp = leader(self.st, li);
            if lp >= PREFETCH_AHEAD {
                self.table.prefetch_bucket(self.st.ring[lp].hash);
            }
        }
        if second {
            for li in 0..HALF.min(nl) {
                self.prefetch_second(leader(self.st, li), records);
            }
        }
        for li in 0..nl {
            if li + PREFETCH_AHEAD < nl {
                let ahead = leader(self.st, li + PREFETCH_AHEAD);
                self.table.prefetch_bucket(self.st.ring[ahead].hash);
            }
            if second && li + HALF < nl {
                self.prefetch_second(leader(self.st, li + HALF), records);
            }
            self.retire(ops, leader(self.st, li), out, simd);
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
            let slot = &mut self.st.ring[p & RING_MASK];
            slot.hash = h;
            slot.same_key = false;
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
            let slot = &mut self.st.ring[(p + n) & RING_MASK];
            slot.hash = h;
            slot.same_key = true;
            n += 1;
        }
        (n, gets)
    }

    /// Marks the reservation-station slots of the window's writes in `st.write_slots`.
    #[inline(always)]
    fn mark_write_slots(&mut self, ops: &[Op], base: usize, end: usize) {
        for (p, op) in ops[base..end].iter().enumerate() {
            if op.kind.writes() {
                let rs = rs_slot(self.st.ring[p & RING_MASK].hash);
                self.st.write_slots[rs / 64] |= 1 << (rs % 64);
            }
        }
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
        let h = self.st.ring[p & RING_MASK].hash;
        if !finish_get(self.table.probe_main(op.key, h, simd), op, base + p, out) {
            self.table.prefetch_second(h, records);
            self.st.deferred[*deferred & RING_MASK] = p as u32;
            *deferred += 1;
        }
    }

    /// A window of nothing but GETs and PUTs of valid keys and values, in forward mode,
    /// compiled for x86-64-v3 on its own: out of line, its loops have the registers to
    /// themselves instead of sharing them with the general pipeline's.
    ///
    /// # Safety
    /// The CPU must have AVX2, BMI1, BMI2, LZCNT and POPCNT.
    #[inline(never)]
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,bmi1,bmi2,lzcnt,popcnt")]
    unsafe fn simple_window_wide(
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
    fn simple_window_baseline(
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
        match kind {
            Simple::Gets => self.gets_window(ops, base, end, records, out, simd),
            Simple::GetsPuts => self.in_order_window(ops, base, end, records, out, simd),
            Simple::No => unreachable!("not a simple window"),
        }
    }

    /// A window of GETs and PUTs of valid keys and values (`ops[base..end]`), in forward mode,
    /// without the reservation station: each operation runs to completion in request order,
    /// so later operations on a key see the earlier ones' effects with nothing to
    /// serialize. The station's forwarding would save the lookups of a key's later operations
    /// in the window, but after the first one its bucket is in cache anyway. Main buckets are
    /// prefetched `PREFETCH_AHEAD` operations ahead and, where there are chains or records,
    /// what they point to half that distance ahead.
    #[inline(always)]
    fn in_order_window(
        &mut self,
        ops: &[Op],
        base: usize,
        end: usize,
        records: bool,
        out: &mut Results,
        simd: impl ByteMatch,
    ) {
        const HALF: usize = PREFETCH_AHEAD / 2;
        let win = &ops[base..end];
        // Uninitialized, as in `gets_window`.
        let mut hashes = [const { MaybeUninit::<u64>::uninit() }; WINDOW_MAX];
        for (p, op) in win.iter().take(PREFETCH_AHEAD).enumerate() {
            let h = key_hash(op.key);
            hashes[p & RING_MASK].write(h);
            self.table.prefetch_bucket(h);
        }
        let second = self.table.counts().chained_buckets > 0 || records;
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
            let i = base + p;
            let c = &mut self.stats.kinds[op.kind as usize];
            c.ops += 1;
            if op.kind == OpKind::Get {
                if finish_get(self.table.probe_main(op.key, h, simd), op, i, out) {
                    c.reads += 1;
                    c.line_reads += 1;
                    continue;
                }
                // Without records (asked now: a PUT of this window may have stored one), the
                // rest is a walk down the main bucket's chain, prefetched HALF ahead.
                if !self.table.has_records() {
                    let (v, hops) = self.table.get_in_chain(op.key, h, simd);
                    match v {
                        Some(v) => out.finish_found(i, v, op.no_return),
                        None => out.finish_missing(i),
                    }
                    c.reads += 1 + hops;
                    c.line_reads += 1 + hops;
                    continue;
                }
            } else if let Some(read) = self.table.replace_inline(op.key, h, op.arg, simd) {
                // A PUT over an inline value of the same length, the common replace: the
                // value changes in place in its bucket.
                c.reads += read;
                c.line_reads += read;
                c.writes += 1;
                c.line_writes += 1;
                let m = out.mark();
                out.finish(i, Status::Ok, m);
                continue;
            }
            self.run_single(ops, i, h, out);
        }
    }

    /// A window of nothing but GETs of valid keys (`ops[base..end]`), in forward mode, without
    /// the reservation station: with no write in the window, every order of its GETs gives
    /// the same results, so there is nothing to serialize or forward, and no need to look for
    /// runs on one key. One loop hashes each key `PREFETCH_AHEAD` operations ahead of the GET
    /// it answers, and prefetches its main bucket. The hashes and the undecided GETs are kept
    /// in local arrays, which nothing else can write, so the loop keeps the table's fields in
    /// registers.
    #[inline(always)]
    fn gets_window(
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
            if !finish_get(table.probe(op.key, h, simd), op, base + p, out) {
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
            self.st.deferred[d] = p as u32;
            self.st.ring[p].hash = h;
        }
        self.finish_gets(ops, base, win.len(), nu, out, simd);
    }

    /// Stages 2 and 3 of the `n` GETs of a window with writes that none of those writes can
    /// affect (their ring positions are in `st.free`), in forward mode, without the
    /// reservation station: with no write to its key in the window, a GET sees the same stored
    /// value whenever it runs. Each GET reads its own bucket and counts it (a repeated key is
    /// a cache hit, but still one line read by that operation).
    ///
    /// The first pass answers every GET whose main bucket decides it, which is nearly all at
    /// moderate utilization, and prefetches the chained bucket or record of the others; the
    /// second pass finishes those.
    #[inline(always)]
    fn get_window(
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
                let ahead = self.st.free[k + PREFETCH_AHEAD] as usize;
                self.table
                    .prefetch_bucket(self.st.ring[ahead & RING_MASK].hash);
            }
            let p = self.st.free[k] as usize;
            self.get_main(&ops[base + p], base, p, records, out, simd, &mut deferred);
        }
        self.finish_gets(ops, base, n, deferred, out, simd);
    }

    /// The second pass over `n` GETs of a window: the `deferred` ones whose main bucket did
    /// not decide them (ring positions in `st.deferred`), then the GET counters.
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
            let p = self.st.deferred[d & RING_MASK] as usize;
            let h = self.st.ring[p & RING_MASK].hash;
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

    /// Stage 2: validation and the reservation station, in request order. Returns the end of
    /// the window, which in stall mode is the first operation whose key is already in flight.
    #[inline(always)]
    fn reserve(
        &mut self,
        ops: &[Op],
        base: usize,
        end: usize,
        free_gets: bool,
        out: &mut Results,
    ) -> usize {
        // The leader of the previous operation's key, if that operation entered the station,
        // and the group entry (leader or follower) that operation belongs to.
        let mut prev_leader = NONE;
        let mut prev_entry = 0usize;
        let mut nl = 0usize;
        let mut i = base;
        while i < end {
            let at = i;
            let p = (at - base) & RING_MASK;
            let op = &ops[at];
            i += 1;
            if let Err(e) = validate(op, &self.limits) {
                self.stats.kinds[op.kind as usize].ops += 1;
                self.stats.errors += 1;
                let m = out.mark();
                out.finish(at, Status::Error(e), m);
                prev_leader = NONE;
                continue;
            }
            if free_gets
                && op.kind == OpKind::Get
                && !self.st.writes_to_slot(rs_slot(self.st.ring[p].hash))
            {
                // No write of the window is to this key: it goes the read-only way (and so
                // does any GET of its key after it, which makes the same test).
                self.st.free[self.st.free_len] = p as u32;
                self.st.free_len += 1;
                prev_leader = NONE;
                continue;
            }
            // Stage 1's `same_key` means the previous operation had a key of valid length
            // equal to this one; if it entered the station, its leader is this key's.
            let same_key = self.st.ring[p].same_key;
            if same_key && prev_leader != NONE && !self.stall {
                // It joins the previous operation's run (the group's last entry, since
                // operations join groups in request order), and so do the operations after it
                // of the same kind on the same key (so of a valid key) whose values are in
                // bounds: counted here, stored once.
                let kind = op.kind;
                while i < end
                    && self.st.ring[(i - base) & RING_MASK].same_key
                    && ops[i].kind == kind
                    && validate_value(&ops[i], &self.limits).is_ok()
                {
                    i += 1;
                }
                let n = (i - at) as u32;
                self.stats.kinds[kind as usize].ops += u64::from(n);
                self.st.ring[prev_entry].run += n;
                continue;
            }
            let h = self.st.ring[p].hash;
            let slot = rs_slot(h);
            let mut l = if same_key { prev_leader } else { NONE };
            if l == NONE {
                l = self.st.rs_head[slot];
                while l != NONE {
                    let lu = l as usize & RING_MASK;
                    if self.st.ring[lu].hash == h
                        && key_eq(ops[self.st.ring[lu].op as usize].key, op.key)
                    {
                        break;
                    }
                    l = self.st.ring[lu].rs_next;
                }
            }
            if l != NONE && self.stall {
                self.stats.stalls += 1;
                self.st.leaders_len = nl;
                return at;
            }
            self.stats.kinds[op.kind as usize].ops += 1;
            let s = &mut self.st.ring[p];
            s.op = at as u32;
            s.run = 1;
            s.follow_next = NONE;
            s.follow_tail = NONE;
            prev_entry = p;
            if l != NONE {
                prev_leader = l;
                let lu = l as usize & RING_MASK;
                let tail = self.st.ring[lu].follow_tail;
                if tail == NONE {
                    self.st.ring[lu].follow_next = p as u32;
                } else {
                    self.st.ring[tail as usize & RING_MASK].follow_next = p as u32;
                }
                self.st.ring[lu].follow_tail = p as u32;
                continue;
            }
            prev_leader = p as u32;
            self.st.leaders[nl] = p as u32;
            nl += 1;
            s.rs_next = self.st.rs_head[slot];
            if s.rs_next == NONE {
                self.st.rs_used.push(slot as u16);
            }
            self.st.rs_head[slot] = p as u32;
        }
        self.st.leaders_len = nl;
        end
    }

    /// The chained bucket and records of the key of the leader at ring position `p`.
    #[inline(always)]
    fn prefetch_second(&self, p: usize, records: bool) {
        self.table
            .prefetch_second(self.st.ring[p & RING_MASK].hash, records);
    }

    /// Stage 3 for the leader at ring position `p`: it executes with its followers.
    #[inline(always)]
    fn retire(&mut self, ops: &[Op], p: usize, out: &mut Results, simd: impl ByteMatch) {
        let p = p & RING_MASK;
        let s = self.st.ring[p];
        if s.follow_next == NONE && s.run == 1 {
            let i = s.op as usize;
            let op = &ops[i];
            // A lone GET in a window with writes: the read-only path's main-bucket probe
            // decides nearly all of them without the general lookup's bookkeeping.
            if op.kind == OpKind::Get
                && finish_get(self.table.probe_main(op.key, s.hash, simd), op, i, out)
            {
                let c = &mut self.stats.kinds[OpKind::Get as usize];
                c.reads += 1;
                c.line_reads += 1;
                return;
            }
            // A lone PUT over an inline value of the same length, the common replace: the
            // value changes in place in its bucket, with nothing to allocate or free.
            if matches!(op.kind, OpKind::Put | OpKind::PutXx) {
                if let Some(read) = self.table.replace_inline(op.key, s.hash, op.arg, simd) {
                    let c = &mut self.stats.kinds[op.kind as usize];
                    c.reads += read;
                    c.line_reads += read;
                    c.writes += 1;
                    c.line_writes += 1;
                    let m = out.mark();
                    out.finish(i, Status::Ok, m);
                    return;
                }
            }
            // A lone built-in add or subtract of a 4- or 8-byte integer on an inline value of
            // that width (a counter): changed in place in the main bucket, as the counter run
            // of a group does it.
            if op.kind == OpKind::UpdateS2S && op.func <= ops::FN_SUB {
                let w = op.arg.len();
                if (w == 4 || w == 8) && op.elem.is_int_of_width(w) {
                    if let Some(v) = self.table.main_inline_value_mut(op.key, s.hash, simd) {
                        if v.len() == w {
                            if w == 8 {
                                lone_int::<u64>(op, i, v, out);
                            } else {
                                lone_int::<u32>(op, i, v, out);
                            }
                            let c = &mut self.stats.kinds[op.kind as usize];
                            c.reads += 1;
                            c.line_reads += 1;
                            c.writes += 1;
                            c.line_writes += 1;
                            return;
                        }
                    }
                }
            }
            self.run_single(ops, i, s.hash, out);
        } else {
            self.run_group(ops, p, out);
        }
    }

    /// One operation against the table: lookup, apply, store.
    fn run_single(&mut self, ops: &[Op], i: usize, h: u64, out: &mut Results) {
        let op = &ops[i];
        self.acc.clear();
        let loc = self.table.lookup(op.key, h, self.acc);
        let start = out.mark();
        if op.kind == OpKind::Get {
            // The common case, without the general apply/store machinery.
            let status = match &loc {
                Some(l) => {
                    if !op.no_return {
                        out.push_data(self.table.value(l));
                    }
                    Status::Ok
                }
                None => Status::NotFound,
            };
            out.finish(i, status, start);
            self.stats.charge(op.kind, self.acc);
            return;
        }
        let cur = loc.as_ref().map(|l| self.table.value(l));
        let (mut status, effect) = apply(self.reg, op, cur, self.scratch, out.buf());
        if let Err(e) = self.store(op, h, loc, effect) {
            status = Status::Error(e);
        }
        if matches!(status, Status::Error(_)) {
            self.stats.errors += 1;
        }
        out.finish(i, status, start);
        self.stats.charge(op.kind, self.acc);
    }

    fn store(
        &mut self,
        op: &Op,
        h: u64,
        loc: Option<Loc>,
        effect: Effect,
    ) -> Result<(), crate::OpError> {
        let value: &[u8] = match effect {
            Effect::Keep => return Ok(()),
            Effect::Delete => {
                self.table
                    .remove(&loc.expect("delete of a present key"), self.acc);
                return Ok(());
            }
            Effect::SetScratch => self.scratch,
            Effect::SetArg => op.arg,
            Effect::SetArg2 => op.arg2,
        };
        // Only appends can grow a value past the limit that validation checked on entry.
        if value.len() > self.limits.value_len_max {
            return Err(crate::OpError::ValueTooLarge {
                len: value.len(),
                max: self.limits.value_len_max,
            });
        }
        self.table.write(op.key, h, loc, value, self.acc)
    }

    /// A leader and its followers: one lookup, data forwarding through `fwd`, one write-back.
    #[inline(always)]
    fn run_group(&mut self, ops: &[Op], j: usize, out: &mut Results) {
        let lead = &ops[self.st.ring[j & RING_MASK].op as usize];
        let h = self.st.ring[(j) & RING_MASK].hash;
        self.acc.clear();
        let loc = self.table.lookup(lead.key, h, self.acc);
        let mut present = loc.is_some();
        self.fwd.clear();
        if let Some(l) = &loc {
            self.fwd.extend_from_slice(self.table.value(l));
        }
        let mut dirty = false;
        let mut c = GroupCursor::at(&self.st.ring, j as u32);
        let first = c.i;
        while !c.done() {
            if present {
                let from_leader = c.i == first;
                let ran = forward_int_run(ops, &self.st.ring, &mut c, self.fwd, out);
                if ran > 0 {
                    dirty = true;
                    // The leader itself is not forwarded to.
                    self.stats.forwarded += ran - u64::from(from_leader);
                    continue;
                }
            }
            let i = c.i;
            let op = &ops[i];
            let start = out.mark();
            let cur = if present { Some(&self.fwd[..]) } else { None };
            let (status, effect) = apply(self.reg, op, cur, self.scratch, out.buf());
            match effect {
                Effect::Keep => {}
                Effect::SetScratch => std::mem::swap(self.fwd, self.scratch),
                Effect::SetArg | Effect::SetArg2 => {
                    self.fwd.clear();
                    self.fwd.extend_from_slice(if effect == Effect::SetArg {
                        op.arg
                    } else {
                        op.arg2
                    });
                }
                Effect::Delete => {}
            }
            if effect != Effect::Keep {
                present = effect != Effect::Delete;
                dirty = true;
            }
            if matches!(status, Status::Error(_)) {
                self.stats.errors += 1;
            }
            out.finish(i, status, start);
            if i != first {
                self.stats.forwarded += 1;
            }
            c.advance(&self.st.ring);
        }
        if dirty {
            self.stats.write_backs += 1;
            let r = match (present, loc) {
                (true, _) if self.fwd.len() > self.limits.value_len_max => {
                    Err(crate::OpError::ValueTooLarge {
                        len: self.fwd.len(),
                        max: self.limits.value_len_max,
                    })
                }
                (true, _) => self.table.write(lead.key, h, loc, self.fwd, self.acc),
                (false, Some(l)) => {
                    self.table.remove(&l, self.acc);
                    Ok(())
                }
                (false, None) => Ok(()),
            };
            if r.is_err() {
                self.replay_group(ops, j, out);
            }
        }
        self.stats.charge(lead.kind, self.acc);
    }

    /// The group's write-back failed (out of memory), so nothing was stored: run its operations
    /// one by one so each gets its own exact result.
    fn replay_group(&mut self, ops: &[Op], j: usize, out: &mut Results) {
        self.stats.group_replays += 1;
        let h = self.st.ring[j & RING_MASK].hash;
        let mut c = GroupCursor::at(&self.st.ring, j as u32);
        while !c.done() {
            self.run_single(ops, c.i, h, out);
            c.advance(&self.st.ring);
        }
    }
}
