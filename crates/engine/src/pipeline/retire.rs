//! Stage 3: retiring the window's leaders in request order, each with its followers.
//!
//! ```text
//!  lone leader   GET            main-bucket probe, else the general lookup
//!                PUT / PUT XX   same-length inline value rewritten in place in its bucket
//!                add/sub 4|8 B  inline counter changed in place in its main bucket
//!                else           run_single: lookup, apply, store (a GET, or a memcached
//!                               get that only reads: lookup and reply, no apply)
//!  group         run_group: one lookup, each op applied to the forwarded value (a run of
//!                built-in integer adds/subtracts in a register), one write-back; replayed op
//!                by op if the write-back runs out of memory
//! ```
//!
//! Main buckets are prefetched `PREFETCH_AHEAD` leaders ahead and chained buckets and records
//! half that, so that their lines arrive while earlier leaders execute.

use super::station::{GroupCursor, RingEntry, Station};
use super::{finish_get, Pipeline, NONE, PREFETCH_AHEAD, RING_MASK};
use crate::apply::{apply, Effect};
use crate::config::WINDOW_MAX;
use crate::expiry::expired;
use crate::index::record::Meta;
use crate::index::Loc;
use crate::memcache::Item;
use crate::op::{Op, OpKind, Results, Status};
use crate::ops;
use crate::ops::kernel::Elem;
use crate::simd::ByteMatch;

impl Pipeline<'_> {
    /// Stage 3 over the window's `nl` leaders, the `li`-th at ring position `leader(st, li)`:
    /// each executes with its followers while main buckets are prefetched `PREFETCH_AHEAD`
    /// leaders ahead and chained buckets and records half that.
    #[inline(always)]
    pub(super) fn retire_window(
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
            let lp = leader(self.station, li);
            if lp >= PREFETCH_AHEAD {
                self.table.prefetch_bucket(self.station.ring[lp].hash);
            }
        }
        if second {
            for li in 0..HALF.min(nl) {
                self.prefetch_second(leader(self.station, li), records);
            }
        }
        for li in 0..nl {
            if li + PREFETCH_AHEAD < nl {
                let ahead = leader(self.station, li + PREFETCH_AHEAD);
                self.table.prefetch_bucket(self.station.ring[ahead].hash);
            }
            if second && li + HALF < nl {
                self.prefetch_second(leader(self.station, li + HALF), records);
            }
            self.retire(ops, leader(self.station, li), out, simd);
        }
    }

    /// The chained bucket and records of the key of the leader at ring position `p`.
    #[inline(always)]
    fn prefetch_second(&self, p: usize, records: bool) {
        self.table
            .prefetch_second(self.station.ring[p & RING_MASK].hash, records);
    }

    /// Stage 3 for the leader at ring position `p`: it executes with its followers.
    #[inline(always)]
    fn retire(&mut self, ops: &[Op], p: usize, out: &mut Results, simd: impl ByteMatch) {
        let p = p & RING_MASK;
        let s = self.station.ring[p];
        if s.follow_next == NONE && s.run == 1 {
            let i = s.op as usize;
            let op = &ops[i];
            // The shortcuts below search inline entries, which the empty key never is.
            if op.key.is_empty() {
                return self.run_single(ops, i, s.hash, out);
            }
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

    /// `Table::lookup` with key expiry: a key whose deadline is at or before `now` is removed
    /// and reported missing, so that no operation ever sees it. Every lookup of the pipeline
    /// goes through here (the main-bucket fast paths leave keys with a deadline to it).
    #[inline(always)]
    fn lookup_live(&mut self, key: &[u8], h: u64) -> Option<Loc> {
        let loc = self.table.lookup_inlined(key, h, self.access)?;
        if expired(loc.deadline(), self.now) {
            self.reclaim(&loc, key);
            return None;
        }
        // Eviction's CLOCK (`crate::evict`): the key was used.
        self.table.note_use(h);
        Some(loc)
    }

    #[cold]
    #[inline(never)]
    fn reclaim(&mut self, loc: &Loc, key: &[u8]) {
        self.table.remove(loc, self.access);
        self.stats.note_expired(self.now - loc.deadline());
        // Keys are at most 255 bytes (`EngineConfig::key_len_max`).
        self.reclaimed.push(key.len() as u8);
        self.reclaimed.extend_from_slice(key);
    }

    /// The CAS unique operation `i` of the batch takes if it is a memcache write: the
    /// batch's first plus `i`, whatever order the pipeline runs the operations in (groups run
    /// ahead of the leaders after them), so it is the CAS the operation takes when the batch's
    /// operations run one by one (`Engine::cas_next`).
    #[inline(always)]
    fn cas_of(&self, i: usize) -> u64 {
        crate::memcache::cas_at(self.cas_base, i)
    }

    /// One operation against the table: lookup, apply, store.
    pub(super) fn run_single(&mut self, ops: &[Op], i: usize, h: u64, out: &mut Results) {
        let op = &ops[i];
        self.access.clear();
        let loc = self.lookup_live(op.key, h);
        let start = out.mark();
        if op.kind == OpKind::Get {
            // The common case, without the general apply/store machinery.
            // Checked against the results budget before the value is copied: a large value
            // past it is refused without growing the buffer (9000 GETs of a 1 MiB value once
            // grew it past the budget and shrank it back, 64 MiB copied, for every one).
            match &loc {
                Some(l) => out.finish_found(i, self.table.value(l), op.no_return),
                None => out.finish(i, Status::NotFound, start),
            }
            self.stats.charge(op.kind, self.access);
            return;
        }
        // A memcached get (no touch, no CAS to give) reads as a GET does, with the item's
        // flags, CAS and deadline after the value (issue 21: the bulk of the memcached port's
        // operations, which `apply` would otherwise decode, check and store as `Keep`).
        if op.kind == OpKind::McGet
            && crate::memcache::mc_get_reads(op, loc.as_ref().map(|l| l.meta()))
        {
            return self.finish_mc_read(op, i, loc, start, out);
        }
        let cur = loc.as_ref().map(|l| self.table.value(l));
        let mut item = loc.as_ref().map_or(Item::NONE, item_of);
        let (mut status, mut effect) = apply(
            self.registry,
            op,
            cur,
            &mut item,
            self.now,
            self.cas_of(i),
            self.scratch,
            out.buf(),
        );
        // A write whose reply is past the results budget is refused (by `finish`) and not
        // applied: the client is told it failed, so it must not have happened.
        if out.past_budget() {
            effect = Effect::Keep;
        }
        if let Err(e) = self.store(op, h, loc, effect, item) {
            status = Status::Error(e);
        }
        if matches!(status, Status::Error(_)) {
            self.stats.errors += 1;
        }
        out.finish(i, status, start);
        self.stats.charge(op.kind, self.access);
    }

    /// A memcached get that only reads whatever the entry (`memcache::mc_get_reads_always`: memcached's `get`),
    /// from a window without the station (`memcache_window`): `run_single`'s read road
    /// without its call and its tests of the other kinds.
    #[inline(always)]
    pub(super) fn mc_read(&mut self, op: &Op, i: usize, h: u64, out: &mut Results) {
        self.access.clear();
        let loc = self.lookup_live(op.key, h);
        let start = out.mark();
        self.finish_mc_read(op, i, loc, start, out);
    }

    /// Answers `McGet` `op` (operation `i`), which only reads (`mc_get_reads`), from the entry
    /// at `loc`, the way a GET is answered: the value and the item's flags, CAS and deadline.
    #[inline(always)]
    fn finish_mc_read(
        &mut self,
        op: &Op,
        i: usize,
        loc: Option<Loc>,
        start: usize,
        out: &mut Results,
    ) {
        let status = match &loc {
            Some(l) => {
                if !op.no_return {
                    let v = self.table.value(l);
                    crate::memcache::push_read(out.buf(), v, l.deadline(), l.meta());
                }
                Status::Ok
            }
            None => Status::NotFound,
        };
        out.finish(i, status, start);
        self.stats.charge(op.kind, self.access);
    }

    fn store(
        &mut self,
        op: &Op,
        h: u64,
        loc: Option<Loc>,
        effect: Effect,
        item: Item,
    ) -> Result<(), crate::OpError> {
        let value: &[u8] = match effect {
            Effect::Keep => return Ok(()),
            Effect::Delete => {
                self.table
                    .remove(&loc.expect("delete of a present key"), self.access);
                return Ok(());
            }
            Effect::Touch => {
                // The value is rewritten with its new deadline (it may move: a key with a
                // deadline is a record, one without may go inline).
                let l = loc.expect("deadline of a present key");
                self.scratch.clear();
                self.scratch.extend_from_slice(self.table.value(&l));
                self.scratch
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
        self.table
            .write(op.key, h, loc, value, item.deadline, item.meta, self.access)
    }

    /// A leader and its followers: one lookup, data forwarding through `fwd`, one write-back.
    #[inline(always)]
    fn run_group(&mut self, ops: &[Op], j: usize, out: &mut Results) {
        let lead = &ops[self.station.ring[j & RING_MASK].op as usize];
        let h = self.station.ring[(j) & RING_MASK].hash;
        self.access.clear();
        let loc = self.lookup_live(lead.key, h);
        let mut present = loc.is_some();
        // The deadline and item meta travel with the forwarded value.
        let mut item = loc.as_ref().map_or(Item::NONE, item_of);
        self.forwarded.clear();
        if let Some(l) = &loc {
            self.forwarded.extend_from_slice(self.table.value(l));
        }
        let mut dirty = false;
        let mut c = GroupCursor::at(&self.station.ring, j as u32);
        let first = c.i;
        while !c.done() {
            if present {
                let from_leader = c.i == first;
                let ran = forward_int_run(ops, &self.station.ring, &mut c, self.forwarded, out);
                if ran > 0 {
                    dirty = true;
                    // The value changed: its meta goes (as `apply` drops it).
                    item.meta = Meta::NONE;
                    // The leader itself is not forwarded to.
                    self.stats.forwarded += ran - u64::from(from_leader);
                    continue;
                }
            }
            let i = c.i;
            let op = &ops[i];
            let start = out.mark();
            let cur = if present {
                Some(&self.forwarded[..])
            } else {
                None
            };
            let before = item;
            let (mut status, mut effect) = apply(
                self.registry,
                op,
                cur,
                &mut item,
                self.now,
                self.cas_of(i),
                self.scratch,
                out.buf(),
            );
            // Only appends grow a value past the limit validation checked on entry: such an op
            // fails on its own, as it would alone (`store`), and the group goes on from the
            // value before it, so no later op of the group sees the over-long value.
            if effect == Effect::SetScratch && self.scratch.len() > self.limits.value_len_max {
                status = Status::Error(crate::OpError::ValueTooLarge {
                    len: self.scratch.len(),
                    max: self.limits.value_len_max,
                });
                effect = Effect::Keep;
            }
            // Refused past the results budget (by `finish`): not applied either.
            if out.past_budget() {
                effect = Effect::Keep;
            }
            if effect == Effect::Keep {
                item = before;
            }
            match effect {
                Effect::Keep | Effect::Touch => {}
                Effect::SetScratch => std::mem::swap(self.forwarded, self.scratch),
                Effect::SetArg | Effect::SetArg2 => {
                    self.forwarded.clear();
                    self.forwarded
                        .extend_from_slice(if effect == Effect::SetArg {
                            op.arg
                        } else {
                            op.arg2
                        });
                }
                Effect::Delete => {}
            }
            if effect != Effect::Keep {
                present = effect != Effect::Delete;
                if !present {
                    item = Item::NONE;
                }
                dirty = true;
            }
            if matches!(status, Status::Error(_)) {
                self.stats.errors += 1;
            }
            out.finish(i, status, start);
            if i != first {
                self.stats.forwarded += 1;
            }
            c.advance(&self.station.ring);
        }
        if dirty {
            self.stats.write_backs += 1;
            let r = match (present, loc) {
                (true, _) if self.forwarded.len() > self.limits.value_len_max => {
                    Err(crate::OpError::ValueTooLarge {
                        len: self.forwarded.len(),
                        max: self.limits.value_len_max,
                    })
                }
                (true, _) => self.table.write(
                    lead.key,
                    h,
                    loc,
                    self.forwarded,
                    item.deadline,
                    item.meta,
                    self.access,
                ),
                (false, Some(l)) => {
                    self.table.remove(&l, self.access);
                    Ok(())
                }
                (false, None) => Ok(()),
            };
            if r.is_err() {
                self.replay_group(ops, j, out);
            }
        }
        self.stats.charge(lead.kind, self.access);
    }

    /// The group's write-back failed (out of memory), so nothing was stored: run its operations
    /// one by one so each gets its own exact result.
    fn replay_group(&mut self, ops: &[Op], j: usize, out: &mut Results) {
        self.stats.group_replays += 1;
        let h = self.station.ring[j & RING_MASK].hash;
        let mut c = GroupCursor::at(&self.station.ring, j as u32);
        while !c.done() {
            self.run_single(ops, c.i, h, out);
            c.advance(&self.station.ring);
        }
    }
}

/// The deadline and item meta of the key at `l`.
#[inline(always)]
fn item_of(l: &Loc) -> Item {
    Item {
        deadline: l.deadline(),
        meta: l.meta(),
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
    ring: &[RingEntry; WINDOW_MAX],
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
    ring: &[RingEntry; WINDOW_MAX],
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
            // An update whose reply is refused (past the results budget) is not applied.
            if !out.refused(c.i) {
                cur = add_or_sub(cur, op);
            }
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
    // An update whose reply is refused (past the results budget) is not applied.
    if !out.refused(i) {
        add_or_sub(cur, op).store(v);
    }
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
