//! Snapshots without fork (issue 22 item 2): a point-in-time image of one shard's store,
//! emitted a few main buckets at a time between batches while the engine keeps executing
//! them; and the fast load of such an image into an engine (recovery).
//!
//! ```text
//!   snapshot_begin()   records the point (now, cas_next); allocates `saved`: 1 bit per main
//!                      bucket, only while a snapshot runs (no per-key bytes, none at rest)
//!
//!   main buckets  0 ............ cursor ........................................ bucket_count
//!                 [ emitted      | not yet: read live when the cursor gets there, unless saved ]
//!
//!   a write to the chain of main bucket i (put, delete, update, eviction, expiry, a record
//!   moving), i >= cursor and saved[i] clear:  copy i's entries into `side`, set saved[i]
//!                                             (copy before first write; Table::snap_save):
//!                                             the 64-byte bucket when it is the whole chain
//!                                             (all inline), else its live entries, encoded
//!   snapshot_step(budget, sink):  emits all of `side`, then the live entries of main buckets
//!                                 cursor..cursor+budget whose bit is clear; cursor += budget;
//!                                 done (and everything freed) when the cursor is at the end
//! ```
//!
//! **Why the image is the store at the point.** Every key lives in the chain of one main
//! bucket, fixed by its hash (the index never resizes). A chain the cursor reaches with its bit
//! clear was not changed since the point (a change would have saved it first), so reading it
//! live reads it as it was; a chain with its bit set was copied, as it was, before its first
//! change, and the copy is emitted instead; a chain behind the cursor was emitted already and
//! later changes do not matter. So each main bucket's entries are emitted exactly once, as
//! they were at the point. Entries whose deadline had passed at the point's `now` are left
//! out (they are gone for every operation from then on). The image is a set: saved chains are
//! emitted at the next step, ahead of the cursor, which keeps `side` small; order carries no
//! meaning in a snapshot file.
//!
//! **Memory.** `saved` is `bucket_count / 8` bytes: 1/512 of the index region, under 0.2% of
//! the arena. `side` holds the chains copied since the last step, so it is bounded by the
//! main buckets first changed between two steps times a chain's live bytes: a server that
//! steps after every batch holds at most one batch's worth (a batch of 64 PUTs of 8+8-byte keys
//! copies at most 64 chains, about 6 KB with the usual one or two entries each), and
//! [`SnapProgress::side_bytes`] tells it when to step more often.
//!
//! **Cost with no snapshot.** The write paths test `Table::snap` (an `Option<Box>` next to the
//! fields they read) before their first change: one predictable branch; the whole-window
//! loops' `PLAIN` paths have no test at all (they are not taken while a snapshot runs,
//! `Table::plain_hits`); GETs have none either (a GET changes a chain only when it expires a
//! key, on the cold path of `remove`).
//!
//! Non-goals: files and formats (crates/persist's `image.rs` writes entries to a snapshot file),
//! deciding when to snapshot or how fast to step (the server), more than one snapshot at a time.

use crate::error::OpError;
use crate::expiry::expired;
use crate::index::bucket::Bucket;
use crate::index::record::Meta;
use crate::index::{Access, MainProbe, Table};
use crate::simd::Baseline;
use crate::Limits;

/// Bytes of a copied entry's header in `side`: key length u8, value length u32, deadline
/// u64, item flags u32, CAS u64 (little-endian).
const SIDE_HEADER_BYTES: usize = 1 + 4 + 8 + 4 + 8;
/// Entries loaded per group of [`load_entries`]: their main buckets are prefetched together
/// before any is written, so their cache misses overlap.
const LOAD_GROUP_LEN: usize = 32;

/// One key-value of an image, as the sink of a step sees it and as [`load_entries`] takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapEntry<'a> {
    pub key: &'a [u8],
    pub value: &'a [u8],
    /// Absolute deadline in ms since the epoch, or `NO_DEADLINE` (0): none.
    pub deadline: u64,
    /// memcached's client flags (0 without item meta).
    pub flags: u32,
    /// memcached's CAS unique; 0: the key has no item meta (it was written by a RESP or native
    /// operation), and `flags` is then 0 too.
    pub cas: u64,
}

/// The point a snapshot is taken at ([`crate::Engine::snapshot_begin`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapPoint {
    /// The engine's `now` (ms): entries whose deadline is at or before it are left out.
    pub now: u64,
    /// The CAS unique the next memcache write took at the point (the image's `cas_next`).
    pub cas_next: u64,
}

/// Where a snapshot stands ([`crate::Engine::snapshot_progress`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SnapProgress {
    /// Main buckets emitted (the cursor), of `buckets`.
    pub cursor: u64,
    pub buckets: u64,
    /// Main buckets copied before their first write.
    pub buckets_saved: u64,
    /// Entries emitted so far.
    pub entries: u64,
    /// Bytes of copies waiting for the next step, and the most there were at once.
    pub side_bytes: u64,
    pub side_bytes_peak: u64,
    /// Memory the snapshot holds now: the bitmap and the side buffer's capacity.
    pub extra_bytes: u64,
}

/// [`crate::Engine::snapshot_begin`] while a snapshot is being taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a snapshot is already being taken; finish or abort it first")]
pub struct SnapshotBusy;

/// What [`load_entries`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LoadCounts {
    /// Entries stored (a key already present is replaced).
    pub loaded: u64,
    /// Entries left out because their deadline is at or before the engine's `now`.
    pub expired: u64,
}

/// A snapshot being taken: owned by the table (`Table::snap`) while it runs.
pub struct SnapState {
    point: SnapPoint,
    cursor: u64,
    buckets: u64,
    /// One bit per main bucket: copied into `side` (or emitted from it) already.
    saved: Vec<u64>,
    /// Copies of main buckets holding their whole chain inline (the common case: a 64-byte
    /// copy in the write path, parsed when emitted).
    side_buckets: Vec<Bucket>,
    /// Copies of the other chains, encoded entries (`SIDE_HEADER_BYTES` + key + value each).
    side: Vec<u8>,
    buckets_saved: u64,
    entries: u64,
    side_bytes_peak: u64,
}

impl SnapState {
    pub fn new(point: SnapPoint, buckets: u64) -> SnapState {
        SnapState {
            point,
            cursor: 0,
            buckets,
            saved: vec![0; buckets.div_ceil(64) as usize],
            side_buckets: Vec::new(),
            side: Vec::new(),
            buckets_saved: 0,
            entries: 0,
            side_bytes_peak: 0,
        }
    }

    pub fn progress(&self) -> SnapProgress {
        SnapProgress {
            cursor: self.cursor,
            buckets: self.buckets,
            buckets_saved: self.buckets_saved,
            entries: self.entries,
            side_bytes: self.side_bytes(),
            side_bytes_peak: self.side_bytes_peak,
            extra_bytes: (self.saved.capacity() * 8
                + self.side_buckets.capacity() * size_of::<Bucket>()
                + self.side.capacity()) as u64,
        }
    }

    fn side_bytes(&self) -> u64 {
        (self.side.len() + self.side_buckets.len() * size_of::<Bucket>()) as u64
    }

    fn is_saved(&self, i: u64) -> bool {
        self.saved[(i / 64) as usize] & (1 << (i % 64)) != 0
    }

    /// The chain of main bucket `i` is about to change (`Table::snap_save`): copies its live
    /// entries unless the cursor passed it or it was copied already.
    pub fn before_write(&mut self, table: &Table, i: u64) {
        if i < self.cursor || self.is_saved(i) {
            return;
        }
        self.saved[(i / 64) as usize] |= 1 << (i % 64);
        self.buckets_saved += 1;
        if let Some(b) = table.main_bucket_inline_copy(i) {
            if !b.is_empty() {
                self.side_buckets.push(b);
                self.side_bytes_peak = self.side_bytes_peak.max(self.side_bytes());
            }
            return;
        }
        let now = self.point.now;
        let side = &mut self.side;
        table.scan_items(i, 1, |k, v, d, m| {
            if !expired(d, now) {
                side.push(k.len() as u8);
                side.extend_from_slice(&(v.len() as u32).to_le_bytes());
                side.extend_from_slice(&d.to_le_bytes());
                side.extend_from_slice(&m.flags.to_le_bytes());
                side.extend_from_slice(&m.cas.to_le_bytes());
                side.extend_from_slice(k);
                side.extend_from_slice(v);
            }
        });
        self.side_bytes_peak = self.side_bytes_peak.max(self.side_bytes());
    }

    /// Emits the copies, then the live entries of up to `budget` main buckets from the
    /// cursor. Returns whether the whole index is covered.
    pub fn step(
        &mut self,
        table: &Table,
        budget: u64,
        sink: &mut impl FnMut(SnapEntry<'_>),
    ) -> bool {
        let now = self.point.now;
        let mut emitted = 0u64;
        for b in &self.side_buckets {
            for e in b.inline_entries() {
                if !expired(e.deadline, now) {
                    emitted += 1;
                    sink(SnapEntry {
                        key: b.inline_key(&e),
                        value: b.inline_value(&e),
                        deadline: e.deadline,
                        flags: 0,
                        cas: 0,
                    });
                }
            }
        }
        self.side_buckets.clear();
        let mut at = 0usize;
        while at < self.side.len() {
            let s = &self.side[at..];
            let klen = usize::from(s[0]);
            let vlen = u32::from_le_bytes(s[1..5].try_into().expect("4 bytes")) as usize;
            let word = |o: usize| u64::from_le_bytes(s[o..o + 8].try_into().expect("8 bytes"));
            let kv = &s[SIDE_HEADER_BYTES..SIDE_HEADER_BYTES + klen + vlen];
            sink(SnapEntry {
                key: &kv[..klen],
                value: &kv[klen..],
                deadline: word(5),
                flags: u32::from_le_bytes(s[13..17].try_into().expect("4 bytes")),
                cas: word(17),
            });
            self.entries += 1;
            at += SIDE_HEADER_BYTES + klen + vlen;
        }
        self.side.clear();
        let end = self.cursor.saturating_add(budget).min(self.buckets);
        for i in self.cursor..end {
            if self.is_saved(i) {
                continue;
            }
            table.scan_items(i, 1, |k, v, d, m| {
                if !expired(d, now) {
                    emitted += 1;
                    sink(SnapEntry {
                        key: k,
                        value: v,
                        deadline: d,
                        flags: m.flags,
                        cas: m.cas,
                    });
                }
            });
        }
        self.entries += emitted;
        self.cursor = end;
        self.cursor == self.buckets
    }
}

/// Stores `entries` into `table` without the pipeline (recovery: an image's entries are
/// plain key-values, each stored once): checks each against the limits, leaves out the
/// expired ones (deadline at or before `now`), replaces a key already present. Groups of
/// `LOAD_GROUP_LEN` have their main buckets prefetched before the first is written.
/// On an error (a limit, out of memory), the entries before the failing one (its index is
/// returned) are stored and the rest are not.
pub fn load_entries(
    table: &mut Table,
    acc: &mut Access,
    limits: &Limits,
    now: u64,
    entries: &[SnapEntry<'_>],
) -> Result<LoadCounts, (usize, OpError)> {
    let mut counts = LoadCounts::default();
    let mut hashes = [0u64; LOAD_GROUP_LEN];
    for (g, group) in entries.chunks(LOAD_GROUP_LEN).enumerate() {
        for (h, e) in hashes.iter_mut().zip(group) {
            *h = crate::hash::key_hash(e.key);
            table.prefetch_bucket(*h);
        }
        for (j, (e, &h)) in group.iter().zip(&hashes).enumerate() {
            let fail = |err| (g * LOAD_GROUP_LEN + j, err);
            if e.key.is_empty() {
                return Err(fail(OpError::KeyEmpty));
            }
            if e.key.len() > limits.key_len_max {
                return Err(fail(OpError::KeyTooLong {
                    len: e.key.len(),
                    max: limits.key_len_max,
                }));
            }
            if e.value.len() > limits.value_len_max {
                return Err(fail(OpError::ValueTooLarge {
                    len: e.value.len(),
                    max: limits.value_len_max,
                }));
            }
            if expired(e.deadline, now) {
                counts.expired += 1;
                continue;
            }
            let meta = if e.cas != 0 {
                Meta {
                    flags: e.flags,
                    cas: e.cas,
                }
            } else {
                Meta::NONE
            };
            acc.clear();
            // The main bucket alone rules out most keys of a partly loaded engine (no inline
            // entry, no pointer of its secondary hash, no chain): the general lookup is for
            // the rest.
            let old = match table.probe_main(e.key, h, Baseline) {
                MainProbe::Missing => None,
                _ => table.lookup(e.key, h, acc),
            };
            table
                .write(e.key, h, old, e.value, e.deadline, meta, acc)
                .map_err(fail)?;
            counts.loaded += 1;
        }
    }
    Ok(counts)
}
