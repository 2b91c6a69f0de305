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
//! The reservation station has 1024 slots indexed by hash bits 41..51, each a chain of the
//! window's leaders with that slot. Unlike the FPGA, software can afford to compare full keys, so
//! operations on different keys that share a slot are never falsely serialized.
//!
//! While stage 1 runs, up to `window` bucket fetches are in flight: this is how one core keeps
//! many cache misses outstanding, the software form of the seed's 256 in-flight DMAs.

use crate::index::{key_eq, Access, Loc, Table};
use crate::op::{Op, OpKind, Results, Status};
use crate::ops::{self, FunctionRegistry};
use crate::stats::Stats;

pub const RS_SLOTS: usize = 1024;
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

/// State of a ring position.
const ST_FREE: u8 = 0;
const ST_LEADER: u8 = 1;
const ST_FOLLOWER: u8 = 2;

/// The in-flight ring and the reservation station, sized at start-up. Operation `k` of a batch
/// occupies ring position `k % window` from its issue to its retirement.
pub(crate) struct Station {
    window: usize,
    hashes: Vec<u64>,
    state: Vec<u8>,
    /// Next leader in the same reservation-station slot.
    rs_next: Vec<u32>,
    /// First follower of a leader / next follower of a follower.
    follow_next: Vec<u32>,
    follow_tail: Vec<u32>,
    rs_head: Box<[u32; RS_SLOTS]>,
}

impl Station {
    pub(crate) fn new(window: usize) -> Station {
        assert!(window.is_power_of_two(), "window {window} is not a power of two");
        Station {
            window,
            hashes: vec![0; window],
            state: vec![ST_FREE; window],
            rs_next: vec![NONE; window],
            follow_next: vec![NONE; window],
            follow_tail: vec![NONE; window],
            rs_head: Box::new([NONE; RS_SLOTS]),
        }
    }

    /// Unlinks leader `p` from its reservation-station slot.
    fn remove_leader(&mut self, p: usize) {
        let slot = rs_slot(self.hashes[p]);
        let mut cur = self.rs_head[slot];
        let mut prev = NONE;
        while cur != NONE && cur as usize != p {
            prev = cur;
            cur = self.rs_next[cur as usize];
        }
        assert!(
            cur != NONE,
            "leader {p} missing from reservation station slot {slot}"
        );
        let next = self.rs_next[p];
        if prev == NONE {
            self.rs_head[slot] = next;
        } else {
            self.rs_next[prev as usize] = next;
        }
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
            out.extend_from_slice(bytes)
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
        _ => apply_vector(reg, op, cur, scratch, out),
    }
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
    if op.key.is_empty() {
        return Err(OpError::KeyEmpty);
    }
    if op.key.len() > limits.key_len_max {
        return Err(OpError::KeyTooLong {
            len: op.key.len(),
            max: limits.key_len_max,
        });
    }
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

impl Pipeline<'_> {
    /// Runs a batch as a software pipeline: operation `k + window` is hashed and its bucket
    /// prefetched while operation `k` retires, so memory fetches overlap execution.
    pub(crate) fn execute(&mut self, ops: &[Op], out: &mut Results) {
        out.reset(ops.len());
        self.stats.batches += 1;
        let w = self.st.window;
        let lookahead = (w / 4).max(1);
        let records = self.table.counts().keys > self.table.counts().inline_keys;
        let (mut iss, mut ret) = (0usize, 0usize);
        while ret < ops.len() {
            while iss < ops.len() && iss - ret < w {
                if !self.issue(ops, iss, out) {
                    break;
                }
                iss += 1;
            }
            debug_assert!(
                ret < iss,
                "a stall always leaves its conflicting leader in flight"
            );
            // Stage 2: records of an operation a quarter window ahead, whose bucket has arrived.
            let q = ret + lookahead;
            if records && q < iss && self.st.state[q & (w - 1)] == ST_LEADER {
                self.table.prefetch_records(self.st.hashes[q & (w - 1)]);
            }
            self.retire(ops, ret, out);
            ret += 1;
        }
    }

    /// Stage 1 for operation `i`: validate, hash, reservation station, prefetch. Returns false
    /// (issuing nothing) in stall mode when an operation on the same key is in flight.
    fn issue(&mut self, ops: &[Op], i: usize, out: &mut Results) -> bool {
        let w = self.st.window;
        let p = i & (w - 1);
        let op = &ops[i];
        self.st.state[p] = ST_FREE;
        if let Err(e) = validate(op, &self.limits) {
            self.stats.kinds[op.kind as usize].ops += 1;
            self.stats.errors += 1;
            let m = out.mark();
            out.finish(i, Status::Error(e), m);
            return true;
        }
        let h = key_hash(op.key);
        let slot = rs_slot(h);
        let mut l = self.st.rs_head[slot];
        while l != NONE {
            let lu = l as usize;
            if self.st.hashes[lu] == h && key_eq(ops[self.abs(i, lu)].key, op.key) {
                break;
            }
            l = self.st.rs_next[lu];
        }
        if l != NONE && self.stall {
            self.stats.stalls += 1;
            return false;
        }
        self.stats.kinds[op.kind as usize].ops += 1;
        self.st.hashes[p] = h;
        self.st.follow_next[p] = NONE;
        self.st.follow_tail[p] = NONE;
        if l != NONE {
            let lu = l as usize;
            let tail = self.st.follow_tail[lu];
            if tail == NONE {
                self.st.follow_next[lu] = p as u32;
            } else {
                self.st.follow_next[tail as usize] = p as u32;
            }
            self.st.follow_tail[lu] = p as u32;
            self.st.state[p] = ST_FOLLOWER;
            return true;
        }
        self.st.rs_next[p] = self.st.rs_head[slot];
        self.st.rs_head[slot] = p as u32;
        self.st.state[p] = ST_LEADER;
        self.table.prefetch_bucket(h);
        true
    }

    /// Absolute operation index of ring position `p`, which is in flight while `i` issues.
    #[inline(always)]
    fn abs(&self, i: usize, p: usize) -> usize {
        let w = self.st.window;
        let base = i & !(w - 1);
        if p < (i & (w - 1)) {
            base + p
        } else {
            base + p - w
        }
    }

    /// Stage 3 for operation `i`: a leader executes with its followers; followers are done by then.
    fn retire(&mut self, ops: &[Op], i: usize, out: &mut Results) {
        let p = i & (self.st.window - 1);
        if self.st.state[p] != ST_LEADER {
            self.st.state[p] = ST_FREE;
            return;
        }
        self.st.remove_leader(p);
        self.st.state[p] = ST_FREE;
        if self.st.follow_next[p] == NONE {
            self.run_single(ops, i, self.st.hashes[p], out);
        } else {
            self.run_group(ops, i, out);
        }
    }
    /// One operation against the table: lookup, apply, store.
    fn run_single(&mut self, ops: &[Op], i: usize, h: u64, out: &mut Results) {
        let op = &ops[i];
        self.acc.clear();
        let loc = self.table.lookup(op.key, h, self.acc);
        let start = out.mark();
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
        self.table.write(op.key, h, loc, value, self.acc)
    }

    /// A leader and its followers: one lookup, data forwarding through `fwd`, one write-back.
    fn run_group(&mut self, ops: &[Op], lead_i: usize, out: &mut Results) {
        let w = self.st.window;
        let j = lead_i & (w - 1);
        let lead = &ops[lead_i];
        let h = self.st.hashes[j];
        self.acc.clear();
        let loc = self.table.lookup(lead.key, h, self.acc);
        let mut present = loc.is_some();
        self.fwd.clear();
        if let Some(l) = &loc {
            self.fwd.extend_from_slice(self.table.value(l));
        }
        let mut dirty = false;
        let mut k = j as u32;
        while k != NONE {
            let i = follower_index(lead_i, k as usize, w);
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
            if k != j as u32 {
                self.stats.forwarded += 1;
            }
            k = self.st.follow_next[k as usize];
        }
        if dirty {
            self.stats.write_backs += 1;
            let r = match (present, loc) {
                (true, _) => self.table.write(lead.key, h, loc, self.fwd, self.acc),
                (false, Some(l)) => {
                    self.table.remove(&l, self.acc);
                    Ok(())
                }
                (false, None) => Ok(()),
            };
            if r.is_err() {
                self.replay_group(ops, lead_i, out);
            }
        }
        self.stats.charge(lead.kind, self.acc);
    }

    /// The group's write-back failed (out of memory), so nothing was stored: run its operations
    /// one by one so each gets its own exact result.
    fn replay_group(&mut self, ops: &[Op], lead_i: usize, out: &mut Results) {
        self.stats.group_replays += 1;
        let w = self.st.window;
        let h = self.st.hashes[lead_i & (w - 1)];
        let mut k = (lead_i & (w - 1)) as u32;
        while k != NONE {
            self.run_single(ops, follower_index(lead_i, k as usize, w), h, out);
            k = self.st.follow_next[k as usize];
        }
    }
}

/// Absolute index of ring position `p`, which is at or after leader `lead_i` within one window.
#[inline(always)]
fn follower_index(lead_i: usize, p: usize, w: usize) -> usize {
    let lp = lead_i & (w - 1);
    if p >= lp {
        lead_i + (p - lp)
    } else {
        lead_i + (w - lp) + p
    }
}
