//! Key-value records in the slab region, for key-values that are not inline.
//!
//! ```text
//! small (slot codes 3..=6, classes 32..256 B):  [klen u8][pad u8][key][value][pad zero bytes]
//!                                                value length = class size - 2 - klen - pad
//! large (slot code 7, classes >= 512 B):        [klen u8][class u8][vlen u32 LE][key][value]
//! ```
//!
//! The small header is two bytes so that a 254-byte key-value fits a 256-byte slab exactly (the
//! seed's evaluation sizes). The pad fits a byte because a record always fills more than half of
//! its class (classes are powers of two), and small classes are at most 256 bytes.

use super::bucket::code;
use crate::slab::{class_for_size, class_size_bytes};

pub const SMALL_HEADER_BYTES: usize = 2;
pub const LARGE_HEADER_BYTES: usize = 6;
/// Largest class that uses the small header.
pub const SMALL_CLASS_MAX: u8 = 3;

/// Where and how a record of a given key and value length is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub slot_code: u8,
    pub class: u8,
    pub header: usize,
}

/// The layout for a key-value, or None if it is larger than the top slab class.
pub fn layout(klen: usize, vlen: usize, top_class: u8) -> Option<Layout> {
    let small = SMALL_HEADER_BYTES + klen + vlen;
    if small <= class_size_bytes(SMALL_CLASS_MAX) {
        let class = class_for_size(small, top_class)?;
        return Some(Layout {
            slot_code: code::PTR_SMALL_FIRST + class,
            class,
            header: SMALL_HEADER_BYTES,
        });
    }
    let class = class_for_size(LARGE_HEADER_BYTES + klen + vlen, top_class)?;
    Some(Layout {
        slot_code: code::PTR_LARGE,
        class,
        header: LARGE_HEADER_BYTES,
    })
}

/// Decoded record header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub klen: usize,
    pub vlen: usize,
    pub class: u8,
    pub header: usize,
}

impl Header {
    pub fn total(&self) -> usize {
        self.header + self.klen + self.vlen
    }
}

/// Decodes the header of a record referenced by a slot with `slot_code`. `rec` must hold at least
/// the header bytes.
pub fn decode(slot_code: u8, rec: &[u8]) -> Header {
    let klen = rec[0] as usize;
    if slot_code == code::PTR_LARGE {
        let class = rec[1];
        let vlen = u32::from_le_bytes([rec[2], rec[3], rec[4], rec[5]]) as usize;
        Header {
            klen,
            vlen,
            class,
            header: LARGE_HEADER_BYTES,
        }
    } else {
        let class = slot_code - code::PTR_SMALL_FIRST;
        let pad = rec[1] as usize;
        let vlen = class_size_bytes(class) - SMALL_HEADER_BYTES - klen - pad;
        Header {
            klen,
            vlen,
            class,
            header: SMALL_HEADER_BYTES,
        }
    }
}

/// Encodes a record into `out`, which is exactly the class size.
pub fn encode(l: Layout, key: &[u8], value: &[u8], out: &mut [u8]) {
    debug_assert_eq!(out.len(), class_size_bytes(l.class));
    let total = l.header + key.len() + value.len();
    assert!(total <= out.len() && key.len() <= u8::MAX as usize);
    out[0] = key.len() as u8;
    if l.header == SMALL_HEADER_BYTES {
        out[1] = (out.len() - total) as u8;
    } else {
        out[1] = l.class;
        out[2..6].copy_from_slice(&(value.len() as u32).to_le_bytes());
    }
    out[l.header..l.header + key.len()].copy_from_slice(key);
    out[l.header + key.len()..total].copy_from_slice(value);
    if l.header == SMALL_HEADER_BYTES {
        out[total..].fill(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kv_of_254_bytes_fits_256_class() {
        let l = layout(8, 246, 16).unwrap();
        assert_eq!(l.class, 3);
        assert_eq!(l.slot_code, 6);
        let mut buf = vec![0xAA; 256];
        encode(l, &[1; 8], &[2; 246], &mut buf);
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
            let l = layout(k, v, 16).unwrap();
            let mut buf = vec![0xAA; class_size_bytes(l.class)];
            let key = vec![3u8; k];
            let value = vec![4u8; v];
            encode(l, &key, &value, &mut buf);
            let h = decode(l.slot_code, &buf);
            assert_eq!((h.klen, h.vlen), (k, v), "k={k} v={v}");
            assert_eq!(&buf[h.header..h.header + k], &key[..]);
            assert_eq!(&buf[h.header + k..h.total()], &value[..]);
        }
    }

    #[test]
    fn too_large_for_top_class() {
        assert!(layout(10, 1 << 20, 15).is_none());
    }
}
