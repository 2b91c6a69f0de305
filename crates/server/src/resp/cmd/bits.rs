//! Byte-range and bit commands on strings: GETRANGE SUBSTR SETRANGE GETBIT SETBIT BITCOUNT
//! BITPOS, with Redis 7.0's semantics, edge cases and error texts.
//!
//! ```text
//!  GETRANGE GETBIT BITCOUNT BITPOS   one GET, then `render` derives the reply from the value
//!                                    (arguments parsed at plan time, kept in a `Bits`)
//!  SETRANGE SETBIT                   one engine operation (`OpKind::SetRange`, `SetBit`): the
//!                                    read-modify-write runs in one step on the key's shard
//! ```
//!
//! Why the reads derive at render time: Redis looks the key up before it checks some arguments
//! (BITCOUNT and BITPOS answer 0 or -1 for a missing key whatever their range says), so the
//! verdict on the arguments is kept with the recipe and applied once the key's presence is known.
//!
//! Limits: an offset is checked before anything is planned against Redis's proto-max-bulk-len
//! (512 MiB, [`PROTO_MAX_BULK_LEN`]), and the engine refuses a write past `value_len_max` (1 MiB
//! by default) in its validation, before the value is built; either way the client gets Redis's
//! text for the offset, and nothing large is allocated.

use directkv_engine::{Op, OpError, Status};
use directkv_proto::resp::{self, RespWriter, Version};

use super::{arity, error, parse_int, Planned};
use crate::resp::reply::{Pending, Recipe};

/// Redis's default `proto-max-bulk-len`: the largest string SETRANGE and SETBIT may make, and
/// the bound on GETBIT's offset, checked before planning.
pub const PROTO_MAX_BULK_LEN: u64 = 512 << 20;

const ERR_BIT_OFFSET: &str = "ERR bit offset is not an integer or out of range";
const ERR_BIT: &str = "ERR bit is not an integer or out of range";
const ERR_STRING_SIZE: &str = "ERR string exceeds maximum allowed size (proto-max-bulk-len)";
const ERR_OFFSET_RANGE: &str = "ERR offset is out of range";
const ERR_BITPOS_BIT: &str = "ERR The bit argument must be 1 or 0.";

/// What the reply of a bit or range command derives from its operation's result.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Bits {
    GetRange {
        start: i64,
        end: i64,
    },
    GetBit {
        offset: u64,
    },
    /// SETRANGE's new length; a value past `value_len_max` is Redis's size error.
    SetRange,
    /// SETBIT's old bit; a value past `value_len_max` is Redis's offset error.
    SetBit,
    Count(Range),
    /// BITPOS.
    Pos {
        bit: u8,
        range: Range,
    },
}

/// BITCOUNT's and BITPOS's range, or the error their arguments make once the key exists.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Range {
    Whole,
    Span {
        start: i64,
        end: Option<i64>,
        bits: bool,
    },
    /// Redis answers 0 (BITCOUNT) before looking at the unit: both negative, start > end.
    Empty,
    NotInteger,
    Syntax,
}

pub fn plan(p: &mut Pending, v: Version, name: &[u8], a: &[&[u8]]) -> Option<Planned> {
    let n = a.len();
    Some(match name {
        b"getrange" | b"substr" if n == 4 => match (parse_int(a[2]), parse_int(a[3])) {
            (Some(start), Some(end)) => read(p, a[1], Bits::GetRange { start, end }),
            _ => error(p, v, resp::err_not_integer()),
        },
        b"getbit" if n == 3 => match bit_offset(a[2]) {
            Some(offset) => read(p, a[1], Bits::GetBit { offset }),
            None => error(p, v, ERR_BIT_OFFSET),
        },
        b"setrange" if n == 4 => setrange(p, v, a),
        b"setbit" if n == 4 => setbit(p, v, a),
        b"bitcount" if n >= 2 => read(p, a[1], Bits::Count(count_range(&a[2..]))),
        b"bitpos" if n >= 3 => match parse_int(a[2]) {
            Some(b @ (0 | 1)) => {
                let range = pos_range(&a[3..]);
                read(
                    p,
                    a[1],
                    Bits::Pos {
                        bit: b as u8,
                        range,
                    },
                )
            }
            Some(_) => error(p, v, ERR_BITPOS_BIT),
            None => error(p, v, resp::err_not_integer()),
        },
        b"getrange" | b"substr" | b"getbit" | b"setrange" | b"setbit" | b"bitcount" | b"bitpos" => {
            arity(p, v, name)
        }
        _ => return None,
    })
}

fn read(p: &mut Pending, key: &[u8], d: Bits) -> Planned {
    let op = p.op(&Op::get(key));
    recipe(p, op, d);
    Planned::Queued
}

/// Adds the recipe of `d` for operation `op`. Its arguments are stashed with the batch's
/// immediate bytes rather than held in the recipe, so every recipe stays 24 bytes (a `Bits`
/// is 40) and a pipeline of GETs does not pay for BITPOS's range.
fn recipe(p: &mut Pending, op: usize, d: Bits) {
    let at = p.stash(&d.encode());
    p.recipes.push(Recipe::Bits { op, at });
}

/// A bit offset as Redis's `getBitOffsetFromArgument` takes it: an integer, not negative,
/// whose byte is below proto-max-bulk-len.
fn bit_offset(a: &[u8]) -> Option<u64> {
    let off = u64::try_from(parse_int(a)?).ok()?;
    (off >> 3 < PROTO_MAX_BULK_LEN).then_some(off)
}

/// SETRANGE key offset value.
fn setrange(p: &mut Pending, v: Version, a: &[&[u8]]) -> Planned {
    let Some(offset) = parse_int(a[2]) else {
        return error(p, v, resp::err_not_integer());
    };
    let Ok(offset) = u64::try_from(offset) else {
        return error(p, v, ERR_OFFSET_RANGE);
    };
    // Redis answers an empty value without the size check (0, or the length, key untouched).
    if !a[3].is_empty() && offset + a[3].len() as u64 > PROTO_MAX_BULK_LEN {
        return error(p, v, ERR_STRING_SIZE);
    }
    let offset = offset.to_le_bytes();
    let op = p.op(&Op::set_range(a[1], &offset, a[3]));
    recipe(p, op, Bits::SetRange);
    Planned::Queued
}

/// SETBIT key offset 0|1.
fn setbit(p: &mut Pending, v: Version, a: &[&[u8]]) -> Planned {
    let Some(offset) = bit_offset(a[2]) else {
        return error(p, v, ERR_BIT_OFFSET);
    };
    let bit: &[u8] = match parse_int(a[3]) {
        Some(0) => &[0],
        Some(1) => &[1],
        _ => return error(p, v, ERR_BIT),
    };
    let offset = offset.to_le_bytes();
    let op = p.op(&Op::set_bit(a[1], &offset, bit));
    recipe(p, op, Bits::SetBit);
    Planned::Queued
}

/// BITCOUNT's arguments after the key, checked in Redis's order.
fn count_range(rest: &[&[u8]]) -> Range {
    match rest.len() {
        0 => Range::Whole,
        2 | 3 => {
            let (Some(start), Some(end)) = (parse_int(rest[0]), parse_int(rest[1])) else {
                return Range::NotInteger;
            };
            if start < 0 && end < 0 && start > end {
                return Range::Empty;
            }
            match unit(rest.get(2)) {
                Some(bits) => Range::Span {
                    start,
                    end: Some(end),
                    bits,
                },
                None => Range::Syntax,
            }
        }
        _ => Range::Syntax,
    }
}

/// BITPOS's arguments after the bit, checked in Redis's order (the unit before the end).
fn pos_range(rest: &[&[u8]]) -> Range {
    if rest.is_empty() {
        return Range::Whole;
    }
    if rest.len() > 3 {
        return Range::Syntax;
    }
    let Some(start) = parse_int(rest[0]) else {
        return Range::NotInteger;
    };
    let Some(bits) = unit(rest.get(2)) else {
        return Range::Syntax;
    };
    let end = match rest.get(1) {
        Some(e) => match parse_int(e) {
            Some(e) => Some(e),
            None => return Range::NotInteger,
        },
        None => None,
    };
    Range::Span { start, end, bits }
}

/// BYTE (the default) or BIT: whether the range counts bits; None for anything else.
fn unit(a: Option<&&[u8]>) -> Option<bool> {
    match a {
        None => Some(false),
        Some(u) if u.eq_ignore_ascii_case(b"byte") => Some(false),
        Some(u) if u.eq_ignore_ascii_case(b"bit") => Some(true),
        Some(_) => None,
    }
}

/// Bytes of an encoded `Bits`: kind, bit, range kind, unit, end given, start, end (i64 LE).
pub(crate) const BITS_ENCODED: usize = 5 + 16;

impl Bits {
    /// The bytes `decode` reads back (stashed with the batch, see `recipe`).
    fn encode(self) -> [u8; BITS_ENCODED] {
        let mut b = [0u8; BITS_ENCODED];
        let (kind, bit, range, (x, y)) = match self {
            Bits::GetRange { start, end } => (0, 0, Range::Whole, (start, end)),
            Bits::GetBit { offset } => (1, 0, Range::Whole, (offset as i64, 0)),
            Bits::SetRange => (2, 0, Range::Whole, (0, 0)),
            Bits::SetBit => (3, 0, Range::Whole, (0, 0)),
            Bits::Count(r) => (4, 0, r, (0, 0)),
            Bits::Pos { bit, range } => (5, bit, range, (0, 0)),
        };
        let (rk, unit, given, x, y) = match range {
            Range::Whole => (0, false, false, x, y),
            Range::Span { start, end, bits } => (1, bits, end.is_some(), start, end.unwrap_or(0)),
            Range::Empty => (2, false, false, x, y),
            Range::NotInteger => (3, false, false, x, y),
            Range::Syntax => (4, false, false, x, y),
        };
        b[..5].copy_from_slice(&[kind, bit, rk, u8::from(unit), u8::from(given)]);
        b[5..13].copy_from_slice(&x.to_le_bytes());
        b[13..].copy_from_slice(&y.to_le_bytes());
        b
    }

    /// The `Bits` that `encode` wrote into `b`.
    pub(crate) fn decode(b: &[u8]) -> Bits {
        let x = i64::from_le_bytes(b[5..13].try_into().expect("8 bytes"));
        let y = i64::from_le_bytes(b[13..21].try_into().expect("8 bytes"));
        let range = match b[2] {
            0 => Range::Whole,
            1 => Range::Span {
                start: x,
                end: (b[4] == 1).then_some(y),
                bits: b[3] == 1,
            },
            2 => Range::Empty,
            3 => Range::NotInteger,
            _ => Range::Syntax,
        };
        match b[0] {
            0 => Bits::GetRange { start: x, end: y },
            1 => Bits::GetBit { offset: x as u64 },
            2 => Bits::SetRange,
            3 => Bits::SetBit,
            4 => Bits::Count(range),
            _ => Bits::Pos { bit: b[1], range },
        }
    }

    /// Whether the command reads its key (a keyspace hit or miss), as Redis counts them.
    pub(crate) fn reads(self) -> bool {
        !matches!(self, Bits::SetRange | Bits::SetBit)
    }
}

/// Writes the reply of a `Bits` recipe from its operation's status and data.
pub(crate) fn render(w: &mut RespWriter<'_>, d: Bits, s: Status, data: &[u8]) {
    if let Status::Error(e) = s {
        let text = match (d, e) {
            (Bits::SetRange, OpError::ValueTooLarge { .. }) => ERR_STRING_SIZE.to_string(),
            (Bits::SetBit, OpError::ValueTooLarge { .. }) => ERR_BIT_OFFSET.to_string(),
            _ => super::op_error_text(&e),
        };
        return w.error(&text);
    }
    let value = (s == Status::Ok).then_some(data);
    match d {
        Bits::GetRange { start, end } => w.bulk(get_range(value.unwrap_or(&[]), start, end)),
        Bits::GetBit { offset } => w.integer(i64::from(get_bit(value.unwrap_or(&[]), offset))),
        Bits::SetRange => w.integer(le_u64(data) as i64),
        Bits::SetBit => w.integer(i64::from(data.first().copied().unwrap_or(0))),
        Bits::Count(range) => match value {
            None => w.integer(0),
            Some(v) => match bit_span(v.len(), range) {
                Ok(None) => w.integer(0),
                Ok(Some((from, to, _))) => w.integer(count_ones(v, from, to) as i64),
                Err(text) => w.error(text),
            },
        },
        Bits::Pos { bit, range } => match value {
            None => w.integer(if bit == 1 { -1 } else { 0 }),
            Some(v) => match bit_span(v.len(), range) {
                Ok(None) => w.integer(-1),
                Ok(Some((from, to, end_given))) => match first_bit(v, bit, from, to) {
                    Some(at) => w.integer(at as i64),
                    // Past a range that ran to the end of the string, the bits are zeros:
                    // the first clear bit is the one after it. An explicit end has none.
                    None if bit == 0 && !end_given => w.integer(to as i64 + 1),
                    None => w.integer(-1),
                },
                Err(text) => w.error(text),
            },
        },
    }
}

fn le_u64(d: &[u8]) -> u64 {
    d.try_into().map(u64::from_le_bytes).unwrap_or(0)
}

/// GETRANGE's slice, with Redis's index conversion.
fn get_range(v: &[u8], mut start: i64, mut end: i64) -> &[u8] {
    let len = v.len() as i64;
    if start < 0 && end < 0 && start > end {
        return &[];
    }
    if start < 0 {
        start = start.saturating_add(len);
    }
    if end < 0 {
        end = end.saturating_add(len);
    }
    start = start.max(0);
    end = end.max(0).min(len - 1);
    if start > end || len == 0 {
        return &[];
    }
    &v[start as usize..=end as usize]
}

fn get_bit(v: &[u8], offset: u64) -> u8 {
    let byte = (offset / 8) as usize;
    v.get(byte).map_or(0, |b| (b >> (7 - offset % 8)) & 1)
}

/// The inclusive bit span `(from, to, end_given)` a range selects in a value of `len` bytes,
/// None when it is empty, or the error text of arguments Redis refuses once the key exists.
fn bit_span(len: usize, range: Range) -> Result<Option<(u64, u64, bool)>, &'static str> {
    let (start, end, bits, end_given) = match range {
        Range::Whole => (0, len as i64 - 1, false, false),
        Range::Span { start, end, bits } => {
            let total = if bits { len as i64 * 8 } else { len as i64 };
            (start, end.unwrap_or(total - 1), bits, end.is_some())
        }
        Range::Empty => return Ok(None),
        Range::NotInteger => return Err(resp::err_not_integer()),
        Range::Syntax => return Err(resp::err_syntax()),
    };
    let total = if bits { len as i64 * 8 } else { len as i64 };
    let fix = |i: i64| {
        if i < 0 {
            i.saturating_add(total).max(0)
        } else {
            i
        }
    };
    let (start, end) = (fix(start), fix(end).min(total - 1));
    if start > end || total == 0 {
        return Ok(None);
    }
    let (from, to) = if bits {
        (start as u64, end as u64)
    } else {
        (start as u64 * 8, end as u64 * 8 + 7)
    };
    Ok(Some((from, to, end_given)))
}

/// Set bits of `v` in the inclusive bit span `from..=to` (within the value).
fn count_ones(v: &[u8], from: u64, to: u64) -> u64 {
    let (first, last) = ((from / 8) as usize, (to / 8) as usize);
    let mut n: u64 = v[first..=last]
        .iter()
        .map(|b| u64::from(b.count_ones()))
        .sum();
    // Bits of the edge bytes outside the span.
    let head = v[first] & !(0xffu8 >> (from % 8));
    let tail = v[last] & 0xffu8.checked_shr((to % 8 + 1) as u32).unwrap_or(0);
    n -= u64::from(head.count_ones()) + u64::from(tail.count_ones());
    n
}

/// The first bit equal to `bit` in the inclusive span `from..=to`.
fn first_bit(v: &[u8], bit: u8, from: u64, to: u64) -> Option<u64> {
    let skip = if bit == 1 { 0x00 } else { 0xff };
    let mut i = from;
    while i <= to {
        let byte = v[(i / 8) as usize];
        // Whole bytes with nothing to find are skipped at once.
        if i.is_multiple_of(8) && to - i >= 7 && byte == skip {
            i += 8;
            continue;
        }
        if (byte >> (7 - i % 8)) & 1 == bit {
            return Some(i);
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bit_commands_keep_recipes_at_24_bytes() {
        assert_eq!(size_of::<crate::resp::reply::Recipe>(), 24);
    }

    #[test]
    fn bits_survive_their_encoding() {
        let span = |start, end, bits| Range::Span { start, end, bits };
        for d in [
            Bits::GetRange {
                start: i64::MIN,
                end: i64::MAX,
            },
            Bits::GetBit {
                offset: (512 << 23) - 1,
            },
            Bits::SetRange,
            Bits::SetBit,
            Bits::Count(Range::Whole),
            Bits::Count(span(-5, Some(-1), true)),
            Bits::Count(Range::Empty),
            Bits::Count(Range::Syntax),
            Bits::Pos {
                bit: 1,
                range: span(3, None, false),
            },
            Bits::Pos {
                bit: 0,
                range: Range::NotInteger,
            },
        ] {
            assert_eq!(format!("{:?}", Bits::decode(&d.encode())), format!("{d:?}"));
        }
    }

    #[test]
    fn get_range_converts_indexes_as_redis() {
        let v = b"This is a string";
        assert_eq!(get_range(v, 0, 3), b"This");
        assert_eq!(get_range(v, -3, -1), b"ing");
        assert_eq!(get_range(v, 0, -1), v);
        assert_eq!(get_range(v, 10, 100), b"string");
        assert_eq!(get_range(v, -1, -5), b"");
        assert_eq!(get_range(v, 5, 3), b"");
        assert_eq!(get_range(v, i64::MIN, i64::MAX), v);
        assert_eq!(get_range(b"", 0, -1), b"");
    }

    #[test]
    fn counts_and_finds_bits_in_spans() {
        let v = [0xffu8, 0xf0, 0x00];
        assert_eq!(count_ones(&v, 0, 23), 12);
        assert_eq!(count_ones(&v, 1, 11), 11);
        assert_eq!(count_ones(&v, 4, 4), 1);
        assert_eq!(count_ones(&v, 12, 23), 0);
        assert_eq!(first_bit(&v, 0, 0, 23), Some(12));
        assert_eq!(first_bit(&v, 1, 12, 23), None);
        assert_eq!(first_bit(&v, 1, 3, 3), Some(3));
        assert_eq!(bit_span(3, Range::Whole), Ok(Some((0, 23, false))));
        assert_eq!(bit_span(0, Range::Whole), Ok(None));
        let span = |start, end, bits| Range::Span { start, end, bits };
        assert_eq!(
            bit_span(3, span(-2, Some(-1), false)),
            Ok(Some((8, 23, true)))
        );
        assert_eq!(
            bit_span(3, span(5, Some(100), true)),
            Ok(Some((5, 23, true)))
        );
        assert_eq!(bit_span(3, span(2, None, false)), Ok(Some((16, 23, false))));
    }
}
