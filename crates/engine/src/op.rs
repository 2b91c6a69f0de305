//! Operations and their results: the engine's whole interface besides configuration.
//!
//! An `Op` borrows its key and arguments from the caller (typically a received frame), so a
//! batch costs no allocation. Results go into a reusable `Results`: one `OpResult` per operation,
//! in request order, whose data is a range of one shared byte buffer.
//!
//! That buffer holds at most `results_bytes_max` bytes between operations (an operation whose
//! data would pass it gets `OpError::ReplyTooLarge` and no data), which is also what keeps the
//! 32-bit offsets of `OpResult` in range: 4096 GETs of a 1 MiB value once wrapped them and
//! panicked the server (issue 19 item 5).

use crate::error::OpError;

/// `OpResult` offsets are `u32`: the results budget must keep them in range.
const _: () = assert!(crate::config::RESULTS_BYTES_MAX_DEFAULT <= u32::MAX as usize);
use crate::ops::ElemType;

/// What an operation does (SPEC section 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum OpKind {
    Get = 0,
    /// Insert or replace.
    Put = 1,
    /// Insert only (NX).
    PutNx = 2,
    /// Replace only (XX).
    PutXx = 3,
    Delete = 4,
    /// Compare-and-swap of the whole value: `arg` expected, `arg2` new.
    Cas = 5,
    UpdateS2S = 6,
    UpdateS2V = 7,
    UpdateV2V = 8,
    Reduce = 9,
    Filter = 10,
    /// Appends `arg` to the value (a missing key starts empty); replies the new length (u64 LE).
    Append = 11,
    /// The value is a decimal integer string (as Redis keeps counters); adds the i64 in `arg`
    /// (8 bytes LE) and replies the new value as a decimal string. A missing key starts at 0.
    IncrBy = 12,
    /// Like `IncrBy` for a decimal floating-point string and an f64 `arg`.
    IncrByFloat = 13,
    /// Put with a deadline (key expiry, `crate::expiry`): `arg` the value, `arg2` the 9 bytes
    /// of [`expire_args`]: the deadline (`KEEP_DEADLINE`: keep the key's own, Redis's
    /// KEEPTTL) and `cond::ANY`, `cond::NX` or `cond::XX`. A deadline at or before `now`
    /// deletes the key instead. NotStored when the condition fails.
    PutExpire = 14,
    /// Sets an existing key's deadline: `arg` the 9 bytes of [`expire_args`], with any of the
    /// conditions of `cond` (Redis's EXPIRE NX/XX/GT/LT; a key without a deadline counts as
    /// one infinitely far for GT and LT). A deadline at or before `now` deletes the key. Ok:
    /// done; NotStored: the condition failed; NotFound: no key.
    Expire = 15,
    /// Removes a key's deadline. Ok: it had one; NotStored: it had none; NotFound: no key.
    Persist = 16,
    /// Reads a key's deadline: Ok with 16 bytes, the deadline and the milliseconds left
    /// (u64 LE each; both 0 for a key without a deadline); NotFound: no key. With `arg` =
    /// [`TTL_WITH_META`], one more byte: whether the entry has item meta.
    Ttl = 17,
    /// Reads the value, then sets the deadline to `arg` (8 bytes u64 LE; `NO_DEADLINE`
    /// removes it, Redis's PERSIST; an empty `arg` leaves it alone). A deadline at or before
    /// `now` deletes the key after it was read. Redis's GETEX.
    GetEx = 18,
    /// Writes `arg2` at byte offset `arg` (u64 LE), zero-padding (Redis SETRANGE; see
    /// `ops/range.rs`); replies the new length (u64 LE).
    SetRange = 19,
    /// Sets bit `arg` (u64 LE) to `arg2` ([0] or [1]) (Redis SETBIT); replies the old bit.
    SetBit = 20,
    /// memcached's get/gets/gat/gats/mg, with the item's flags and CAS (`op::mc`).
    McGet = 21,
    /// memcached's set/add/replace/append/prepend/cas/ms (`op::mc::StoreArgs`).
    McStore = 22,
    /// memcached's delete/md, with an optional CAS to compare.
    McDelete = 23,
    /// memcached's incr/decr/ma on a decimal u64 (`op::mc::ArithArgs`).
    McArith = 24,
    /// memcached's touch: sets the deadline, keeps the value, flags and CAS.
    McTouch = 25,
}

pub const OP_KIND_COUNT: usize = 26;

/// The `arg` of [`Op::ttl_with_meta`].
pub const TTL_WITH_META: &[u8] = &[1];

pub mod mc;

/// A deadline that says "keep the key's current deadline" (`OpKind::PutExpire`, KEEPTTL).
pub const KEEP_DEADLINE: u64 = u64::MAX;

/// Conditions of `OpKind::PutExpire` (NX, XX) and `OpKind::Expire` (all), as bits: every
/// bit set must hold (Redis's EXPIRE takes XX with GT or LT). PutExpire ignores GT and LT.
pub mod cond {
    /// Unconditional.
    pub const ANY: u8 = 0;
    /// PutExpire: only if the key is missing. Expire: only if it has no deadline.
    pub const NX: u8 = 1;
    /// PutExpire: only if the key exists. Expire: only if it has a deadline.
    pub const XX: u8 = 2;
    /// Expire: only if the key has a deadline and the new one is later.
    pub const GT: u8 = 4;
    /// Expire: only if the key has no deadline or the new one is earlier.
    pub const LT: u8 = 8;
    /// Every condition bit.
    pub const ALL: u8 = NX | XX | GT | LT;
}

/// The argument bytes of `PutExpire` (as `arg2`) and `Expire` (as `arg`): the deadline in
/// milliseconds since the Unix epoch (u64 LE) and a condition of [`cond`].
pub fn expire_args(deadline_ms: u64, condition: u8) -> [u8; 9] {
    let mut a = [0u8; 9];
    a[..8].copy_from_slice(&deadline_ms.to_le_bytes());
    a[8] = condition;
    a
}

/// Decodes [`expire_args`]; None if `a` is not 9 bytes or the condition is unknown.
pub fn parse_expire_args(a: &[u8]) -> Option<(u64, u8)> {
    let (d, c) = (a.get(..8)?, *a.get(8)?);
    if a.len() != 9 || c & !cond::ALL != 0 {
        return None;
    }
    Some((u64::from_le_bytes(d.try_into().ok()?), c))
}

impl OpKind {
    pub const ALL: [OpKind; OP_KIND_COUNT] = [
        OpKind::Get,
        OpKind::Put,
        OpKind::PutNx,
        OpKind::PutXx,
        OpKind::Delete,
        OpKind::Cas,
        OpKind::UpdateS2S,
        OpKind::UpdateS2V,
        OpKind::UpdateV2V,
        OpKind::Reduce,
        OpKind::Filter,
        OpKind::Append,
        OpKind::IncrBy,
        OpKind::IncrByFloat,
        OpKind::PutExpire,
        OpKind::Expire,
        OpKind::Persist,
        OpKind::Ttl,
        OpKind::GetEx,
        OpKind::SetRange,
        OpKind::SetBit,
        OpKind::McGet,
        OpKind::McStore,
        OpKind::McDelete,
        OpKind::McArith,
        OpKind::McTouch,
    ];

    pub fn name(self) -> &'static str {
        match self {
            OpKind::Get => "get",
            OpKind::Put => "put",
            OpKind::PutNx => "put_nx",
            OpKind::PutXx => "put_xx",
            OpKind::Delete => "delete",
            OpKind::Cas => "cas",
            OpKind::UpdateS2S => "update_scalar2scalar",
            OpKind::UpdateS2V => "update_scalar2vector",
            OpKind::UpdateV2V => "update_vector2vector",
            OpKind::Reduce => "reduce",
            OpKind::Filter => "filter",
            OpKind::Append => "append",
            OpKind::IncrBy => "incr_by",
            OpKind::IncrByFloat => "incr_by_float",
            OpKind::PutExpire => "put_expire",
            OpKind::Expire => "expire",
            OpKind::Persist => "persist",
            OpKind::Ttl => "ttl",
            OpKind::GetEx => "get_ex",
            OpKind::SetRange => "set_range",
            OpKind::SetBit => "set_bit",
            OpKind::McGet => "mc_get",
            OpKind::McStore => "mc_store",
            OpKind::McDelete => "mc_delete",
            OpKind::McArith => "mc_arith",
            OpKind::McTouch => "mc_touch",
        }
    }

    pub fn from_code(c: u8) -> Option<OpKind> {
        OpKind::ALL.get(c as usize).copied()
    }

    /// True for the memcache kinds (`op::mc`), which the native protocol does not carry.
    pub fn is_memcache(self) -> bool {
        self as u8 >= OpKind::McGet as u8
    }

    /// True for operations that may change the store (`McGet` may: a touch, or giving an
    /// entry a CAS for `gets`).
    pub fn writes(self) -> bool {
        !matches!(
            self,
            OpKind::Get | OpKind::Reduce | OpKind::Filter | OpKind::Ttl
        )
    }
}

/// One operation. `arg` is the value (put), expected value (cas), delta(s) (updates), initial
/// accumulator (reduce) or parameter (filter); `arg2` is the new value of a cas.
#[derive(Debug, Clone, Copy)]
pub struct Op<'a> {
    pub kind: OpKind,
    pub key: &'a [u8],
    pub arg: &'a [u8],
    pub arg2: &'a [u8],
    pub func: u16,
    pub elem: ElemType,
    /// Reply with the status only (seed 002 measures updates both ways).
    pub no_return: bool,
}

impl<'a> Op<'a> {
    fn new(kind: OpKind, key: &'a [u8]) -> Op<'a> {
        Op {
            kind,
            key,
            arg: &[],
            arg2: &[],
            func: 0,
            elem: ElemType::U64,
            no_return: false,
        }
    }
    pub fn get(key: &'a [u8]) -> Op<'a> {
        Op::new(OpKind::Get, key)
    }
    pub fn put(key: &'a [u8], value: &'a [u8]) -> Op<'a> {
        Op {
            arg: value,
            ..Op::new(OpKind::Put, key)
        }
    }
    pub fn put_nx(key: &'a [u8], value: &'a [u8]) -> Op<'a> {
        Op {
            arg: value,
            ..Op::new(OpKind::PutNx, key)
        }
    }
    pub fn put_xx(key: &'a [u8], value: &'a [u8]) -> Op<'a> {
        Op {
            arg: value,
            ..Op::new(OpKind::PutXx, key)
        }
    }
    pub fn delete(key: &'a [u8]) -> Op<'a> {
        Op::new(OpKind::Delete, key)
    }
    pub fn cas(key: &'a [u8], expected: &'a [u8], new: &'a [u8]) -> Op<'a> {
        Op {
            arg: expected,
            arg2: new,
            ..Op::new(OpKind::Cas, key)
        }
    }
    pub fn update_s2s(key: &'a [u8], func: u16, elem: ElemType, delta: &'a [u8]) -> Op<'a> {
        Op {
            arg: delta,
            func,
            elem,
            ..Op::new(OpKind::UpdateS2S, key)
        }
    }
    pub fn update_s2v(key: &'a [u8], func: u16, elem: ElemType, delta: &'a [u8]) -> Op<'a> {
        Op {
            arg: delta,
            func,
            elem,
            ..Op::new(OpKind::UpdateS2V, key)
        }
    }
    pub fn update_v2v(key: &'a [u8], func: u16, elem: ElemType, deltas: &'a [u8]) -> Op<'a> {
        Op {
            arg: deltas,
            func,
            elem,
            ..Op::new(OpKind::UpdateV2V, key)
        }
    }
    pub fn reduce(key: &'a [u8], func: u16, elem: ElemType, sigma: &'a [u8]) -> Op<'a> {
        Op {
            arg: sigma,
            func,
            elem,
            ..Op::new(OpKind::Reduce, key)
        }
    }
    pub fn append(key: &'a [u8], suffix: &'a [u8]) -> Op<'a> {
        Op {
            arg: suffix,
            ..Op::new(OpKind::Append, key)
        }
    }
    /// `delta` is an i64 in little-endian (8 bytes).
    pub fn incr_by(key: &'a [u8], delta: &'a [u8; 8]) -> Op<'a> {
        Op {
            arg: delta,
            ..Op::new(OpKind::IncrBy, key)
        }
    }
    /// `delta` is an f64 in little-endian (8 bytes).
    pub fn incr_by_float(key: &'a [u8], delta: &'a [u8; 8]) -> Op<'a> {
        Op {
            arg: delta,
            ..Op::new(OpKind::IncrByFloat, key)
        }
    }
    /// `offset` is a u64 in little-endian (8 bytes).
    pub fn set_range(key: &'a [u8], offset: &'a [u8; 8], bytes: &'a [u8]) -> Op<'a> {
        Op {
            arg: offset,
            arg2: bytes,
            ..Op::new(OpKind::SetRange, key)
        }
    }
    /// `offset` is a bit offset, u64 in little-endian (8 bytes); `bit` is [0] or [1].
    pub fn set_bit(key: &'a [u8], offset: &'a [u8; 8], bit: &'a [u8]) -> Op<'a> {
        Op {
            arg: offset,
            arg2: bit,
            ..Op::new(OpKind::SetBit, key)
        }
    }
    pub fn filter(key: &'a [u8], func: u16, elem: ElemType, param: &'a [u8]) -> Op<'a> {
        Op {
            arg: param,
            func,
            elem,
            ..Op::new(OpKind::Filter, key)
        }
    }
    /// Put with a deadline: `args` from [`expire_args`] (deadline, `cond::ANY/NX/XX`).
    pub fn put_expire(key: &'a [u8], value: &'a [u8], args: &'a [u8; 9]) -> Op<'a> {
        Op {
            arg: value,
            arg2: args,
            ..Op::new(OpKind::PutExpire, key)
        }
    }
    /// Sets the deadline of an existing key: `args` from [`expire_args`].
    pub fn expire(key: &'a [u8], args: &'a [u8; 9]) -> Op<'a> {
        Op {
            arg: args,
            ..Op::new(OpKind::Expire, key)
        }
    }
    pub fn persist(key: &'a [u8]) -> Op<'a> {
        Op::new(OpKind::Persist, key)
    }
    pub fn ttl(key: &'a [u8]) -> Op<'a> {
        Op::new(OpKind::Ttl, key)
    }
    /// [`Op::ttl`] whose reply has one more byte: 1 if the entry has item meta (memcached's
    /// flags and CAS, `op::mc`), else 0. Still a read.
    pub fn ttl_with_meta(key: &'a [u8]) -> Op<'a> {
        Op {
            arg: TTL_WITH_META,
            ..Op::new(OpKind::Ttl, key)
        }
    }
    /// GETEX: `deadline` is 8 bytes (u64 LE, `NO_DEADLINE` to persist) or empty (unchanged).
    pub fn get_ex(key: &'a [u8], deadline: &'a [u8]) -> Op<'a> {
        Op {
            arg: deadline,
            ..Op::new(OpKind::GetEx, key)
        }
    }
    /// memcached get: `touch` empty or `mc::touch_arg(deadline)`; `want_cas` empty or
    /// `&mc::WANT_CAS`.
    #[inline]
    pub fn mc_get(key: &'a [u8], touch: &'a [u8], want_cas: &'a [u8]) -> Op<'a> {
        Op {
            arg: touch,
            arg2: want_cas,
            ..Op::new(OpKind::McGet, key)
        }
    }
    /// memcached store: `args` from `mc::StoreArgs::encode`.
    pub fn mc_store(key: &'a [u8], data: &'a [u8], args: &'a [u8; mc::STORE_ARGS_BYTES]) -> Op<'a> {
        Op {
            arg: data,
            arg2: args,
            ..Op::new(OpKind::McStore, key)
        }
    }
    /// memcached delete: `compare_cas` empty or `mc::u64_arg(cas)`.
    pub fn mc_delete(key: &'a [u8], compare_cas: &'a [u8]) -> Op<'a> {
        Op {
            arg: compare_cas,
            ..Op::new(OpKind::McDelete, key)
        }
    }
    /// memcached incr/decr: `args` from `mc::ArithArgs::encode`.
    pub fn mc_arith(key: &'a [u8], args: &'a [u8; mc::ARITH_ARGS_BYTES]) -> Op<'a> {
        Op {
            arg2: args,
            ..Op::new(OpKind::McArith, key)
        }
    }
    /// memcached touch: `deadline` from `mc::u64_arg`.
    pub fn mc_touch(key: &'a [u8], deadline: &'a [u8; 8]) -> Op<'a> {
        Op {
            arg: deadline,
            ..Op::new(OpKind::McTouch, key)
        }
    }
    /// Whether a success of this op tells the client a write happened: every `writes()` kind
    /// but a memcached get without a touch (which at most gives an item a CAS, which no client
    /// sees changed). What a server that can no longer log writes refuses
    /// (`Engine::execute_reads_only`, `Results::refuse_writes`).
    pub fn acknowledges_a_write(&self) -> bool {
        self.kind.writes() && !(self.kind == OpKind::McGet && self.arg.is_empty())
    }

    pub fn no_return(self) -> Op<'a> {
        Op {
            no_return: true,
            ..self
        }
    }
}

/// Outcome of one operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Done; data per operation (value, original value, reduction, filtered elements).
    Ok,
    /// The key does not exist (get, delete, vector operations, reduce, filter).
    NotFound,
    /// A conditional put did not apply: NX on an existing key or XX on a missing one.
    NotStored,
    /// The cas did not match; data is the current value (empty if the key is missing).
    CasMismatch,
    Error(OpError),
}

impl Status {
    /// Wire code: 0 ok, 1 not found, 2 not stored, 3 cas mismatch, 0x80 | error code.
    pub fn code(&self) -> u8 {
        match self {
            Status::Ok => 0,
            Status::NotFound => 1,
            Status::NotStored => 2,
            Status::CasMismatch => 3,
            Status::Error(e) => 0x80 | e.code(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpResult {
    pub status: Status,
    data_start: u32,
    data_len: u32,
}

/// Results of a batch, reused across batches to avoid allocation.
#[derive(Debug, Default)]
pub struct Results {
    items: Vec<OpResult>,
    data: Vec<u8>,
    /// The batch's `results_bytes_max` (set by `reset`): `data.len()` stays at or below it
    /// between operations, so every offset fits a `u32`.
    bytes_max: usize,
    /// The caller's cap on `bytes_max` (`set_bytes_cap`; 0: none).
    bytes_cap: usize,
}

const PENDING: OpResult = OpResult {
    status: Status::NotFound,
    data_start: 0,
    data_len: 0,
};

impl Results {
    pub fn with_capacity(ops: usize, data_bytes: usize) -> Results {
        Results {
            items: Vec::with_capacity(ops),
            data: Vec::with_capacity(data_bytes),
            bytes_max: 0,
            bytes_cap: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    #[inline]
    pub fn status(&self, i: usize) -> Status {
        self.items[i].status
    }

    /// Bytes of reply data the batch produced (all its operations together).
    pub fn data_bytes(&self) -> usize {
        self.data.len()
    }

    #[inline]
    pub fn data(&self, i: usize) -> &[u8] {
        let r = &self.items[i];
        let start = r.data_start as usize;
        &self.data[start..start + r.data_len as usize]
    }

    pub fn iter(&self) -> impl Iterator<Item = (Status, &[u8])> + '_ {
        (0..self.items.len()).map(|i| (self.status(i), self.data(i)))
    }

    /// Starts a batch of `n` operations whose data may total `bytes_max` bytes (at most
    /// `u32::MAX`, checked when the engine is built).
    #[inline]
    pub(crate) fn reset(&mut self, n: usize, bytes_max: usize) {
        debug_assert!(bytes_max <= u32::MAX as usize);
        let bytes_max = match self.bytes_cap {
            0 => bytes_max,
            cap => bytes_max.min(cap),
        };
        self.bytes_max = bytes_max;
        self.items.clear();
        self.data.clear();
        if self.data.capacity() > bytes_max {
            self.data.shrink_to(bytes_max);
        }
        self.items.resize(n, PENDING);
    }

    /// Starts the data of a result: bytes appended until `finish` belong to it.
    #[inline]
    pub(crate) fn buf(&mut self) -> &mut Vec<u8> {
        &mut self.data
    }

    #[inline]
    pub(crate) fn mark(&self) -> usize {
        self.data.len()
    }

    /// Result `i` is `Ok` with `value` as its data (none when `no_return`).
    #[inline(always)]
    pub(crate) fn finish_found(&mut self, i: usize, value: &[u8], no_return: bool) {
        let start = self.data.len();
        debug_assert!(self.data.capacity() <= self.bytes_max || self.data.capacity() == 0);
        // The budget costs nothing on the common path: a small value that fits the buffer's
        // capacity, which never exceeds `bytes_max` between operations (see `finish`), is
        // within it; only the path that grows the buffer checks.
        if !no_return && !push_fast(&mut self.data, value) && !self.push_budgeted(value) {
            self.refuse(i, start);
            return;
        }
        self.items[i] = OpResult {
            status: Status::Ok,
            data_start: start as u32,
            data_len: (self.data.len() - start) as u32,
        };
    }

    /// Result `i` is `NotFound`, without data.
    #[inline(always)]
    pub(crate) fn finish_missing(&mut self, i: usize) {
        self.items[i] = OpResult {
            status: Status::NotFound,
            data_start: self.data.len() as u32,
            data_len: 0,
        };
    }

    /// Result `i` is `status` with the bytes appended since `start` as its data; an error
    /// keeps none, and data that passed `bytes_max` is dropped for `ReplyTooLarge`.
    #[inline]
    pub(crate) fn finish(&mut self, i: usize, status: Status, start: usize) {
        if matches!(status, Status::Error(_)) {
            self.data.truncate(start);
        } else if self.data.capacity() > self.bytes_max {
            self.over_budget(i, start);
            return;
        }
        let len = self.data.len() - start;
        self.items[i] = OpResult {
            status,
            data_start: start as u32,
            data_len: len as u32,
        };
    }
}

impl Results {
    /// True when the data appended so far is past the batch's budget: the operation being
    /// finished will be refused (`ReplyTooLarge`), so a write must not be applied.
    #[inline]
    pub(crate) fn past_budget(&self) -> bool {
        self.data.len() > self.bytes_max
    }

    /// Result `i` was refused for the results budget.
    #[inline(always)]
    pub(crate) fn refused(&self, i: usize) -> bool {
        matches!(
            self.items[i].status,
            Status::Error(OpError::ReplyTooLarge { .. })
        )
    }

    /// Turns the result of every write of `ops` (the batch these are the results of) into
    /// `e`, dropping its data: the server's answer when a batch ran but its log record could
    /// not be written, so none of its writes may be acknowledged.
    pub fn refuse_writes(&mut self, ops: &[Op], e: OpError) {
        debug_assert_eq!(ops.len(), self.items.len());
        for (r, op) in self.items.iter_mut().zip(ops) {
            if op.acknowledges_a_write() {
                *r = OpResult {
                    status: Status::Error(e),
                    data_start: r.data_start,
                    data_len: 0,
                };
            }
        }
    }

    /// Limits the data of every batch run into this buffer to `bytes` (0: the engine's
    /// `results_bytes_max` alone), below the engine's own budget: a caller whose reply has a
    /// smaller bound (a UDP datagram) gets `ReplyTooLarge` past it instead of a buffer grown
    /// for data it could not send.
    pub fn set_bytes_cap(&mut self, bytes: usize) {
        self.bytes_cap = bytes;
    }

    /// Bytes this buffer holds allocated (results and data), for the server's accounting of
    /// client memory.
    pub fn capacity_bytes(&self) -> usize {
        self.data.capacity() + self.items.capacity() * size_of::<OpResult>()
    }

    /// Forgets the results and gives back all but `bytes` of the data's capacity (and as much
    /// of the result list): a buffer that once held a large batch does not keep it.
    pub fn release(&mut self, bytes: usize) {
        self.items.clear();
        self.data.clear();
        if self.data.capacity() > bytes {
            self.data.shrink_to(bytes);
        }
        let items = bytes / size_of::<OpResult>();
        if self.items.capacity() > items {
            self.items.shrink_to(items);
        }
    }

    /// Appends `v` if the budget has room, growing the buffer to at most `bytes_max`.
    #[inline(never)]
    fn push_budgeted(&mut self, v: &[u8]) -> bool {
        let len = self.data.len();
        // `len <= capacity <= bytes_max` between operations, so this does not wrap.
        if v.len() > self.bytes_max - len {
            return false;
        }
        if self.data.capacity() - len < v.len() {
            let want = (self.data.capacity() * 2)
                .max(len + v.len())
                .min(self.bytes_max);
            self.data.reserve_exact(want - len);
        }
        self.data.extend_from_slice(v);
        true
    }

    /// The data of result `i` (appended since `start` by a writer that grows the buffer as it
    /// likes) left the buffer's capacity above `bytes_max`: refuses the data if its length
    /// passed the budget too, then brings the capacity back under it, so the next small
    /// values can again be appended unchecked.
    #[cold]
    #[inline(never)]
    fn over_budget(&mut self, i: usize, start: usize) {
        if self.data.len() > self.bytes_max {
            self.refuse(i, start);
        } else {
            let len = self.data.len() - start;
            self.items[i] = OpResult {
                status: Status::Ok,
                data_start: start as u32,
                data_len: len as u32,
            };
        }
        self.data.shrink_to(self.bytes_max);
    }

    /// Result `i` is `ReplyTooLarge`: its data (appended since `start`) would pass `bytes_max`.
    #[cold]
    #[inline(never)]
    fn refuse(&mut self, i: usize, start: usize) {
        self.data.truncate(start);
        self.items[i] = OpResult {
            status: Status::Error(OpError::ReplyTooLarge {
                max: self.bytes_max,
            }),
            data_start: start as u32,
            data_len: 0,
        };
    }
}

/// Appends `v` to `out`; values of up to 16 bytes (the common case) are copied without a
/// library call, as two overlapping word moves straight from `v` (no staging buffer: writing
/// a small value into one and reading it back as a wider word stalls store forwarding).
#[inline(always)]
pub(crate) fn push_small(out: &mut Vec<u8>, v: &[u8]) {
    if !push_fast(out, v) {
        out.extend_from_slice(v);
    }
}

/// Appends `v` to `out` as `push_small` does when it is 4 to 16 bytes long and fits `out`'s
/// capacity; returns false, appending nothing, otherwise.
#[inline(always)]
fn push_fast(out: &mut Vec<u8>, v: &[u8]) -> bool {
    let n = v.len();
    if !(4..=16).contains(&n) || out.capacity() - out.len() < n {
        return false;
    }
    let len = out.len();
    // SAFETY: 4 <= n <= 16 and `n` bytes are free past `len` (checked above); `v` is not in
    // `out`'s spare capacity.
    unsafe {
        copy_words(out.as_mut_ptr().add(len), v.as_ptr(), n);
        out.set_len(len + n);
    }
    true
}

/// Copies `n` bytes, 4 <= n <= 16, from `s` to `d` as two overlapping word moves (8-byte words
/// from 8 bytes on, else 4-byte ones): no library call for a copy of run-time length, and no
/// staging buffer (writing a small value into one and reading it back as a wider word stalls
/// store forwarding).
///
/// # Safety
/// `s` must be valid for `n` reads and `d` for `n` writes, the two not overlapping, and
/// 4 <= n <= 16.
#[inline(always)]
pub(crate) unsafe fn copy_words(d: *mut u8, s: *const u8, n: usize) {
    debug_assert!((4..=16).contains(&n));
    // SAFETY: every read lies in `s[..n]` and every write in `d[..n]`: the words start at 0
    // and at n - w, w <= n. Unaligned accesses are what read/write_unaligned are for.
    unsafe {
        if n >= 8 {
            let a = std::ptr::read_unaligned(s.cast::<u64>());
            let b = std::ptr::read_unaligned(s.add(n - 8).cast::<u64>());
            std::ptr::write_unaligned(d.cast::<u64>(), a);
            std::ptr::write_unaligned(d.add(n - 8).cast::<u64>(), b);
        } else {
            let a = std::ptr::read_unaligned(s.cast::<u32>());
            let b = std::ptr::read_unaligned(s.add(n - 4).cast::<u32>());
            std::ptr::write_unaligned(d.cast::<u32>(), a);
            std::ptr::write_unaligned(d.add(n - 4).cast::<u32>(), b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{push_small, OpError, Results, Status};

    #[test]
    fn results_past_the_budget_are_refused_and_offsets_stay_in_range() {
        let mut r = Results::default();
        r.reset(4, 10);
        r.finish_found(0, b"123456", false);
        r.finish_found(1, b"12345", false);
        let m = r.mark();
        r.buf().extend_from_slice(b"abcdef");
        r.finish(2, Status::Ok, m);
        r.finish_found(3, b"1234", false);
        let refused = Status::Error(OpError::ReplyTooLarge { max: 10 });
        assert_eq!(r.status(0), Status::Ok);
        assert_eq!(r.data(0), b"123456");
        assert_eq!((r.status(1), r.data(1)), (refused, &b""[..]));
        assert_eq!((r.status(2), r.data(2)), (refused, &b""[..]));
        assert_eq!((r.status(3), r.data(3)), (Status::Ok, &b"1234"[..]));
    }

    #[test]
    fn push_small_appends_exactly_the_value_at_every_length() {
        for n in 0..=20usize {
            for spare in [0usize, 3, 16, 64] {
                let v: Vec<u8> = (0..n as u8).map(|b| b.wrapping_mul(37) ^ 0x5A).collect();
                let mut out = Vec::with_capacity(5 + spare);
                out.extend_from_slice(&[9, 9, 9, 9, 9]);
                push_small(&mut out, &v);
                push_small(&mut out, &v);
                let mut want = vec![9u8; 5];
                want.extend_from_slice(&v);
                want.extend_from_slice(&v);
                assert_eq!(out, want, "n {n} spare {spare}");
            }
        }
    }
}
