//! Batch records: the payload of one log record, the write operations of one executed batch
//! and the batch's `now`, so replaying it through `Engine::execute` after `Engine::set_now`
//! gives the same store.
//!
//! ```text
//!   payload = now u64 | ops u32 | op*                      (little-endian)
//!   op      = kind u8 | elem u8 | func u16 | key_len v | arg_len v | arg2_len v | key | arg | arg2
//!             (v: unsigned LEB128, at most 5 bytes, at most u32::MAX)
//! ```
//!
//! The encoding is the `Op` itself, field by field, and does not look at what the kind means:
//! a kind is its code (`OpKind as u8`), deadlines are whatever absolute values the op's
//! arguments carry (`expire_args`), so a new op kind is logged without a change here and a
//! decoder that does not know a code refuses the record (`BatchError::UnknownKind`) rather
//! than guess. Which ops to log is `OpKind::writes`. A write that failed (an NX put on an
//! existing key) is logged all the same: replayed in order at the same `now` it fails again,
//! and deciding which ops changed the store would need the engine's results, which a
//! deterministic engine makes unnecessary.
//!
//! Not here: operations whose outcome replay cannot reproduce from the op alone (a user
//! function registered at run time that a restarted server may not have) must be logged by
//! the server as the value they produced (a `Put`); eviction and active expiry as `Delete`s.
//! An 8-byte key with an 8-byte value costs 23 bytes (4 of op header, 3 of lengths, 16 of
//! data).

use directkv_engine::{ElemType, Engine, Op, OpKind, Results};

/// Bytes of the batch header: `now` and the op count.
pub const BATCH_HEADER_BYTES: usize = 12;
/// The fewest bytes one op takes (4 of header and three 1-byte lengths).
const OP_BYTES_MIN: usize = 7;

/// Why a payload is not a batch.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BatchError {
    #[error("batch record ends early at byte {at} of {len}")]
    Truncated { at: usize, len: usize },
    #[error("batch record has {extra} bytes after its last op")]
    Trailing { extra: usize },
    #[error("unknown op kind code {code} at byte {at} (written by a newer directkv?)")]
    UnknownKind { code: u8, at: usize },
    #[error("unknown element type code {code} at byte {at}")]
    UnknownElem { code: u8, at: usize },
    #[error("bad length at byte {at}")]
    BadLength { at: usize },
    #[error("batch record of {ops} ops has no room for them in {len} bytes")]
    TooManyOps { ops: u32, len: usize },
}

/// Appends the encoding of the write operations of `ops`, executed at `now`, to `out`;
/// returns how many it encoded. With none, `out` is left as it was (a batch of reads is not
/// logged).
pub fn encode_writes(now: u64, ops: &[Op], out: &mut Vec<u8>) -> usize {
    encode_ops(now, ops.iter().filter(|op| op.kind.writes()), out)
}

/// Appends the encoding of every op of `ops` (reads too) at `now` to `out`; returns how many.
/// With none, `out` is left as it was.
pub fn encode_ops<'o, 'a: 'o>(
    now: u64,
    ops: impl IntoIterator<Item = &'o Op<'a>>,
    out: &mut Vec<u8>,
) -> usize {
    let start = out.len();
    out.extend_from_slice(&now.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    let mut n = 0u32;
    for op in ops {
        out.push(op.kind as u8);
        out.push(op.elem.code());
        out.extend_from_slice(&op.func.to_le_bytes());
        for part in [op.key, op.arg, op.arg2] {
            put_len(out, part.len());
        }
        out.extend_from_slice(op.key);
        out.extend_from_slice(op.arg);
        out.extend_from_slice(op.arg2);
        n += 1;
    }
    if n == 0 {
        out.truncate(start);
    } else {
        out[start + 8..start + 12].copy_from_slice(&n.to_le_bytes());
    }
    n as usize
}

fn put_len(out: &mut Vec<u8>, len: usize) {
    let mut v = u32::try_from(len).expect("an op's part is under 4 GiB (engine limits)");
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A decoded batch whose ops borrow the payload.
#[derive(Debug, Clone)]
pub struct Batch<'a> {
    pub now: u64,
    pub ops: Vec<Op<'a>>,
}

struct Cursor<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], BatchError> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.b.len())
            .ok_or(BatchError::Truncated {
                at: self.at,
                len: self.b.len(),
            })?;
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }

    fn len(&mut self) -> Result<usize, BatchError> {
        let at = self.at;
        let mut v: u64 = 0;
        for i in 0..5 {
            let byte = self.take(1)?[0];
            v |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                return u32::try_from(v)
                    .map(|v| v as usize)
                    .map_err(|_| BatchError::BadLength { at });
            }
        }
        Err(BatchError::BadLength { at })
    }
}

/// Decodes a payload written by [`encode_writes`]; the ops borrow it and ask for no reply data
/// (`no_return`), which replay does not need.
pub fn decode(payload: &[u8]) -> Result<Batch<'_>, BatchError> {
    let mut c = Cursor { b: payload, at: 0 };
    let now = u64::from_le_bytes(c.take(8)?.try_into().unwrap());
    let count = u32::from_le_bytes(c.take(4)?.try_into().unwrap());
    // The count is checked against the bytes before anything is allocated for it.
    if count as usize > (payload.len() - BATCH_HEADER_BYTES) / OP_BYTES_MIN {
        return Err(BatchError::TooManyOps {
            ops: count,
            len: payload.len(),
        });
    }
    let mut ops = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let at = c.at;
        let h = c.take(4)?;
        let kind = OpKind::from_code(h[0]).ok_or(BatchError::UnknownKind { code: h[0], at })?;
        let elem = ElemType::from_code(h[1]).map_err(|_| BatchError::UnknownElem {
            code: h[1],
            at: at + 1,
        })?;
        let func = u16::from_le_bytes([h[2], h[3]]);
        let (kl, al, a2l) = (c.len()?, c.len()?, c.len()?);
        ops.push(Op {
            kind,
            key: c.take(kl)?,
            arg: c.take(al)?,
            arg2: c.take(a2l)?,
            func,
            elem,
            no_return: true,
        });
    }
    if c.at != payload.len() {
        return Err(BatchError::Trailing {
            extra: payload.len() - c.at,
        });
    }
    Ok(Batch { now, ops })
}

impl Batch<'_> {
    /// Runs the batch in `engine` at its `now` (left set afterwards), as it first ran.
    pub fn replay(&self, engine: &mut Engine, out: &mut Results) {
        engine.set_now(self.now);
        engine.execute(&self.ops, out);
    }

    /// A copy that owns its bytes.
    pub fn to_owned(&self) -> OwnedBatch {
        OwnedBatch {
            now: self.now,
            ops: self.ops.iter().map(OwnedOp::from).collect(),
        }
    }
}

/// An operation that owns its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnedOp {
    pub kind: OpKind,
    pub key: Vec<u8>,
    pub arg: Vec<u8>,
    pub arg2: Vec<u8>,
    pub func: u16,
    pub elem: ElemType,
}

impl From<&Op<'_>> for OwnedOp {
    fn from(op: &Op<'_>) -> OwnedOp {
        OwnedOp {
            kind: op.kind,
            key: op.key.to_vec(),
            arg: op.arg.to_vec(),
            arg2: op.arg2.to_vec(),
            func: op.func,
            elem: op.elem,
        }
    }
}

impl OwnedOp {
    pub fn as_op(&self) -> Op<'_> {
        Op {
            kind: self.kind,
            key: &self.key,
            arg: &self.arg,
            arg2: &self.arg2,
            func: self.func,
            elem: self.elem,
            no_return: true,
        }
    }
}

/// A decoded batch that owns its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnedBatch {
    pub now: u64,
    pub ops: Vec<OwnedOp>,
}

impl OwnedBatch {
    /// Runs the batch in `engine` at its `now` (left set afterwards).
    pub fn replay(&self, engine: &mut Engine, out: &mut Results) {
        let ops: Vec<Op> = self.ops.iter().map(OwnedOp::as_op).collect();
        engine.set_now(self.now);
        engine.execute(&ops, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use directkv_engine::{cond, expire_args};

    #[test]
    fn a_batch_round_trips_and_reads_are_left_out() {
        let args = expire_args(5_000, cond::NX);
        let big = vec![7u8; 300];
        let ops = [
            Op::put(b"k1", b"v1"),
            Op::get(b"k1"),
            Op::put_expire(b"k2", &big, &args),
            Op::update_s2s(b"k3", 3, ElemType::U32, b"\x01\0\0\0"),
            Op::delete(b"k4"),
        ];
        let mut out = vec![0xAA];
        assert_eq!(encode_writes(1234, &ops, &mut out), 4);
        let b = decode(&out[1..]).unwrap();
        assert_eq!(b.now, 1234);
        let kinds: Vec<OpKind> = b.ops.iter().map(|o| o.kind).collect();
        assert_eq!(
            kinds,
            [
                OpKind::Put,
                OpKind::PutExpire,
                OpKind::UpdateS2S,
                OpKind::Delete
            ]
        );
        assert_eq!(b.ops[1].arg, &big[..]);
        assert_eq!(b.ops[1].arg2, &args[..]);
        assert_eq!((b.ops[2].func, b.ops[2].elem), (3, ElemType::U32));
        let mut reads = vec![];
        assert_eq!(encode_writes(1, &[Op::get(b"x")], &mut reads), 0);
        assert!(reads.is_empty());
    }

    #[test]
    fn an_eight_byte_put_costs_23_bytes() {
        let mut out = vec![];
        encode_writes(0, &[Op::put(b"12345678", b"abcdefgh")], &mut out);
        assert_eq!(out.len(), BATCH_HEADER_BYTES + 23);
    }

    #[test]
    fn damaged_payloads_are_refused_not_misread() {
        let mut out = vec![];
        encode_writes(9, &[Op::put(b"key", b"value")], &mut out);
        for cut in 0..out.len() {
            assert!(decode(&out[..cut]).is_err(), "cut at {cut}");
        }
        let mut extra = out.clone();
        extra.push(0);
        assert_eq!(
            decode(&extra).unwrap_err(),
            BatchError::Trailing { extra: 1 }
        );
        let mut kind = out.clone();
        kind[BATCH_HEADER_BYTES] = 200;
        assert!(matches!(
            decode(&kind),
            Err(BatchError::UnknownKind { code: 200, .. })
        ));
        let mut count = out.clone();
        count[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(decode(&count), Err(BatchError::TooManyOps { .. })));
        let mut len = out.clone();
        len[BATCH_HEADER_BYTES + 4..BATCH_HEADER_BYTES + 9].copy_from_slice(&[0xff; 5]);
        assert!(decode(&len).is_err());
    }
}
