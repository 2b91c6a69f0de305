//! The hash table of one shard: 64-byte buckets in the index region, chained buckets and
//! key-value records in the slab region.
//!
//! ```text
//!  hash = xxh3_64(key)
//!   bits  0..32  bucket index (multiply-shift onto bucket_count)
//!   bits 32..41  secondary hash stored in pointer slots
//!   bits 41..51  reservation-station slot (pipeline; `hash.rs` holds the partition)
//!   bits 52..64  shard (server), so every part of the hash is independent of the others
//!
//!  main bucket ──chain──> bucket from slab (64 B) ──chain──> ...
//!   slot: inline key-value (1..10 slots)  |  pointer: 9-bit secondary hash + 31-bit address
//!                                                      └──> record in slab: header, key, value
//! ```
//!
//! Goals: about one cache line per GET and two per PUT for inline key-values, keys always
//! compared in full, out of memory leaves the table unchanged.
//! Non-goals: concurrency (a table belongs to one shard thread), resizing.
//!
//! Every line of the arena that an operation reads or writes is counted in an `Access`; the
//! counts are what the seed calls memory accesses (its DMA operations), and lines are counted
//! separately for multi-line records.

pub mod bucket;
pub mod record;

use crate::arena::Arena;
use crate::error::OpError;
use crate::hash::{bucket_bits, secondary_hash};
use crate::simd::ByteMatch;
use crate::slab::{class_size_bytes, SlabAllocator, CLASS_COUNT_MAX, SLAB_UNIT_BYTES};
use bucket::{code, Bucket, INLINE_BYTES_MAX};
use record::Meta;

/// Slab class of a chained bucket (64 bytes).
const CHAIN_CLASS: u8 = 1;
const _: () = assert!(32 << CHAIN_CLASS == std::mem::size_of::<Bucket>());
/// Marks "no previous bucket" (the key is in its main bucket).
const NO_BUCKET: usize = usize::MAX;
/// Bound on chain walks: a chain longer than every bucket of the arena is corruption.
const LINE_BYTES: usize = 64;
/// Lines of a large record prefetched ahead of its lookup.
const RECORD_PREFETCH_LINES_MAX: usize = 4;

/// Where a key lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Loc {
    /// Byte offset of the bucket holding the slot.
    pub bucket: usize,
    /// Byte offset of the bucket before it in the chain, or `NO_BUCKET` for a main bucket.
    pub prev: usize,
    /// Inline: the entry's first byte in the bucket. Record: its pointer slot.
    pub pos: usize,
    pub kind: LocKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LocKind {
    Inline {
        klen: usize,
        vlen: usize,
        /// Absolute deadline in ms, or `record::NO_DEADLINE`.
        deadline: u64,
    },
    Record {
        rec: usize,
        slot_code: u8,
        class: u8,
        header: usize,
        klen: usize,
        vlen: usize,
        /// Absolute deadline in ms, or `record::NO_DEADLINE`.
        deadline: u64,
        /// Item meta (memcached's flags and CAS), or `Meta::NONE`.
        meta: Meta,
    },
}

impl Loc {
    /// The key's item meta, or `Meta::NONE` (inline entries never have any).
    #[inline(always)]
    pub fn meta(&self) -> Meta {
        match self.kind {
            LocKind::Record { meta, .. } => meta,
            LocKind::Inline { .. } => Meta::NONE,
        }
    }

    /// The key's deadline (ms since the epoch), or `record::NO_DEADLINE`.
    #[inline(always)]
    pub fn deadline(&self) -> u64 {
        match self.kind {
            LocKind::Record { deadline, .. } | LocKind::Inline { deadline, .. } => deadline,
        }
    }
}

/// What the main bucket alone says about a key (`Table::probe_main`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MainProbe<'a> {
    /// The key is stored inline in the main bucket; this is its value.
    Found(&'a [u8]),
    /// The key is in no slot of the main bucket, and no bucket is chained behind it.
    Missing,
    /// A record whose secondary hash matches, or the chained bucket, must decide.
    Elsewhere,
}

/// Byte offset of the main bucket of hash `h` among `bucket_count` buckets: the low 32 bits of
/// the hash scaled to the bucket count (no modulo).
#[inline(always)]
fn main_offset(h: u64, bucket_count: u64) -> usize {
    ((bucket_bits(h) * bucket_count) >> 32) as usize * LINE_BYTES
}

/// Whether a key of `klen` bytes may be stored inline, given the table's `inline_key_span`
/// (`Table::inline_key_span`): 1..=span bytes. The empty key never is: an inline entry is
/// found by its key's last byte's mark (`bucket.rs`), which an empty key does not have, so it
/// is always a record (a 2-byte header, no key bytes), the way an empty value is. Only the
/// general lookup asks: the main-bucket fast paths below (`probe_as`, `get_in_chain`,
/// `replace_inline_as`, `main_inline_value_mut`) are never given the empty key (the pipeline
/// sends it the general way, `pipeline/mod.rs`), so they keep their one plain length test.
#[inline(always)]
fn may_be_inline(klen: usize, inline_key_span: usize) -> bool {
    klen.wrapping_sub(1) < inline_key_span
}

/// The main buckets of a [`Table`], read-only: what stage 1's prefetch and the GET fast path
/// need, as a small copyable value ([`Table::main_index`]).
#[derive(Clone, Copy)]
pub struct MainIndex<'a> {
    base: *mut u8,
    bucket_count: u64,
    inline_threshold: usize,
    /// Whether a hit sets its bucket's reference bit (`Table::set_track_references`).
    track_refs: bool,
    _table: std::marker::PhantomData<&'a Table>,
}

impl<'a> MainIndex<'a> {
    #[inline(always)]
    fn bucket(self, h: u64) -> &'a Bucket {
        self.bucket_at(main_offset(h, self.bucket_count))
    }

    #[inline(always)]
    fn bucket_at(self, off: usize) -> &'a Bucket {
        // SAFETY: off + 64 <= bucket_count * 64 <= index_bytes <= arena.len() (asserted in
        // `Table::new`) for every main offset; off is a multiple of 64 from a 2 MiB aligned
        // base, so aligned for Bucket (plain bytes, align 64); the table is borrowed for 'a.
        unsafe { &*(self.base.add(off) as *const Bucket) }
    }

    /// Sets the reference bit of the main bucket at `off` (the GET path calls it only when
    /// the bit is clear: once per bucket per turn of eviction's hand).
    #[inline(always)]
    fn mark_referenced(self, off: usize) {
        let (at, mask) = Bucket::REFERENCED_AT;
        // SAFETY: off + 64 <= bucket_count * 64 <= arena.len() (asserted in `Table::new`), so
        // the byte is inside the mapping. The arena is memory behind a raw pointer that only
        // this shard's thread touches; no reference to a bucket's metadata bytes outlives the
        // call that made it (values handed out are slices of bytes 0..50, which this write
        // does not touch), so the write aliases no live reference to the byte.
        unsafe { *self.base.add(off + at) |= mask };
    }

    /// [`MainIndex::mark_referenced`] of `h`'s main bucket (inline: a call in the GET loop, even
    /// a cold one, costs the loop registers).
    #[inline(always)]
    fn mark_referenced_of(self, h: u64) {
        self.mark_referenced(main_offset(h, self.bucket_count));
    }

    /// Prefetches the main bucket of `h` (pipeline stage 1).
    #[inline(always)]
    pub fn prefetch(self, h: u64) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: prefetch never faults; the address is inside the mapping anyway.
        unsafe {
            core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(
                (self.bucket(h) as *const Bucket).cast::<i8>(),
            );
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = h;
    }

    /// [`Table::probe_main`]. A hit sets the bucket's reference bit for eviction's CLOCK
    /// (`crate::evict`), writing the line only when the bit is clear.
    #[inline(always)]
    pub fn probe(self, key: &[u8], h: u64, simd: impl ByteMatch) -> MainProbe<'a> {
        self.probe_as::<false>(key, h, simd)
    }

    /// [`MainIndex::probe`], or with `PLAIN` for a caller that found [`Table::plain_hits`]
    /// true for the whole loop it runs: an inline hit is then the answer without the two
    /// tests (deadline, reference bit), which cost the GET loop about 4% of its instructions
    /// (callgrind, BENCHMARKS.md "Cost on the GET path").
    #[inline(always)]
    pub fn probe_as<const PLAIN: bool>(
        self,
        key: &[u8],
        h: u64,
        simd: impl ByteMatch,
    ) -> MainProbe<'a> {
        let b = self.bucket(h);
        debug_assert!(!key.is_empty(), "the empty key takes the general road");
        if key.len() < self.inline_threshold {
            if let Some((pos, vlen)) = b.find_inline_with(key, simd) {
                debug_assert!(!(PLAIN && b.has_deadline(pos, key.len() + vlen)));
                // A key with a deadline goes the general way, which expires it.
                if !PLAIN && b.has_deadline(pos, key.len() + vlen) {
                    return MainProbe::Elsewhere;
                }
                let o = pos + key.len();
                let v = &b.bytes[o..o + vlen];
                // Only under an LRU policy. `b` is not used past the write, which touches the
                // metadata bytes and not `v`'s (see `mark_referenced`).
                if !PLAIN && self.track_refs && !b.referenced() {
                    self.mark_referenced_of(h);
                }
                return MainProbe::Found(v);
            }
        }
        let sec = secondary_hash(h);
        let mut ptrs = bucket::pointer_lanes(b.codes());
        while ptrs != 0 {
            let s = ptrs.trailing_zeros() as usize / 3;
            ptrs &= ptrs - 1;
            if b.pointer(s).0 == sec {
                return MainProbe::Elsewhere;
            }
        }
        match b.chain() {
            Some(_) => MainProbe::Elsewhere,
            None => MainProbe::Missing,
        }
    }
}

/// Memory accesses of one operation: distinct 64-byte lines, and accesses in the seed's sense
/// (one per contiguous region, a DMA). A region touched twice by one operation counts once.
#[derive(Debug, Default, Clone)]
pub struct Access {
    seen_reads: [usize; 4],
    seen_writes: [usize; 4],
    n_reads: u8,
    n_writes: u8,
    pub line_reads: u64,
    pub line_writes: u64,
    pub reads: u64,
    pub writes: u64,
}

impl Access {
    #[inline(always)]
    fn note(seen: &mut [usize; 4], n: &mut u8, off: usize) -> bool {
        let k = *n as usize;
        for &s in &seen[..k] {
            if s == off {
                return false;
            }
        }
        if k < seen.len() {
            seen[k] = off;
            *n += 1;
        }
        true
    }

    /// A bucket read by a lookup, which always comes first in an operation and never reads a
    /// bucket twice, so no de-duplication is needed.
    #[inline(always)]
    pub fn read_bucket(&mut self, off: usize) {
        let k = self.n_reads as usize;
        if k < self.seen_reads.len() {
            self.seen_reads[k] = off;
            self.n_reads += 1;
        }
        self.reads += 1;
        self.line_reads += 1;
    }

    #[inline(always)]
    pub fn read(&mut self, off: usize, len: usize) {
        if Self::note(&mut self.seen_reads, &mut self.n_reads, off) {
            self.reads += 1;
            self.line_reads += lines_spanned(off, len);
        }
    }

    #[inline(always)]
    pub fn write(&mut self, off: usize, len: usize) {
        if Self::note(&mut self.seen_writes, &mut self.n_writes, off) {
            self.writes += 1;
            self.line_writes += lines_spanned(off, len);
        }
    }

    /// Starts a new operation.
    #[inline(always)]
    pub fn clear(&mut self) {
        self.n_reads = 0;
        self.n_writes = 0;
        self.line_reads = 0;
        self.line_writes = 0;
        self.reads = 0;
        self.writes = 0;
    }
}

#[inline(always)]
fn lines_spanned(off: usize, len: usize) -> u64 {
    let len = len.max(1);
    ((off + len - 1) / LINE_BYTES - off / LINE_BYTES + 1) as u64
}

/// Live totals of the table.
#[derive(Debug, Default, Clone, Copy)]
pub struct TableCounts {
    pub keys: u64,
    pub kv_bytes: u64,
    pub inline_keys: u64,
    pub chained_buckets: u64,
    /// Keys with a deadline (Redis's `expires=` in INFO's keyspace line).
    pub expiring_keys: u64,
}

pub struct Table {
    arena: Arena,
    slab: SlabAllocator,
    bucket_count: u64,
    inline_threshold: usize,
    /// `inline_threshold - 1` (0 when inlining is off): the key lengths that may be inline are
    /// 1..=span, tested as one comparison by [`may_be_inline`].
    inline_key_span: usize,
    top_class: u8,
    counts: TableCounts,
    /// Inline keys without a deadline: when they are all the keys, the main-bucket fast paths
    /// decide everything (`has_records`).
    plain_inline_keys: u64,
    /// Whether lookups set reference bits: only an LRU eviction policy reads them, and the
    /// test and write cost the GET path about 7% of its instructions (callgrind), so without
    /// one (`noeviction`, the default) they are left alone.
    track_refs: bool,
    /// The snapshot being taken, if any (`crate::snapshot`): while it is, every change of a
    /// main bucket's chain first calls [`Table::snap_save`]. `None` (the test every write
    /// path makes, on a field next to the ones it reads) when no snapshot runs.
    snap: Option<Box<crate::snapshot::SnapState>>,
}

impl Table {
    /// A table over `arena` whose first `index_bytes` are the hash index.
    pub fn new(
        arena: Arena,
        slab: SlabAllocator,
        index_bytes: usize,
        inline_threshold: usize,
        top_class: u8,
    ) -> Table {
        assert!(index_bytes >= LINE_BYTES && index_bytes <= arena.len());
        Table {
            bucket_count: (index_bytes / LINE_BYTES) as u64,
            arena,
            slab,
            inline_threshold: inline_threshold.min(INLINE_BYTES_MAX + 1),
            inline_key_span: inline_threshold.min(INLINE_BYTES_MAX + 1).saturating_sub(1),
            top_class,
            counts: TableCounts::default(),
            plain_inline_keys: 0,
            track_refs: false,
            snap: None,
        }
    }

    pub fn counts(&self) -> TableCounts {
        self.counts
    }

    /// Removes every key at once (`Engine::clear`): the arena is discarded (its pages read as
    /// zero, so every bucket is empty, `Arena::discard`), the slab allocator starts again with
    /// the whole region free, the counts go to zero. A snapshot being taken is dropped, as
    /// `snap_take` would. Reference tracking stays as the policy set it.
    pub fn clear(&mut self) {
        self.snap = None;
        self.arena.discard();
        self.slab.reset();
        self.counts = TableCounts::default();
        self.plain_inline_keys = 0;
    }

    /// Whether an inline hit in a main bucket is the whole answer: no inline key carries a
    /// deadline (none to expire) and no eviction policy reads reference bits (none to set).
    /// Nothing but a write with a deadline or a change of policy makes it false, so a loop of
    /// plain GETs and PUTs asks once, before it starts, and takes the `PLAIN` fast paths
    /// ([`MainIndex::probe_as`], [`Table::replace_inline_as`]) throughout.
    /// It is false while a snapshot is taken, so that the `PLAIN` write path needs no
    /// snapshot test of its own (copy before first write, `crate::snapshot`), which would
    /// cost every PUT of the loop an instruction or two.
    #[inline(always)]
    pub fn plain_hits(&self) -> bool {
        !self.track_refs && self.snap.is_none() && self.counts.inline_keys == self.plain_inline_keys
    }

    /// Whether any key-value is stored as a record (pointer slots exist) or inline with a
    /// deadline. Without either, a key that is not inline in a bucket is not in it at all, and
    /// one that is has no deadline, so the chain walks below need no general lookup.
    #[inline(always)]
    pub fn has_records(&self) -> bool {
        self.counts.keys > self.plain_inline_keys
    }

    pub fn slab(&self) -> &SlabAllocator {
        &self.slab
    }

    pub fn arena(&self) -> &Arena {
        &self.arena
    }
    pub fn inline_threshold(&self) -> usize {
        self.inline_threshold
    }

    /// Byte offset of the main bucket of hash `h`.
    #[inline(always)]
    pub fn main_bucket(&self, h: u64) -> usize {
        main_offset(h, self.bucket_count)
    }

    /// The main bucket of `h` and its offset, without a bounds check: `main_bucket` is below
    /// `bucket_count` lines, which `new` checked lie inside the arena.
    #[inline(always)]
    fn main_bucket_ref(&self, h: u64) -> (usize, &Bucket) {
        let off = self.main_bucket(h);
        debug_assert!(off + LINE_BYTES <= self.bucket_count as usize * LINE_BYTES);
        // SAFETY: off + 64 <= bucket_count * 64 <= index_bytes <= arena.len() (asserted in
        // `new`); off is a multiple of 64 from a 2 MiB aligned base, so aligned for Bucket
        // (plain bytes, align 64).
        (off, unsafe {
            &*(self.arena.base().add(off) as *const Bucket)
        })
    }

    #[inline(always)]
    fn bucket(&self, off: usize) -> &Bucket {
        debug_assert!(off.is_multiple_of(LINE_BYTES) && off + LINE_BYTES <= self.arena.len());
        let s = self.arena.slice(off, LINE_BYTES);
        // SAFETY: the arena base is 2 MiB aligned and `off` is a multiple of 64, so the pointer is
        // aligned for Bucket (align 64); the slice covers its 64 bytes; Bucket is plain bytes.
        unsafe { &*(s.as_ptr() as *const Bucket) }
    }

    #[inline(always)]
    fn bucket_mut(&mut self, off: usize) -> &mut Bucket {
        debug_assert!(off.is_multiple_of(LINE_BYTES));
        let s = self.arena.slice_mut(off, LINE_BYTES);
        // SAFETY: as in `bucket`, and &mut self makes the access exclusive.
        unsafe { &mut *(s.as_mut_ptr() as *mut Bucket) }
    }

    /// Prefetches the main bucket of `h` (pipeline stage 1).
    #[inline(always)]
    pub fn prefetch_bucket(&self, h: u64) {
        self.main_index().prefetch(h);
    }

    /// The fields the main-bucket fast path reads, copied: a loop holding them as a local
    /// value keeps them in registers across its stores.
    #[inline(always)]
    pub fn main_index(&self) -> MainIndex<'_> {
        MainIndex {
            base: self.arena.base(),
            bucket_count: self.bucket_count,
            inline_threshold: self.inline_threshold,
            track_refs: self.track_refs,
            _table: std::marker::PhantomData,
        }
    }

    /// Pipeline stage 2, once the main bucket has arrived: prefetches the next bucket of its
    /// chain, and (when the table has records) the records whose secondary hash matches.
    #[inline]
    pub fn prefetch_second(&self, h: u64, records: bool) {
        let (_, b) = self.main_bucket_ref(h);
        if let Some(p) = b.chain() {
            self.arena.prefetch(p as usize * SLAB_UNIT_BYTES);
        }
        if !records {
            return;
        }
        let sec = secondary_hash(h);
        let codes = b.codes();
        let mut ptrs = bucket::pointer_lanes(codes);
        while ptrs != 0 {
            let s = ptrs.trailing_zeros() as usize / 3;
            ptrs &= ptrs - 1;
            let (sh, ptr) = b.pointer(s);
            if sh == sec {
                // Records are buddy-aligned, so a small record's class size in lines covers
                // it; of a large one, fetch the first lines (header, key, start of value).
                let c = ((codes >> (3 * s)) & 7) as u8;
                let lines = if c == code::PTR_LARGE {
                    RECORD_PREFETCH_LINES_MAX
                } else {
                    (class_size_bytes(c - code::PTR_SMALL_FIRST) / LINE_BYTES).max(1)
                };
                let rec = ptr as usize * SLAB_UNIT_BYTES;
                for l in 0..lines {
                    self.arena.prefetch(rec + l * LINE_BYTES);
                }
            }
        }
    }

    /// Searches the main bucket of `h` for `key` without bookkeeping: the read-only fast path of
    /// the pipeline, which counts the bucket read itself. Anything beyond an inline hit or a
    /// definite miss is left to `lookup`.
    #[inline(always)]
    pub fn probe_main(&self, key: &[u8], h: u64, simd: impl ByteMatch) -> MainProbe<'_> {
        self.main_index().probe(key, h, simd)
    }

    /// The rest of a GET that [`Table::probe_main`] left undecided, in a table whose
    /// key-values are all inline (no records, so no pointer slots): searches the buckets
    /// chained behind the main one. Returns the value, if found, and how many chained buckets
    /// were read.
    #[inline(always)]
    pub fn get_in_chain(&self, key: &[u8], h: u64, simd: impl ByteMatch) -> (Option<&[u8]>, u64) {
        debug_assert_eq!(self.counts.keys, self.plain_inline_keys);
        let mut hops = 0u64;
        debug_assert!(!key.is_empty(), "the empty key takes the general road");
        if key.len() >= self.inline_threshold {
            return (None, hops);
        }
        let (_, mut b) = self.main_bucket_ref(h);
        while let Some(p) = b.chain() {
            let off = p as usize * SLAB_UNIT_BYTES;
            hops += 1;
            assert!(
                hops as usize <= self.arena.len() / LINE_BYTES,
                "chain cycle"
            );
            b = self.bucket(off);
            if let Some((pos, vlen)) = b.find_inline_with(key, simd) {
                self.note_use(h);
                return (Some(self.arena.slice(off + pos + key.len(), vlen)), hops);
            }
        }
        (None, hops)
    }

    /// Stage 3's shortcut for a lone PUT: when `key` is inline in its main bucket, or (in a
    /// table without records) in a bucket chained behind it, with a value of `value`'s length,
    /// overwrites the value there and returns how many buckets were read (one line written).
    /// Otherwise changes nothing and returns `None`: the general path decides.
    #[inline(always)]
    pub fn replace_inline(
        &mut self,
        key: &[u8],
        h: u64,
        value: &[u8],
        simd: impl ByteMatch,
    ) -> Option<u64> {
        self.replace_inline_as::<false>(key, h, value, simd)
    }

    /// [`Table::replace_inline`], or with `PLAIN` for a caller that found
    /// [`Table::plain_hits`] true for the whole loop it runs: no deadline to test, no
    /// reference bit to set.
    #[inline(always)]
    pub fn replace_inline_as<const PLAIN: bool>(
        &mut self,
        key: &[u8],
        h: u64,
        value: &[u8],
        simd: impl ByteMatch,
    ) -> Option<u64> {
        debug_assert!(!key.is_empty(), "the empty key takes the general road");
        if key.len() >= self.inline_threshold {
            return None;
        }
        debug_assert!(
            !(PLAIN && self.snap.is_some()),
            "PLAIN write under a snapshot"
        );
        if !PLAIN && self.snap.is_some() {
            self.snap_save(self.main_bucket(h));
        }
        // The main bucket first, on its own: where nearly every key is.
        let (mut off, b) = self.main_bucket_ref(h);
        match b.find_inline_with(key, simd) {
            // A plain PUT clears a deadline: one is left to the general path.
            Some((pos, vlen))
                if vlen == value.len() && (PLAIN || !b.has_deadline(pos, key.len() + vlen)) =>
            {
                debug_assert!(!(PLAIN && b.has_deadline(pos, key.len() + vlen)));
                let b = self.bucket_mut(off);
                b.replace_inline_value(pos, key.len(), value);
                if !PLAIN {
                    b.set_referenced(true);
                }
                return Some(1);
            }
            Some(_) => return None,
            None if self.has_records() => return None,
            None => {}
        }
        // Without records, a key that is not inline in a bucket is not in it at all, and no
        // inline key has a deadline: walk the chain.
        let mut read = 1u64;
        let mut next = b.chain();
        while let Some(p) = next {
            off = p as usize * SLAB_UNIT_BYTES;
            read += 1;
            assert!(
                read as usize <= self.arena.len() / LINE_BYTES,
                "chain cycle"
            );
            let b = self.bucket(off);
            match b.find_inline_with(key, simd) {
                Some((pos, vlen)) if vlen == value.len() => {
                    self.bucket_mut(off)
                        .replace_inline_value(pos, key.len(), value);
                    self.note_use(h);
                    return Some(read);
                }
                Some(_) => return None,
                None => {}
            }
            next = b.chain();
        }
        None
    }

    /// Stage 3's shortcut for a lone update of a small inline value: the value of `key` if it
    /// is inline in its main bucket (one line read), to be changed in place (the same line
    /// written back), never resized.
    #[inline(always)]
    pub fn main_inline_value_mut(
        &mut self,
        key: &[u8],
        h: u64,
        simd: impl ByteMatch,
    ) -> Option<&mut [u8]> {
        debug_assert!(!key.is_empty(), "the empty key takes the general road");
        if key.len() >= self.inline_threshold {
            return None;
        }
        let (off, b) = self.main_bucket_ref(h);
        let (pos, vlen) = b.find_inline_with(key, simd)?;
        // A key with a deadline goes the general way, which expires it.
        if b.has_deadline(pos, key.len() + vlen) {
            return None;
        }
        if self.snap.is_some() {
            self.snap_save(off);
        }
        self.bucket_mut(off).set_referenced(true);
        Some(self.arena.slice_mut(off + pos + key.len(), vlen))
    }

    /// Sets the CLOCK reference bit of the main bucket of `h` (`crate::evict`): a key of its
    /// chain was used. Writes the line only when the bit is clear.
    #[inline(always)]
    pub fn note_use(&self, h: u64) {
        if !self.track_refs {
            return;
        }
        let (off, b) = self.main_bucket_ref(h);
        if !b.referenced() {
            self.main_index().mark_referenced(off);
        }
    }

    /// Whether lookups set the reference bits eviction's CLOCK reads (an LRU policy).
    pub fn set_track_references(&mut self, on: bool) {
        self.track_refs = on;
    }

    /// Whether main bucket `i` holds nothing: no entry and no chain behind it.
    pub fn main_vacant(&self, i: u64) -> bool {
        let b = self.bucket(i as usize * LINE_BYTES);
        b.is_empty() && b.chain().is_none()
    }

    /// The reference bit of main bucket `i` (`crate::evict`'s hand).
    pub fn referenced(&self, i: u64) -> bool {
        self.bucket(i as usize * LINE_BYTES).referenced()
    }

    /// Clears the reference bit of main bucket `i` (the hand passed it).
    pub fn clear_referenced(&mut self, i: u64) {
        self.bucket_mut(i as usize * LINE_BYTES)
            .set_referenced(false);
    }

    /// Finds `key` (whose hash is `h`). Always the first access of an operation.
    #[inline]
    pub fn lookup(&self, key: &[u8], h: u64, acc: &mut Access) -> Option<Loc> {
        self.lookup_inlined(key, h, acc)
    }

    /// [`Table::lookup`] inlined into its caller: the pipeline's one road to every lookup
    /// (`lookup_live`), where a call returned its `Loc` through memory (callgrind: about 20
    /// instructions of every memcached get).
    #[inline(always)]
    pub fn lookup_inlined(&self, key: &[u8], h: u64, acc: &mut Access) -> Option<Loc> {
        let sec = secondary_hash(h);
        let mut off = self.main_bucket(h);
        let mut prev = NO_BUCKET;
        let mut hops = 0usize;
        // A table with no inline key (memcached items, which are all records) skips the search
        // of each bucket's inline entries: about 40 instructions of a memcached get (callgrind).
        let may_inline =
            self.counts.inline_keys != 0 && may_be_inline(key.len(), self.inline_key_span);
        loop {
            acc.read_bucket(off);
            let b = self.bucket(off);
            if may_inline {
                if let Some(e) = b.find_inline_entry(key) {
                    let kind = LocKind::Inline {
                        klen: e.klen,
                        vlen: e.vlen,
                        deadline: e.deadline,
                    };
                    return Some(Loc {
                        bucket: off,
                        prev,
                        pos: e.pos,
                        kind,
                    });
                }
            }
            if let Some(found) = self.search_pointers(b, off, prev, key, sec, acc) {
                return Some(found);
            }
            match b.chain() {
                Some(p) => {
                    prev = off;
                    off = p as usize * SLAB_UNIT_BYTES;
                    hops += 1;
                    assert!(hops <= self.arena.len() / LINE_BYTES, "chain cycle");
                }
                None => return None,
            }
        }
    }

    #[inline(always)]
    fn search_pointers(
        &self,
        b: &Bucket,
        off: usize,
        prev: usize,
        key: &[u8],
        sec: u16,
        acc: &mut Access,
    ) -> Option<Loc> {
        let codes = b.codes();
        let mut ptrs = bucket::pointer_lanes(codes);
        while ptrs != 0 {
            let s = ptrs.trailing_zeros() as usize / 3;
            ptrs &= ptrs - 1;
            let (sh, ptr) = b.pointer(s);
            if sh == sec {
                if let Some(loc) = self.check_record(off, prev, s, b.code(s), ptr, key, acc) {
                    return Some(loc);
                }
            }
        }
        None
    }

    // Inlined into `lookup`: as a call it returned its `Loc` through memory, about 30
    // instructions of every record lookup (callgrind).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn check_record(
        &self,
        off: usize,
        prev: usize,
        slot: usize,
        c: u8,
        ptr: u32,
        key: &[u8],
        acc: &mut Access,
    ) -> Option<Loc> {
        let rec = ptr as usize * SLAB_UNIT_BYTES;
        let hdr = record::decode(c, self.arena.slice(rec, record::HEADER_BYTES_MAX));
        // Reading the key brings in the record; the value is read in the same access.
        acc.read(rec, hdr.total());
        if hdr.klen != key.len() || !key_eq(self.arena.slice(rec + hdr.header, hdr.klen), key) {
            return None;
        }
        let kind = LocKind::Record {
            rec,
            slot_code: c,
            class: hdr.class,
            header: hdr.header,
            klen: hdr.klen,
            vlen: hdr.vlen,
            deadline: hdr.deadline,
            meta: hdr.meta,
        };
        Some(Loc {
            bucket: off,
            prev,
            pos: slot,
            kind,
        })
    }

    /// The value at `loc` (valid until the next mutation).
    #[inline]
    pub fn value(&self, loc: &Loc) -> &[u8] {
        match loc.kind {
            LocKind::Inline { klen, vlen, .. } => {
                let o = loc.bucket + loc.pos + klen;
                self.arena.slice(o, vlen)
            }
            LocKind::Record {
                rec,
                header,
                klen,
                vlen,
                ..
            } => self.arena.slice(rec + header + klen, vlen),
        }
    }

    /// Whether a key-value (with a deadline if `deadline`) is stored inline: below the
    /// threshold, with a key and a value (an empty one would break the bitmap's alternation of
    /// key and value marks; see `bucket`), and with its deadline's 8 bytes within a bucket's slots. The
    /// threshold is the tuner's choice of which sizes of key-value go inline (`config::tune`),
    /// so it applies to the key-value, not to its deadline. An entry with item meta is never
    /// inline (`record.rs` keeps it in the record's header).
    fn is_inline(&self, klen: usize, vlen: usize, deadline: bool, meta: bool) -> bool {
        let kv_len = klen + vlen;
        let stored = kv_len + if deadline { record::DEADLINE_BYTES } else { 0 };
        !meta
            && klen > 0
            && vlen > 0
            && kv_len < self.inline_threshold
            && stored <= INLINE_BYTES_MAX
    }

    /// Arena bytes a key-value of these lengths takes (MEMORY USAGE): inline, its bytes in the
    /// bucket; as a record, its pointer slot and its slab block; either way plus its share of
    /// the bucket's metadata bytes (in proportion to the slot bytes it uses, rounded up). A key
    /// with a deadline (`deadline`) has 8 more bytes: after its value inline, or in its record's
    /// header. A key with item meta (`meta`) is a record with 12 more header bytes.
    pub fn footprint_bytes(&self, klen: usize, vlen: usize, deadline: bool, meta: bool) -> usize {
        let meta_share = |slot_bytes: usize| {
            (slot_bytes * (LINE_BYTES - INLINE_BYTES_MAX)).div_ceil(INLINE_BYTES_MAX)
        };
        if self.is_inline(klen, vlen, deadline, meta) {
            let stored = klen + vlen + if deadline { record::DEADLINE_BYTES } else { 0 };
            return stored + meta_share(stored);
        }
        let block = record::layout(klen, vlen, self.top_class, deadline, meta)
            .map_or(0, |l| class_size_bytes(l.class));
        bucket::SLOT_BYTES + meta_share(bucket::SLOT_BYTES) + block
    }

    /// Stores `value` under `key` with `deadline` (`record::NO_DEADLINE`: none) and item
    /// `meta` (`Meta::NONE`: none), replacing `old` (the result of `lookup`) if present. On
    /// error (out of memory) the table is unchanged.
    #[allow(clippy::too_many_arguments)]
    pub fn write(
        &mut self,
        key: &[u8],
        h: u64,
        old: Option<Loc>,
        value: &[u8],
        deadline: u64,
        meta: Meta,
        acc: &mut Access,
    ) -> Result<(), OpError> {
        if self.snap.is_some() {
            self.snap_save(self.main_bucket(h));
        }
        if let Some(o) = old {
            if self.rewrite_in_place(key, &o, value, deadline, meta, acc) {
                return Ok(());
            }
        }
        self.insert_new(key, h, value, deadline, meta, acc)?;
        if let Some(o) = old {
            self.remove(&o, acc);
        }
        Ok(())
    }

    /// Replaces the value (and deadline) where it is when the new key-value needs the same
    /// space, or fits the same bucket. Returns false when it does not.
    fn rewrite_in_place(
        &mut self,
        key: &[u8],
        o: &Loc,
        value: &[u8],
        deadline: u64,
        meta: Meta,
        acc: &mut Access,
    ) -> bool {
        let timed = deadline != record::NO_DEADLINE;
        let was_timed = o.deadline() != record::NO_DEADLINE;
        let inline = self.is_inline(key.len(), value.len(), timed, meta.is_some());
        let old_kv_len = match o.kind {
            LocKind::Inline { klen, vlen, .. } if inline => {
                if vlen == value.len() && timed == was_timed {
                    // The key is the one stored there: only the value and deadline change.
                    let b = self.bucket_mut(o.bucket);
                    b.replace_inline_value(o.pos, klen, value);
                    if timed {
                        let e = bucket::InlineEntry {
                            pos: o.pos,
                            klen,
                            vlen,
                            deadline: o.deadline(),
                        };
                        b.set_inline_deadline(&e, deadline);
                    }
                } else {
                    // Same bucket if it has room once the old entry is gone.
                    let mut b = *self.bucket(o.bucket);
                    b.remove_inline(o.pos);
                    if b.push_inline_with_deadline(key, value, deadline).is_none() {
                        return false;
                    }
                    *self.bucket_mut(o.bucket) = b;
                }
                acc.write(o.bucket, LINE_BYTES);
                klen + vlen
            }
            LocKind::Record {
                rec,
                slot_code,
                class,
                klen,
                vlen,
                ..
            } if !inline => {
                let Some(l) = record::layout(
                    key.len(),
                    value.len(),
                    self.top_class,
                    timed,
                    meta.is_some(),
                ) else {
                    return false;
                };
                if l.slot_code != slot_code || l.class != class {
                    return false;
                }
                record::encode(
                    l,
                    key,
                    value,
                    deadline,
                    meta,
                    self.arena.slice_mut(rec, class_size_bytes(class)),
                );
                acc.write(rec, l.header + key.len() + value.len());
                klen + vlen
            }
            _ => return false,
        };
        self.count_out(old_kv_len, inline, was_timed);
        self.count_in(key.len() + value.len(), inline, timed);
        true
    }

    /// A key-value of `kv_len` bytes joins the totals.
    fn count_in(&mut self, kv_len: usize, inline: bool, timed: bool) {
        self.counts.keys += 1;
        self.counts.kv_bytes += kv_len as u64;
        self.counts.inline_keys += u64::from(inline);
        self.counts.expiring_keys += u64::from(timed);
        self.plain_inline_keys += u64::from(inline && !timed);
    }

    /// A key-value of `kv_len` bytes leaves the totals.
    fn count_out(&mut self, kv_len: usize, inline: bool, timed: bool) {
        self.counts.keys -= 1;
        self.counts.kv_bytes -= kv_len as u64;
        self.counts.inline_keys -= u64::from(inline);
        self.counts.expiring_keys -= u64::from(timed);
        self.plain_inline_keys -= u64::from(inline && !timed);
    }

    /// Adds a key-value that is not in the table.
    fn insert_new(
        &mut self,
        key: &[u8],
        h: u64,
        value: &[u8],
        deadline: u64,
        meta: Meta,
        acc: &mut Access,
    ) -> Result<(), OpError> {
        let kv_len = key.len() + value.len();
        let timed = deadline != record::NO_DEADLINE;
        let inline = self.is_inline(key.len(), value.len(), timed, meta.is_some());
        let need = match (inline, timed) {
            (false, _) => 0,
            (true, false) => kv_len,
            (true, true) => kv_len + record::DEADLINE_BYTES,
        };
        let rec = if inline {
            None
        } else {
            let extra = if timed { record::DEADLINE_BYTES } else { 0 }
                + if meta.is_some() {
                    record::META_BYTES
                } else {
                    0
                };
            let l = record::layout(
                key.len(),
                value.len(),
                self.top_class,
                timed,
                meta.is_some(),
            )
            .ok_or(OpError::ValueTooLarge {
                len: value.len(),
                max: (class_size_bytes(self.top_class) - record::LARGE_HEADER_BYTES)
                    .saturating_sub(key.len() + extra),
            })?;
            let addr = self.slab.alloc(l.class).ok_or(OpError::OutOfMemory)?;
            Some((l, addr))
        };
        let target = match self.bucket_with_room(h, need, acc) {
            Ok(off) => off,
            Err(e) => {
                if let Some((l, addr)) = rec {
                    self.slab.free(addr, l.class);
                }
                return Err(e);
            }
        };
        let mut b = *self.bucket(target);
        match rec {
            None => {
                b.push_inline_with_deadline(key, value, deadline)
                    .expect("bucket checked for room");
            }
            Some((l, addr)) => {
                let off = addr as usize * SLAB_UNIT_BYTES;
                record::encode(
                    l,
                    key,
                    value,
                    deadline,
                    meta,
                    self.arena.slice_mut(off, class_size_bytes(l.class)),
                );
                acc.write(off, l.header + kv_len);
                b.push_pointer(l.slot_code, secondary_hash(h), addr)
                    .expect("bucket checked for room");
            }
        }
        *self.bucket_mut(target) = b;
        acc.write(target, LINE_BYTES);
        self.count_in(kv_len, inline, timed);
        Ok(())
    }

    /// The first bucket of h's chain with room for an inline key-value of `need` bytes (0: for a
    /// pointer slot), linking a new chained bucket at the end when none has.
    fn bucket_with_room(
        &mut self,
        h: u64,
        need: usize,
        acc: &mut Access,
    ) -> Result<usize, OpError> {
        let mut off = self.main_bucket(h);
        loop {
            acc.read(off, LINE_BYTES);
            let b = self.bucket(off);
            let room = if need == 0 {
                b.fits_pointer()
            } else {
                b.fits_inline(need)
            };
            if room {
                return Ok(off);
            }
            match b.chain() {
                Some(p) => off = p as usize * SLAB_UNIT_BYTES,
                None => break,
            }
        }
        let addr = self.slab.alloc(CHAIN_CLASS).ok_or(OpError::OutOfMemory)?;
        let new_off = addr as usize * SLAB_UNIT_BYTES;
        *self.bucket_mut(new_off) = Bucket::default();
        self.bucket_mut(off).set_chain(Some(addr));
        acc.write(off, LINE_BYTES);
        self.counts.chained_buckets += 1;
        Ok(new_off)
    }

    /// Removes the key-value at `loc`; frees its record and, when a chained bucket becomes empty,
    /// the bucket.
    pub fn remove(&mut self, loc: &Loc, acc: &mut Access) {
        if self.snap.is_some() {
            self.snap_save_loc(loc);
        }
        let mut b = *self.bucket(loc.bucket);
        let (kv_len, inline) = match loc.kind {
            LocKind::Inline { klen, vlen, .. } => {
                b.remove_inline(loc.pos);
                (klen + vlen, true)
            }
            LocKind::Record {
                rec,
                class,
                klen,
                vlen,
                ..
            } => {
                b.remove_pointer(loc.pos);
                self.slab.free((rec / SLAB_UNIT_BYTES) as u32, class);
                (klen + vlen, false)
            }
        };
        self.count_out(kv_len, inline, loc.deadline() != record::NO_DEADLINE);
        if b.is_empty() && loc.prev != NO_BUCKET {
            let next = b.chain();
            self.bucket_mut(loc.prev).set_chain(next);
            acc.write(loc.prev, LINE_BYTES);
            self.slab
                .free((loc.bucket / SLAB_UNIT_BYTES) as u32, CHAIN_CLASS);
            self.counts.chained_buckets -= 1;
        } else {
            *self.bucket_mut(loc.bucket) = b;
            acc.write(loc.bucket, LINE_BYTES);
        }
    }

    /// Copy before first write (`crate::snapshot`): the chain of the main bucket at byte
    /// offset `main` is about to change; if the snapshot's cursor has not reached it and it
    /// was not saved yet, its live entries are copied as they are now. Out of line and cold:
    /// it runs only while a snapshot is taken.
    #[cold]
    #[inline(never)]
    fn snap_save(&mut self, main: usize) {
        let Some(mut s) = self.snap.take() else {
            return;
        };
        s.before_write(self, (main / LINE_BYTES) as u64);
        self.snap = Some(s);
    }

    /// [`Table::snap_save`] of the main bucket of the key at `loc` (a removal knows where the
    /// key is, not its hash: the key is read and hashed again, here on the cold path).
    #[cold]
    #[inline(never)]
    fn snap_save_loc(&mut self, loc: &Loc) {
        let main = if loc.prev == NO_BUCKET {
            loc.bucket
        } else {
            let key = match loc.kind {
                LocKind::Inline { klen, .. } => self.arena.slice(loc.bucket + loc.pos, klen),
                LocKind::Record {
                    rec, header, klen, ..
                } => self.arena.slice(rec + header, klen),
            };
            self.main_bucket(crate::hash::key_hash(key))
        };
        self.snap_save(main);
    }

    /// A copy of main bucket `i` when it holds its whole chain inline (no pointer slot, no
    /// chained bucket): then its 64 bytes are all a snapshot must keep of it
    /// (`crate::snapshot`).
    pub fn main_bucket_inline_copy(&self, i: u64) -> Option<Bucket> {
        let b = self.bucket(i as usize * LINE_BYTES);
        (b.pointer_slots() == 0 && b.chain().is_none()).then_some(*b)
    }

    /// Starts copy before first write for `state` (`crate::snapshot`).
    pub fn snap_install(&mut self, state: Box<crate::snapshot::SnapState>) {
        assert!(self.snap.is_none(), "a snapshot is already being taken");
        self.snap = Some(state);
    }

    /// Stops copy before first write and hands the state back (`None`: no snapshot ran).
    pub fn snap_take(&mut self) -> Option<Box<crate::snapshot::SnapState>> {
        self.snap.take()
    }

    /// The snapshot being taken, if any.
    pub fn snap_state(&self) -> Option<&crate::snapshot::SnapState> {
        self.snap.as_deref()
    }

    /// Adds to `need` (blocks per slab class) what one write of a key-value of these lengths
    /// may allocate, at most: its record's block unless it is stored inline, and one chained
    /// bucket in case no bucket of its chain has room (`insert_new` allocates nothing else, and
    /// `rewrite_in_place` nothing at all). Fails as `insert_new` would for a key-value larger
    /// than the top class.
    pub fn write_blocks_max(
        &self,
        klen: usize,
        vlen: usize,
        deadline: bool,
        meta: bool,
        need: &mut [u32; CLASS_COUNT_MAX],
    ) -> Result<(), OpError> {
        need[usize::from(CHAIN_CLASS)] += 1;
        if !self.is_inline(klen, vlen, deadline, meta) {
            let l = record::layout(klen, vlen, self.top_class, deadline, meta).ok_or(
                OpError::ValueTooLarge {
                    len: vlen,
                    max: class_size_bytes(self.top_class) - record::LARGE_HEADER_BYTES - klen,
                },
            )?;
            need[usize::from(l.class)] += 1;
        }
        Ok(())
    }

    /// Allocates `need[c]` blocks of every class `c`, largest class first, then frees them all
    /// again (`taken` is scratch space). Returns whether every allocation succeeded. The table's
    /// contents are untouched either way; when it returned true, those blocks are free as they
    /// were taken (see `crate::atomic` for why that makes a batch within them succeed).
    pub fn trial_alloc(
        &mut self,
        need: &[u32; CLASS_COUNT_MAX],
        taken: &mut Vec<(u32, u8)>,
    ) -> bool {
        taken.clear();
        let mut fits = true;
        'classes: for class in (0..=self.top_class).rev() {
            for _ in 0..need[usize::from(class)] {
                match self.slab.alloc(class) {
                    Some(addr) => taken.push((addr, class)),
                    None => {
                        fits = false;
                        break 'classes;
                    }
                }
            }
        }
        for &(addr, class) in taken.iter() {
            self.slab.free(addr, class);
        }
        taken.clear();
        fits
    }

    /// Histogram of chain lengths (buckets per chain, index 0 = main bucket only); scans the
    /// whole index, for statistics only.
    pub fn chain_histogram(&self) -> Vec<u64> {
        let mut hist = vec![0u64; 4];
        for i in 0..self.bucket_count as usize {
            let mut len = 0usize;
            let mut b = self.bucket(i * LINE_BYTES);
            while let Some(p) = b.chain() {
                len += 1;
                b = self.bucket(p as usize * SLAB_UNIT_BYTES);
            }
            if len >= hist.len() {
                hist.resize(len + 1, 0);
            }
            hist[len] += 1;
        }
        hist
    }

    /// Every key-value, expired or not, for tests and snapshots: calls
    /// `f(key, value, deadline)`.
    pub fn for_each(&self, mut f: impl FnMut(&[u8], &[u8], u64)) {
        let mut cursor = 0;
        loop {
            cursor = self.scan(cursor, self.bucket_count, &mut f);
            if cursor == 0 {
                break;
            }
        }
    }

    /// Main buckets in the index (the range of a scan cursor).
    pub fn bucket_count(&self) -> u64 {
        self.bucket_count
    }

    /// Visits the key-values of up to `count` main buckets, from main bucket `cursor` on, with
    /// the buckets chained behind them: `f(key, value, deadline)` for each, expired or not.
    /// Returns the cursor to continue from, 0 when the pass reached the end of the index.
    /// The table has a fixed bucket count (no resizing), so a pass of cursors visits every
    /// key that was present during the whole pass exactly once.
    pub fn scan(&self, cursor: u64, count: u64, mut f: impl FnMut(&[u8], &[u8], u64)) -> u64 {
        self.scan_items(cursor, count, |k, v, d, _| f(k, v, d))
    }

    /// [`Table::scan`] with each key's item meta: `f(key, value, deadline, meta)`.
    pub fn scan_items(
        &self,
        cursor: u64,
        count: u64,
        mut f: impl FnMut(&[u8], &[u8], u64, Meta),
    ) -> u64 {
        let start = cursor.min(self.bucket_count);
        let end = start.saturating_add(count.max(1)).min(self.bucket_count);
        for i in start as usize..end as usize {
            let mut off = i * LINE_BYTES;
            let mut hops = 0usize;
            loop {
                let b = self.bucket(off);
                for e in b.inline_entries() {
                    f(b.inline_key(&e), b.inline_value(&e), e.deadline, Meta::NONE);
                }
                for s in b.pointer_slot_list() {
                    let rec = b.pointer(s).1 as usize * SLAB_UNIT_BYTES;
                    let h =
                        record::decode(b.code(s), self.arena.slice(rec, record::HEADER_BYTES_MAX));
                    let kv = self.arena.slice(rec + h.header, h.klen + h.vlen);
                    f(&kv[..h.klen], &kv[h.klen..], h.deadline, h.meta);
                }
                match b.chain() {
                    Some(p) => off = p as usize * SLAB_UNIT_BYTES,
                    None => break,
                }
                hops += 1;
                assert!(hops <= self.arena.len() / LINE_BYTES, "chain cycle");
            }
        }
        if end >= self.bucket_count {
            0
        } else {
            end
        }
    }
}

/// One key compared with many (a run of operations on it): its length and, for keys of 4 to
/// 16 bytes, its first and last words are read once. `matches` is [`key_eq`].
#[derive(Clone, Copy)]
pub struct KeyMatch<'a> {
    key: &'a [u8],
    first: u64,
    last: u64,
}

#[inline(always)]
fn r8(s: &[u8], o: usize) -> u64 {
    u64::from_ne_bytes(s[o..o + 8].try_into().expect("8 bytes"))
}

#[inline(always)]
fn r4(s: &[u8], o: usize) -> u64 {
    u64::from(u32::from_ne_bytes(s[o..o + 4].try_into().expect("4 bytes")))
}

impl<'a> KeyMatch<'a> {
    #[inline(always)]
    pub fn new(key: &'a [u8]) -> KeyMatch<'a> {
        let n = key.len();
        let (first, last) = if (8..=16).contains(&n) {
            (r8(key, 0), r8(key, n - 8))
        } else if (4..8).contains(&n) {
            (r4(key, 0), r4(key, n - 4))
        } else {
            (0, 0)
        };
        KeyMatch { key, first, last }
    }

    #[inline(always)]
    pub fn matches(&self, k: &[u8]) -> bool {
        let n = self.key.len();
        if k.len() != n {
            return false;
        }
        if (8..=16).contains(&n) {
            return r8(k, 0) == self.first && r8(k, n - 8) == self.last;
        }
        if (4..8).contains(&n) {
            return r4(k, 0) == self.first && r4(k, n - 4) == self.last;
        }
        k == self.key
    }
}

/// Key equality without a libc call for the short keys that dominate.
#[inline(always)]
pub fn key_eq(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    if (8..=16).contains(&n) {
        let r8 = |s: &[u8], o: usize| u64::from_ne_bytes(s[o..o + 8].try_into().expect("8 bytes"));
        return r8(a, 0) == r8(b, 0) && r8(a, n - 8) == r8(b, n - 8);
    }
    if (4..8).contains(&n) {
        let r4 = |s: &[u8], o: usize| u32::from_ne_bytes(s[o..o + 4].try_into().expect("4 bytes"));
        return r4(a, 0) == r4(b, 0) && r4(a, n - 4) == r4(b, n - 4);
    }
    a == b
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `KeyMatch::matches` is `key_eq` at every length, for keys that differ in any one byte
    /// (first, last or in between) and for keys of other lengths.
    #[test]
    fn key_match_agrees_with_key_equality_at_every_length() {
        for n in 0..=24usize {
            let key: Vec<u8> = (0..n as u8).map(|b| b.wrapping_mul(29) ^ 0x33).collect();
            let m = KeyMatch::new(&key);
            assert!(m.matches(&key.clone()), "len {n}: equal");
            for at in 0..n {
                let mut other = key.clone();
                other[at] ^= 0x80;
                assert!(!m.matches(&other), "len {n}: byte {at} differs");
                assert!(!key_eq(&key, &other));
            }
            let mut longer = key.clone();
            longer.push(0);
            assert!(!m.matches(&longer), "len {n}: longer");
            if n > 0 {
                assert!(!m.matches(&key[..n - 1]), "len {n}: shorter");
            }
        }
    }
}
