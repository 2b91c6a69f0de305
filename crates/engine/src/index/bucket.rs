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
//!                50..80   ten 3-bit slot codes (slot s at bit 50 + 3s), see `SlotCode`
//!                80..111  31-bit pointer to the next chained bucket, in 32-byte units
//!                    111  chain valid bit
//!
//! pointer slot (40 bits, little-endian): bits 0..9 secondary hash, bits 9..40 record pointer
//! in 32-byte units (31 bits: 64 GiB).
//! ```
//!
//! Invariant kept by every mutation: used slots form a prefix of the bucket, so free slots are a
//! contiguous run at the end and "is there room for n slots" is one comparison. Removing an entry
//! shifts the entries behind it to the left; this costs nothing extra in memory accesses because
//! the whole bucket is one cache line that the operation writes anyway.

/// Hash slots per bucket.
pub const SLOTS: usize = 10;
/// Bytes per hash slot.
pub const SLOT_BYTES: usize = 5;
/// Bytes of slot space, the most an inline key-value can occupy.
pub const INLINE_BYTES_MAX: usize = SLOTS * SLOT_BYTES;
/// Bits of the secondary hash stored in pointer slots.
pub const SECONDARY_HASH_BITS: u32 = 9;
/// Bits of a pointer (in 32-byte units).
pub const POINTER_BITS: u32 = 31;
pub const POINTER_MAX: u32 = (1 << POINTER_BITS) - 1;

const BITMAP_BITS: u32 = 50;
const CHAIN_SHIFT: u32 = 80;
const CHAIN_VALID_BIT: u32 = 111;
const META_BYTES: usize = 64 - INLINE_BYTES_MAX;

/// What a slot holds (3 bits).
pub mod code {
    pub const EMPTY: u8 = 0;
    pub const INLINE_START: u8 = 1;
    pub const INLINE_CONT: u8 = 2;
    /// Codes 3..=6: pointer to a record of slab class 0..=3 (32..256 bytes) with a 2-byte header.
    pub const PTR_SMALL_FIRST: u8 = 3;
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
// The chain word (bytes 60..64) starts right after the codes.
const _: () =
    assert!(CHAIN_SHIFT == 30 + 50 && (INLINE_BYTES_MAX * 8) as u32 + CHAIN_SHIFT == 60 * 8);

/// Bit 0 of every 3-bit code lane.
const LANE_LOW: u32 = 0b001_001_001_001_001_001_001_001_001_001;

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

/// The bytes of `v` (at most 16) as a little-endian number, read with two overlapping loads
/// instead of a copy of run-time length.
#[inline(always)]
fn load_le_16(v: &[u8]) -> u128 {
    let n = v.len();
    debug_assert!(n <= 16);
    let r8 = |o: usize| u64::from_le_bytes(v[o..o + 8].try_into().expect("8 bytes")) as u128;
    let r4 = |o: usize| u32::from_le_bytes(v[o..o + 4].try_into().expect("4 bytes")) as u128;
    // The second load ends at the last byte; where the two overlap they hold the same bytes.
    match n {
        8..=16 => r8(0) | (r8(n - 8) << (8 * (n - 8))),
        4..=7 => r4(0) | (r4(n - 4) << (8 * (n - 4))),
        1..=3 => {
            v[0] as u128
                | ((v[n / 2] as u128) << (8 * (n / 2)))
                | ((v[n - 1] as u128) << (8 * (n - 1)))
        }
        _ => 0,
    }
}

/// A decoded inline entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InlineEntry {
    pub slot: usize,
    pub klen: usize,
    pub vlen: usize,
    pub slots: usize,
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

/// Slots needed by an inline key-value of `kv_len` bytes.
pub const fn inline_slots(kv_len: usize) -> usize {
    kv_len.div_ceil(SLOT_BYTES)
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

    /// Number of used slots (the used prefix).
    #[inline(always)]
    pub fn used_slots(&self) -> usize {
        let codes = self.codes();
        if codes == 0 {
            return 0;
        }
        // Highest non-zero 3-bit group + 1.
        let top_bit = 31 - codes.leading_zeros() as usize;
        top_bit / 3 + 1
    }

    #[inline(always)]
    pub fn free_slots(&self) -> usize {
        SLOTS - self.used_slots()
    }

    pub fn is_empty(&self) -> bool {
        self.codes() == 0
    }

    /// Metadata bits 80..112 are bytes 60..64: the chain pointer and its valid bit on top.
    #[inline(always)]
    pub fn chain(&self) -> Option<u32> {
        let w = u32::from_le_bytes(self.bytes[60..64].try_into().expect("4 bytes"));
        if w >> 31 == 1 {
            Some(w & POINTER_MAX)
        } else {
            None
        }
    }

    /// Bytes 60..64 hold only the chain pointer and its valid bit (see `chain`).
    pub fn set_chain(&mut self, next: Option<u32>) {
        let w = match next {
            Some(p) => {
                assert!(p <= POINTER_MAX);
                p | (1 << 31)
            }
            None => 0,
        };
        self.bytes[60..64].copy_from_slice(&w.to_le_bytes());
    }

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

    /// Decodes the inline entry starting at `slot` (whose code must be INLINE_START).
    #[inline(always)]
    pub fn inline_entry(&self, slot: usize) -> InlineEntry {
        debug_assert_eq!(self.code(slot), code::INLINE_START);
        let codes = self.codes();
        // The entry spans up to the next slot that does not continue it.
        let not_cont = !lanes_equal(codes, code::INLINE_CONT) & LANE_LOW;
        let after = not_cont >> (3 * (slot + 1));
        let slots = if after == 0 {
            SLOTS - slot
        } else {
            1 + after.trailing_zeros() as usize / 3
        };
        let start = slot * SLOT_BYTES;
        let span_end = (slot + slots) * SLOT_BYTES;
        let bits = self.bitmap() >> start;
        let key_end = start + bits.trailing_zeros() as usize;
        debug_assert!(key_end < span_end);
        let rest = bits >> (key_end - start + 1);
        let next = key_end + 1 + rest.trailing_zeros() as usize;
        let value_end = if rest != 0 && next < span_end {
            next
        } else {
            key_end
        };
        InlineEntry {
            slot,
            klen: key_end - start + 1,
            vlen: value_end - key_end,
            slots,
        }
    }

    /// Finds the inline entry whose key is `key`: (slot, value length). The hot path of GET.
    #[inline(always)]
    pub fn find_inline(&self, key: &[u8]) -> Option<(usize, usize)> {
        let klen = key.len();
        debug_assert!((1..=INLINE_BYTES_MAX).contains(&klen));
        let codes = self.codes();
        let mut starts = lanes_equal(codes, code::INLINE_START);
        if starts == 0 {
            return None;
        }
        let bitmap = self.bitmap();
        let want = 1u64 << (klen - 1);
        let mask = (want << 1).wrapping_sub(1);
        while starts != 0 {
            let s = starts.trailing_zeros() as usize / 3;
            starts &= starts - 1;
            let o = s * SLOT_BYTES;
            // The first marked byte at or after the slot start is the key's last byte.
            if (bitmap >> o) & mask == want && crate::index::key_eq(&self.bytes[o..o + klen], key) {
                // The value ends at the next marked byte inside the entry's span, if any.
                let not_cont = !lanes_equal(codes, code::INLINE_CONT) & LANE_LOW;
                let after = not_cont >> (3 * (s + 1));
                let span_end = if after == 0 {
                    INLINE_BYTES_MAX
                } else {
                    (s + 1 + after.trailing_zeros() as usize / 3) * SLOT_BYTES
                };
                let rest = bitmap >> (o + klen);
                let next = o + klen + rest.trailing_zeros() as usize;
                let vlen = if rest != 0 && next < span_end {
                    next - (o + klen) + 1
                } else {
                    0
                };
                return Some((s, vlen));
            }
        }
        None
    }

    pub fn inline_key(&self, e: &InlineEntry) -> &[u8] {
        let o = e.slot * SLOT_BYTES;
        &self.bytes[o..o + e.klen]
    }

    pub fn inline_value(&self, e: &InlineEntry) -> &[u8] {
        let o = e.slot * SLOT_BYTES + e.klen;
        &self.bytes[o..o + e.vlen]
    }

    /// Number of slots the entry starting at `slot` occupies.
    pub fn entry_slots(&self, slot: usize) -> usize {
        match self.code(slot) {
            code::INLINE_START => self.inline_entry(slot).slots,
            c if code::is_pointer(c) => 1,
            c => panic!("slot {slot} holds code {c}, not the start of an entry"),
        }
    }

    /// Appends an inline key-value after the used prefix. Returns its first slot, or None if the
    /// free run is too short.
    pub fn push_inline(&mut self, key: &[u8], value: &[u8]) -> Option<usize> {
        let kv_len = key.len() + value.len();
        assert!(!key.is_empty() && kv_len <= INLINE_BYTES_MAX);
        let n = inline_slots(kv_len);
        let slot = self.used_slots();
        if SLOTS - slot < n {
            return None;
        }
        self.write_inline_at(slot, n, key, value);
        Some(slot)
    }

    /// Writes an inline entry at `slot` over `n` slots that are free or belong to an entry of the
    /// same slot count being replaced.
    pub fn write_inline_at(&mut self, slot: usize, n: usize, key: &[u8], value: &[u8]) {
        let kv_len = key.len() + value.len();
        debug_assert_eq!(inline_slots(kv_len), n);
        let o = slot * SLOT_BYTES;
        let span = n * SLOT_BYTES;
        self.bytes[o..o + key.len()].copy_from_slice(key);
        self.bytes[o + key.len()..o + kv_len].copy_from_slice(value);
        self.bytes[o + kv_len..o + span].fill(0);
        let mut bitmap = self.bitmap() & !(((1u64 << span) - 1) << o);
        bitmap |= 1u64 << (o + key.len() - 1);
        bitmap |= 1u64 << (o + kv_len - 1);
        self.set_bitmap(bitmap);
        // INLINE_START in the first lane, INLINE_CONT in the other n - 1.
        let lanes = (1u32 << (3 * n)) - 1;
        let new = ((LANE_LOW * code::INLINE_CONT as u32) & lanes & !7) | code::INLINE_START as u32;
        self.set_codes((self.codes() & !(lanes << (3 * slot))) | (new << (3 * slot)));
    }

    /// Replaces the value of the inline entry at `slot` (key of `klen` bytes, `slots` slots)
    /// with `value`, which must need the same number of slots. The key, the codes and the key's
    /// bitmap bit stay as they are. The common small case is one 16-byte merge, without the
    /// library calls that copying and zero-filling slices of run-time length make.
    #[inline]
    pub fn replace_inline_value(&mut self, slot: usize, klen: usize, slots: usize, value: &[u8]) {
        let o = slot * SLOT_BYTES;
        let vo = o + klen;
        let end = o + slots * SLOT_BYTES;
        debug_assert!(klen >= 1 && inline_slots(klen + value.len()) == slots);
        let vlen = value.len();
        // Bytes vo..end become the value followed by zeros.
        if end - vo <= 16 && vo + 16 <= self.bytes.len() {
            let keep = (end - vo) * 8;
            let mask = if keep == 128 {
                u128::MAX
            } else {
                (1u128 << keep) - 1
            };
            let w: &mut [u8; 16] = (&mut self.bytes[vo..vo + 16]).try_into().expect("16 bytes");
            let cur = u128::from_le_bytes(*w);
            *w = ((load_le_16(value) & mask) | (cur & !mask)).to_le_bytes();
        } else {
            self.bytes[vo..vo + vlen].copy_from_slice(value);
            self.bytes[vo + vlen..end].fill(0);
        }
        let span_bits = ((1u64 << (end - vo)) - 1) << vo;
        let mut bitmap = self.bitmap() & !span_bits;
        if vlen > 0 {
            bitmap |= 1u64 << (vo + vlen - 1);
        }
        self.set_bitmap(bitmap);
    }

    /// Appends a pointer slot. Returns its slot, or None if the bucket is full.
    pub fn push_pointer(&mut self, slot_code: u8, secondary: u16, ptr: u32) -> Option<usize> {
        let slot = self.used_slots();
        if slot == SLOTS {
            return None;
        }
        self.set_pointer(slot, slot_code, secondary, ptr);
        Some(slot)
    }

    /// Overwrites slot `slot` with a pointer.
    pub fn set_pointer(&mut self, slot: usize, slot_code: u8, secondary: u16, ptr: u32) {
        assert!(code::is_pointer(slot_code));
        assert!(ptr <= POINTER_MAX && (secondary as u32) < (1 << SECONDARY_HASH_BITS));
        let v = (secondary as u64) | ((ptr as u64) << SECONDARY_HASH_BITS);
        let o = slot * SLOT_BYTES;
        self.bytes[o..o + 5].copy_from_slice(&v.to_le_bytes()[..5]);
        self.set_bitmap(self.bitmap() & !(((1u64 << SLOT_BYTES) - 1) << o));
        self.set_code(slot, slot_code);
    }

    /// Removes the entry starting at `slot` and shifts the entries behind it left, keeping the
    /// used prefix contiguous.
    pub fn remove(&mut self, slot: usize) {
        let n = self.entry_slots(slot);
        let used = self.used_slots();
        let (lo, hi, end) = (
            slot * SLOT_BYTES,
            (slot + n) * SLOT_BYTES,
            used * SLOT_BYTES,
        );
        self.bytes.copy_within(hi..end, lo);
        self.bytes[end - (hi - lo)..end].fill(0);
        let bitmap = self.bitmap();
        let moved_bits = (bitmap >> hi) << lo;
        self.set_bitmap((bitmap & ((1u64 << lo) - 1)) | moved_bits);
        let codes = self.codes();
        let low_codes = codes & ((1u32 << (3 * slot)) - 1);
        let moved_codes = (codes >> (3 * (slot + n))) << (3 * slot);
        self.set_codes(low_codes | moved_codes);
    }

    /// Starting slots of the entries, in order.
    pub fn entry_starts(&self) -> impl Iterator<Item = usize> + '_ {
        let codes = self.codes();
        (0..SLOTS).filter(move |&s| {
            let c = ((codes >> (3 * s)) & 7) as u8;
            c == code::INLINE_START || code::is_pointer(c)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_bucket() {
        let b = Bucket::default();
        assert!(b.is_empty());
        assert_eq!(b.free_slots(), 10);
        assert_eq!(b.chain(), None);
    }

    #[test]
    fn inline_roundtrip_and_exact_fill() {
        let mut b = Bucket::default();
        // Five 10-byte key-values (6 + 4) fill exactly 10 slots.
        for i in 0..5u8 {
            let key = [i, 1, 2, 3, 4, 5];
            assert_eq!(b.push_inline(&key, &[9, 9, 9, i]), Some(2 * i as usize));
        }
        assert_eq!(b.free_slots(), 0);
        assert_eq!(b.push_inline(b"k", b""), None);
        for (n, s) in b.entry_starts().enumerate() {
            let e = b.inline_entry(s);
            assert_eq!((e.klen, e.vlen, e.slots), (6, 4, 2));
            assert_eq!(b.inline_key(&e), &[n as u8, 1, 2, 3, 4, 5]);
            assert_eq!(b.inline_value(&e), &[9, 9, 9, n as u8]);
        }
    }

    #[test]
    fn one_kv_spanning_all_ten_slots() {
        let mut b = Bucket::default();
        let key = [7u8; 20];
        let value = [8u8; 30];
        assert_eq!(b.push_inline(&key, &value), Some(0));
        let e = b.inline_entry(0);
        assert_eq!((e.klen, e.vlen, e.slots), (20, 30, 10));
        assert_eq!(b.inline_value(&e), &value);
        assert_eq!(b.free_slots(), 0);
    }

    #[test]
    fn empty_values_and_keys_ending_on_slot_boundaries() {
        let mut b = Bucket::default();
        b.push_inline(b"abcde", b"").unwrap(); // key fills the slot exactly, value empty
        b.push_inline(b"x", b"").unwrap();
        b.push_inline(b"abcd", b"e").unwrap();
        b.push_inline(b"q", b"12345").unwrap(); // value crosses into a second slot
        let got: Vec<(Vec<u8>, Vec<u8>)> = b
            .entry_starts()
            .map(|s| {
                let e = b.inline_entry(s);
                (b.inline_key(&e).to_vec(), b.inline_value(&e).to_vec())
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (b"abcde".to_vec(), vec![]),
                (b"x".to_vec(), vec![]),
                (b"abcd".to_vec(), b"e".to_vec()),
                (b"q".to_vec(), b"12345".to_vec()),
            ]
        );
    }

    #[test]
    fn pointers_and_secondary_hash_collisions() {
        let mut b = Bucket::default();
        // Two pointers with the same secondary hash are both kept; the full key decides.
        b.push_pointer(code::PTR_SMALL_FIRST, 0x1ff, POINTER_MAX)
            .unwrap();
        b.push_pointer(code::PTR_LARGE, 0x1ff, 12345).unwrap();
        assert_eq!(b.pointer(0), (0x1ff, POINTER_MAX));
        assert_eq!(b.pointer(1), (0x1ff, 12345));
        assert_eq!(b.code(1), code::PTR_LARGE);
        assert_eq!(b.used_slots(), 2);
    }

    #[test]
    fn remove_shifts_entries_and_bits() {
        let mut b = Bucket::default();
        b.push_inline(b"key1", b"v").unwrap();
        b.push_pointer(4, 3, 77).unwrap();
        b.push_inline(b"longer-key", b"value!").unwrap();
        b.set_chain(Some(99));
        b.remove(0);
        assert_eq!(b.code(0), 4);
        assert_eq!(b.pointer(0), (3, 77));
        let e = b.inline_entry(1);
        assert_eq!(b.inline_key(&e), b"longer-key");
        assert_eq!(b.inline_value(&e), b"value!");
        assert_eq!(b.chain(), Some(99));
        b.remove(0);
        b.remove(0);
        assert!(b.is_empty());
        assert_eq!(b.bitmap(), 0);
        assert_eq!(&b.bytes[..50], &[0u8; 50][..]);
        assert_eq!(b.chain(), Some(99));
        b.set_chain(None);
        assert_eq!(b, Bucket::default());
    }

    #[test]
    fn replace_inline_value_matches_a_full_rewrite() {
        // Every key length and value length pair that fits, at every slot, with neighbours on
        // both sides: replacing the value must give the same bucket as writing the entry anew.
        for klen in 1..=20usize {
            for old_vlen in 0..=30usize {
                let slots = inline_slots(klen + old_vlen);
                for first in 0..=(SLOTS - slots) {
                    let key: Vec<u8> = (0..klen as u8).map(|b| b.wrapping_mul(7) | 1).collect();
                    let old_v = vec![0xee; old_vlen];
                    let mut b = Bucket::default();
                    for _ in 0..first {
                        b.push_inline(b"n", b"1234").unwrap();
                    }
                    let slot = b.push_inline(&key, &old_v).unwrap();
                    let _ = b.push_inline(b"z", b"");
                    for vlen in 0..=slots * SLOT_BYTES - klen {
                        if inline_slots(klen + vlen) != slots {
                            continue;
                        }
                        let v: Vec<u8> = (0..vlen as u8).map(|x| x ^ 0x5a).collect();
                        let mut want = b;
                        want.write_inline_at(slot, slots, &key, &v);
                        let mut got = b;
                        got.replace_inline_value(slot, klen, slots, &v);
                        assert_eq!(got, want, "klen {klen} vlen {old_vlen} -> {vlen} at {slot}");
                        let e = got.inline_entry(slot);
                        assert_eq!(got.inline_value(&e), &v[..]);
                    }
                }
            }
        }
    }

    #[test]
    fn load_le_16_reads_every_length() {
        for n in 0..=16usize {
            let v: Vec<u8> = (1..=n as u8).collect();
            let mut want = [0u8; 16];
            want[..n].copy_from_slice(&v);
            assert_eq!(load_le_16(&v), u128::from_le_bytes(want), "length {n}");
        }
    }

    #[test]
    fn rewrite_in_place_same_slot_count() {
        let mut b = Bucket::default();
        b.push_inline(b"k", b"aaaa").unwrap();
        b.push_inline(b"z", b"1").unwrap();
        b.write_inline_at(0, 1, b"k", b"bb");
        let e = b.inline_entry(0);
        assert_eq!(b.inline_value(&e), b"bb");
        let e = b.inline_entry(1);
        assert_eq!(b.inline_key(&e), b"z");
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
        b.push_inline(b"k", b"").unwrap();
        b.set_chain(Some(POINTER_MAX));
        let m = b.meta();
        assert_eq!(b.bitmap() as u128, m & ((1 << 50) - 1));
        assert_eq!(b.codes() as u128, (m >> 50) & ((1 << 30) - 1));
        assert_eq!(b.chain(), Some(POINTER_MAX));
        assert_eq!(b.pointer(2), (0x155, 0x2aaa_aaaa));
        assert_eq!(b.code(2), code::PTR_LARGE);
        b.set_chain(None);
        assert_eq!(b.chain(), None);
    }
}
