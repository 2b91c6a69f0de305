//! Operations in a REQUEST frame: the op header with its copy flags, the zero-copy decoder and
//! the encoder that applies the copy flags by itself.
//!
//! ```text
//!   REQUEST body:  op_count u16 | op 0 | op 1 | ...
//!
//!   op:  +--------+--------------------+--------+-------+-----------+-----+-------------+------+
//!        | header | func u16, elem u8  | key_len|  key  | arg_len   | arg | arg2_len    | arg2 |
//!        |   u8   | (update, reduce,   |   u8   |       | varint    |     | varint      |      |
//!        |        |  filter only)      |  (1)   |       | (2)       | (3) | (cas only)  |      |
//!        +--------+--------------------+--------+-------+-----------+-----+-------------+------+
//!   header bits: 7 COPY_VALUE  6 COPY_VALUE_LEN  5 COPY_KEY_LEN  4 NO_RETURN  3..0 opcode
//!   (opcode nibble 15: the opcode is the byte after the header, 15..=255: `codes.rs`)
//!   (1) absent with COPY_KEY_LEN: the key is as long as the previous op's key
//!   (2) absent with COPY_VALUE_LEN or COPY_VALUE; arg and arg_len absent for get and delete
//!   (3) absent with COPY_VALUE: the arg is the same bytes as the previous arg
//! ```
//!
//! "Previous" means the copy registers: the key length of the op just before, and the argument
//! of the most recent op in the frame that had one (key-only ops leave it alone). An `arg2`
//! (cas, put_expire, set_range, set_bit) is always explicit and never enters the registers.
//!
//! Goals: a GET with an 8-byte key costs 10 bytes, 9 with a copied key length; a vector of
//! updates with the same delta repeats neither its length nor its bytes (the seed's two copy
//! flags); decoded ops borrow key and arguments from the frame wherever the bytes physically are.
//! Non-goals: function ids and element codes are passed through unchecked (the engine fails
//! just that op); empty keys likewise (the engine stores them, as Redis does).

use std::fmt;

use super::codes::{ElemCode, OpCode, OP_CODE_EXTENDED};
use super::error::{EncodeError, ErrorCode};
use super::frame::{begin_frame, end_frame, FrameKind, HEADER_LEN};
use super::limits::NativeLimits;
use super::wire::{batch_views, patch_u16, put_u16, put_varint, varint_len, Cursor};

/// The flag bits of an op header (its high nibble).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct OpFlags(u8);

impl OpFlags {
    pub const NONE: OpFlags = OpFlags(0);
    /// Reply with the status only.
    pub const NO_RETURN: OpFlags = OpFlags(0x10);
    /// The key length is the previous op's; no key_len byte.
    pub const COPY_KEY_LEN: OpFlags = OpFlags(0x20);
    /// The argument length is the previous argument's; no arg_len.
    pub const COPY_VALUE_LEN: OpFlags = OpFlags(0x40);
    /// The argument is the previous argument; neither arg_len nor arg bytes.
    pub const COPY_VALUE: OpFlags = OpFlags(0x80);
    const COPY_ANY: OpFlags = OpFlags(0xE0);

    pub const fn bits(self) -> u8 {
        self.0
    }

    /// The flags in the high nibble of an op header byte.
    pub const fn from_header(header: u8) -> OpFlags {
        OpFlags(header & 0xF0)
    }

    pub const fn contains(self, other: OpFlags) -> bool {
        self.0 & other.0 == other.0
    }

    pub const fn intersects(self, other: OpFlags) -> bool {
        self.0 & other.0 != 0
    }

    pub const fn union(self, other: OpFlags) -> OpFlags {
        OpFlags(self.0 | other.0)
    }

    pub const fn without(self, other: OpFlags) -> OpFlags {
        OpFlags(self.0 & !other.0)
    }
}

impl std::ops::BitOr for OpFlags {
    type Output = OpFlags;
    fn bitor(self, rhs: OpFlags) -> OpFlags {
        self.union(rhs)
    }
}

impl fmt::Debug for OpFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names = [
            (OpFlags::NO_RETURN, "NO_RETURN"),
            (OpFlags::COPY_KEY_LEN, "COPY_KEY_LEN"),
            (OpFlags::COPY_VALUE_LEN, "COPY_VALUE_LEN"),
            (OpFlags::COPY_VALUE, "COPY_VALUE"),
        ];
        let mut set = f.debug_set();
        for (flag, name) in names {
            if self.contains(flag) {
                set.entry(&format_args!("{name}"));
            }
        }
        set.finish()
    }
}

/// One operation of a request. Decoded ops borrow from the frame; `flags` are the header's
/// flags as received (copy flags included, already resolved into `key` and `arg`). `func` and
/// `elem` are 0 for operations that carry none; `arg` and `arg2` are empty likewise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NativeOp<'a> {
    pub kind: OpCode,
    pub flags: OpFlags,
    pub func: u16,
    pub elem: u8,
    pub key: &'a [u8],
    pub arg: &'a [u8],
    pub arg2: &'a [u8],
}

impl<'a> NativeOp<'a> {
    fn new(kind: OpCode, key: &'a [u8]) -> NativeOp<'a> {
        NativeOp {
            kind,
            flags: OpFlags::NONE,
            func: 0,
            elem: 0,
            key,
            arg: &[],
            arg2: &[],
        }
    }

    fn with_arg(kind: OpCode, key: &'a [u8], arg: &'a [u8]) -> NativeOp<'a> {
        NativeOp {
            arg,
            ..NativeOp::new(kind, key)
        }
    }

    fn with_func(
        kind: OpCode,
        key: &'a [u8],
        func: u16,
        elem: ElemCode,
        arg: &'a [u8],
    ) -> NativeOp<'a> {
        NativeOp {
            func,
            elem: elem.code(),
            ..NativeOp::with_arg(kind, key, arg)
        }
    }

    pub fn get(key: &'a [u8]) -> NativeOp<'a> {
        NativeOp::new(OpCode::Get, key)
    }
    pub fn put(key: &'a [u8], value: &'a [u8]) -> NativeOp<'a> {
        NativeOp::with_arg(OpCode::Put, key, value)
    }
    pub fn put_nx(key: &'a [u8], value: &'a [u8]) -> NativeOp<'a> {
        NativeOp::with_arg(OpCode::PutNx, key, value)
    }
    pub fn put_xx(key: &'a [u8], value: &'a [u8]) -> NativeOp<'a> {
        NativeOp::with_arg(OpCode::PutXx, key, value)
    }
    pub fn delete(key: &'a [u8]) -> NativeOp<'a> {
        NativeOp::new(OpCode::Delete, key)
    }
    pub fn cas(key: &'a [u8], expected: &'a [u8], new: &'a [u8]) -> NativeOp<'a> {
        NativeOp {
            arg2: new,
            ..NativeOp::with_arg(OpCode::Cas, key, expected)
        }
    }
    pub fn update_s2s(key: &'a [u8], func: u16, elem: ElemCode, delta: &'a [u8]) -> NativeOp<'a> {
        NativeOp::with_func(OpCode::UpdateS2S, key, func, elem, delta)
    }
    pub fn update_s2v(key: &'a [u8], func: u16, elem: ElemCode, delta: &'a [u8]) -> NativeOp<'a> {
        NativeOp::with_func(OpCode::UpdateS2V, key, func, elem, delta)
    }
    pub fn update_v2v(key: &'a [u8], func: u16, elem: ElemCode, deltas: &'a [u8]) -> NativeOp<'a> {
        NativeOp::with_func(OpCode::UpdateV2V, key, func, elem, deltas)
    }
    pub fn reduce(key: &'a [u8], func: u16, elem: ElemCode, sigma: &'a [u8]) -> NativeOp<'a> {
        NativeOp::with_func(OpCode::Reduce, key, func, elem, sigma)
    }
    pub fn filter(key: &'a [u8], func: u16, elem: ElemCode, param: &'a [u8]) -> NativeOp<'a> {
        NativeOp::with_func(OpCode::Filter, key, func, elem, param)
    }

    /// Appends `value` to the value of `key`; the result is the new length (u64 LE).
    pub fn append(key: &'a [u8], value: &'a [u8]) -> NativeOp<'a> {
        NativeOp::with_arg(OpCode::Append, key, value)
    }
    /// Adds the i64 `delta_le` (8 bytes LE) to a decimal integer string.
    pub fn incr_by(key: &'a [u8], delta_le: &'a [u8]) -> NativeOp<'a> {
        NativeOp::with_arg(OpCode::IncrBy, key, delta_le)
    }
    /// Adds the f64 `delta_le` (8 bytes LE) to a decimal float string.
    pub fn incr_by_float(key: &'a [u8], delta_le: &'a [u8]) -> NativeOp<'a> {
        NativeOp::with_arg(OpCode::IncrByFloat, key, delta_le)
    }

    /// Puts `value` with a deadline: `args` from [`expire_args`](super::codes::expire_args)
    /// (deadline in ms since the Unix epoch or `KEEP_DEADLINE`; `cond::ANY`, `NX` or `XX`).
    pub fn put_expire(key: &'a [u8], value: &'a [u8], args: &'a [u8; 9]) -> NativeOp<'a> {
        NativeOp {
            arg2: args,
            ..NativeOp::with_arg(OpCode::PutExpire, key, value)
        }
    }
    /// Sets the deadline of an existing key: `args` from `expire_args` (any `cond` bits).
    pub fn expire(key: &'a [u8], args: &'a [u8; 9]) -> NativeOp<'a> {
        NativeOp::with_arg(OpCode::Expire, key, args)
    }
    /// Removes the deadline of `key`.
    pub fn persist(key: &'a [u8]) -> NativeOp<'a> {
        NativeOp::new(OpCode::Persist, key)
    }
    /// The deadline of `key` and the milliseconds left (`parse_ttl_reply`).
    pub fn ttl(key: &'a [u8]) -> NativeOp<'a> {
        NativeOp::new(OpCode::Ttl, key)
    }
    /// Reads the value, then sets the deadline to `deadline_le` (8 bytes u64 LE;
    /// `NO_DEADLINE` removes it) or, empty, leaves it.
    pub fn get_ex(key: &'a [u8], deadline_le: &'a [u8]) -> NativeOp<'a> {
        NativeOp::with_arg(OpCode::GetEx, key, deadline_le)
    }
    /// Writes `bytes` at byte `offset_le` (u64 LE) of the value, zero-padding.
    pub fn set_range(key: &'a [u8], offset_le: &'a [u8; 8], bytes: &'a [u8]) -> NativeOp<'a> {
        NativeOp {
            arg2: bytes,
            ..NativeOp::with_arg(OpCode::SetRange, key, offset_le)
        }
    }
    /// Sets bit `offset_le` (u64 LE) of the value to `bit` ([0] or [1]).
    pub fn set_bit(key: &'a [u8], offset_le: &'a [u8; 8], bit: &'a [u8]) -> NativeOp<'a> {
        NativeOp {
            arg2: bit,
            ..NativeOp::with_arg(OpCode::SetBit, key, offset_le)
        }
    }
    /// Ok if `key` exists, else not found.
    pub fn exists(key: &'a [u8]) -> NativeOp<'a> {
        NativeOp::new(OpCode::Exists, key)
    }
    /// The type name of `key`'s value, or not found.
    pub fn type_of(key: &'a [u8]) -> NativeOp<'a> {
        NativeOp::new(OpCode::Type, key)
    }
    /// One step of a scan of the keys starting with `prefix`: `args` from
    /// [`scan_args`](super::keyspace::scan_args) (cursor, count).
    pub fn scan(prefix: &'a [u8], args: &'a [u8; 12]) -> NativeOp<'a> {
        NativeOp::with_arg(OpCode::Scan, prefix, args)
    }

    /// The same op answered with its status only.
    pub fn no_return(self) -> NativeOp<'a> {
        NativeOp {
            flags: self.flags | OpFlags::NO_RETURN,
            ..self
        }
    }

    pub fn is_no_return(&self) -> bool {
        self.flags.contains(OpFlags::NO_RETURN)
    }

    /// The op as a client would have written it: copy flags dropped. Two frames carry the same
    /// operations iff their ops are equal after this.
    pub fn without_copy_flags(self) -> NativeOp<'a> {
        NativeOp {
            flags: self.flags.without(OpFlags::COPY_ANY),
            ..self
        }
    }
}

/// What the copy flags copy from: the previous op's key length and the most recent argument.
#[derive(Default)]
struct CopyRegs<'a> {
    key_len: Option<u8>,
    arg: Option<&'a [u8]>,
}

/// Parses one op at the cursor, resolving copy flags against `regs` and updating them.
fn parse_op<'a>(
    c: &mut Cursor<'a>,
    regs: &mut CopyRegs<'a>,
    limits: &NativeLimits,
) -> Result<NativeOp<'a>, ErrorCode> {
    let header = c.u8()?;
    let code = match header & 0x0F {
        // The opcode is the next byte; one written short is not (one encoding per frame).
        OP_CODE_EXTENDED => match c.u8()? {
            x if x < OP_CODE_EXTENDED => return Err(ErrorCode::UnknownOpcode),
            x => x,
        },
        short => short,
    };
    let kind = OpCode::from_code(code).ok_or(ErrorCode::UnknownOpcode)?;
    let flags = OpFlags::from_header(header);
    let copy_len = flags.contains(OpFlags::COPY_VALUE_LEN);
    let copy_value = flags.contains(OpFlags::COPY_VALUE);
    // A copy needs something to copy from and an argument to copy into; COPY_VALUE already
    // implies the length, so both flags together are not a valid encoding.
    let copying = copy_len || copy_value;
    if copying && (!kind.has_arg() || regs.arg.is_none() || (copy_len && copy_value)) {
        return Err(ErrorCode::BadOpFlags);
    }
    let mut op = NativeOp {
        flags,
        ..NativeOp::new(kind, &[])
    };
    if kind.has_func() {
        op.func = c.u16()?;
        op.elem = c.u8()?;
    }
    let key_len = if flags.contains(OpFlags::COPY_KEY_LEN) {
        regs.key_len.ok_or(ErrorCode::BadOpFlags)?
    } else {
        c.u8()?
    };
    if key_len > limits.key_len_max {
        return Err(ErrorCode::KeyTooLong);
    }
    op.key = c.bytes(usize::from(key_len))?;
    regs.key_len = Some(key_len);
    if kind.has_arg() {
        op.arg = match regs.arg {
            Some(prev) if copy_value => prev,
            Some(prev) if copy_len => c.bytes(prev.len())?,
            _ => parse_arg(c, limits)?,
        };
        regs.arg = Some(op.arg);
    }
    if kind.has_arg2() {
        op.arg2 = parse_arg(c, limits)?;
    }
    Ok(op)
}

/// An explicit argument: varint length, checked against `value_len_max`, then the bytes.
fn parse_arg<'a>(c: &mut Cursor<'a>, limits: &NativeLimits) -> Result<&'a [u8], ErrorCode> {
    let len = c.varint()?;
    if len > limits.value_len_max {
        return Err(ErrorCode::ValueTooLarge);
    }
    c.bytes(len as usize)
}

/// The validated operations of a REQUEST frame. Iterating parses them again (cheaply, without
/// failing): decoding keeps no per-op state, so it allocates nothing and holds no lifetime
/// besides the frame's.
#[derive(Clone, Copy)]
pub struct OpBatch<'a> {
    count: u16,
    ops: &'a [u8],
}

impl<'a> OpBatch<'a> {
    pub fn iter(&self) -> OpIter<'a> {
        OpIter {
            c: Cursor::new(self.ops),
            regs: CopyRegs::default(),
            left: self.count,
        }
    }
}

impl fmt::Debug for OpBatch<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// The operations of an `OpBatch`, in frame order.
pub struct OpIter<'a> {
    c: Cursor<'a>,
    regs: CopyRegs<'a>,
    left: u16,
}

impl<'a> OpIter<'a> {
    fn parse_next(&mut self) -> Result<NativeOp<'a>, ErrorCode> {
        parse_op(&mut self.c, &mut self.regs, &NativeLimits::UNCHECKED)
    }
}

batch_views!(OpBatch, OpIter, NativeOp);

/// Validates a REQUEST body. On error: the code and the index of the op at fault, if any.
#[cfg(test)]
pub(crate) fn parse_batch<'a>(
    body: &'a [u8],
    limits: &NativeLimits,
) -> Result<OpBatch<'a>, (ErrorCode, Option<u16>)> {
    parse_batch_with(body, limits, |_| {})
}

/// [`parse_batch`], handing each validated operation to `each` in order as it goes (on an
/// error, the operations before the faulty one have been handed over).
pub(crate) fn parse_batch_with<'a>(
    body: &'a [u8],
    limits: &NativeLimits,
    mut each: impl FnMut(NativeOp<'a>),
) -> Result<OpBatch<'a>, (ErrorCode, Option<u16>)> {
    let mut c = Cursor::new(body);
    let count = c.u16().map_err(|e| (e, None))?;
    if count > limits.frame_ops_max {
        return Err((ErrorCode::TooManyOps, None));
    }
    // Every op takes at least its header byte: a cheap bound before the loop.
    if usize::from(count) > c.remaining() {
        return Err((ErrorCode::Truncated, None));
    }
    let ops = &body[2..];
    let mut regs = CopyRegs::default();
    for i in 0..count {
        each(parse_op(&mut c, &mut regs, limits).map_err(|e| (e, Some(i)))?);
    }
    if c.remaining() != 0 {
        return Err((ErrorCode::TrailingBytes, None));
    }
    Ok(OpBatch { count, ops })
}

/// Writes an op header: flags and the opcode in one byte, or flags and `OP_CODE_EXTENDED`
/// followed by the opcode.
#[inline]
fn put_header(out: &mut Vec<u8>, flags: OpFlags, kind: OpCode) {
    if kind.is_extended() {
        out.extend_from_slice(&[flags.bits() | OP_CODE_EXTENDED, kind.code()]);
    } else {
        out.push(flags.bits() | kind.code());
    }
}

/// How an op's argument is written.
enum ArgForm {
    /// Length and bytes.
    Explicit,
    /// Bytes only (COPY_VALUE_LEN).
    CopyLen,
    /// Nothing (COPY_VALUE).
    CopyValue,
}

/// Builds one REQUEST frame in `out`, op by op, choosing the copy flags: COPY_KEY_LEN when the
/// key is as long as the previous op's, COPY_VALUE when the argument equals the previous one,
/// else COPY_VALUE_LEN when it is as long. The frame in `out` is complete after every `push`;
/// a refused push leaves it unchanged, so a client can send what it has and start a new frame.
pub struct RequestEncoder<'o> {
    out: &'o mut Vec<u8>,
    limits: NativeLimits,
    start: usize,
    count: u16,
    key_len: Option<u8>,
    /// Where the most recent argument's bytes are in `out`: offset and length.
    arg: Option<(usize, usize)>,
}

impl<'o> RequestEncoder<'o> {
    /// Appends the header of an empty REQUEST frame to `out`.
    pub fn begin(out: &'o mut Vec<u8>, request_id: u32, limits: &NativeLimits) -> Self {
        let start = begin_frame(out, FrameKind::Request, 0, request_id);
        put_u16(out, 0);
        RequestEncoder {
            out,
            limits: *limits,
            start,
            count: 0,
            key_len: None,
            arg: None,
        }
    }

    /// Number of ops in the frame.
    pub fn len(&self) -> usize {
        usize::from(self.count)
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Bytes in the frame so far, header included.
    pub fn frame_len(&self) -> usize {
        self.out.len() - self.start
    }

    /// Appends `op`. Its `flags` contribute NO_RETURN only; copy flags are chosen here.
    pub fn push(&mut self, op: &NativeOp<'_>) -> Result<(), EncodeError> {
        let kind = op.kind;
        let key_len = op.key.len();
        if key_len > usize::from(self.limits.key_len_max) {
            return Err(EncodeError::KeyTooLong {
                len: key_len,
                max: usize::from(self.limits.key_len_max),
            });
        }
        if !kind.has_func() && !kind.has_arg() && !kind.has_arg2() {
            return self.push_key_only(op);
        }
        let value_len_max = self.limits.value_len_max as usize;
        for arg in [(kind.has_arg(), op.arg), (kind.has_arg2(), op.arg2)] {
            if arg.0 && arg.1.len() > value_len_max {
                return Err(EncodeError::ValueTooLarge {
                    len: arg.1.len(),
                    max: value_len_max,
                });
            }
        }
        let mut flags = OpFlags::from_header(op.flags.bits()).without(OpFlags::COPY_ANY);
        let copy_key = self.key_len == Some(key_len as u8);
        if copy_key {
            flags = flags | OpFlags::COPY_KEY_LEN;
        }
        let form = match self.arg {
            _ if !kind.has_arg() => ArgForm::Explicit,
            Some((at, n)) if &self.out[at..at + n] == op.arg => ArgForm::CopyValue,
            Some((_, n)) if n == op.arg.len() => ArgForm::CopyLen,
            _ => ArgForm::Explicit,
        };
        match form {
            ArgForm::CopyValue => flags = flags | OpFlags::COPY_VALUE,
            ArgForm::CopyLen => flags = flags | OpFlags::COPY_VALUE_LEN,
            ArgForm::Explicit => {}
        }
        // Size first, so a refused op leaves `out` untouched.
        let mut size = 1 + usize::from(kind.is_extended()) + key_len + usize::from(!copy_key);
        if kind.has_func() {
            size += 3;
        }
        if kind.has_arg() {
            size += match form {
                ArgForm::Explicit => varint_len(op.arg.len() as u32) + op.arg.len(),
                ArgForm::CopyLen => op.arg.len(),
                ArgForm::CopyValue => 0,
            };
        }
        if kind.has_arg2() {
            size += varint_len(op.arg2.len() as u32) + op.arg2.len();
        }
        self.room_for(size)?;

        let out = &mut *self.out;
        let before = out.len();
        put_header(out, flags, kind);
        if kind.has_func() {
            put_u16(out, op.func);
            out.push(op.elem);
        }
        if !copy_key {
            out.push(key_len as u8);
        }
        out.extend_from_slice(op.key);
        self.key_len = Some(key_len as u8);
        if kind.has_arg() {
            if let ArgForm::Explicit = form {
                put_varint(out, op.arg.len() as u32);
            }
            if !matches!(form, ArgForm::CopyValue) {
                self.arg = Some((out.len(), op.arg.len()));
                out.extend_from_slice(op.arg);
            }
        }
        if kind.has_arg2() {
            put_varint(out, op.arg2.len() as u32);
            out.extend_from_slice(op.arg2);
        }
        debug_assert_eq!(out.len() - before, size);
        self.count += 1;
        Ok(())
    }

    /// [`RequestEncoder::push`] for an op that is a header and a key (GET, DELETE), whose key
    /// length is already checked: the bulk of most workloads.
    #[inline]
    fn push_key_only(&mut self, op: &NativeOp<'_>) -> Result<(), EncodeError> {
        let key_len = op.key.len();
        let copy_key = self.key_len == Some(key_len as u8);
        let extended = op.kind.is_extended();
        self.room_for(1 + usize::from(extended) + key_len + usize::from(!copy_key))?;
        let flags = OpFlags::from_header(op.flags.bits()).without(OpFlags::COPY_ANY);
        if extended {
            let flags = if copy_key {
                flags | OpFlags::COPY_KEY_LEN
            } else {
                flags
            };
            put_header(self.out, flags, op.kind);
            if !copy_key {
                self.out.push(key_len as u8);
            }
        } else if copy_key {
            let header = flags.bits() | op.kind.code();
            self.out.push(header | OpFlags::COPY_KEY_LEN.bits());
        } else {
            let header = flags.bits() | op.kind.code();
            self.out.extend_from_slice(&[header, key_len as u8]);
        }
        self.out.extend_from_slice(op.key);
        self.key_len = Some(key_len as u8);
        self.count += 1;
        Ok(())
    }

    /// Refuses one more op of `size` bytes when the frame already holds `frame_ops_max` ops or
    /// would outgrow `frame_len_max` (checked before anything is written).
    #[inline]
    fn room_for(&self, size: usize) -> Result<(), EncodeError> {
        if self.count >= self.limits.frame_ops_max {
            return Err(EncodeError::TooManyOps {
                max: usize::from(self.limits.frame_ops_max),
            });
        }
        let frame_len_max = self.limits.frame_len_max as usize;
        if self.frame_len() + size > frame_len_max {
            return Err(EncodeError::FrameTooLong {
                len: self.frame_len() + size,
                max: frame_len_max,
            });
        }
        Ok(())
    }

    /// Ends the frame; returns its length in bytes. (Dropping the encoder ends it too: `out`
    /// cannot be seen while the encoder borrows it, and the header's op count and length are
    /// written once, when the encoder goes, not once per op.)
    pub fn finish(self) -> usize {
        self.frame_len()
    }
}

impl Drop for RequestEncoder<'_> {
    fn drop(&mut self) {
        patch_u16(self.out, self.start + HEADER_LEN, self.count);
        end_frame(self.out, self.start);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const L: NativeLimits = NativeLimits::DEFAULT;

    fn encode(ops: &[NativeOp<'_>]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut enc = RequestEncoder::begin(&mut out, 7, &L);
        for op in ops {
            enc.push(op).unwrap();
        }
        enc.finish();
        out
    }

    fn decode(frame: &[u8]) -> Vec<NativeOp<'_>> {
        parse_batch(&frame[HEADER_LEN..], &L)
            .unwrap()
            .iter()
            .collect()
    }

    #[test]
    fn get_with_an_eight_byte_key_costs_two_bytes_of_header() {
        let f = encode(&[NativeOp::get(b"key:0001"), NativeOp::get(b"key:0002")]);
        // 12 header + 2 count + (1 + 1 + 8) + (1 + 8)
        assert_eq!(f.len(), 12 + 2 + 10 + 9);
        assert_eq!(&f[14..16], &[0x00, 8]);
        assert_eq!(f[24], 0x20);
        let ops = decode(&f);
        assert_eq!(ops[1].key, b"key:0002");
        assert_eq!(ops[1].flags, OpFlags::COPY_KEY_LEN);
    }

    #[test]
    fn copy_value_points_at_the_physical_bytes() {
        let delta = 1u64.to_le_bytes();
        let ops = [
            NativeOp::update_s2s(b"a", 0, ElemCode::U64, &delta).no_return(),
            NativeOp::get(b"b"),
            NativeOp::update_s2s(b"c", 0, ElemCode::U64, &delta).no_return(),
        ];
        let f = encode(&ops);
        let got = decode(&f);
        assert_eq!(
            got[2].flags,
            OpFlags::NO_RETURN | OpFlags::COPY_KEY_LEN | OpFlags::COPY_VALUE
        );
        // The third op's arg is the first op's bytes in the frame: a get in between does not
        // reset the argument register.
        assert_eq!(got[2].arg.as_ptr(), got[0].arg.as_ptr());
        assert!(f.as_ptr_range().contains(&got[2].arg.as_ptr()));
        for (g, o) in got.iter().zip(&ops) {
            assert_eq!(g.without_copy_flags(), *o);
        }
    }

    #[test]
    fn copy_value_len_and_cas_second_argument() {
        let ops = [
            NativeOp::put(b"k1", b"aaaa"),
            NativeOp::put(b"k2", b"bbbb"),
            NativeOp::cas(b"k3", b"bbbb", b"cccc"),
            NativeOp::cas(b"k4", b"cccc", b"cccc"),
        ];
        let frame = encode(&ops);
        let got = decode(&frame);
        let flags: Vec<_> = got.iter().map(|o| o.flags).collect();
        let kl = OpFlags::COPY_KEY_LEN;
        assert_eq!(
            flags,
            [
                OpFlags::NONE,
                kl | OpFlags::COPY_VALUE_LEN,
                kl | OpFlags::COPY_VALUE,
                // arg2 of the cas before never enters the register: only COPY_VALUE_LEN.
                kl | OpFlags::COPY_VALUE_LEN,
            ]
        );
        for (g, o) in got.iter().zip(&ops) {
            assert_eq!(g.without_copy_flags(), *o);
        }
    }

    /// A REQUEST body holding `count` ops written as `ops`.
    fn body(count: u8, ops: &[u8]) -> Vec<u8> {
        let mut b = vec![count, 0];
        b.extend_from_slice(ops);
        b
    }

    #[test]
    fn bad_copy_flags_are_rejected() {
        let err = |count, ops: &[u8]| parse_batch(&body(count, ops), &L).unwrap_err();
        // COPY_KEY_LEN on the first op: no previous key.
        assert_eq!(err(1, &[0x20, b'k']), (ErrorCode::BadOpFlags, Some(0)));
        // COPY_VALUE on a get, which has no argument.
        assert_eq!(err(1, &[0x80, 1, b'k']), (ErrorCode::BadOpFlags, Some(0)));
        // COPY_VALUE_LEN on a put with no argument before it.
        assert_eq!(
            err(1, &[0x41, 1, b'k', b'v']),
            (ErrorCode::BadOpFlags, Some(0))
        );
        // put k=v, then a put with both COPY_VALUE and COPY_VALUE_LEN.
        let both = [0x01, 1, b'k', 1, b'v', 0xE1, b'j'];
        assert_eq!(err(2, &both), (ErrorCode::BadOpFlags, Some(1)));
        // The same with COPY_VALUE only is fine.
        let fine = [0x01, 1, b'k', 1, b'v', 0xA1, b'j'];
        let fine = body(2, &fine);
        let ops: Vec<_> = parse_batch(&fine, &L).unwrap().iter().collect();
        assert_eq!((ops[1].key, ops[1].arg), (&b"j"[..], &b"v"[..]));
    }

    #[test]
    fn limits_are_checked_per_field() {
        let key = [b'k'; 251];
        let mut big_key = vec![1, 0, 0x00, 251];
        big_key.extend_from_slice(&key);
        assert_eq!(
            parse_batch(&big_key, &L).unwrap_err(),
            (ErrorCode::KeyTooLong, Some(0))
        );
        // put with arg_len 1 MiB + 1 (varint 81 80 40) in a tiny frame: the limit comes first.
        let big_arg = [1, 0, 0x01, 1, b'k', 0x81, 0x80, 0x40];
        assert_eq!(
            parse_batch(&big_arg, &L).unwrap_err().0,
            ErrorCode::ValueTooLarge
        );
        let too_many = [0x01, 0x10];
        assert_eq!(
            parse_batch(&too_many, &L).unwrap_err().0,
            ErrorCode::TooManyOps
        );
        let trailing = [1, 0, 0x00, 1, b'k', 0];
        assert_eq!(
            parse_batch(&trailing, &L).unwrap_err().0,
            ErrorCode::TrailingBytes
        );
        for unknown in [
            &[1, 0, 0x0F, 0x30, 1, b'k'][..],
            // A short opcode written long: one encoding per frame.
            &[1, 0, 0x0F, 0x00, 1, b'k'],
        ] {
            assert_eq!(
                parse_batch(unknown, &L).unwrap_err(),
                (ErrorCode::UnknownOpcode, Some(0))
            );
        }
        assert_eq!(
            parse_batch(&[1, 0, 0x0F], &L).unwrap_err(),
            (ErrorCode::Truncated, Some(0))
        );
    }

    #[test]
    fn encoder_refuses_without_touching_the_frame() {
        let limits = NativeLimits {
            frame_len_max: 34,
            frame_ops_max: 2,
            key_len_max: 4,
            value_len_max: 8,
        };
        let mut out = Vec::new();
        let mut enc = RequestEncoder::begin(&mut out, 1, &limits);
        assert_eq!(
            enc.push(&NativeOp::get(b"12345")),
            Err(EncodeError::KeyTooLong { len: 5, max: 4 })
        );
        assert_eq!(
            enc.push(&NativeOp::cas(b"k", b"", b"123456789")),
            Err(EncodeError::ValueTooLarge { len: 9, max: 8 })
        );
        // 14 bytes of header and count, then 1 + 1 + 1 + 1 + 8.
        enc.push(&NativeOp::put(b"k", b"12345678")).unwrap();
        assert_eq!(enc.frame_len(), 26);
        // Would take 1 + 1 + 8 (copied key and value lengths).
        assert_eq!(
            enc.push(&NativeOp::put(b"j", b"abcdefgh")),
            Err(EncodeError::FrameTooLong { len: 36, max: 34 })
        );
        assert_eq!(enc.frame_len(), 26);
        enc.push(&NativeOp::get(b"k")).unwrap();
        assert_eq!(
            enc.push(&NativeOp::get(b"k")),
            Err(EncodeError::TooManyOps { max: 2 })
        );
        assert_eq!(enc.len(), 2);
        let n = enc.finish();
        assert_eq!(n, out.len());
        let ops: Vec<_> = parse_batch(&out[HEADER_LEN..], &limits)
            .unwrap()
            .iter()
            .collect();
        let get_copied = NativeOp {
            flags: OpFlags::COPY_KEY_LEN,
            ..NativeOp::get(b"k")
        };
        assert_eq!(ops, [NativeOp::put(b"k", b"12345678"), get_copied]);
    }

    #[test]
    fn extended_opcodes_take_one_more_byte_and_keep_copy_flags() {
        let args = crate::native::expire_args(1_700_000_000_000, crate::native::cond::NX);
        let scan = crate::native::scan_args(0, 10);
        let ops = [
            NativeOp::put_expire(b"k1", b"v", &args),
            NativeOp::expire(b"k2", &args),
            NativeOp::ttl(b"k3").no_return(),
            NativeOp::persist(b"k4"),
            NativeOp::exists(b"k5"),
            NativeOp::type_of(b"k6"),
            NativeOp::scan(b"", &scan),
            NativeOp::get(b"k7"),
        ];
        let f = encode(&ops);
        // put_expire keeps the short header (opcode 14); the expire after it is explicit
        // about its 9 bytes, as put_expire's arg2 never entered the argument register.
        assert_eq!(&f[14..18], &[0x0E, 2, b'k', b'1']);
        let got = decode(&f);
        assert_eq!(got.len(), ops.len());
        for (g, o) in got.iter().zip(&ops) {
            assert_eq!(g.without_copy_flags(), *o);
        }
        assert_eq!(got[1].flags, OpFlags::COPY_KEY_LEN);
        assert_eq!(
            got[2].flags,
            OpFlags::COPY_KEY_LEN | OpFlags::NO_RETURN,
            "ttl: key only"
        );
        // The scan's prefix is empty: key_len 0 is explicit.
        assert_eq!(got[6].key, b"");
        assert_eq!(got[7].flags, OpFlags::NONE);
    }

    #[test]
    fn flags_debug_lists_names() {
        let f = OpFlags::NO_RETURN | OpFlags::COPY_VALUE;
        assert_eq!(format!("{f:?}"), "{NO_RETURN, COPY_VALUE}");
        assert!(f.intersects(OpFlags::COPY_ANY));
        assert_eq!(OpFlags::from_header(0xF5).bits(), 0xF0);
    }
}
