//! Little-endian fields and LEB128 lengths: the leaves every native parser and encoder uses.
//!
//! What: a bounds-checked read cursor over one frame and the matching append functions.
//!
//! ```text
//!   varint (unsigned LEB128, at most 5 bytes, shortest form only)
//!     0x00..0x7f            -> 1 byte   0vvvvvvv
//!     0x80..0x3fff          -> 2 bytes  1vvvvvvv 0vvvvvvv      (low 7 bits first)
//!     ... up to u32::MAX    -> 5 bytes, the last one <= 0x0f
//! ```
//!
//! Goals: no read past the slice ever (every read returns `Truncated` instead), one accepted
//! encoding per number (an overlong varint such as `80 00` is `BadVarint`), so decode followed by
//! encode gives back the same bytes.
//! Non-goals: knowing what the fields mean.

use super::error::ErrorCode;

/// Longest varint: 5 bytes hold 35 bits, enough for any u32.
pub(crate) const VARINT_LEN_MAX: usize = 5;

/// A read position in one frame's bytes.
pub(crate) struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Cursor<'a> {
        Cursor { buf, pos: 0 }
    }

    /// Bytes not read yet.
    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub(crate) fn u8(&mut self) -> Result<u8, ErrorCode> {
        let b = *self.buf.get(self.pos).ok_or(ErrorCode::Truncated)?;
        self.pos += 1;
        Ok(b)
    }

    pub(crate) fn u16(&mut self) -> Result<u16, ErrorCode> {
        let b = self.bytes(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    pub(crate) fn u32(&mut self) -> Result<u32, ErrorCode> {
        let b = self.bytes(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// The next `n` bytes, borrowed from the frame.
    pub(crate) fn bytes(&mut self, n: usize) -> Result<&'a [u8], ErrorCode> {
        if n > self.remaining() {
            return Err(ErrorCode::Truncated);
        }
        let b = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(b)
    }

    /// An unsigned LEB128 number in its shortest form.
    pub(crate) fn varint(&mut self) -> Result<u32, ErrorCode> {
        // Fast path: almost every length on the wire is below 128.
        let first = self.u8()?;
        if first < 0x80 {
            return Ok(u32::from(first));
        }
        let mut value = u32::from(first & 0x7f);
        for i in 1..VARINT_LEN_MAX {
            let b = self.u8()?;
            let shift = 7 * i as u32;
            if i == VARINT_LEN_MAX - 1 && b > 0x0f {
                // A fifth byte above 0x0f overflows u32 or continues further.
                return Err(ErrorCode::BadVarint);
            }
            value |= u32::from(b & 0x7f) << shift;
            if b < 0x80 {
                // A zero last byte means a shorter encoding existed.
                return if b == 0 {
                    Err(ErrorCode::BadVarint)
                } else {
                    Ok(value)
                };
            }
        }
        // Unreachable: the fifth byte is either rejected above or ends the number.
        Err(ErrorCode::BadVarint)
    }
}

/// Bytes `v` takes as a varint.
pub(crate) const fn varint_len(v: u32) -> usize {
    match v {
        0..=0x7f => 1,
        0x80..=0x3fff => 2,
        0x4000..=0x1f_ffff => 3,
        0x20_0000..=0x0fff_ffff => 4,
        _ => 5,
    }
}

pub(crate) fn put_varint(out: &mut Vec<u8>, mut v: u32) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

pub(crate) fn put_u16(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&v.to_le_bytes());
}

pub(crate) fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// Overwrites a u16 already in `out` at `at`.
pub(crate) fn patch_u16(out: &mut [u8], at: usize, v: u16) {
    out[at..at + 2].copy_from_slice(&v.to_le_bytes());
}

/// Overwrites a u32 already in `out` at `at`.
pub(crate) fn patch_u32(out: &mut [u8], at: usize, v: u32) {
    out[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

/// The views every validated batch of the codec offers (`OpBatch` of requests, `ResponseBatch`
/// of results): its length, and iteration by value and by reference through its iterator,
/// which re-parses the checked bytes with `NativeLimits::UNCHECKED` (`$iter::parse_next`).
macro_rules! batch_views {
    ($batch:ident, $iter:ident, $item:ident) => {
        impl<'a> $batch<'a> {
            pub fn len(&self) -> usize {
                usize::from(self.count)
            }

            pub fn is_empty(&self) -> bool {
                self.count == 0
            }
        }

        impl<'a> IntoIterator for $batch<'a> {
            type Item = $item<'a>;
            type IntoIter = $iter<'a>;
            fn into_iter(self) -> $iter<'a> {
                self.iter()
            }
        }

        impl<'a> IntoIterator for &$batch<'a> {
            type Item = $item<'a>;
            type IntoIter = $iter<'a>;
            fn into_iter(self) -> $iter<'a> {
                self.iter()
            }
        }

        impl<'a> Iterator for $iter<'a> {
            type Item = $item<'a>;

            fn next(&mut self) -> Option<$item<'a>> {
                if self.left == 0 {
                    return None;
                }
                self.left -= 1;
                let item = self.parse_next();
                // The batch was validated when it was decoded, so this cannot fail; if it
                // somehow did, ending the iteration is safer than inventing an item.
                debug_assert!(item.is_ok(), "re-parsing a validated batch failed");
                if item.is_err() {
                    self.left = 0;
                }
                item.ok()
            }

            fn size_hint(&self) -> (usize, Option<usize>) {
                (usize::from(self.left), Some(usize::from(self.left)))
            }
        }

        impl ExactSizeIterator for $iter<'_> {}
    };
}
pub(crate) use batch_views;

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(v: u32) -> Vec<u8> {
        let mut out = Vec::new();
        put_varint(&mut out, v);
        out
    }

    #[test]
    fn varint_known_encodings() {
        assert_eq!(enc(0), [0x00]);
        assert_eq!(enc(5), [0x05]);
        assert_eq!(enc(127), [0x7f]);
        assert_eq!(enc(128), [0x80, 0x01]);
        assert_eq!(enc(300), [0xac, 0x02]);
        assert_eq!(enc(1 << 20), [0x80, 0x80, 0x40]);
        assert_eq!(enc(u32::MAX), [0xff, 0xff, 0xff, 0xff, 0x0f]);
    }

    #[test]
    fn varint_round_trips_at_every_boundary() {
        let mut cases = vec![0, 1, u32::MAX, u32::MAX - 1];
        for bits in 1..32 {
            cases.extend([(1u32 << bits) - 1, 1 << bits, (1 << bits) + 1]);
        }
        for v in cases {
            let bytes = enc(v);
            assert_eq!(bytes.len(), varint_len(v), "{v}");
            let mut c = Cursor::new(&bytes);
            assert_eq!(c.varint(), Ok(v));
            assert_eq!(c.remaining(), 0);
        }
    }

    #[test]
    fn varint_rejects_overlong_overflowing_and_short_input() {
        let bad = |b: &[u8]| Cursor::new(b).varint();
        assert_eq!(bad(&[0x80, 0x00]), Err(ErrorCode::BadVarint));
        assert_eq!(bad(&[0xff, 0x80, 0x00]), Err(ErrorCode::BadVarint));
        assert_eq!(
            bad(&[0xff, 0xff, 0xff, 0xff, 0x10]),
            Err(ErrorCode::BadVarint)
        );
        assert_eq!(
            bad(&[0x80, 0x80, 0x80, 0x80, 0x80]),
            Err(ErrorCode::BadVarint)
        );
        assert_eq!(bad(&[0x80]), Err(ErrorCode::Truncated));
        assert_eq!(bad(&[]), Err(ErrorCode::Truncated));
    }

    #[test]
    fn cursor_never_reads_past_the_end() {
        let mut c = Cursor::new(&[1, 2, 3]);
        assert_eq!(c.u16(), Ok(0x0201));
        assert_eq!(c.u16(), Err(ErrorCode::Truncated));
        assert_eq!(c.bytes(2), Err(ErrorCode::Truncated));
        assert_eq!(c.u8(), Ok(3));
        assert_eq!(c.u32(), Err(ErrorCode::Truncated));
        assert_eq!(c.remaining(), 0);
    }
}
