//! Byte-range and bit writes on a string value, as Redis's SETRANGE and SETBIT: the two
//! read-modify-write string commands whose new value depends on the old one, so they run in
//! the engine (one step on the key's shard, through the one door) rather than as a read and a
//! write that another client could come between.
//!
//! ```text
//!  SetRange  arg = offset (u64 LE), arg2 = bytes   value[offset..offset+len] = bytes, the
//!            reply: new length (u64 LE)             gap past the old end zero-filled
//!  SetBit    arg = bit offset (u64 LE), arg2 = [b]  bit `offset` (bit 0 = the first byte's
//!            reply: the old bit (one byte, 0 | 1)   most significant bit) set to b
//! ```
//!
//! Both grow the value with zero bytes as needed and never shrink it. SETRANGE with no bytes
//! changes nothing (a missing key stays missing, as in Redis). The length a write would need is
//! computed by [`value_len`] before anything is allocated, so an offset past `value_len_max`
//! is refused (`ValueTooLarge`) by validation, not after building a huge value.
//!
//! Deadlines (issue 20 item 1): Redis keeps a key's time to live through SETRANGE and SETBIT, so
//! when entries carry a deadline, these writes (effect `SetScratch`, as APPEND's) must keep it.

use crate::error::OpError;
use crate::op::{Op, OpKind};

/// The offset argument: a u64 in 8 little-endian bytes.
fn offset(arg: &[u8]) -> Result<u64, OpError> {
    let b: [u8; 8] = arg.try_into().map_err(|_| OpError::WrongWidth {
        len: arg.len(),
        width: 8,
    })?;
    Ok(u64::from_le_bytes(b))
}

/// The length of value the operation needs at least (0 for one that stores nothing new, or
/// whose arguments are malformed: `apply` refuses those), saturating: compared with
/// `value_len_max` before the operation runs.
#[inline]
pub(crate) fn value_len(op: &Op) -> usize {
    let Ok(off) = offset(op.arg) else {
        return 0;
    };
    let need = match op.kind {
        OpKind::SetRange if op.arg2.is_empty() => 0,
        OpKind::SetRange => off.saturating_add(op.arg2.len() as u64),
        _ => off / 8 + 1,
    };
    usize::try_from(need).unwrap_or(usize::MAX)
}

/// SETRANGE: the new value into `out` (cleared first); returns whether anything changes.
/// `cur` None is a missing key.
pub(crate) fn set_range(
    cur: Option<&[u8]>,
    arg: &[u8],
    bytes: &[u8],
    out: &mut Vec<u8>,
) -> Result<bool, OpError> {
    let off = usize::try_from(offset(arg)?).map_err(|_| OpError::ValueTooLarge {
        len: usize::MAX,
        max: usize::MAX,
    })?;
    out.clear();
    out.extend_from_slice(cur.unwrap_or(&[]));
    if bytes.is_empty() {
        return Ok(false);
    }
    let end = off.checked_add(bytes.len()).ok_or(OpError::ValueTooLarge {
        len: usize::MAX,
        max: usize::MAX,
    })?;
    if out.len() < end {
        out.resize(end, 0);
    }
    out[off..end].copy_from_slice(bytes);
    Ok(true)
}

/// SETBIT: the new value into `out` (cleared first); returns the bit's old value.
pub(crate) fn set_bit(
    cur: Option<&[u8]>,
    arg: &[u8],
    bit: &[u8],
    out: &mut Vec<u8>,
) -> Result<u8, OpError> {
    let on = match bit {
        [b @ (0 | 1)] => *b,
        _ => {
            return Err(OpError::UserFunction(
                "SETBIT's bit must be one byte, 0 or 1",
            ))
        }
    };
    let off = offset(arg)?;
    let byte = usize::try_from(off / 8).map_err(|_| OpError::ValueTooLarge {
        len: usize::MAX,
        max: usize::MAX,
    })?;
    let mask = 0x80u8 >> (off % 8);
    out.clear();
    out.extend_from_slice(cur.unwrap_or(&[]));
    if out.len() <= byte {
        out.resize(byte + 1, 0);
    }
    let old = u8::from(out[byte] & mask != 0);
    if on == 1 {
        out[byte] |= mask;
    } else {
        out[byte] &= !mask;
    }
    Ok(old)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn le(n: u64) -> [u8; 8] {
        n.to_le_bytes()
    }

    #[test]
    fn set_range_pads_with_zeros_and_overwrites() {
        let mut out = Vec::new();
        assert!(set_range(None, &le(3), b"ab", &mut out).unwrap());
        assert_eq!(out, b"\0\0\0ab");
        assert!(set_range(Some(b"hello world"), &le(6), b"redis", &mut out).unwrap());
        assert_eq!(out, b"hello redis");
        assert!(set_range(Some(b"hello"), &le(1), b"E", &mut out).unwrap());
        assert_eq!(out, b"hEllo");
        assert!(!set_range(Some(b"abc"), &le(100), b"", &mut out).unwrap());
        assert_eq!(out, b"abc");
        assert!(set_range(None, &le(0), b"x", &mut out).is_ok());
        assert!(matches!(
            set_range(None, b"short", b"x", &mut out),
            Err(OpError::WrongWidth { .. })
        ));
    }

    #[test]
    fn set_bit_counts_from_the_most_significant_bit() {
        let mut out = Vec::new();
        assert_eq!(set_bit(None, &le(7), &[1], &mut out).unwrap(), 0);
        assert_eq!(out, [0x01]);
        assert_eq!(
            set_bit(Some(&out.clone()), &le(7), &[0], &mut out).unwrap(),
            1
        );
        assert_eq!(out, [0x00]);
        assert_eq!(set_bit(Some(b"\xff"), &le(0), &[0], &mut out).unwrap(), 1);
        assert_eq!(out, [0x7f]);
        assert_eq!(set_bit(Some(b"a"), &le(17), &[1], &mut out).unwrap(), 0);
        assert_eq!(out, [b'a', 0, 0x40]);
        assert!(set_bit(None, &le(0), &[2], &mut out).is_err());
    }

    #[test]
    fn value_len_saturates_and_ignores_empty_ranges() {
        let op = |kind, arg: &'static [u8], arg2: &'static [u8]| Op {
            kind,
            arg,
            arg2,
            ..Op::get(b"k")
        };
        const BIG: [u8; 8] = u64::MAX.to_le_bytes();
        const TEN: [u8; 8] = 10u64.to_le_bytes();
        assert_eq!(value_len(&op(OpKind::SetRange, &BIG, b"x")), usize::MAX);
        assert_eq!(value_len(&op(OpKind::SetRange, &BIG, b"")), 0);
        assert_eq!(value_len(&op(OpKind::SetRange, &TEN, b"abc")), 13);
        assert_eq!(value_len(&op(OpKind::SetBit, &TEN, &[1])), 2);
        assert_eq!(
            value_len(&op(OpKind::SetBit, &BIG, &[1])),
            (u64::MAX / 8 + 1) as usize
        );
    }
}
