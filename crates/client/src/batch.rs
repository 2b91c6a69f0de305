//! Batches: operations added one by one, executed together, results in the order added.
//!
//! ```text
//!   b.get(k) ─┐                       Staging (in the Client, reused by every batch)
//!   b.add(k,1)├─> ops:   [StagedOp { kind, flags, func, elem, shard, key/arg ranges }]
//!   b.put(k,v)┘   bytes: [ k | k 01000000.. | k v ... ]      one buffer for keys and arguments
//!
//!   execute: ops by shard ──> one or more REQUEST frames per shard ──> sent concurrently
//!            ──> results placed back by index ──> Replies
//! ```
//!
//! Each operation's shard is computed when it is added (xxh3-64 of the key, `shard_of_hash`),
//! so executing only groups indexes. Limits (key and value length) are checked at `execute`,
//! by the protocol's encoder, before any byte is sent.
//!
//! Goals: adding an operation copies its key and argument once and allocates nothing once the
//! staging buffers have grown; every operation of SPEC section 1 has a method.
//! Non-goals: transactions. A batch is not atomic; operations on one key run in the order they
//! were added (the server keeps per-key order), operations on different shards in parallel.

use directkv_proto::native::{expire_args, func, scan_args, ElemCode, NativeOp, OpCode, OpFlags};

use crate::client::Client;
use crate::error::ClientError;
use crate::reply::Replies;

/// One operation waiting in the staging area; key and arguments are ranges of `Staging::bytes`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StagedOp {
    kind: OpCode,
    flags: OpFlags,
    func: u16,
    elem: u8,
    pub(crate) shard: u16,
    key: (usize, usize),
    arg: (usize, usize),
    arg2: (usize, usize),
}

impl StagedOp {
    /// True if the operation never changes the store, so resending it is harmless.
    pub(crate) fn is_read_only(&self) -> bool {
        self.kind.is_read_only()
    }
}

/// The operations of the batch being built.
#[derive(Debug, Default)]
pub(crate) struct Staging {
    pub(crate) ops: Vec<StagedOp>,
    bytes: Vec<u8>,
}

impl Staging {
    pub(crate) fn clear(&mut self) {
        self.ops.clear();
        self.bytes.clear();
    }

    fn copy(&mut self, b: &[u8]) -> (usize, usize) {
        let start = self.bytes.len();
        // Most ops have no argument (GET) or one: an empty one costs no copy call.
        if !b.is_empty() {
            self.bytes.extend_from_slice(b);
        }
        (start, self.bytes.len())
    }

    /// Stages `op` for `shard`; returns its index.
    pub(crate) fn push(&mut self, op: &NativeOp<'_>, shard: u16) -> usize {
        let key = self.copy(op.key);
        let arg = self.copy(op.arg);
        let arg2 = self.copy(op.arg2);
        self.ops.push(StagedOp {
            kind: op.kind,
            flags: op.flags,
            func: op.func,
            elem: op.elem,
            shard,
            key,
            arg,
            arg2,
        });
        self.ops.len() - 1
    }

    /// The staged operation `i`, borrowing from the staging buffer.
    pub(crate) fn op(&self, i: usize) -> NativeOp<'_> {
        let s = &self.ops[i];
        let b = &self.bytes;
        NativeOp {
            kind: s.kind,
            flags: s.flags,
            func: s.func,
            elem: s.elem,
            key: &b[s.key.0..s.key.1],
            arg: &b[s.arg.0..s.arg.1],
            arg2: &b[s.arg2.0..s.arg2.1],
        }
    }
}

/// A batch being built on a `Client`: add operations, then `execute` once. Each method returns
/// the index of the operation's result in the `Replies`.
pub struct Batch<'c> {
    client: &'c mut Client,
}

impl<'c> Batch<'c> {
    pub(crate) fn new(client: &'c mut Client) -> Batch<'c> {
        client.staging_mut().clear();
        Batch { client }
    }

    /// Adds any operation (see `directkv_proto::native::NativeOp`'s constructors; copy flags
    /// are ignored, NO_RETURN is kept).
    pub fn push(&mut self, op: NativeOp<'_>) -> usize {
        self.client.stage(&op)
    }

    /// Operations added so far.
    pub fn len(&self) -> usize {
        self.client.staged_len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The value of `key`, or `Reply::NotFound`.
    pub fn get(&mut self, key: &[u8]) -> usize {
        self.push(NativeOp::get(key))
    }

    /// `Reply::Ok` if `key` exists, else `NotFound`; no data comes back.
    pub fn exists(&mut self, key: &[u8]) -> usize {
        self.push(NativeOp::exists(key))
    }

    /// `Ok(type name)` ("string") if `key` exists, else `NotFound`.
    pub fn type_of(&mut self, key: &[u8]) -> usize {
        self.push(NativeOp::type_of(key))
    }

    /// Puts with a deadline in ms since the Unix epoch under `condition` (`cond::ANY`, `NX`,
    /// `XX`; `KEEP_DEADLINE` keeps the key's own): `Ok`, or `NotStored` when the condition
    /// failed. A deadline already passed deletes the key.
    pub fn put_with_deadline(
        &mut self,
        key: &[u8],
        value: &[u8],
        deadline_ms: u64,
        condition: u8,
    ) -> usize {
        let args = expire_args(deadline_ms, condition);
        self.push(NativeOp::put_expire(key, value, &args))
    }

    /// Sets an existing key's deadline under `condition` (any `cond` bits): `Ok`, `NotStored`
    /// (condition failed) or `NotFound`.
    pub fn expire(&mut self, key: &[u8], deadline_ms: u64, condition: u8) -> usize {
        let args = expire_args(deadline_ms, condition);
        self.push(NativeOp::expire(key, &args))
    }

    /// Removes the deadline: `Ok` (it had one), `NotStored` (none) or `NotFound`.
    pub fn persist(&mut self, key: &[u8]) -> usize {
        self.push(NativeOp::persist(key))
    }

    /// The deadline and ms left (`Ttl::from_reply` types it), or `NotFound`.
    pub fn ttl(&mut self, key: &[u8]) -> usize {
        self.push(NativeOp::ttl(key))
    }

    /// One page of a scan (`ScanReply::parse` reads its `Ok` data).
    pub fn scan(&mut self, cursor: u64, prefix: &[u8], count: u32) -> usize {
        let args = scan_args(cursor, count);
        self.push(NativeOp::scan(prefix, &args))
    }

    /// Inserts or replaces.
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> usize {
        self.push(NativeOp::put(key, value))
    }

    /// Inserts only if missing, else `NotStored`.
    pub fn put_nx(&mut self, key: &[u8], value: &[u8]) -> usize {
        self.push(NativeOp::put_nx(key, value))
    }

    /// Replaces only if present, else `NotStored`.
    pub fn put_xx(&mut self, key: &[u8], value: &[u8]) -> usize {
        self.push(NativeOp::put_xx(key, value))
    }

    /// `Ok` if the key existed, else `NotFound`.
    pub fn delete(&mut self, key: &[u8]) -> usize {
        self.push(NativeOp::delete(key))
    }

    /// Compare-and-swap of the whole value: `Ok(value before)` or `CasMismatch(current)`.
    pub fn cas(&mut self, key: &[u8], expected: &[u8], new: &[u8]) -> usize {
        self.push(NativeOp::cas(key, expected, new))
    }

    /// `cas` answered with its status only.
    pub fn cas_no_return(&mut self, key: &[u8], expected: &[u8], new: &[u8]) -> usize {
        self.push(NativeOp::cas(key, expected, new).no_return())
    }

    /// `v = func(v, delta)` on a scalar; `Ok(original)`.
    pub fn update_s2s(&mut self, key: &[u8], func: u16, elem: ElemCode, delta: &[u8]) -> usize {
        self.push(NativeOp::update_s2s(key, func, elem, delta))
    }

    pub fn update_s2s_no_return(
        &mut self,
        key: &[u8],
        func: u16,
        elem: ElemCode,
        delta: &[u8],
    ) -> usize {
        self.push(NativeOp::update_s2s(key, func, elem, delta).no_return())
    }

    /// `e = func(e, delta)` for every element; `Ok(original vector)`.
    pub fn update_s2v(&mut self, key: &[u8], func: u16, elem: ElemCode, delta: &[u8]) -> usize {
        self.push(NativeOp::update_s2v(key, func, elem, delta))
    }

    pub fn update_s2v_no_return(
        &mut self,
        key: &[u8],
        func: u16,
        elem: ElemCode,
        delta: &[u8],
    ) -> usize {
        self.push(NativeOp::update_s2v(key, func, elem, delta).no_return())
    }

    /// `e[i] = func(e[i], deltas[i])`; `Ok(original vector)`.
    pub fn update_v2v(&mut self, key: &[u8], func: u16, elem: ElemCode, deltas: &[u8]) -> usize {
        self.push(NativeOp::update_v2v(key, func, elem, deltas))
    }

    pub fn update_v2v_no_return(
        &mut self,
        key: &[u8],
        func: u16,
        elem: ElemCode,
        deltas: &[u8],
    ) -> usize {
        self.push(NativeOp::update_v2v(key, func, elem, deltas).no_return())
    }

    /// Folds the vector into a scalar starting from `sigma`; `Ok(result)`.
    pub fn reduce(&mut self, key: &[u8], func: u16, elem: ElemCode, sigma: &[u8]) -> usize {
        self.push(NativeOp::reduce(key, func, elem, sigma))
    }

    /// The elements `e` for which `func(e, param)` holds; `Ok(elements)`.
    pub fn filter(&mut self, key: &[u8], func: u16, elem: ElemCode, param: &[u8]) -> usize {
        self.push(NativeOp::filter(key, func, elem, param))
    }

    /// Adds `delta` to a u64 counter (a missing key starts at 0); `Ok(original, 8 bytes LE)`.
    pub fn add_u64(&mut self, key: &[u8], delta: u64) -> usize {
        let d = delta.to_le_bytes();
        self.push(NativeOp::update_s2s(key, func::ADD, ElemCode::U64, &d))
    }

    /// `add_u64` answered with its status only.
    pub fn add_u64_no_return(&mut self, key: &[u8], delta: u64) -> usize {
        let d = delta.to_le_bytes();
        self.push(NativeOp::update_s2s(key, func::ADD, ElemCode::U64, &d).no_return())
    }

    /// Appends `value` to the value of `key` (a missing key starts empty); `Ok(new length,
    /// u64 LE)`.
    pub fn append(&mut self, key: &[u8], value: &[u8]) -> usize {
        self.push(NativeOp::append(key, value))
    }

    /// Adds `delta` to a decimal integer string, as Redis INCRBY (a missing key is 0);
    /// `Ok(new value as decimal text)`.
    pub fn incr_by(&mut self, key: &[u8], delta: i64) -> usize {
        let d = delta.to_le_bytes();
        self.push(NativeOp::incr_by(key, &d))
    }

    /// Adds `delta` to a decimal float string, as Redis INCRBYFLOAT; `Ok(new value as text)`.
    pub fn incr_by_float(&mut self, key: &[u8], delta: f64) -> usize {
        let d = delta.to_le_bytes();
        self.push(NativeOp::incr_by_float(key, &d))
    }

    /// Sends every operation and waits for all results.
    pub async fn execute(self) -> Result<Replies, ClientError> {
        let mut replies = Replies::new();
        self.execute_into(&mut replies).await?;
        Ok(replies)
    }

    /// `execute` into a `Replies` the caller reuses (no allocation once it has grown).
    pub async fn execute_into(self, replies: &mut Replies) -> Result<(), ClientError> {
        self.client.run(replies).await
    }
}
