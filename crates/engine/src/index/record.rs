//! Key-value records in the slab region, for key-values that are not inline.
//!
//! ```text
//! small (slot codes 3..=6, classes 32..256 B):  [klen u8][pad u8][key][value][pad zero bytes]
//!                                                value length = class size - 2 - klen - pad
//! large (slot code 7, classes >= 512 B):        [klen u8][class u8][vlen u32 LE][key][value]
//!
//! with a deadline (bit 7 of byte 1 set), 8 more header bytes before the key:
//! small:  [klen u8][0x80 | pad u8][deadline u64 LE][key][value][pad zero bytes]
//! large:  [klen u8][0x80 | class u8][vlen u32 LE][deadline u64 LE][key][value]
//!
//! with item meta (bit 6 of byte 1 set: memcached's flags and CAS, `op::mc`), 12 more header
//! bytes after the deadline's place, before the key:
//! small:  [klen u8][0x40 | pad u8][(deadline u64)][flags u32 LE][cas u64 LE][key][value][pad]
//! large:  [klen u8][0x40 | class u8][vlen u32 LE][(deadline u64)][flags u32][cas u64][key][value]
//! ```
//!
//! Bit 6 of a small record's byte 1 is free in classes 32, 64 and 128 (pads below 64), not in
//! class 256 (a 129-byte record has a pad of 127): a record with meta that would be small in
//! class 256 takes the large header instead (`layout`), and bit 6 means meta only for slot codes
//! of the smaller classes and the large one (`decode`). An 8 + 8-byte item with meta is a
//! 2 + 12 + 16 = 30-byte record in a 32-byte block.
//!
//! The small header is two bytes so that a 254-byte key-value fits a 256-byte slab exactly (the
//! seed's evaluation sizes). The pad fits a byte because a record always fills more than half of
//! its class (classes are powers of two), and small classes are at most 256 bytes.
//!
//! A key's deadline (issue 20, key expiry: an absolute time in milliseconds since the Unix
//! epoch) lives in its record's header, so finding the key finds its deadline with no second
//! lookup. (A key-value small enough to be inline carries its deadline in the bucket instead,
//! after its value: `bucket.rs`.) Byte 1's top bit is free in both headers: a small record's
//! pad is below 128 (the record fills more than half of a class of at most 256 bytes, or the
//! class is 32 bytes) and a large record's class is below 32.

use super::bucket::code;
use crate::slab::{class_for_size, class_size_bytes};

pub const SMALL_HEADER_BYTES: usize = 2;
pub const LARGE_HEADER_BYTES: usize = 6;
/// Bytes of a deadline in a record header, or after an inline entry's value.
pub const DEADLINE_BYTES: usize = 8;
/// Bytes of item meta in a record header: flags u32, cas u64.
pub const META_BYTES: usize = 4 + 8;
/// The longest header: a large record's with a deadline and meta. Every record is at least one
/// slab unit (32 bytes), so reading this many bytes from a record's start stays inside it.
pub const HEADER_BYTES_MAX: usize = LARGE_HEADER_BYTES + DEADLINE_BYTES + META_BYTES;
const _: () = assert!(HEADER_BYTES_MAX <= crate::slab::SLAB_UNIT_BYTES);
/// Byte 1's flag: a deadline follows the fixed header.
const DEADLINE_FLAG: u8 = 0x80;
/// Byte 1's flag: item meta follows the fixed header (and the deadline, if any). Only in small
/// classes up to `META_SMALL_CLASS_MAX` and in large records.
const META_FLAG: u8 = 0x40;
/// Largest small class whose pads leave bit 6 free (a 128-byte block holds over 64 bytes).
const META_SMALL_CLASS_MAX: u8 = 2;

/// An entry's item meta (memcached's client flags and CAS unique, `op::mc`); `cas == 0`: none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Meta {
    pub flags: u32,
    pub cas: u64,
}

impl Meta {
    /// No meta: what entries written by the RESP and native operations carry.
    pub const NONE: Meta = Meta { flags: 0, cas: 0 };

    #[inline(always)]
    pub fn is_some(&self) -> bool {
        self.cas != 0
    }
}
/// "No deadline": deadlines are at least 1 ms after the epoch.
pub const NO_DEADLINE: u64 = 0;
/// Largest class that uses the small header.
pub const SMALL_CLASS_MAX: u8 = 3;

/// Where and how a record of a given key and value length is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub slot_code: u8,
    pub class: u8,
    pub header: usize,
}

/// The layout for a key-value (with room for a deadline if `deadline`, and for item meta if
/// `meta`), or None if it is larger than the top slab class.
pub fn layout(
    klen: usize,
    vlen: usize,
    top_class: u8,
    deadline: bool,
    meta: bool,
) -> Option<Layout> {
    let extra = if deadline { DEADLINE_BYTES } else { 0 } + if meta { META_BYTES } else { 0 };
    let small = SMALL_HEADER_BYTES + extra + klen + vlen;
    let small_max = if meta {
        META_SMALL_CLASS_MAX
    } else {
        SMALL_CLASS_MAX
    };
    if small <= class_size_bytes(small_max) {
        let class = class_for_size(small, top_class)?;
        return Some(Layout {
            slot_code: code::PTR_SMALL_FIRST + class,
            class,
            header: SMALL_HEADER_BYTES + extra,
        });
    }
    let class = class_for_size(LARGE_HEADER_BYTES + extra + klen + vlen, top_class)?;
    Some(Layout {
        slot_code: code::PTR_LARGE,
        class,
        header: LARGE_HEADER_BYTES + extra,
    })
}

/// Decoded record header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub klen: usize,
    pub vlen: usize,
    pub class: u8,
    pub header: usize,
    /// Absolute deadline in ms, or `NO_DEADLINE`.
    pub deadline: u64,
    /// Item meta, or `Meta::NONE`.
    pub meta: Meta,
}

impl Header {
    pub fn total(&self) -> usize {
        self.header + self.klen + self.vlen
    }
}

/// Decodes the header of a record referenced by a slot with `slot_code`. `rec` must hold at least
/// the header bytes (`HEADER_BYTES_MAX` always do).
#[inline]
pub fn decode(slot_code: u8, rec: &[u8]) -> Header {
    // A small record with meta and no deadline (a memcached item stored without an exptime,
    // most of them) has its fields at fixed places: read them with no test of the other
    // layouts (callgrind: about 10 instructions less per memcached get).
    let flags = rec[1];
    if slot_code <= code::PTR_SMALL_FIRST + META_SMALL_CLASS_MAX
        && flags & (DEADLINE_FLAG | META_FLAG) == META_FLAG
    {
        debug_assert!(slot_code >= code::PTR_SMALL_FIRST);
        let klen = rec[0] as usize;
        let class = slot_code - code::PTR_SMALL_FIRST;
        let header = SMALL_HEADER_BYTES + META_BYTES;
        let pad = (flags & !META_FLAG) as usize;
        let at = SMALL_HEADER_BYTES;
        return Header {
            klen,
            vlen: class_size_bytes(class) - header - klen - pad,
            class,
            header,
            deadline: NO_DEADLINE,
            meta: Meta {
                flags: u32::from_le_bytes(rec[at..at + 4].try_into().expect("4 bytes")),
                cas: u64::from_le_bytes(rec[at + 4..at + 12].try_into().expect("8 bytes")),
            },
        };
    }
    let klen = rec[0] as usize;
    let flagged = rec[1] & DEADLINE_FLAG != 0;
    let large = slot_code == code::PTR_LARGE;
    // Bit 6 is a flag only where pads leave it free (see the module's comment).
    let meta_bit = if large || slot_code <= code::PTR_SMALL_FIRST + META_SMALL_CLASS_MAX {
        META_FLAG
    } else {
        0
    };
    let has_meta = rec[1] & meta_bit != 0;
    let low = rec[1] & !(DEADLINE_FLAG | meta_bit);
    let extra = if flagged { DEADLINE_BYTES } else { 0 } + if has_meta { META_BYTES } else { 0 };
    let (mut h, fixed) = if large {
        let vlen = u32::from_le_bytes([rec[2], rec[3], rec[4], rec[5]]) as usize;
        let h = Header {
            klen,
            vlen,
            class: low,
            header: LARGE_HEADER_BYTES,
            deadline: NO_DEADLINE,
            meta: Meta::NONE,
        };
        (h, LARGE_HEADER_BYTES)
    } else {
        let class = slot_code - code::PTR_SMALL_FIRST;
        let vlen = class_size_bytes(class) - SMALL_HEADER_BYTES - extra - klen - low as usize;
        let h = Header {
            klen,
            vlen,
            class,
            header: SMALL_HEADER_BYTES,
            deadline: NO_DEADLINE,
            meta: Meta::NONE,
        };
        (h, SMALL_HEADER_BYTES)
    };
    let mut at = fixed;
    if flagged {
        let d = &rec[at..at + DEADLINE_BYTES];
        h.deadline = u64::from_le_bytes(d.try_into().expect("8 bytes"));
        at += DEADLINE_BYTES;
    }
    if has_meta {
        h.meta = Meta {
            flags: u32::from_le_bytes(rec[at..at + 4].try_into().expect("4 bytes")),
            cas: u64::from_le_bytes(rec[at + 4..at + 12].try_into().expect("8 bytes")),
        };
        at += META_BYTES;
    }
    h.header = at;
    h
}

/// Encodes a record into `out`, which is exactly the class size. `deadline` and `meta` are
/// stored when the layout has room for them (it was made with `deadline: true`, `meta: true`),
/// and must then not be `NO_DEADLINE` / `Meta::NONE`.
pub fn encode(l: Layout, key: &[u8], value: &[u8], deadline: u64, meta: Meta, out: &mut [u8]) {
    debug_assert_eq!(out.len(), class_size_bytes(l.class));
    let total = l.header + key.len() + value.len();
    assert!(total <= out.len() && key.len() <= u8::MAX as usize);
    let small = l.slot_code != code::PTR_LARGE;
    let fixed = if small {
        SMALL_HEADER_BYTES
    } else {
        LARGE_HEADER_BYTES
    };
    let timed = deadline != NO_DEADLINE;
    debug_assert_eq!(
        l.header - fixed,
        if timed { DEADLINE_BYTES } else { 0 } + if meta.is_some() { META_BYTES } else { 0 }
    );
    out[0] = key.len() as u8;
    if small {
        out[1] = (out.len() - total) as u8;
        debug_assert!(out[1] < DEADLINE_FLAG);
        debug_assert!(!meta.is_some() || out[1] < META_FLAG);
    } else {
        out[1] = l.class;
        out[2..6].copy_from_slice(&(value.len() as u32).to_le_bytes());
    }
    let mut at = fixed;
    if timed {
        out[1] |= DEADLINE_FLAG;
        out[at..at + DEADLINE_BYTES].copy_from_slice(&deadline.to_le_bytes());
        at += DEADLINE_BYTES;
    }
    if meta.is_some() {
        out[1] |= META_FLAG;
        out[at..at + 4].copy_from_slice(&meta.flags.to_le_bytes());
        out[at + 4..at + 12].copy_from_slice(&meta.cas.to_le_bytes());
    }
    out[l.header..l.header + key.len()].copy_from_slice(key);
    out[l.header + key.len()..total].copy_from_slice(value);
    if small {
        out[total..].fill(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kv_of_254_bytes_fits_256_class() {
        let l = layout(8, 246, 16, false, false).unwrap();
        assert_eq!(l.class, 3);
        assert_eq!(l.slot_code, 6);
        let mut buf = vec![0xAA; 256];
        encode(l, &[1; 8], &[2; 246], NO_DEADLINE, Meta::NONE, &mut buf);
        let h = decode(l.slot_code, &buf);
        assert_eq!((h.klen, h.vlen, h.total()), (8, 246, 256));
    }

    #[test]
    fn small_and_large_roundtrip() {
        for (k, v) in [
            (1usize, 0usize),
            (10, 20),
            (30, 1),
            (100, 155),
            (100, 156),
            (250, 1 << 20),
        ] {
            for (deadline, meta) in [NO_DEADLINE, 1, 1_800_000_000_000, u64::MAX]
                .into_iter()
                .flat_map(|d| {
                    [
                        (d, Meta::NONE),
                        (
                            d,
                            Meta {
                                flags: 0xFFFF_FFFF,
                                cas: 1,
                            },
                        ),
                        (
                            d,
                            Meta {
                                flags: 7,
                                cas: u64::MAX,
                            },
                        ),
                    ]
                })
            {
                let l = layout(k, v, 16, deadline != NO_DEADLINE, meta.is_some()).unwrap();
                let mut buf = vec![0xAA; class_size_bytes(l.class)];
                let key = vec![3u8; k];
                let value = vec![4u8; v];
                encode(l, &key, &value, deadline, meta, &mut buf);
                let h = decode(l.slot_code, &buf);
                assert_eq!(
                    (h.klen, h.vlen, h.deadline, h.meta),
                    (k, v, deadline, meta),
                    "k={k} v={v}"
                );
                assert_eq!(h.class, l.class);
                assert_eq!(&buf[h.header..h.header + k], &key[..]);
                assert_eq!(&buf[h.header + k..h.total()], &value[..]);
            }
        }
    }

    #[test]
    fn too_large_for_top_class() {
        assert!(layout(10, 1 << 20, 15, false, false).is_none());
    }

    /// A deadline costs 8 header bytes: an 8 + 8-byte key-value goes from a 32-byte record
    /// (18 bytes) to a 32-byte record (26 bytes); a 246-byte value moves up a class.
    #[test]
    fn deadline_adds_eight_header_bytes() {
        let (a, b) = (
            layout(8, 8, 16, false, false).unwrap(),
            layout(8, 8, 16, true, false).unwrap(),
        );
        assert_eq!(
            (a.class, b.class, b.header - a.header),
            (0, 0, DEADLINE_BYTES)
        );
        assert_eq!(
            layout(8, 246, 16, true, false).unwrap().slot_code,
            code::PTR_LARGE
        );
    }

    /// Meta costs 12 header bytes: an 8 + 8-byte item is a 30-byte record in a 32-byte block.
    /// Every record size from 1 to 300 bytes round-trips with meta, with and without a
    /// deadline, in particular the small records of class 256 whose pads use bit 6 (they take
    /// the large header when they carry meta).
    #[test]
    fn meta_adds_twelve_header_bytes_and_roundtrips_at_every_size() {
        let l = layout(8, 8, 16, false, true).unwrap();
        assert_eq!((l.class, l.header), (0, SMALL_HEADER_BYTES + META_BYTES));
        let meta = Meta {
            flags: 0x8040_2010,
            cas: 0x0102_0304_0506_0708,
        };
        for v in 0..300usize {
            for deadline in [NO_DEADLINE, 1_800_000_000_000] {
                for m in [Meta::NONE, meta] {
                    let l = layout(5, v, 16, deadline != NO_DEADLINE, m.is_some()).unwrap();
                    let mut buf = vec![0x55; class_size_bytes(l.class)];
                    let value: Vec<u8> = (0..v).map(|i| i as u8).collect();
                    encode(l, b"hello", &value, deadline, m, &mut buf);
                    let h = decode(l.slot_code, &buf);
                    assert_eq!((h.vlen, h.deadline, h.meta), (v, deadline, m), "v {v}");
                    assert_eq!(&buf[h.header..h.header + 5], b"hello");
                    assert_eq!(&buf[h.header + 5..h.total()], &value[..]);
                }
            }
        }
    }
}
