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
//! ```
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
/// The longest header: a large record's with a deadline. Every record is at least one slab
/// unit (32 bytes), so reading this many bytes from a record's start stays inside it.
pub const HEADER_BYTES_MAX: usize = LARGE_HEADER_BYTES + DEADLINE_BYTES;
const _: () = assert!(HEADER_BYTES_MAX <= crate::slab::SLAB_UNIT_BYTES);
/// Byte 1's flag: a deadline follows the fixed header.
const DEADLINE_FLAG: u8 = 0x80;
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

/// The layout for a key-value (with room for a deadline if `deadline`), or None if it is
/// larger than the top slab class.
pub fn layout(klen: usize, vlen: usize, top_class: u8, deadline: bool) -> Option<Layout> {
    let extra = if deadline { DEADLINE_BYTES } else { 0 };
    let small = SMALL_HEADER_BYTES + extra + klen + vlen;
    if small <= class_size_bytes(SMALL_CLASS_MAX) {
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
    let klen = rec[0] as usize;
    let flagged = rec[1] & DEADLINE_FLAG != 0;
    let low = rec[1] & !DEADLINE_FLAG;
    let (mut h, fixed) = if slot_code == code::PTR_LARGE {
        let vlen = u32::from_le_bytes([rec[2], rec[3], rec[4], rec[5]]) as usize;
        let h = Header {
            klen,
            vlen,
            class: low,
            header: LARGE_HEADER_BYTES,
            deadline: NO_DEADLINE,
        };
        (h, LARGE_HEADER_BYTES)
    } else {
        let class = slot_code - code::PTR_SMALL_FIRST;
        let extra = if flagged { DEADLINE_BYTES } else { 0 };
        let vlen = class_size_bytes(class) - SMALL_HEADER_BYTES - extra - klen - low as usize;
        let h = Header {
            klen,
            vlen,
            class,
            header: SMALL_HEADER_BYTES,
            deadline: NO_DEADLINE,
        };
        (h, SMALL_HEADER_BYTES)
    };
    if flagged {
        let d = &rec[fixed..fixed + DEADLINE_BYTES];
        h.deadline = u64::from_le_bytes(d.try_into().expect("8 bytes"));
        h.header = fixed + DEADLINE_BYTES;
    }
    h
}

/// Encodes a record into `out`, which is exactly the class size. `deadline` is stored when the
/// layout has room for one (it was made with `deadline: true`), and must then not be
/// `NO_DEADLINE`.
pub fn encode(l: Layout, key: &[u8], value: &[u8], deadline: u64, out: &mut [u8]) {
    debug_assert_eq!(out.len(), class_size_bytes(l.class));
    let total = l.header + key.len() + value.len();
    assert!(total <= out.len() && key.len() <= u8::MAX as usize);
    let small = l.slot_code != code::PTR_LARGE;
    let fixed = if small {
        SMALL_HEADER_BYTES
    } else {
        LARGE_HEADER_BYTES
    };
    let flagged = l.header > fixed;
    debug_assert_eq!(flagged, deadline != NO_DEADLINE);
    out[0] = key.len() as u8;
    if small {
        out[1] = (out.len() - total) as u8;
        debug_assert!(out[1] < DEADLINE_FLAG);
    } else {
        out[1] = l.class;
        out[2..6].copy_from_slice(&(value.len() as u32).to_le_bytes());
    }
    if flagged {
        out[1] |= DEADLINE_FLAG;
        out[fixed..fixed + DEADLINE_BYTES].copy_from_slice(&deadline.to_le_bytes());
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
        let l = layout(8, 246, 16, false).unwrap();
        assert_eq!(l.class, 3);
        assert_eq!(l.slot_code, 6);
        let mut buf = vec![0xAA; 256];
        encode(l, &[1; 8], &[2; 246], NO_DEADLINE, &mut buf);
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
            for deadline in [NO_DEADLINE, 1, 1_800_000_000_000, u64::MAX] {
                let l = layout(k, v, 16, deadline != NO_DEADLINE).unwrap();
                let mut buf = vec![0xAA; class_size_bytes(l.class)];
                let key = vec![3u8; k];
                let value = vec![4u8; v];
                encode(l, &key, &value, deadline, &mut buf);
                let h = decode(l.slot_code, &buf);
                assert_eq!(
                    (h.klen, h.vlen, h.deadline),
                    (k, v, deadline),
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
        assert!(layout(10, 1 << 20, 15, false).is_none());
    }

    /// A deadline costs 8 header bytes: an 8 + 8-byte key-value goes from a 32-byte record
    /// (18 bytes) to a 32-byte record (26 bytes); a 246-byte value moves up a class.
    #[test]
    fn deadline_adds_eight_header_bytes() {
        let (a, b) = (
            layout(8, 8, 16, false).unwrap(),
            layout(8, 8, 16, true).unwrap(),
        );
        assert_eq!(
            (a.class, b.class, b.header - a.header),
            (0, 0, DEADLINE_BYTES)
        );
        assert_eq!(layout(8, 246, 16, true).unwrap().slot_code, code::PTR_LARGE);
    }
}
