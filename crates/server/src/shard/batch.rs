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
pub(crate) struct OwnedOp {
    pub kind: OpKind,
    key: Range<usize>,
    arg: Range<usize>,
    arg2: Range<usize>,
    pub func: u16,
    pub elem: ElemType,
    pub no_return: bool,
}

#[derive(Debug, Default)]
pub(crate) struct OwnedBatch {
    bytes: Vec<u8>,
    ops: Vec<OwnedOp>,
}

impl OwnedBatch {
    pub(crate) fn len(&self) -> usize {
        self.ops.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    pub(crate) fn clear(&mut self) {
        self.bytes.clear();
        self.ops.clear();
    }

    /// Bytes this batch holds allocated, for the accounting of client memory.
    pub(crate) fn capacity_bytes(&self) -> usize {
        self.bytes.capacity() + self.ops.capacity() * size_of::<OwnedOp>()
    }

    /// Empties the batch and gives back all but `bytes` of its capacity.
    pub(crate) fn release(&mut self, bytes: usize) {
        self.clear();
        if self.bytes.capacity() > bytes {
            self.bytes.shrink_to(bytes);
        }
        let ops = bytes / size_of::<OwnedOp>();
        if self.ops.capacity() > ops {
            self.ops.shrink_to(ops);
        }
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
    pub(crate) fn push(&mut self, op: &Op) -> usize {
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
    pub(crate) fn ops(&self) -> Vec<Op<'_>> {
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

    /// Operation `i` (as `push` returned it), borrowing this batch's bytes.
    #[inline]
    pub(crate) fn op(&self, i: usize) -> Op<'_> {
        let o = &self.ops[i];
        Op {
            kind: o.kind,
            key: &self.bytes[o.key.clone()],
            arg: &self.bytes[o.arg.clone()],
            arg2: &self.bytes[o.arg2.clone()],
            func: o.func,
            elem: o.elem,
            no_return: o.no_return,
        }
    }
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
}
