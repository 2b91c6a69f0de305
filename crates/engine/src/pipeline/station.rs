//! The in-flight ring and the reservation station, and stage 2, which fills them.
//!
//! ```text
//!  ring[WINDOW_MAX]  one RingEntry per ring position: op index, hash, run length, followers
//!  heads[1024]       per station slot (hash bits 41..51): the window's leaders with that slot,
//!                    chained through RingEntry::station_next
//!  leader ──follow_next──> follower ──follow_next──> follower      (follow_tail: the last)
//! ```
//!
//! Operation `k` of a window occupies ring position `k`. A leader is the first operation of its
//! key in the window; later operations on the key are its followers (forward mode) or cut the
//! window (stall mode). A `GroupCursor` walks a leader's group: each entry's run, then the next
//! follower. The station is cleared (only the station slots used) when the window retires.

use super::{Pipeline, NONE, RING_MASK};
use crate::apply::{validate, validate_value};
use crate::config::WINDOW_MAX;
use crate::hash::{station_slot, STATION_SLOTS};
use crate::index::key_eq;
use crate::op::{Op, OpKind, Results, Status};

/// One in-flight operation's bookkeeping (one ring position).
#[derive(Clone, Copy)]
pub(super) struct RingEntry {
    pub(super) hash: u64,
    /// Index of the operation in the batch.
    pub(super) op: u32,
    /// Next leader in the same station slot.
    pub(super) station_next: u32,
    /// How many operations this entry stands for: `op`, `op + 1`, ... on the same key, one
    /// after the other in the batch (a run, e.g. a hot counter's increments), executed in turn.
    pub(super) run: u32,
    /// First follower of a leader / next follower of a follower.
    pub(super) follow_next: u32,
    pub(super) follow_tail: u32,
    /// Stage 1 found this operation's key equal to the previous operation's (a run on one
    /// key, such as a hot counter); stage 2 then takes the previous one's leader directly.
    pub(super) same_key: bool,
}

const FREE_ENTRY: RingEntry = RingEntry {
    hash: 0,
    op: 0,
    station_next: NONE,
    run: 1,
    follow_next: NONE,
    follow_tail: NONE,
    same_key: false,
};

/// The in-flight ring and the reservation station, sized at start-up. Operation `k` of a batch
/// occupies ring position `k % window` from its issue to its retirement. The ring has the
/// largest window's size so that masked indices need no bounds checks.
pub(crate) struct Station {
    pub(super) window: usize,
    pub(super) ring: Box<[RingEntry; WINDOW_MAX]>,
    /// Per station slot, the last leader that entered it (its list goes on through
    /// `RingEntry::station_next`), or `NONE`.
    pub(super) heads: Box<[u32; STATION_SLOTS]>,
    /// Station slots in use in this window, cleared when it retires.
    pub(super) slots_used: Vec<u16>,
    /// Ring positions of a read-only window whose GET needs more than the main bucket.
    pub(super) deferred: Box<[u32; WINDOW_MAX]>,
    /// Ring positions of the window's leaders in request order (stage 2 fills it): stage 3
    /// visits only these, and prefetches a distance in leaders, not in positions.
    pub(super) leaders: Box<[u32; WINDOW_MAX]>,
    pub(super) leaders_len: usize,
    /// Station slots of the window's writes (a bit per station slot), set after stage 1
    /// (`mark_write_station_slots`): a GET whose station slot is clear here has no write to
    /// its key in the window.
    pub(super) write_slots: [u64; STATION_SLOTS / 64],
    /// Ring positions of the window's GETs that no write in it can affect (stage 2 fills it).
    pub(super) free: Box<[u32; WINDOW_MAX]>,
    pub(super) free_len: usize,
}

impl Station {
    pub(crate) fn new(window: usize) -> Station {
        assert!(
            window.is_power_of_two() && window <= WINDOW_MAX,
            "window {window} is not a power of two <= {WINDOW_MAX}"
        );
        Station {
            window,
            ring: Box::new([FREE_ENTRY; WINDOW_MAX]),
            heads: Box::new([NONE; STATION_SLOTS]),
            slots_used: Vec::with_capacity(WINDOW_MAX),
            deferred: Box::new([0; WINDOW_MAX]),
            leaders: Box::new([0; WINDOW_MAX]),
            leaders_len: 0,
            write_slots: [0; STATION_SLOTS / 64],
            free: Box::new([0; WINDOW_MAX]),
            free_len: 0,
        }
    }

    /// Empties the reservation station once every operation of the window has retired.
    pub(super) fn clear(&mut self) {
        for &slot in &self.slots_used {
            self.heads[slot as usize] = NONE;
        }
        self.slots_used.clear();
        self.free_len = 0;
    }

    #[inline(always)]
    pub(super) fn writes_to_slot(&self, slot: usize) -> bool {
        (self.write_slots[slot / 64] >> (slot % 64)) & 1 == 1
    }
}

/// A position in a group: operation `i` of the entry at ring position `k`, whose run of
/// operations ends before `end`; `k == NONE` past the group's last operation.
#[derive(Clone, Copy)]
pub(super) struct GroupCursor {
    pub(super) k: u32,
    pub(super) i: usize,
    pub(super) end: usize,
}

impl GroupCursor {
    /// The first operation of the entry at ring position `k` (or the end, for `NONE`).
    #[inline(always)]
    pub(super) fn at(ring: &[RingEntry; WINDOW_MAX], k: u32) -> GroupCursor {
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
    pub(super) fn done(&self) -> bool {
        self.k == NONE
    }

    /// The group's next operation: the next one of this run, else the next entry's first.
    #[inline(always)]
    pub(super) fn advance(&mut self, ring: &[RingEntry; WINDOW_MAX]) {
        self.i += 1;
        if self.i == self.end {
            *self = GroupCursor::at(ring, ring[self.k as usize & RING_MASK].follow_next);
        }
    }
}

impl Pipeline<'_> {
    /// Marks the station slots of the window's writes in `station.write_slots`.
    #[inline(always)]
    pub(super) fn mark_write_station_slots(&mut self, ops: &[Op], base: usize, end: usize) {
        for (p, op) in ops[base..end].iter().enumerate() {
            if op.kind.writes() {
                let rs = station_slot(self.station.ring[p & RING_MASK].hash);
                self.station.write_slots[rs / 64] |= 1 << (rs % 64);
            }
        }
    }

    /// Stage 2: validation and the reservation station, in request order. Returns the end of
    /// the window, which in stall mode is the first operation whose key is already in flight.
    #[inline(always)]
    pub(super) fn reserve(
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
                && !op.key.is_empty()
                && !self
                    .station
                    .writes_to_slot(station_slot(self.station.ring[p].hash))
            {
                // No write of the window is to this key: it goes the read-only way (and so
                // does any GET of its key after it, which makes the same test).
                self.station.free[self.station.free_len] = p as u32;
                self.station.free_len += 1;
                prev_leader = NONE;
                continue;
            }
            // Stage 1's `same_key` means the previous operation had a key of valid length
            // equal to this one; if it entered the station, its leader is this key's.
            let same_key = self.station.ring[p].same_key;
            if same_key && prev_leader != NONE && !self.stall {
                // It joins the previous operation's run (the group's last entry, since
                // operations join groups in request order), and so do the operations after it
                // of the same kind on the same key (so of a valid key) whose values are in
                // bounds: counted here, stored once.
                let kind = op.kind;
                while i < end
                    && self.station.ring[(i - base) & RING_MASK].same_key
                    && ops[i].kind == kind
                    && validate_value(&ops[i], &self.limits).is_ok()
                {
                    i += 1;
                }
                let n = (i - at) as u32;
                self.stats.kinds[kind as usize].ops += u64::from(n);
                self.station.ring[prev_entry].run += n;
                continue;
            }
            let h = self.station.ring[p].hash;
            let slot = station_slot(h);
            let mut l = if same_key { prev_leader } else { NONE };
            if l == NONE {
                l = self.station.heads[slot];
                while l != NONE {
                    let lu = l as usize & RING_MASK;
                    if self.station.ring[lu].hash == h
                        && key_eq(ops[self.station.ring[lu].op as usize].key, op.key)
                    {
                        break;
                    }
                    l = self.station.ring[lu].station_next;
                }
            }
            if l != NONE && self.stall {
                self.stats.stalls += 1;
                self.station.leaders_len = nl;
                return at;
            }
            self.stats.kinds[op.kind as usize].ops += 1;
            let s = &mut self.station.ring[p];
            s.op = at as u32;
            s.run = 1;
            s.follow_next = NONE;
            s.follow_tail = NONE;
            prev_entry = p;
            if l != NONE {
                prev_leader = l;
                let lu = l as usize & RING_MASK;
                let tail = self.station.ring[lu].follow_tail;
                if tail == NONE {
                    self.station.ring[lu].follow_next = p as u32;
                } else {
                    self.station.ring[tail as usize & RING_MASK].follow_next = p as u32;
                }
                self.station.ring[lu].follow_tail = p as u32;
                continue;
            }
            prev_leader = p as u32;
            self.station.leaders[nl] = p as u32;
            nl += 1;
            s.station_next = self.station.heads[slot];
            if s.station_next == NONE {
                self.station.slots_used.push(slot as u16);
            }
            self.station.heads[slot] = p as u32;
        }
        self.station.leaders_len = nl;
        end
    }
}
