//! Batches of operations that own their bytes, so they can cross from a connection's shard to
//! the shard that owns the keys over a bounded queue.
//!
//! ```text
//!  OwnedBatch { bytes: [key0 arg0 key1 arg1 ...], ops: [OwnedOp{kind, key: range, arg: range}] }
//!      └── ops() ──> Vec<Op<'_>> borrowing `bytes` ──> Engine::execute
//! ```

use std::ops::Range;

use directkv_engine::{ElemType, Op, OpKind};

#[derive(Debug, Clone)]
pub struct OwnedOp {
    pub kind: OpKind,
    key: Range<usize>,
    arg: Range<usize>,
    arg2: Range<usize>,
    pub func: u16,
    pub elem: ElemType,
    pub no_return: bool,
}

#[derive(Debug, Default)]
pub struct OwnedBatch {
    bytes: Vec<u8>,
    ops: Vec<OwnedOp>,
}

impl OwnedBatch {
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    pub fn clear(&mut self) {
        self.bytes.clear();
        self.ops.clear();
    }

    fn copy(&mut self, b: &[u8]) -> Range<usize> {
        let start = self.bytes.len();
        // Most operations have no argument (GET) or one: an empty one costs no copy call.
        if !b.is_empty() {
            self.bytes.extend_from_slice(b);
        }
        start..self.bytes.len()
    }

    /// Appends a copy of `op`; returns its index in the batch.
    pub fn push(&mut self, op: &Op) -> usize {
        let key = self.copy(op.key);
        let arg = self.copy(op.arg);
        let arg2 = self.copy(op.arg2);
        self.ops.push(OwnedOp {
            kind: op.kind,
            key,
            arg,
            arg2,
            func: op.func,
            elem: op.elem,
            no_return: op.no_return,
        });
        self.ops.len() - 1
    }

    /// The operations, borrowing this batch's bytes.
    pub fn ops(&self) -> Vec<Op<'_>> {
        self.ops
            .iter()
            .map(|o| Op {
                kind: o.kind,
                key: &self.bytes[o.key.clone()],
                arg: &self.bytes[o.arg.clone()],
                arg2: &self.bytes[o.arg2.clone()],
                func: o.func,
                elem: o.elem,
                no_return: o.no_return,
            })
            .collect()
    }
}

/// The shard that owns a key: bits 52..64 of its xxh3-64 hash, mapped onto `shards` by
/// multiply-shift (the engine uses bits 0..51 for bucket, secondary hash and reservation
/// station, so the choices are independent).
pub fn shard_of(key: &[u8], shards: usize) -> usize {
    if shards == 1 {
        return 0;
    }
    let h = directkv_engine::key_hash(key);
    (((h >> 52) as usize) * shards) >> 12
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_round_trip_through_owned_bytes() {
        let mut b = OwnedBatch::default();
        b.push(&Op::put(b"k1", b"v1"));
        b.push(&Op::cas(b"k2", b"old", b"new").no_return());
        let ops = b.ops();
        assert_eq!(
            (ops[0].kind, ops[0].key, ops[0].arg),
            (OpKind::Put, &b"k1"[..], &b"v1"[..])
        );
        assert_eq!(
            (ops[1].arg, ops[1].arg2, ops[1].no_return),
            (&b"old"[..], &b"new"[..], true)
        );
    }

    #[test]
    fn shards_cover_the_range_evenly() {
        let mut counts = [0usize; 3];
        for i in 0..30_000u32 {
            counts[shard_of(&i.to_le_bytes(), 3)] += 1;
        }
        for c in counts {
            assert!((9_000..11_000).contains(&c), "{counts:?}");
        }
    }
}
