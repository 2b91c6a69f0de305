//! One 64-byte hash bucket, in the layout of KV-Direct's hash index (seed 002, "Hash index
//! structure"). Pure encoding: no arena, no allocation, no I/O.
//!
//! ```text
//! byte  0        5        10             45       50                                   64
//!       +--------+--------+-- ... -------+--------+-----------------------------------+
//!       | slot 0 | slot 1 |               | slot 9 | metadata (112 bits, little-endian) |
//!       +--------+--------+-- ... -------+--------+-----------------------------------+
//!
//! metadata bits   0..50   bitmap, one bit per slot byte: marks the LAST byte of an inline key
//!                         and the LAST byte of its value (one bit only when the value is empty)
//!                50..80   ten 3-bit slot codes (slot s at bit 50 + 3s), see `code`
//!                80..110  30-bit pointer to the next chained bucket, in 32-byte units
//!                         (32 GiB: `Engine::new` refuses larger arenas)
//!                    110  reference bit of eviction's CLOCK (main buckets only, `evict.rs`)
//!                    111  chain valid bit
//!
//! pointer slot (40 bits, little-endian): bits 0..9 secondary hash, bits 9..40 record pointer
//! in 32-byte units (31 bits: 64 GiB).
//!
//! inline entry                  [key][value]                    marks: last key byte,
//!                                                                      last value byte
//! inline entry with a deadline  [key][value][deadline u64 LE]   marks: last key byte,
//!                                                                      last deadline byte
//! ```
//!
//! Placement (ours; the bits above are the seed's). Inline key-values are packed byte by byte from
//! byte 0 upwards: an entry may start in the middle of a slot, right after the previous entry's
//! last value byte, so the set bits of the bitmap alternate "last key byte", "last value byte".
//! Pointer slots, which must stay whole, are packed from slot 9 downwards. A slot's code says what
//! it holds: INLINE or INLINE_DEADLINE if it holds inline bytes, a pointer code, or EMPTY. The
//! free space is the gap between the end of the inline bytes and the lowest pointer slot, so "is
//! there room" is one comparison. Removing an entry shifts the entries behind it; that costs no
//! extra memory access because the operation writes the bucket's one cache line anyway. A
//! key-value with an empty value would set a single bit and break the alternation, so those are
//! stored as records; so is the empty key (Redis allows it), which has no last byte to mark.
//!
//! Why not the seed's slot-aligned placement: with 5-byte slots an 8 + 8-byte pair takes 4 slots
//! (20 bytes), so a bucket holds 2 of them and 16-byte pairs cannot fill memory beyond about
//! 0.47; packed, a bucket holds 3 (48 of 50 bytes). Sizes that are a multiple of 5 are stored
//! exactly as before. BENCHMARKS.md ("Byte-packed inline key-values") has the measurements.
//!
//! Deadlines (issue 20, key expiry). An inline entry may carry its key's deadline (absolute ms,
//! as in `record.rs`) in 8 bytes after its value, inside the value's marks, so the bitmap and
//! every search over it are unchanged; its slot code says which entries do. The seed's two
//! inline codes said "an entry starts in this slot" and "this slot only continues one", which
//! the bitmap says too (`Marks::starts`), so code 2 now means INLINE_DEADLINE: "the last entry
//! that starts in this slot carries a deadline". An entry with a deadline is at least 10 bytes
//! (a 1-byte key, a 1-byte value, 8), so it runs past the end of the slot it starts in and IS
//! the last entry starting there: the entry at byte p, n bytes long in all, has a deadline if
//! and only if slot p / 5 has code 2 and p + n reaches that slot's end. Before that test the
//! fast paths look at the middle bit of every code lane at once (one AND of the code word): it
//! is set only by code 2 and the pointer codes 3, 6 and 7, so in a bucket of plain inline
//! entries, all of them in a table without deadlines or records, a key costs that one test. A
//! deadline costs 8 bytes of the bucket instead of a record (a 5-byte slot and a 32-byte block
//! at least): BENCHMARKS.md ("Deadline cost in bytes") has the measurements.

use super::record::{DEADLINE_BYTES, NO_DEADLINE};
use crate::simd::{Baseline, ByteMatch};

/// Hash slots per bucket.
pub const SLOTS: usize = 10;
/// Bytes per hash slot.
pub const SLOT_BYTES: usize = 5;
/// Bytes of slot space, the most an inline key-value can occupy.
pub const INLINE_BYTES_MAX: usize = SLOTS * SLOT_BYTES;
/// Bits of the secondary hash stored in pointer slots (the hash partition is `hash.rs`'s).
pub use crate::hash::SECONDARY_HASH_BITS;
/// Bits of a pointer (in 32-byte units).
pub const POINTER_BITS: u32 = 31;
pub const POINTER_MAX: u32 = (1 << POINTER_BITS) - 1;

const BITMAP_BITS: u32 = 50;
const CHAIN_SHIFT: u32 = 80;
const CHAIN_VALID_BIT: u32 = 111;
/// Metadata bit of the CLOCK reference bit: set when a key of the bucket's chain is used,
/// cleared by eviction's hand (`crate::evict`). Byte 63, bit 6.
const REFERENCED_BIT: u32 = 110;
/// Bits of a chained bucket's pointer (in 32-byte units): the bits below the reference bit.
pub const CHAIN_POINTER_BITS: u32 = REFERENCED_BIT - CHAIN_SHIFT;
pub const CHAIN_POINTER_MAX: u32 = (1 << CHAIN_POINTER_BITS) - 1;
/// The reference bit within byte 63.
const REFERENCED_MASK: u8 = 1 << (REFERENCED_BIT + (INLINE_BYTES_MAX * 8) as u32 - 63 * 8);
const META_BYTES: usize = 64 - INLINE_BYTES_MAX;

/// What a slot holds (3 bits).
pub mod code {
    #[cfg_attr(not(test), allow(dead_code))] // the code of a zeroed slot: never written by name
    pub const EMPTY: u8 = 0;
    /// Inline bytes; no entry that starts in this slot carries a deadline.
    pub const INLINE: u8 = 1;
    /// Inline bytes; the last entry that starts in this slot carries a deadline (module doc).
    pub const INLINE_DEADLINE: u8 = 2;
    /// Codes 3..=6: pointer to a record of slab class 0..=3 (32..256 bytes) with a 2-byte header.
    pub const PTR_SMALL_FIRST: u8 = 3;
    #[allow(dead_code)] // the range's end, for the reader: `is_pointer` needs only its start
    pub const PTR_SMALL_LAST: u8 = 6;
    /// Pointer to a record of class >= 4 (512 bytes and up) whose header carries the class.
    pub const PTR_LARGE: u8 = 7;

    pub fn is_pointer(c: u8) -> bool {
        c >= PTR_SMALL_FIRST
    }
}

/// A hash bucket: exactly one cache line.
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(C, align(64))]
pub struct Bucket {
    pub bytes: [u8; 64],
}

const _: () = assert!(std::mem::size_of::<Bucket>() == 64);
const _: () = assert!(std::mem::align_of::<Bucket>() == 64);
const _: () = assert!(BITMAP_BITS as usize == INLINE_BYTES_MAX);
const _: () = assert!(CHAIN_VALID_BIT == (META_BYTES * 8) as u32 - 1);
const _: () = assert!(REFERENCED_BIT == CHAIN_VALID_BIT - 1 && REFERENCED_MASK == 0x40);
// The chain word (bytes 60..64) starts right after the codes.
const _: () =
    assert!(CHAIN_SHIFT == 30 + 50 && (INLINE_BYTES_MAX * 8) as u32 + CHAIN_SHIFT == 60 * 8);

/// Bit 0 of every 3-bit code lane.
const LANE_LOW: u32 = 0b001_001_001_001_001_001_001_001_001_001;
/// Bit 1 of every lane: set by INLINE_DEADLINE and by the pointer codes 3, 6 and 7, clear for
/// EMPTY and INLINE (the fast paths' first test, see the module doc).
const LANE_MID: u32 = LANE_LOW << 1;
const _: () = assert!(code::INLINE_DEADLINE & 2 != 0 && code::INLINE & 2 == 0);
// The middle bits of all ten lanes lie in bytes 56..60 (`has_deadline`).
const _: () = assert!(CHAIN_SHIFT - 50 + 2 <= 32);
// An entry with a deadline (at least a 1-byte key and value) runs past the slot it starts in.
const _: () = assert!(1 + 1 + DEADLINE_BYTES > SLOT_BYTES);

/// Lanes (bit 3s set) whose code equals `c`.
#[inline(always)]
pub fn lanes_equal(codes: u32, c: u8) -> u32 {
    let x = codes ^ (LANE_LOW * c as u32);
    !(x | (x >> 1) | (x >> 2)) & LANE_LOW
}

/// Lanes (bit 3s set) holding a pointer: codes 3..=7, i.e. the lane's top bit set or exactly 3.
#[inline(always)]
pub fn pointer_lanes(codes: u32) -> u32 {
    ((codes >> 2) & LANE_LOW) | lanes_equal(codes, code::PTR_SMALL_FIRST)
}

/// A decoded inline entry: it starts at byte `pos` of the bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InlineEntry {
    pub pos: usize,
    pub klen: usize,
    /// The value's bytes (the deadline's not included).
    pub vlen: usize,
    /// Absolute deadline in ms, or `NO_DEADLINE`.
    pub deadline: u64,
}

/// Parity of the bits at and below each position: 1 from an entry's last key byte up to, not
/// including, its last value byte.
#[inline(always)]
fn prefix_xor(mut x: u64) -> u64 {
    x ^= x << 1;
    x ^= x << 2;
    x ^= x << 4;
    x ^= x << 8;
    x ^= x << 16;
    x ^= x << 32;
    x
}

/// The bitmap split into its two kinds of marks, and where entries start.
#[derive(Debug, Clone, Copy)]
struct Marks {
    key_ends: u64,
    value_ends: u64,
    /// Bit p set: an inline entry starts at byte p.
    starts: u64,
    /// One past the last inline byte.
    end: usize,
}

impl Marks {
    #[inline(always)]
    fn of(bitmap: u64) -> Marks {
        let inside = prefix_xor(bitmap);
        let key_ends = bitmap & inside;
        let value_ends = bitmap & !inside;
        let end = 64 - bitmap.leading_zeros() as usize;
        let below_end = (1u64 << end) - 1;
        Marks {
            key_ends,
            value_ends,
            starts: ((value_ends << 1) | 1) & below_end,
            end,
        }
    }

    /// Bytes from the key's end to the value's end mark (value and deadline) of the entry whose
    /// key ends at byte `key_end`.
    #[inline(always)]
    fn tail_after(&self, key_end: usize) -> usize {
        (self.value_ends >> (key_end + 1)).trailing_zeros() as usize + 1
    }

    /// (key length, tail length) of the entry starting at byte `pos` (which must be an entry
    /// start).
    #[inline(always)]
    fn span(&self, pos: usize) -> (usize, usize) {
        let key_end = pos + (self.key_ends >> pos).trailing_zeros() as usize;
        (key_end - pos + 1, self.tail_after(key_end))
    }
}

impl Default for Bucket {
    fn default() -> Self {
        Bucket { bytes: [0; 64] }
    }
}

impl std::fmt::Debug for Bucket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let codes: Vec<u8> = (0..SLOTS).map(|s| self.code(s)).collect();
        f.debug_struct("Bucket")
            .field("codes", &codes)
            .field("bitmap", &format_args!("{:050b}", self.bitmap()))
            .field("chain", &self.chain())
            .finish()
    }
}
impl Bucket {
    /// The whole 112-bit metadata as one number (tests compare the word accessors with it).
    #[cfg(test)]
    fn meta(&self) -> u128 {
        let mut b = [0u8; 16];
        b[..META_BYTES].copy_from_slice(&self.bytes[INLINE_BYTES_MAX..]);
        u128::from_le_bytes(b)
    }

    #[inline(always)]
    pub fn code(&self, slot: usize) -> u8 {
        debug_assert!(slot < SLOTS);
        ((self.codes() >> (3 * slot)) & 7) as u8
    }

    /// All ten codes packed, slot s at bits 3s..3s+3 (metadata bits 50..80 = byte 56 bit 2 on).
    #[inline(always)]
    pub fn codes(&self) -> u32 {
        let w = u64::from_le_bytes(self.bytes[56..64].try_into().expect("8 bytes"));
        ((w >> 2) & ((1 << 30) - 1)) as u32
    }

    /// Metadata bits 0..50 (bytes 50..57).
    #[inline(always)]
    pub fn bitmap(&self) -> u64 {
        let w = u64::from_le_bytes(self.bytes[50..58].try_into().expect("8 bytes"));
        w & ((1 << BITMAP_BITS) - 1)
    }

    /// Number of pointer slots (they occupy the top slots).
    #[inline(always)]
    pub fn pointer_slots(&self) -> usize {
        pointer_lanes(self.codes()).count_ones() as usize
    }

    /// One past the last byte of inline key-values.
    #[inline(always)]
    pub fn inline_end(&self) -> usize {
        64 - self.bitmap().leading_zeros() as usize
    }

    /// Bytes between the inline entries and the lowest pointer slot.
    #[inline(always)]
    pub fn free_bytes(&self) -> usize {
        (SLOTS - self.pointer_slots()) * SLOT_BYTES - self.inline_end()
    }

    /// Room for an inline key-value of `kv_len` bytes.
    #[inline(always)]
    pub fn fits_inline(&self, kv_len: usize) -> bool {
        kv_len <= self.free_bytes()
    }

    /// Room for one more pointer slot.
    #[inline(always)]
    pub fn fits_pointer(&self) -> bool {
        self.free_bytes() >= SLOT_BYTES
    }

    pub fn is_empty(&self) -> bool {
        self.codes() == 0
    }

    /// Metadata bits 80..112 are bytes 60..64: the chain pointer, the reference bit and the
    /// chain's valid bit on top.
    #[inline(always)]
    pub fn chain(&self) -> Option<u32> {
        let w = u32::from_le_bytes(self.bytes[60..64].try_into().expect("4 bytes"));
        if w >> 31 == 1 {
            Some(w & CHAIN_POINTER_MAX)
        } else {
            None
        }
    }

    /// Sets the chain pointer and its valid bit (see `chain`), keeping the reference bit.
    pub fn set_chain(&mut self, next: Option<u32>) {
        let w = match next {
            Some(p) => {
                assert!(p <= CHAIN_POINTER_MAX);
                p | (1 << 31)
            }
            None => 0,
        };
        let kept = u32::from(self.bytes[63] & REFERENCED_MASK) << 24;
        self.bytes[60..64].copy_from_slice(&(w | kept).to_le_bytes());
    }

    /// The CLOCK reference bit (metadata bit 110): a key of this main bucket's chain was used
    /// since eviction's hand last passed.
    #[inline(always)]
    pub fn referenced(&self) -> bool {
        self.bytes[63] & REFERENCED_MASK != 0
    }

    /// Sets or clears the reference bit.
    #[inline(always)]
    pub fn set_referenced(&mut self, on: bool) {
        if on {
            self.bytes[63] |= REFERENCED_MASK;
        } else {
            self.bytes[63] &= !REFERENCED_MASK;
        }
    }

    /// Byte offset, within the bucket, of the byte holding the reference bit, and its mask:
    /// for the GET path, which sets the bit through the arena's pointer (`index::MainIndex`).
    pub const REFERENCED_AT: (usize, u8) = (63, REFERENCED_MASK);

    /// Replaces the 50 bitmap bits (bytes 50..57), leaving the codes that share byte 56.
    #[inline(always)]
    fn set_bitmap(&mut self, bitmap: u64) {
        debug_assert!(bitmap >> BITMAP_BITS == 0);
        let mut w = u64::from_le_bytes(self.bytes[50..58].try_into().expect("8 bytes"));
        w = (w & !((1 << BITMAP_BITS) - 1)) | bitmap;
        self.bytes[50..58].copy_from_slice(&w.to_le_bytes());
    }

    /// Replaces the 30 code bits (byte 56 bit 2 to byte 60 bit 0).
    #[inline(always)]
    fn set_codes(&mut self, codes: u32) {
        debug_assert!(codes >> 30 == 0);
        let mut w = u64::from_le_bytes(self.bytes[56..64].try_into().expect("8 bytes"));
        w = (w & !(((1u64 << 30) - 1) << 2)) | ((codes as u64) << 2);
        self.bytes[56..64].copy_from_slice(&w.to_le_bytes());
    }

    fn set_code(&mut self, slot: usize, c: u8) {
        let shift = 3 * slot as u32;
        self.set_codes((self.codes() & !(7 << shift)) | ((c as u32) << shift));
    }

    /// (secondary hash, pointer) of a pointer slot.
    #[inline(always)]
    pub fn pointer(&self, slot: usize) -> (u16, u32) {
        let o = slot * SLOT_BYTES;
        // Slots end at byte 50, so an 8-byte load from any slot stays inside the bucket.
        let v =
            u64::from_le_bytes(self.bytes[o..o + 8].try_into().expect("8 bytes")) & ((1 << 40) - 1);
        (
            (v & ((1 << SECONDARY_HASH_BITS) - 1)) as u16,
            (v >> SECONDARY_HASH_BITS) as u32,
        )
    }

    /// The inline entry starting at byte `pos`.
    pub fn inline_entry(&self, pos: usize) -> InlineEntry {
        let m = Marks::of(self.bitmap());
        debug_assert!(m.starts >> pos & 1 == 1, "no entry starts at byte {pos}");
        let (klen, tail) = m.span(pos);
        self.entry_at(pos, klen, tail)
    }

    /// The entry at byte `pos` whose key is `klen` bytes and whose value's end mark is `tail`
    /// bytes after the key, with its deadline if it carries one.
    #[inline(always)]
    fn entry_at(&self, pos: usize, klen: usize, tail: usize) -> InlineEntry {
        if self.has_deadline(pos, klen + tail) {
            let o = pos + klen + tail - DEADLINE_BYTES;
            let d = u64::from_le_bytes(self.bytes[o..o + 8].try_into().expect("8 bytes"));
            InlineEntry {
                pos,
                klen,
                vlen: tail - DEADLINE_BYTES,
                deadline: d,
            }
        } else {
            InlineEntry {
                pos,
                klen,
                vlen: tail,
                deadline: NO_DEADLINE,
            }
        }
    }

    /// Whether the inline entry at byte `pos`, `len` bytes long in all (key and tail, as
    /// `find_inline` gives them), carries a deadline in its last 8 bytes. One test of the code
    /// word when no slot of the bucket has code 2 (module doc).
    #[inline(always)]
    pub fn has_deadline(&self, pos: usize, len: usize) -> bool {
        // The codes start at bit 2 of byte 56, so the lanes' middle bits are bits 3s + 3 of
        // bytes 56..60: one test of memory against a constant.
        let w = u32::from_le_bytes(self.bytes[56..60].try_into().expect("4 bytes"));
        w & (LANE_MID << 2) != 0 && self.deadline_code_names(pos, len)
    }

    /// The precise half of `has_deadline`, out of the fast paths' way: the start slot's code is
    /// INLINE_DEADLINE and the entry is the last one starting in it.
    #[cold]
    #[inline(never)]
    fn deadline_code_names(&self, pos: usize, len: usize) -> bool {
        let s = pos / SLOT_BYTES;
        self.code(s) == code::INLINE_DEADLINE && pos + len >= (s + 1) * SLOT_BYTES
    }

    /// Bit p set: the entry starting at byte p carries a deadline.
    fn deadline_starts(&self, m: &Marks) -> u64 {
        let mut lanes = lanes_equal(self.codes(), code::INLINE_DEADLINE);
        let mut out = 0u64;
        while lanes != 0 {
            let s = lanes.trailing_zeros() as usize / 3;
            lanes &= lanes - 1;
            let in_slot = m.starts & (0x1f << (s * SLOT_BYTES));
            debug_assert!(
                in_slot != 0,
                "slot {s} has code 2 but no entry starts in it"
            );
            out |= 1 << (63 - in_slot.leading_zeros());
        }
        out
    }

    /// Finds the inline entry whose key is `key`, with its deadline.
    #[inline(always)]
    pub fn find_inline_entry(&self, key: &[u8]) -> Option<InlineEntry> {
        let (pos, tail) = self.find_inline(key)?;
        Some(self.entry_at(pos, key.len(), tail))
    }

    /// Finds the inline entry whose key is `key`: (byte position, tail length), the tail being
    /// the value, and the deadline's 8 bytes after it if the entry carries one (ask
    /// `has_deadline`). The hot path of GET. Candidates are the bytes that may start an entry
    /// (byte 0, or one after a mark) holding the key's first byte, whose byte `key.len() - 1`
    /// further on holds its last byte and carries a mark; one SIMD comparison per 16 bytes
    /// finds them all, so nearly every probe compares one key or none. A candidate is an entry
    /// of a key this long only if an even number of marks (whole entries) lies below it and its
    /// first mark is that one.
    #[inline(always)]
    pub fn find_inline(&self, key: &[u8]) -> Option<(usize, usize)> {
        self.find_inline_with(key, Baseline)
    }

    /// [`Bucket::find_inline`] with the byte comparisons of `simd`.
    #[inline(always)]
    pub fn find_inline_with(&self, key: &[u8], simd: impl ByteMatch) -> Option<(usize, usize)> {
        let klen = key.len();
        debug_assert!((1..=INLINE_BYTES_MAX).contains(&klen));
        let bitmap = self.bitmap();
        let last = klen - 1;
        let cand = ((bitmap << 1) | 1)
            & (bitmap >> last)
            & simd.bytes_equal(&self.bytes, key[0])
            & (simd.bytes_equal(&self.bytes, key[last]) >> last);
        if cand == 0 {
            return None;
        }
        // Nearly always the first candidate is the key (a false candidate needs an entry of
        // the same length with the same first and last bytes): it is checked here, the rest
        // out of line, so the common path stays straight.
        let pos = cand.trailing_zeros() as usize;
        if let Some(vlen) = self.inline_entry_is(pos, bitmap, key) {
            return Some((pos, vlen));
        }
        self.find_inline_rest(cand & (cand - 1), bitmap, key)
    }

    /// The value length of the inline entry at byte `pos` if it is the key `key`, given that
    /// the bitmap and the first and last key bytes allow it (a candidate).
    #[inline(always)]
    fn inline_entry_is(&self, pos: usize, bitmap: u64, key: &[u8]) -> Option<usize> {
        let klen = key.len();
        let below = bitmap & ((1u64 << pos) - 1);
        if below.count_ones().is_multiple_of(2)
            && (bitmap >> pos).trailing_zeros() as usize == klen - 1
            && crate::index::key_eq(&self.bytes[pos..pos + klen], key)
        {
            Some((bitmap >> (pos + klen)).trailing_zeros() as usize + 1)
        } else {
            None
        }
    }

    /// [`Bucket::find_inline_with`] for the candidates after the first.
    #[cold]
    #[inline(never)]
    fn find_inline_rest(&self, mut cand: u64, bitmap: u64, key: &[u8]) -> Option<(usize, usize)> {
        while cand != 0 {
            let pos = cand.trailing_zeros() as usize;
            cand &= cand - 1;
            if let Some(vlen) = self.inline_entry_is(pos, bitmap, key) {
                return Some((pos, vlen));
            }
        }
        None
    }

    /// Inline entries, in byte order.
    pub fn inline_entries(&self) -> impl Iterator<Item = InlineEntry> + '_ {
        let m = Marks::of(self.bitmap());
        let mut starts = m.starts;
        std::iter::from_fn(move || {
            if starts == 0 {
                return None;
            }
            let pos = starts.trailing_zeros() as usize;
            starts &= starts - 1;
            let (klen, tail) = m.span(pos);
            Some(self.entry_at(pos, klen, tail))
        })
    }

    /// Pointer slots, lowest first.
    pub fn pointer_slot_list(&self) -> impl Iterator<Item = usize> {
        let mut lanes = pointer_lanes(self.codes());
        std::iter::from_fn(move || {
            if lanes == 0 {
                return None;
            }
            let s = lanes.trailing_zeros() as usize / 3;
            lanes &= lanes - 1;
            Some(s)
        })
    }

    pub fn inline_key(&self, e: &InlineEntry) -> &[u8] {
        &self.bytes[e.pos..e.pos + e.klen]
    }

    pub fn inline_value(&self, e: &InlineEntry) -> &[u8] {
        let o = e.pos + e.klen;
        &self.bytes[o..o + e.vlen]
    }

    /// Recomputes the codes of the inline slots (all slots below the pointer slots) from the
    /// bitmap and `deadline_starts` (bit p set: the entry starting at byte p carries a
    /// deadline).
    fn set_inline_codes(&mut self, deadline_starts: u64) {
        let end = self.inline_end();
        let codes = self.codes();
        let first_pointer = SLOTS - self.pointer_slots();
        let mut new = codes & !((1u32 << (3 * first_pointer)) - 1);
        for s in 0..first_pointer {
            let lo = s * SLOT_BYTES;
            if lo >= end {
                break;
            }
            let c = if (deadline_starts >> lo) & 0x1f != 0 {
                code::INLINE_DEADLINE
            } else {
                code::INLINE
            };
            new |= (c as u32) << (3 * s);
        }
        self.set_codes(new);
    }

    /// Appends an inline key-value without a deadline; see `push_inline_with_deadline`.
    #[cfg(test)]
    pub fn push_inline(&mut self, key: &[u8], value: &[u8]) -> Option<usize> {
        self.push_inline_with_deadline(key, value, NO_DEADLINE)
    }

    /// Appends an inline key-value, with `deadline` in 8 bytes after the value unless it is
    /// `NO_DEADLINE`, after the inline entries. Returns its byte position, or None if the free
    /// space is too short. The value must not be empty (see the module doc).
    pub fn push_inline_with_deadline(
        &mut self,
        key: &[u8],
        value: &[u8],
        deadline: u64,
    ) -> Option<usize> {
        let timed = deadline != NO_DEADLINE;
        let kv_len = key.len() + value.len();
        let len = kv_len + if timed { DEADLINE_BYTES } else { 0 };
        assert!(!key.is_empty() && !value.is_empty() && len <= INLINE_BYTES_MAX);
        if !self.fits_inline(len) {
            return None;
        }
        let bitmap = self.bitmap();
        let starts =
            self.deadline_starts(&Marks::of(bitmap)) | u64::from(timed) << self.inline_end();
        let pos = self.inline_end();
        self.bytes[pos..pos + key.len()].copy_from_slice(key);
        self.bytes[pos + key.len()..pos + kv_len].copy_from_slice(value);
        if timed {
            self.bytes[pos + kv_len..pos + len].copy_from_slice(&deadline.to_le_bytes());
        }
        self.set_bitmap(bitmap | 1u64 << (pos + key.len() - 1) | 1u64 << (pos + len - 1));
        self.set_inline_codes(starts);
        Some(pos)
    }

    /// Overwrites the deadline of the inline entry `e`, which carries one, with `deadline`.
    pub fn set_inline_deadline(&mut self, e: &InlineEntry, deadline: u64) {
        assert!(e.deadline != NO_DEADLINE && deadline != NO_DEADLINE);
        debug_assert_eq!(*e, self.inline_entry(e.pos));
        let o = e.pos + e.klen + e.vlen;
        self.bytes[o..o + DEADLINE_BYTES].copy_from_slice(&deadline.to_le_bytes());
    }

    /// Replaces the value of the inline entry at byte `pos` (key of `klen` bytes) with `value`
    /// of the same length as the old one: the key, the bitmap and the codes stay as they are.
    /// The common small case (4..=16 bytes) is two overlapping word moves, without the library
    /// call that copying a slice of run-time length makes.
    #[inline(always)]
    pub fn replace_inline_value(&mut self, pos: usize, klen: usize, value: &[u8]) {
        let vo = pos + klen;
        let n = value.len();
        debug_assert_eq!(self.inline_entry(pos).vlen, n);
        let dst = &mut self.bytes[vo..vo + n];
        if (4..=16).contains(&n) {
            // SAFETY: `dst` and `value` are n bytes each, 4 <= n <= 16, and `value` is not in
            // this bucket (it is borrowed while the bucket is borrowed mutably).
            unsafe { crate::op::copy_words(dst.as_mut_ptr(), value.as_ptr(), n) };
        } else {
            dst.copy_from_slice(value);
        }
    }

    /// Adds a pointer slot below the other pointer slots. Returns its slot, or None if there is
    /// no room.
    pub fn push_pointer(&mut self, slot_code: u8, secondary: u16, ptr: u32) -> Option<usize> {
        if !self.fits_pointer() {
            return None;
        }
        let slot = SLOTS - self.pointer_slots() - 1;
        self.set_pointer(slot, slot_code, secondary, ptr);
        Some(slot)
    }

    /// Overwrites slot `slot`, which holds no inline bytes, with a pointer.
    pub fn set_pointer(&mut self, slot: usize, slot_code: u8, secondary: u16, ptr: u32) {
        assert!(code::is_pointer(slot_code));
        assert!(ptr <= POINTER_MAX && (secondary as u32) < (1 << SECONDARY_HASH_BITS));
        debug_assert!(slot * SLOT_BYTES >= self.inline_end());
        let v = (secondary as u64) | ((ptr as u64) << SECONDARY_HASH_BITS);
        let o = slot * SLOT_BYTES;
        self.bytes[o..o + 5].copy_from_slice(&v.to_le_bytes()[..5]);
        self.set_code(slot, slot_code);
    }

    /// Removes the inline entry at byte `pos` and shifts the entries behind it left.
    pub fn remove_inline(&mut self, pos: usize) {
        let bitmap = self.bitmap();
        let m = Marks::of(bitmap);
        debug_assert!(m.starts >> pos & 1 == 1, "no entry starts at byte {pos}");
        let (klen, tail) = m.span(pos);
        let len = klen + tail;
        let end = m.end;
        self.bytes.copy_within(pos + len..end, pos);
        self.bytes[end - len..end].fill(0);
        // Bits [pos, pos + len) go, the ones above move down with their bytes.
        let cut = |x: u64| (x & ((1u64 << pos) - 1)) | ((x >> (pos + len)) << pos);
        let starts = cut(self.deadline_starts(&m));
        self.set_bitmap(cut(bitmap));
        self.set_inline_codes(starts);
    }

    /// Removes the pointer in slot `slot` and shifts the pointer slots below it up.
    pub fn remove_pointer(&mut self, slot: usize) {
        debug_assert!(code::is_pointer(self.code(slot)));
        let first = SLOTS - self.pointer_slots();
        let (lo, hi) = (first * SLOT_BYTES, slot * SLOT_BYTES);
        self.bytes.copy_within(lo..hi, lo + SLOT_BYTES);
        self.bytes[lo..lo + SLOT_BYTES].fill(0);
        let codes = self.codes();
        let moving = codes & (((1u32 << (3 * slot)) - 1) & !((1u32 << (3 * first)) - 1));
        let kept = codes & !(((1u32 << (3 * (slot + 1))) - 1) & !((1u32 << (3 * first)) - 1));
        self.set_codes(kept | (moving << 3));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(b: &Bucket) -> Vec<(Vec<u8>, Vec<u8>)> {
        b.inline_entries()
            .map(|e| (b.inline_key(&e).to_vec(), b.inline_value(&e).to_vec()))
            .collect()
    }

    /// Codes recomputed from scratch: what every mutation must leave behind.
    fn check_codes(b: &Bucket) {
        let ptrs = b.pointer_slots();
        let end = b.inline_end();
        assert!(
            end <= (SLOTS - ptrs) * SLOT_BYTES,
            "inline bytes run into pointer slots"
        );
        // Every slot with code 2 names the entry with a deadline that starts in it.
        let timed: Vec<usize> = b
            .inline_entries()
            .filter(|e| e.deadline != NO_DEADLINE)
            .map(|e| e.pos)
            .collect();
        for s in 0..SLOTS {
            let want = if s >= SLOTS - ptrs {
                assert!(code::is_pointer(b.code(s)), "slot {s} {:?}", b);
                continue;
            } else if s * SLOT_BYTES >= end {
                code::EMPTY
            } else if timed.iter().any(|&p| p / SLOT_BYTES == s) {
                code::INLINE_DEADLINE
            } else {
                code::INLINE
            };
            assert_eq!(b.code(s), want, "slot {s} of {b:?}");
        }
        // Bytes past the inline entries and below the pointers are zero.
        assert!(b.bytes[end..(SLOTS - ptrs) * SLOT_BYTES]
            .iter()
            .all(|&x| x == 0));
    }

    #[test]
    fn empty_bucket() {
        let b = Bucket::default();
        assert!(b.is_empty());
        assert_eq!(b.free_bytes(), 50);
        assert_eq!(b.chain(), None);
        assert_eq!(b.find_inline(b"k"), None);
    }

    #[test]
    fn inline_roundtrip_and_exact_fill() {
        let mut b = Bucket::default();
        // Five 10-byte key-values (6 + 4) fill exactly 50 bytes.
        for i in 0..5u8 {
            let key = [i, 1, 2, 3, 4, 5];
            assert_eq!(b.push_inline(&key, &[9, 9, 9, i]), Some(10 * i as usize));
            check_codes(&b);
        }
        assert_eq!(b.free_bytes(), 0);
        assert!(!b.fits_pointer());
        assert_eq!(b.push_inline(b"k", b"v"), None);
        for (n, (k, v)) in entries(&b).into_iter().enumerate() {
            assert_eq!(k, [n as u8, 1, 2, 3, 4, 5]);
            assert_eq!(v, [9, 9, 9, n as u8]);
            assert_eq!(b.find_inline(&k), Some((10 * n, 4)));
        }
    }

    #[test]
    fn three_sixteen_byte_pairs_share_a_bucket() {
        let mut b = Bucket::default();
        for i in 0..3u8 {
            let key = [b'k', b'e', b'y', 0, 0, 0, 0, i];
            let value = [i; 8];
            assert_eq!(b.push_inline(&key, &value), Some(16 * i as usize));
            check_codes(&b);
        }
        assert_eq!(b.free_bytes(), 2);
        assert_eq!(b.push_inline(b"k", b"v"), Some(48)); // 2 bytes left: a 1 + 1 pair fits
        assert_eq!(b.free_bytes(), 0);
        // Entries start mid-slot: 16 is in slot 3, 32 in slot 6.
        assert_eq!(b.code(3), code::INLINE);
        assert_eq!(b.code(6), code::INLINE);
        assert_eq!(b.code(4), code::INLINE);
        for i in 0..3u8 {
            let key = [b'k', b'e', b'y', 0, 0, 0, 0, i];
            let (pos, vlen) = b.find_inline(&key).unwrap();
            assert_eq!((pos, vlen), (16 * i as usize, 8));
            assert_eq!(&b.bytes[pos + 8..pos + 16], &[i; 8]);
        }
        assert_eq!(b.find_inline(b"k"), Some((48, 1)));
        assert_eq!(b.find_inline(b"key\0\0\0\0\x03"), None);
    }

    #[test]
    fn one_kv_spanning_all_fifty_bytes() {
        let mut b = Bucket::default();
        let key = [7u8; 20];
        let value = [8u8; 30];
        assert_eq!(b.push_inline(&key, &value), Some(0));
        let e = b.inline_entry(0);
        assert_eq!((e.klen, e.vlen), (20, 30));
        assert_eq!(b.inline_value(&e), &value);
        assert_eq!(b.free_bytes(), 0);
        check_codes(&b);
    }

    #[test]
    fn an_entry_starting_mid_slot_can_end_exactly_at_byte_50() {
        let mut b = Bucket::default();
        b.push_inline(b"abc", b"d").unwrap(); // bytes 0..4
        assert_eq!(b.push_inline(&[1u8; 20], &[2u8; 26]), Some(4)); // bytes 4..50
        assert_eq!(b.inline_end(), 50);
        assert_eq!(b.find_inline(&[1u8; 20]), Some((4, 26)));
        assert_eq!(b.find_inline(b"abc"), Some((0, 1)));
        check_codes(&b);
        b.remove_inline(0);
        assert_eq!(b.find_inline(&[1u8; 20]), Some((0, 26)));
        assert_eq!(b.inline_end(), 46);
        check_codes(&b);
    }

    #[test]
    fn inline_bytes_meet_the_pointer_slots_exactly() {
        let mut b = Bucket::default();
        b.push_pointer(code::PTR_SMALL_FIRST, 5, 100).unwrap(); // slot 9
        b.push_pointer(code::PTR_LARGE, 6, 200).unwrap(); // slot 8
        assert_eq!(b.free_bytes(), 40);
        assert!(b.push_inline(&[3u8; 20], &[4u8; 21]).is_none()); // 41 > 40
        assert_eq!(b.push_inline(&[3u8; 20], &[4u8; 20]), Some(0));
        assert_eq!(b.free_bytes(), 0);
        assert!(!b.fits_pointer());
        assert_eq!(b.pointer(9), (5, 100));
        assert_eq!(b.pointer(8), (6, 200));
        check_codes(&b);
        // A pointer needs a whole free slot: 4 free bytes are not enough.
        b.remove_inline(0);
        b.push_inline(&[3u8; 20], &[4u8; 16]).unwrap();
        assert_eq!(b.free_bytes(), 4);
        assert!(!b.fits_pointer());
        assert_eq!(b.push_pointer(code::PTR_SMALL_FIRST, 1, 1), None);
        check_codes(&b);
    }

    #[test]
    fn removing_the_middle_of_three_shifts_the_last() {
        let mut b = Bucket::default();
        b.push_inline(b"first-k!", b"11111111").unwrap();
        b.push_inline(b"middle", b"2").unwrap();
        b.push_inline(b"last-key", b"333").unwrap();
        b.push_pointer(code::PTR_SMALL_FIRST + 1, 9, 77).unwrap();
        b.set_chain(Some(42));
        let (pos, _) = b.find_inline(b"middle").unwrap();
        assert_eq!(pos, 16);
        b.remove_inline(pos);
        assert_eq!(
            entries(&b),
            vec![
                (b"first-k!".to_vec(), b"11111111".to_vec()),
                (b"last-key".to_vec(), b"333".to_vec())
            ]
        );
        assert_eq!(b.find_inline(b"last-key"), Some((16, 3)));
        assert_eq!(b.find_inline(b"middle"), None);
        assert_eq!(b.pointer(9), (9, 77));
        assert_eq!(b.chain(), Some(42));
        check_codes(&b);
    }

    #[test]
    fn keys_and_values_of_every_length_round_trip_in_every_position() {
        // A prefix entry of every length puts the entry under test at every byte offset.
        for pre in 0..=48usize {
            for klen in 1..=20usize {
                for vlen in 1..=(50 - pre).saturating_sub(klen).min(30) {
                    let mut b = Bucket::default();
                    if pre >= 2 {
                        b.push_inline(&vec![0xaa; pre - 1], b"p").unwrap();
                    } else if pre == 1 {
                        continue;
                    }
                    let key: Vec<u8> = (0..klen as u8).map(|x| x.wrapping_mul(13) | 1).collect();
                    let value: Vec<u8> = (0..vlen as u8).map(|x| x ^ 0x5a).collect();
                    assert_eq!(b.push_inline(&key, &value), Some(pre));
                    assert_eq!(b.find_inline(&key), Some((pre, vlen)));
                    let e = b.inline_entry(pre);
                    assert_eq!(
                        (b.inline_key(&e), b.inline_value(&e)),
                        (&key[..], &value[..])
                    );
                    check_codes(&b);
                }
            }
        }
    }

    #[test]
    fn pointers_and_secondary_hash_collisions() {
        let mut b = Bucket::default();
        // Two pointers with the same secondary hash are both kept; the full key decides.
        assert_eq!(
            b.push_pointer(code::PTR_SMALL_FIRST, 0x1ff, POINTER_MAX),
            Some(9)
        );
        assert_eq!(b.push_pointer(code::PTR_LARGE, 0x1ff, 12345), Some(8));
        assert_eq!(b.pointer(9), (0x1ff, POINTER_MAX));
        assert_eq!(b.pointer(8), (0x1ff, 12345));
        assert_eq!(b.code(8), code::PTR_LARGE);
        assert_eq!(b.pointer_slots(), 2);
        assert_eq!(b.pointer_slot_list().collect::<Vec<_>>(), vec![8, 9]);
        check_codes(&b);
    }

    #[test]
    fn remove_shifts_entries_and_bits() {
        let mut b = Bucket::default();
        b.push_inline(b"key1", b"v").unwrap();
        b.push_pointer(4, 3, 77).unwrap();
        b.push_pointer(5, 4, 88).unwrap();
        b.push_inline(b"longer-key", b"value!").unwrap();
        b.set_chain(Some(99));
        b.remove_inline(0);
        assert_eq!(b.find_inline(b"longer-key"), Some((0, 6)));
        b.remove_pointer(9);
        assert_eq!((b.code(9), b.pointer(9)), (5, (4, 88)));
        assert_eq!(b.code(8), code::EMPTY);
        check_codes(&b);
        assert_eq!(b.chain(), Some(99));
        b.remove_inline(0);
        b.remove_pointer(9);
        assert!(b.is_empty());
        assert_eq!(b.bitmap(), 0);
        assert_eq!(&b.bytes[..50], &[0u8; 50][..]);
        assert_eq!(b.chain(), Some(99));
        b.set_chain(None);
        assert_eq!(b, Bucket::default());
    }

    #[test]
    fn removing_a_pointer_keeps_the_others_and_their_codes() {
        let mut b = Bucket::default();
        for i in 0..4u32 {
            b.push_pointer(code::PTR_SMALL_FIRST + i as u8, i as u16, 1000 + i)
                .unwrap();
        }
        // Slots 9, 8, 7, 6 hold pointers 0, 1, 2, 3; remove the one in slot 8.
        b.remove_pointer(8);
        let got: Vec<(u8, (u16, u32))> = b
            .pointer_slot_list()
            .map(|s| (b.code(s), b.pointer(s)))
            .collect();
        assert_eq!(
            got,
            vec![(6, (3, 1003)), (5, (2, 1002)), (3, (0, 1000))],
            "{b:?}"
        );
        check_codes(&b);
    }

    #[test]
    fn replace_inline_value_matches_a_full_rewrite() {
        // Every key and value length, at several offsets, with neighbours on both sides:
        // replacing the value in place must give the same bucket as removing and re-adding.
        for klen in 1..=20usize {
            for vlen in 1..=(30usize.min(48 - klen)) {
                let key: Vec<u8> = (0..klen as u8).map(|b| b.wrapping_mul(7) | 1).collect();
                let mut b = Bucket::default();
                b.push_inline(b"n", b"1").unwrap();
                let pos = b.push_inline(&key, &vec![0xee; vlen]).unwrap();
                let v: Vec<u8> = (0..vlen as u8).map(|x| x ^ 0x5a).collect();
                let mut got = b;
                got.replace_inline_value(pos, klen, &v);
                let mut want = b;
                want.remove_inline(pos);
                want.push_inline(&key, &v).unwrap();
                // Same entries (order may differ), same bytes where each lives.
                let mut g = entries(&got);
                let mut w = entries(&want);
                g.sort();
                w.sort();
                assert_eq!(g, w, "klen {klen} vlen {vlen}");
                assert_eq!(got.find_inline(&key), Some((pos, vlen)));
                assert_eq!(got.find_inline(b"n"), Some((0, 1)));
                check_codes(&got);
            }
        }
    }

    #[test]
    #[should_panic]
    fn empty_values_are_never_inline() {
        // Table::is_inline sends them to records; the bucket refuses them outright.
        Bucket::default().push_inline(b"key", b"");
    }

    #[test]
    fn keys_that_are_prefixes_of_others_are_told_apart() {
        let mut b = Bucket::default();
        b.push_inline(b"ab", b"cd").unwrap();
        b.push_inline(b"abc", b"d").unwrap();
        b.push_inline(b"a", b"bcd").unwrap();
        assert_eq!(b.find_inline(b"ab"), Some((0, 2)));
        assert_eq!(b.find_inline(b"abc"), Some((4, 1)));
        assert_eq!(b.find_inline(b"a"), Some((8, 3)));
        assert_eq!(b.find_inline(b"abcd"), None);
    }

    #[test]
    fn a_key_spanning_two_entries_is_not_found() {
        // Entry "ab" -> "cd" is followed by "ef" -> "ghij": the six bytes "abcdef" start at an
        // entry start and end where a key ends, but they are no entry's key.
        let mut b = Bucket::default();
        b.push_inline(b"ab", b"cd").unwrap();
        b.push_inline(b"ef", b"ghij").unwrap();
        assert_eq!(b.find_inline(b"abcdef"), None);
        assert_eq!(b.find_inline(b"ab"), Some((0, 2)));
        assert_eq!(b.find_inline(b"ef"), Some((4, 4)));
        // A key of the same length as the spanned bytes, and the value bytes of one entry.
        let mut b = Bucket::default();
        b.push_inline(b"x", b"yz").unwrap();
        b.push_inline(b"abc", b"d").unwrap();
        assert_eq!(b.find_inline(b"xyza"), None);
        assert_eq!(b.find_inline(b"yza"), None);
        assert_eq!(b.find_inline(b"abc"), Some((3, 1)));
    }

    #[test]
    fn find_inline_agrees_with_a_scan_of_the_entries_for_every_substring() {
        // Buckets of random entries over a two-letter alphabet (so keys, values and the bytes
        // between them repeat), queried with every substring of their bytes: only a real
        // entry's key may be found, at that entry.
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        for _ in 0..300 {
            let mut b = Bucket::default();
            loop {
                let klen = 1 + next(6) as usize;
                let vlen = 1 + next(6) as usize;
                let kv: Vec<u8> = (0..klen + vlen).map(|_| b'a' + next(2) as u8).collect();
                let (k, v) = kv.split_at(klen);
                if b.inline_entries().any(|e| b.inline_key(&e) == k) {
                    continue;
                }
                if b.push_inline(k, v).is_none() {
                    break;
                }
            }
            let end = b.inline_end();
            for from in 0..end {
                for to in from + 1..=end.min(from + 12) {
                    let q = &b.bytes[from..to];
                    let want = b
                        .inline_entries()
                        .find(|e| b.inline_key(e) == q)
                        .map(|e| (e.pos, e.vlen));
                    assert_eq!(b.find_inline(q), want, "query {:?}", q);
                }
            }
        }
    }

    /// A key-value with a deadline at every byte offset, behind a plain entry of every length
    /// (so the two share a start slot or not) and before a short plain one: each is found with
    /// its own value and deadline, and only the one with a deadline has one.
    #[test]
    fn an_entry_with_a_deadline_round_trips_in_every_position() {
        for pre in (0..=40usize).filter(|&p| p != 1) {
            for klen in 1..=8usize {
                for vlen in 1..=(42 - pre).saturating_sub(klen).min(12) {
                    let mut b = Bucket::default();
                    if pre >= 2 {
                        b.push_inline(&vec![0xaa; pre - 1], b"p").unwrap();
                    }
                    let key: Vec<u8> = (0..klen as u8).map(|x| x.wrapping_mul(13) | 1).collect();
                    let value: Vec<u8> = (0..vlen as u8).map(|x| x ^ 0x5a).collect();
                    let d = 0x0102_0304_0506_0708 + pre as u64;
                    assert_eq!(b.push_inline_with_deadline(&key, &value, d), Some(pre));
                    let after = b.push_inline(b"z", b"y");
                    let e = b.find_inline_entry(&key).unwrap();
                    assert_eq!((e.pos, e.klen, e.vlen, e.deadline), (pre, klen, vlen, d));
                    assert_eq!(b.inline_value(&e), &value[..]);
                    assert_eq!(b.find_inline(&key), Some((pre, vlen + 8)));
                    assert!(b.has_deadline(pre, klen + vlen + 8));
                    if pre >= 2 {
                        let p = b.find_inline_entry(&vec![0xaa; pre - 1]).unwrap();
                        assert_eq!((p.pos, p.vlen, p.deadline), (0, 1, NO_DEADLINE));
                    }
                    if let Some(at) = after {
                        let z = b.find_inline_entry(b"z").unwrap();
                        assert_eq!((z.pos, z.vlen, z.deadline), (at, 1, NO_DEADLINE));
                    }
                    check_codes(&b);
                }
            }
        }
    }

    /// Random pushes (half with a deadline) and removes against a list of what was stored:
    /// removing an entry shifts the ones behind it, and their deadlines move with them.
    #[test]
    fn entries_keep_their_deadlines_through_pushes_and_removes() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        for round in 0..3000u64 {
            let mut b = Bucket::default();
            let mut model: Vec<(Vec<u8>, Vec<u8>, u64)> = Vec::new();
            if round % 3 == 0 {
                b.push_pointer(code::PTR_LARGE, 1, 2).unwrap();
            }
            for step in 0..40u64 {
                if !model.is_empty() && next(3) == 0 {
                    let (k, _, _) = model.remove(next(model.len() as u64) as usize);
                    let (pos, _) = b.find_inline(&k).unwrap();
                    b.remove_inline(pos);
                } else {
                    let klen = 1 + next(9) as usize;
                    let vlen = 1 + next(9) as usize;
                    let mut k: Vec<u8> = (0..klen).map(|_| b'a' + next(2) as u8).collect();
                    k.push(step as u8); // distinct keys
                    let v: Vec<u8> = (0..vlen).map(|_| b'a' + next(2) as u8).collect();
                    let d = if next(2) == 0 {
                        NO_DEADLINE
                    } else {
                        1 + next(1 << 40)
                    };
                    let room = k.len() + vlen + if d == NO_DEADLINE { 0 } else { 8 };
                    let fits = room <= b.free_bytes();
                    assert_eq!(b.push_inline_with_deadline(&k, &v, d).is_some(), fits);
                    if fits {
                        model.push((k, v, d));
                    }
                }
                let got: Vec<(Vec<u8>, Vec<u8>, u64)> = b
                    .inline_entries()
                    .map(|e| {
                        (
                            b.inline_key(&e).to_vec(),
                            b.inline_value(&e).to_vec(),
                            e.deadline,
                        )
                    })
                    .collect();
                assert_eq!(got, model, "round {round} step {step}: {b:?}");
                for (k, v, d) in &model {
                    let e = b.find_inline_entry(k).unwrap();
                    assert_eq!((b.inline_value(&e), e.deadline), (&v[..], *d));
                }
                check_codes(&b);
            }
        }
    }

    #[test]
    fn a_deadline_and_the_value_before_it_change_in_place() {
        let mut b = Bucket::default();
        b.push_inline(b"a", b"1").unwrap();
        b.push_inline_with_deadline(b"key", b"value", 77).unwrap();
        b.push_inline(b"b", b"2").unwrap();
        let e = b.find_inline_entry(b"key").unwrap();
        b.replace_inline_value(e.pos, e.klen, b"VALUE");
        b.set_inline_deadline(&e, 1 << 50);
        let e = b.find_inline_entry(b"key").unwrap();
        assert_eq!((b.inline_value(&e), e.deadline), (&b"VALUE"[..], 1 << 50));
        assert_eq!(b.find_inline(b"b"), Some((2 + 16, 1)));
        check_codes(&b);
    }

    #[test]
    fn without_deadlines_the_first_test_decides() {
        // Plain inline entries leave the middle bit of every code lane clear, so
        // `has_deadline` answers from the code word alone.
        let mut b = Bucket::default();
        b.push_inline(b"key-0001", b"value-01").unwrap();
        b.push_inline(b"key-0002", b"value-02").unwrap();
        assert_eq!(b.codes() & LANE_MID, 0);
        assert!(!b.has_deadline(0, 16));
        b.push_inline_with_deadline(b"k", b"v", 5).unwrap();
        assert_ne!(b.codes() & LANE_MID, 0);
        assert!(!b.has_deadline(0, 16) && !b.has_deadline(16, 16) && b.has_deadline(32, 10));
        assert_eq!(b.inline_end(), 42);
    }
}

#[cfg(test)]
mod layout_tests {
    use super::*;

    #[test]
    fn lanes_equal_finds_exact_codes() {
        let mut codes = 0u32;
        for (s, c) in [1u32, 2, 2, 3, 7, 1, 0, 5, 2, 1].iter().enumerate() {
            codes |= c << (3 * s);
        }
        assert_eq!(lanes_equal(codes, 1), (1 << 0) | (1 << 15) | (1 << 27));
        assert_eq!(lanes_equal(codes, 2), (1 << 3) | (1 << 6) | (1 << 24));
        assert_eq!(lanes_equal(codes, 7), 1 << 12);
        assert_eq!(lanes_equal(codes, 0), 1 << 18);
    }

    #[test]
    fn fast_accessors_agree_with_the_u128_metadata() {
        let mut b = Bucket::default();
        b.push_inline(b"abc", b"defgh").unwrap();
        b.push_pointer(code::PTR_LARGE, 0x155, 0x2aaa_aaaa).unwrap();
        b.push_inline(b"k", b"v").unwrap();
        b.set_chain(Some(CHAIN_POINTER_MAX));
        let m = b.meta();
        assert_eq!(b.bitmap() as u128, m & ((1 << 50) - 1));
        assert_eq!(b.codes() as u128, (m >> 50) & ((1 << 30) - 1));
        assert_eq!(b.chain(), Some(CHAIN_POINTER_MAX));
        assert_eq!(b.pointer(9), (0x155, 0x2aaa_aaaa));
        assert_eq!(b.code(9), code::PTR_LARGE);
        b.set_chain(None);
        assert_eq!(b.chain(), None);
    }

    /// The reference bit is metadata bit 110, apart from the chain: setting one never changes
    /// the other, and nothing else in the bucket.
    #[test]
    fn reference_bit_is_independent_of_the_chain() {
        let mut b = Bucket::default();
        b.push_inline(b"abc", b"defgh").unwrap();
        b.set_chain(Some(CHAIN_POINTER_MAX));
        let before = b;
        assert!(!b.referenced());
        b.set_referenced(true);
        assert!(b.referenced());
        assert_eq!(b.meta() >> 110 & 1, 1);
        assert_eq!(b.chain(), Some(CHAIN_POINTER_MAX));
        b.set_chain(Some(5));
        assert!(b.referenced());
        assert_eq!(b.chain(), Some(5));
        b.set_chain(None);
        assert!(b.referenced() && b.chain().is_none());
        b.set_chain(Some(CHAIN_POINTER_MAX));
        b.set_referenced(false);
        assert_eq!(b, before);
        assert_eq!(b.inline_entries().count(), 1);
    }
}
