//! The key hash and how its 64 bits are shared out. A leaf: every other module takes its bit
//! ranges from here, so a change of the partition is one edit checked at compile time.
//!
//! ```text
//!  h = xxh3_64(key), seed 0 (the native protocol's hash_id 1)
//!
//!  bit  0                               32        41          51 52          64
//!       +-------------------------------+---------+-----------+-+------------+
//!       | bucket (multiply-shift onto   | second- | station   |.| shard      |
//!       |  the main bucket count)       | ary     | slot      |.| (server)   |
//!       +-------------------------------+---------+-----------+-+------------+
//!                                                              bit 51 unused
//! ```
//!
//! - bucket (0..32): the main bucket, `(h & 0xffff_ffff) * bucket_count >> 32` (`index`);
//! - secondary hash (32..41): stored beside a record pointer in a bucket slot, so a lookup reads
//!   only records whose secondary hash matches (`index`, `index/bucket.rs`);
//! - station slot (41..51): the reservation station's list of the window's leaders (`pipeline`);
//! - shard (52..64): which shard owns the key, `((h >> 52) * shard_count) >> 12`. The engine does
//!   not use these bits: the rule lives in the proto crate (`native::shard_of_hash`, the one the
//!   client and the native HELLO's shard map use) and in the server's `shard_of`, and is part of
//!   the wire protocol (docs/protocol.md).
//!
//! Because the ranges are disjoint, the choices are independent: a shard's keys still spread
//! evenly over its buckets, and keys in one bucket over station slots.
//!
//! Goals: one hash per key per operation, computed once and passed along.
//! Non-goals: keyed or seeded hashing (the shard rule is on the wire; see SPEC).

/// First bit and width of the bucket part.
pub const BUCKET_SHIFT: u32 = 0;
pub const BUCKET_BITS: u32 = 32;
/// First bit and width of the secondary hash stored in pointer slots.
pub const SECONDARY_SHIFT: u32 = 32;
pub const SECONDARY_HASH_BITS: u32 = 9;
/// First bit and width of the reservation-station slot (a "station slot").
pub const STATION_SHIFT: u32 = 41;
pub const STATION_BITS: u32 = 10;
/// First bit and width of the shard part (used by the server and the client, not the engine).
pub const SHARD_SHIFT: u32 = 52;
pub const SHARD_BITS: u32 = 12;

/// Slots of the reservation station: one per value of the station bits.
pub(crate) const STATION_SLOTS: usize = 1 << STATION_BITS;

/// The bits of a part, in place.
const fn mask(shift: u32, bits: u32) -> u64 {
    ((1u64 << bits) - 1) << shift
}

const BUCKET_MASK: u64 = mask(BUCKET_SHIFT, BUCKET_BITS);
const SECONDARY_MASK: u64 = mask(SECONDARY_SHIFT, SECONDARY_HASH_BITS);
const STATION_MASK: u64 = mask(STATION_SHIFT, STATION_BITS);
const SHARD_MASK: u64 = mask(SHARD_SHIFT, SHARD_BITS);

// Every part fits the 64 bits, and no two parts share a bit.
const _: () = assert!(SHARD_SHIFT + SHARD_BITS == 64);
const _: () = assert!(BUCKET_MASK & SECONDARY_MASK == 0);
const _: () = assert!(BUCKET_MASK & STATION_MASK == 0);
const _: () = assert!(BUCKET_MASK & SHARD_MASK == 0);
const _: () = assert!(SECONDARY_MASK & STATION_MASK == 0);
const _: () = assert!(SECONDARY_MASK & SHARD_MASK == 0);
const _: () = assert!(STATION_MASK & SHARD_MASK == 0);
// The bucket part is the low half, which the multiply-shift onto the bucket count relies on.
const _: () = assert!(BUCKET_SHIFT == 0 && BUCKET_BITS == 32);

/// The hash every component uses for a key (the server takes its shard from bits 52..64).
#[inline(always)]
pub fn key_hash(key: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(key)
}

/// The bucket part of `h`, a number in `0..2^32` that the index scales onto its bucket count.
#[inline(always)]
pub(crate) fn bucket_bits(h: u64) -> u64 {
    h & BUCKET_MASK
}

/// The secondary hash of `h`, stored in a pointer slot beside the record's address.
#[inline(always)]
pub fn secondary_hash(h: u64) -> u16 {
    ((h >> SECONDARY_SHIFT) & ((1 << SECONDARY_HASH_BITS) - 1)) as u16
}

/// The reservation-station slot of `h`.
#[inline(always)]
pub(crate) fn station_slot(h: u64) -> usize {
    ((h >> STATION_SHIFT) as usize) & (STATION_SLOTS - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_take_their_documented_bits() {
        let h = 0xfedc_ba98_7654_3210u64;
        assert_eq!(bucket_bits(h), 0x7654_3210);
        assert_eq!(u64::from(secondary_hash(h)), (h >> 32) & 0x1ff);
        assert_eq!(station_slot(h) as u64, (h >> 41) & 0x3ff);
        // Setting only the shard bits changes no engine part.
        let s = h | SHARD_MASK;
        assert_eq!(bucket_bits(s), bucket_bits(h));
        assert_eq!(secondary_hash(s), secondary_hash(h));
        assert_eq!(station_slot(s), station_slot(h));
    }
}
