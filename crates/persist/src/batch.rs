//! Batch records: the payload of one log record, what one executed batch changed in a shard's
//! store, so that replaying the records in order after `Engine::set_now` gives the same store.
//!
//! ```text
//!   payload = version u8 (3) | flags u8 | now u64 | cas_before u64 | cas_after u64
//!             | deletes_before u32 | key* | ops u32 | op* | deletes_after u32 | key*
//!   key     = len v | bytes
//!   op      = kind u8 | elem u8 | func u16 | key_len v | arg_len v | arg2_len v | key | arg | arg2
//!           | kind|0x80 u8 | key_len u8 | arg_len u8 | key | arg          (the short form)
//!             (v: unsigned LEB128, at most 5 bytes, at most u32::MAX; integers little-endian)
//!   flags   bit 0 FLUSH: the store was emptied (FLUSHALL) before the rest of the record
//! ```
//!
//! What a batch changed, in the order it happened:
//! - **flush**: the shard's store emptied (the CAS counter goes on);
//! - **deletes before**: keys evicted to make room before the batch's operations ran
//!   (`Engine::evicted_before_batch`), and the keys a record of their own removes: an active
//!   expiry step's, or the evictions of an all-or-nothing check (`Engine::reclaimed_keys`);
//! - **ops**: the batch's write operations (`OpKind::writes`), or every operation when one is a
//!   memcache op (a memcache write's CAS is its operation's position in the batch, so replay
//!   needs the positions: `memcache::cas_at`);
//! - **deletes after**: keys evicted ahead of need after the batch
//!   (`Engine::evicted_after_batch`).
//!
//! `cas_before`/`cas_after` are the engine's CAS counter around the batch (`Engine::cas_next`);
//! replay restores both, so a record's deletes, which take numbers as operations when replayed,
//! change no CAS value. Keys the batch's own lookups found expired and reclaimed (lazy expiry)
//! are not logged: replayed at the same `now`, the same lookups reclaim them again. Replay runs
//! with eviction off (`EvictionPolicy::NoEviction`): evictions are in the record, and an engine
//! that evicted on its own while replaying would remove keys the original kept.
//!
//! The op encoding is the `Op` itself, field by field, and does not look at what the kind means:
//! a kind is its code (`OpKind as u8`), deadlines are whatever absolute values the op's
//! arguments carry (`expire_args`), so a new op kind is logged without a change here and a
//! decoder that does not know a code refuses the record (`BatchError::UnknownKind`) rather
//! than guess. A write that failed (an NX put on an existing key) is logged all the same:
//! replayed in order at the same `now` it fails again, and deciding which ops changed the
//! store would need the engine's results, which a deterministic engine makes unnecessary.
//!
//! Not here: operations whose outcome replay cannot reproduce from the op alone (a user
//! function registered at run time that a restarted server may not have) must be given to
//! `encode_record` by the server as the value they produced (a `Put`).
//!
//! **The short form** (version 3): an op whose `elem` is `ElemType::U64` (an `Op`'s default),
//! whose `func` is 0 and whose `arg2` is empty, with key and arg under 256 bytes each (a SET,
//! a DEL, an INCR of small keys: nearly every op a cache logs) is its kind code with the top
//! bit set and two length bytes, 3 bytes before its data instead of 7. An 8-byte key with an
//! 8-byte value costs 19 bytes (23 in version 2): a log of YCSB-A grows 17% slower, and so
//! triggers its snapshots 17% less often. A record's fixed part is 38 bytes
//! (`RECORD_HEADER_BYTES` and the three counts). Version 2 records (no short form) are read
//! as they were.

use directkv_engine::{
    ElemType, Engine, Op, OpError, OpKind, Results, SnapEntry, Status, NO_DEADLINE,
};

/// The record version this code writes; it reads this one and `RECORD_VERSION_OLDEST`.
pub const RECORD_VERSION: u8 = 3;
/// The oldest record version this code reads (version 2: no short form).
pub const RECORD_VERSION_OLDEST: u8 = 2;
/// Bytes before the first count: version, flags, `now`, the CAS counter before and after.
pub const RECORD_HEADER_BYTES: usize = 26;
/// Flag bit: the store was emptied before the rest of the record.
pub const FLAG_FLUSH: u8 = 1;
/// The fewest bytes one op takes (the short form: kind and two 1-byte lengths).
const OP_BYTES_MIN: usize = 3;
/// The kind byte's flag of an op in the short form (module comment).
const SHORT_FORM: u8 = 0x80;

/// Why a payload is not a batch record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BatchError {
    #[error("batch record ends early at byte {at} of {len}")]
    Truncated { at: usize, len: usize },
    #[error("batch record has {extra} bytes after its end")]
    Trailing { extra: usize },
    #[error("batch record version {version} (this directkv reads {RECORD_VERSION_OLDEST} to {RECORD_VERSION})")]
    Version { version: u8 },
    #[error("batch record flags {flags:#04x} unknown")]
    Flags { flags: u8 },
    #[error("unknown op kind code {code} at byte {at} (written by a newer directkv?)")]
    UnknownKind { code: u8, at: usize },
    #[error("unknown element type code {code} at byte {at}")]
    UnknownElem { code: u8, at: usize },
    #[error("bad length at byte {at}")]
    BadLength { at: usize },
    #[error("batch record of {count} items has no room for them in {len} bytes")]
    TooMany { count: u32, len: usize },
}

/// The fixed part of a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RecordHead {
    /// The batch's time (`Engine::set_now`), ms since the Unix epoch.
    pub now: u64,
    /// The store was emptied (FLUSHALL) before the rest.
    pub flush: bool,
    /// `Engine::cas_next` before the batch and after it.
    pub cas_before: u64,
    pub cas_after: u64,
}

/// Whether a batch is logged whole: a memcache op takes its CAS by its position.
fn logs_every_op(ops: &[Op]) -> bool {
    ops.iter().any(|op| op.kind.is_memcache())
}

/// Appends the record of one executed batch to `out`: `deletes_before`, the writes of `ops`
/// (every op when one is a memcache op), `deletes_after`. Returns false, with `out` as it was,
/// when there is nothing to log (no flush, no delete, no write): a batch of reads.
pub fn encode_record<'k>(
    out: &mut Vec<u8>,
    head: &RecordHead,
    deletes_before: impl IntoIterator<Item = &'k [u8]>,
    ops: &[Op],
    deletes_after: impl IntoIterator<Item = &'k [u8]>,
) -> bool {
    let start = out.len();
    out.push(RECORD_VERSION);
    out.push(if head.flush { FLAG_FLUSH } else { 0 });
    out.extend_from_slice(&head.now.to_le_bytes());
    out.extend_from_slice(&head.cas_before.to_le_bytes());
    out.extend_from_slice(&head.cas_after.to_le_bytes());
    let mut items = put_keys(out, deletes_before);
    let every = logs_every_op(ops);
    items += put_ops(out, ops, every);
    items += put_keys(out, deletes_after);
    if items == 0 && !head.flush {
        out.truncate(start);
        return false;
    }
    true
}

/// Appends a count and the keys; returns the count.
fn put_keys<'k>(out: &mut Vec<u8>, keys: impl IntoIterator<Item = &'k [u8]>) -> usize {
    let at = out.len();
    out.extend_from_slice(&0u32.to_le_bytes());
    let mut n = 0u32;
    for k in keys {
        put_len(out, k.len());
        out.extend_from_slice(k);
        n += 1;
    }
    out[at..at + 4].copy_from_slice(&n.to_le_bytes());
    n as usize
}

/// Appends a count and the ops that write (every op with `every`); returns the count.
///
/// Which ops write is gathered 64 at a time into a bit mask, then the set bits are encoded:
/// in a YCSB-A batch reads and writes alternate at random, and a branch on each op's kind
/// mispredicted about half the time (a third of the encoding's cost, perf annotate).
fn put_ops(out: &mut Vec<u8>, ops: &[Op], every: bool) -> usize {
    let at = out.len();
    out.extend_from_slice(&0u32.to_le_bytes());
    let mut n = 0u32;
    for chunk in ops.chunks(64) {
        let mut writes = 0u64;
        for (i, op) in chunk.iter().enumerate() {
            writes |= u64::from(every | op.kind.writes()) << i;
        }
        while writes != 0 {
            put_op(out, &chunk[writes.trailing_zeros() as usize]);
            writes &= writes - 1;
            n += 1;
        }
    }
    out[at..at + 4].copy_from_slice(&n.to_le_bytes());
    n as usize
}

/// Appends one op.
#[inline]
fn put_op(out: &mut Vec<u8>, op: &Op) {
    let (key, arg, arg2) = (op.key, op.arg, op.arg2);
    if op.func == 0
        && op.elem == ElemType::U64
        && arg2.is_empty()
        && (key.len() | arg.len()) < 0x100
    {
        out.reserve(3 + key.len() + arg.len());
        out.extend_from_slice(&[op.kind as u8 | SHORT_FORM, key.len() as u8, arg.len() as u8]);
        out.extend_from_slice(key);
        out.extend_from_slice(arg);
        return;
    }
    let func = op.func.to_le_bytes();
    out.reserve(7 + key.len() + arg.len() + arg2.len());
    if (key.len() | arg.len() | arg2.len()) < 0x80 {
        // Every length fits one LEB128 byte (every op of small keys and values): the op
        // header in one copy, into room reserved for the whole op.
        out.extend_from_slice(&[
            op.kind as u8,
            op.elem.code(),
            func[0],
            func[1],
            key.len() as u8,
            arg.len() as u8,
            arg2.len() as u8,
        ]);
    } else {
        out.extend_from_slice(&[op.kind as u8, op.elem.code(), func[0], func[1]]);
        for part in [key, arg, arg2] {
            put_len(out, part.len());
        }
    }
    out.extend_from_slice(key);
    out.extend_from_slice(arg);
    out.extend_from_slice(arg2);
}

fn put_len(out: &mut Vec<u8>, len: usize) {
    let mut v = u32::try_from(len).expect("an op's part is under 4 GiB (engine limits)");
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A decoded record whose keys and ops borrow the payload.
#[derive(Debug, Clone)]
pub struct Record<'a> {
    pub head: RecordHead,
    pub deletes_before: Vec<&'a [u8]>,
    pub ops: Vec<Op<'a>>,
    pub deletes_after: Vec<&'a [u8]>,
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

    fn u64(&mut self) -> Result<u64, BatchError> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().unwrap()))
    }

    /// A count, checked against the bytes left before anything is allocated for it.
    fn count(&mut self, min_bytes: usize) -> Result<usize, BatchError> {
        let count = u32::from_le_bytes(self.take(4)?.try_into().unwrap());
        if count as usize > (self.b.len() - self.at) / min_bytes {
            return Err(BatchError::TooMany {
                count,
                len: self.b.len(),
            });
        }
        Ok(count as usize)
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

    fn keys(&mut self) -> Result<Vec<&'a [u8]>, BatchError> {
        let n = self.count(1)?;
        let mut keys = Vec::with_capacity(n);
        for _ in 0..n {
            let len = self.len()?;
            keys.push(self.take(len)?);
        }
        Ok(keys)
    }
}

/// Decodes a payload written by [`encode_record`]; the ops borrow it and ask for no reply
/// data (`no_return`), which replay does not need.
pub fn decode(payload: &[u8]) -> Result<Record<'_>, BatchError> {
    let mut c = Cursor { b: payload, at: 0 };
    let h = c.take(2)?;
    let version = h[0];
    if !(RECORD_VERSION_OLDEST..=RECORD_VERSION).contains(&version) {
        return Err(BatchError::Version { version });
    }
    if h[1] & !FLAG_FLUSH != 0 {
        return Err(BatchError::Flags { flags: h[1] });
    }
    let head = RecordHead {
        flush: h[1] & FLAG_FLUSH != 0,
        now: c.u64()?,
        cas_before: c.u64()?,
        cas_after: c.u64()?,
    };
    let deletes_before = c.keys()?;
    let count = c.count(OP_BYTES_MIN)?;
    let mut ops = Vec::with_capacity(count);
    for _ in 0..count {
        let at = c.at;
        let first = c.take(1)?[0];
        if version >= 3 && first & SHORT_FORM != 0 {
            let code = first & !SHORT_FORM;
            let kind = OpKind::from_code(code).ok_or(BatchError::UnknownKind { code, at })?;
            let l = c.take(2)?;
            ops.push(Op {
                kind,
                key: c.take(usize::from(l[0]))?,
                arg: c.take(usize::from(l[1]))?,
                arg2: &[],
                func: 0,
                elem: ElemType::U64,
                no_return: true,
            });
            continue;
        }
        let kind = OpKind::from_code(first).ok_or(BatchError::UnknownKind { code: first, at })?;
        let h = c.take(3)?;
        let elem = ElemType::from_code(h[0]).map_err(|_| BatchError::UnknownElem {
            code: h[0],
            at: at + 1,
        })?;
        let func = u16::from_le_bytes([h[1], h[2]]);
        let (kl, al, a2l) = match c.b.get(c.at..c.at + 3) {
            // Three lengths under 128, one byte each (an op of small parts, the common one):
            // read at once, where `len` takes one byte at a time.
            Some(&[kl, al, a2l]) if (kl | al | a2l) < 0x80 => {
                c.at += 3;
                (usize::from(kl), usize::from(al), usize::from(a2l))
            }
            _ => (c.len()?, c.len()?, c.len()?),
        };
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
    let deletes_after = c.keys()?;
    if c.at != payload.len() {
        return Err(BatchError::Trailing {
            extra: payload.len() - c.at,
        });
    }
    Ok(Record {
        head,
        deletes_before,
        ops,
        deletes_after,
    })
}

/// Runs a record's parts on `engine` (whose eviction policy must be `NoEviction`): at its
/// `now` (left set afterwards), its deletes before, its ops from its CAS counter, its deletes
/// after, and the CAS counter as the batch left it. A flush is the caller's to do first (it
/// owns the configuration a fresh engine is built from): see [`RecordHead::flush`].
/// Returns how many of the ops ran out of memory: none when the engine has the memory the
/// batch first ran with (unless they ran out then too), so recovery can say when a store was
/// restarted with less memory than it was written with.
fn replay_parts(
    engine: &mut Engine,
    out: &mut Results,
    head: &RecordHead,
    before: &[&[u8]],
    ops: &[Op],
    after: &[&[u8]],
) -> u64 {
    debug_assert_eq!(
        engine.eviction_policy(),
        directkv_engine::EvictionPolicy::NoEviction,
        "replay runs with eviction off: evictions are in the log"
    );
    engine.set_now(head.now);
    let deletes = |engine: &mut Engine, out: &mut Results, keys: &[&[u8]]| {
        if !keys.is_empty() {
            let ops: Vec<Op> = keys.iter().map(|k| Op::delete(k).no_return()).collect();
            engine.execute(&ops, out);
        }
    };
    deletes(engine, out, before);
    let mut out_of_memory = 0;
    if before.is_empty() && after.is_empty() && stores_as_entries(ops) {
        out_of_memory = store_puts(engine, ops);
    } else if !ops.is_empty() {
        engine.set_cas_next(head.cas_before);
        engine.execute(ops, out);
        out_of_memory = (0..out.len())
            .filter(|&i| matches!(out.status(i), Status::Error(OpError::OutOfMemory)))
            .count() as u64;
    }
    deletes(engine, out, after);
    engine.set_cas_next(head.cas_after);
    out_of_memory
}

/// Whether `ops` are plain puts of non-empty keys (Redis's SET without options, the bulk of
/// a write-heavy log): what `Engine::load_entries` stores the same way the pipeline does
/// (value, no deadline, no item meta, an existing key replaced), without its per-operation
/// work (`store_puts`). The empty key is left to the pipeline, which stores it where
/// `load_entries` refuses it.
fn stores_as_entries(ops: &[Op]) -> bool {
    !ops.is_empty()
        && ops
            .iter()
            .all(|op| op.kind == OpKind::Put && !op.key.is_empty())
}

/// Plain puts in groups of `PUTS_GROUP_LEN` (`Engine::load_entries` prefetches a group's
/// buckets before it writes them).
const PUTS_GROUP_LEN: usize = 64;

/// Stores plain puts (`stores_as_entries`) as entries, in order; returns how many ran out of
/// memory. An entry `load_entries` refuses (a limit, out of memory) is a put the batch's
/// pipeline refused too (the same checks, the same `Table::write`): nothing of it is stored
/// and the rest go on, as the pipeline's later operations did.
fn store_puts(engine: &mut Engine, ops: &[Op]) -> u64 {
    let mut out_of_memory = 0;
    let empty = SnapEntry {
        key: &[],
        value: &[],
        deadline: NO_DEADLINE,
        flags: 0,
        cas: 0,
    };
    let mut group = [empty; PUTS_GROUP_LEN];
    for chunk in ops.chunks(PUTS_GROUP_LEN) {
        for (e, op) in group.iter_mut().zip(chunk) {
            e.key = op.key;
            e.value = op.arg;
        }
        let mut rest = &group[..chunk.len()];
        while let Err((at, e)) = engine.load_entries(rest) {
            if e == OpError::OutOfMemory {
                out_of_memory += 1;
            }
            rest = &rest[at + 1..];
        }
    }
    out_of_memory
}

impl Record<'_> {
    /// Runs the record on `engine` (eviction off), as its batch first ran; a flush is the
    /// caller's to do first. Returns the ops that ran out of memory (see `replay_parts`).
    pub fn replay(&self, engine: &mut Engine, out: &mut Results) -> u64 {
        replay_parts(
            engine,
            out,
            &self.head,
            &self.deletes_before,
            &self.ops,
            &self.deletes_after,
        )
    }

    /// A copy that owns its bytes.
    pub fn to_owned(&self) -> OwnedRecord {
        OwnedRecord {
            head: self.head,
            deletes_before: self.deletes_before.iter().map(|k| k.to_vec()).collect(),
            ops: self.ops.iter().map(OwnedOp::from).collect(),
            deletes_after: self.deletes_after.iter().map(|k| k.to_vec()).collect(),
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

/// A decoded record that owns its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnedRecord {
    pub head: RecordHead,
    pub deletes_before: Vec<Vec<u8>>,
    pub ops: Vec<OwnedOp>,
    pub deletes_after: Vec<Vec<u8>>,
}

impl OwnedRecord {
    /// Runs the record on `engine` (eviction off); a flush is the caller's to do first.
    /// Returns the ops that ran out of memory (see `replay_parts`).
    pub fn replay(&self, engine: &mut Engine, out: &mut Results) -> u64 {
        let ops: Vec<Op> = self.ops.iter().map(OwnedOp::as_op).collect();
        let before: Vec<&[u8]> = self.deletes_before.iter().map(Vec::as_slice).collect();
        let after: Vec<&[u8]> = self.deletes_after.iter().map(Vec::as_slice).collect();
        replay_parts(engine, out, &self.head, &before, &ops, &after)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use directkv_engine::{cond, expire_args};

    const HEAD: RecordHead = RecordHead {
        now: 1234,
        flush: false,
        cas_before: 10,
        cas_after: 15,
    };

    fn none<'k>() -> std::iter::Empty<&'k [u8]> {
        std::iter::empty()
    }

    #[test]
    fn a_record_round_trips_and_reads_are_left_out() {
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
        let before: [&[u8]; 2] = [b"e1", b""];
        assert!(encode_record(&mut out, &HEAD, before, &ops, [&b"e3"[..]]));
        let r = decode(&out[1..]).unwrap();
        assert_eq!(r.head, HEAD);
        assert_eq!(r.deletes_before, before);
        assert_eq!(r.deletes_after, [&b"e3"[..]]);
        let kinds: Vec<OpKind> = r.ops.iter().map(|o| o.kind).collect();
        assert_eq!(
            kinds,
            [
                OpKind::Put,
                OpKind::PutExpire,
                OpKind::UpdateS2S,
                OpKind::Delete
            ]
        );
        assert_eq!(r.ops[1].arg, &big[..]);
        assert_eq!(r.ops[1].arg2, &args[..]);
        assert_eq!((r.ops[2].func, r.ops[2].elem), (3, ElemType::U32));
        assert_eq!(r.to_owned().ops.len(), 4);
        let mut reads = vec![];
        assert!(!encode_record(
            &mut reads,
            &HEAD,
            none(),
            &[Op::get(b"x")],
            none()
        ));
        assert!(reads.is_empty());
        // A flush alone is a record.
        let flush = RecordHead {
            flush: true,
            ..HEAD
        };
        assert!(encode_record(&mut reads, &flush, none(), &[], none()));
        assert!(decode(&reads).unwrap().head.flush);
    }

    #[test]
    fn a_batch_with_a_memcache_op_is_logged_whole() {
        let ops = [Op::get(b"a"), Op::mc_get(b"b", b"", b"")];
        let mut out = vec![];
        assert!(encode_record(&mut out, &HEAD, none(), &ops, none()));
        assert_eq!(decode(&out).unwrap().ops.len(), 2);
    }

    #[test]
    fn an_eight_byte_put_costs_19_bytes() {
        let mut out = vec![];
        encode_record(
            &mut out,
            &HEAD,
            none(),
            &[Op::put(b"12345678", b"abcdefgh")],
            none(),
        );
        assert_eq!(out.len(), RECORD_HEADER_BYTES + 12 + 19);
    }

    #[test]
    fn damaged_payloads_are_refused_not_misread() {
        let mut out = vec![];
        encode_record(
            &mut out,
            &HEAD,
            [&b"gone"[..]],
            &[Op::put(b"key", b"value")],
            none(),
        );
        for cut in 0..out.len() {
            assert!(decode(&out[..cut]).is_err(), "cut at {cut}");
        }
        let mut extra = out.clone();
        extra.push(0);
        assert_eq!(
            decode(&extra).unwrap_err(),
            BatchError::Trailing { extra: 1 }
        );
        let mut version = out.clone();
        version[0] = 1;
        assert_eq!(
            decode(&version).unwrap_err(),
            BatchError::Version { version: 1 }
        );
        let mut flags = out.clone();
        flags[1] = 0x80;
        assert!(matches!(decode(&flags), Err(BatchError::Flags { .. })));
        // The op starts after the header, the deletes' count and "gone", the ops' count.
        let op_at = RECORD_HEADER_BYTES + 4 + 5 + 4;
        // A put of a small key is in the short form: its kind code with the top bit set.
        assert_eq!(out[op_at], OpKind::Put as u8 | SHORT_FORM);
        let mut kind = out.clone();
        kind[op_at] = 100 | SHORT_FORM;
        assert!(matches!(
            decode(&kind),
            Err(BatchError::UnknownKind { code: 100, .. })
        ));
        kind[op_at] = 100;
        assert!(matches!(
            decode(&kind),
            Err(BatchError::UnknownKind { code: 100, .. })
        ));
        // A version 2 record has no short form: the same byte is an unknown kind there.
        let mut old = out.clone();
        old[0] = RECORD_VERSION_OLDEST;
        assert!(matches!(
            decode(&old),
            Err(BatchError::UnknownKind { code, .. }) if code == OpKind::Put as u8 | SHORT_FORM
        ));
        let mut short_len = out.clone();
        short_len[op_at + 1] = 0xff;
        assert!(matches!(
            decode(&short_len),
            Err(BatchError::Truncated { .. })
        ));
        let mut count = out.clone();
        count[op_at - 4..op_at].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(decode(&count), Err(BatchError::TooMany { .. })));
        let mut dels = out.clone();
        dels[RECORD_HEADER_BYTES..RECORD_HEADER_BYTES + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(decode(&dels), Err(BatchError::TooMany { .. })));
        // The long form (an op with an arg2): a length of more than 5 LEB128 bytes.
        let mut long = vec![];
        let op = Op {
            arg2: b"x",
            ..Op::put(b"key", b"value")
        };
        encode_record(&mut long, &HEAD, [&b"gone"[..]], &[op], none());
        assert_eq!(long[op_at], OpKind::Put as u8);
        assert_eq!(decode(&long).unwrap().ops[0].arg2, b"x");
        long[op_at + 4..op_at + 9].copy_from_slice(&[0xff; 5]);
        assert!(matches!(decode(&long), Err(BatchError::BadLength { .. })));
    }

    /// Every op round-trips whichever form it takes: the short form exactly when its elem is
    /// U64, its func 0, its arg2 empty and key and arg under 256 bytes; and a version 2
    /// record (every op in the long form) still reads.
    #[test]
    fn ops_take_the_short_form_only_when_it_says_everything() {
        let big = [7u8; 300];
        let cases: Vec<(Op, bool)> = vec![
            (Op::put(b"k", b"v"), true),
            (Op::put(&big[..255], &big[..255]), true),
            (Op::put(&big[..256], b"v"), false),
            (Op::put(b"k", &big[..256]), false),
            (
                Op {
                    func: 3,
                    ..Op::put(b"k", b"v")
                },
                false,
            ),
            (
                Op {
                    elem: ElemType::U8,
                    ..Op::put(b"k", b"v")
                },
                false,
            ),
            (
                Op {
                    arg2: b"w",
                    ..Op::put(b"k", b"v")
                },
                false,
            ),
            (Op::put(b"", b""), true),
        ];
        for (op, short) in cases {
            let mut out = vec![];
            encode_record(&mut out, &HEAD, none(), &[op], none());
            let op_at = RECORD_HEADER_BYTES + 4 + 4;
            assert_eq!(out[op_at] & SHORT_FORM != 0, short, "{op:?}");
            let back = decode(&out).unwrap().ops[0];
            assert_eq!(
                (back.kind, back.key, back.arg, back.arg2, back.func, back.elem),
                (op.kind, op.key, op.arg, op.arg2, op.func, op.elem)
            );
        }
        // Version 2, as the previous directkv wrote it: a put of "k" = "v".
        let mut v2 = vec![];
        encode_record(&mut v2, &HEAD, none(), &[], [&b"z"[..]]);
        v2[0] = RECORD_VERSION_OLDEST;
        let ops_at = RECORD_HEADER_BYTES + 4;
        v2[ops_at..ops_at + 4].copy_from_slice(&1u32.to_le_bytes());
        let op = [
            OpKind::Put as u8,
            ElemType::U64.code(),
            0,
            0,
            1,
            1,
            0,
            b'k',
            b'v',
        ];
        v2.splice(ops_at + 4..ops_at + 4, op);
        let r = decode(&v2).unwrap();
        assert_eq!(
            (r.ops[0].kind, r.ops[0].key, r.ops[0].arg),
            (OpKind::Put, &b"k"[..], &b"v"[..])
        );
    }
}
