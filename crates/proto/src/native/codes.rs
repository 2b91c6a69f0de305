//! The numbers the native protocol shares with the engine: opcodes, element types, function ids
//! and per-operation status codes.
//!
//! What: the protocol's own copy of the engine's wire numbering, so that `proto` depends on
//! nothing in the workspace and the server maps every number 1:1:
//!
//! ```text
//!   OpCode    0 get  1 put  2 put_nx  3 put_xx  4 delete  5 cas  6 update_s2s  7 update_s2v
//!             8 update_v2v  9 reduce  10 filter  11 append  12 incr_by
//!             13 incr_by_float  14 put_expire  15 expire  16 persist  17 ttl  18 get_ex
//!             19 set_range  20 set_bit                          (engine OpKind, same numbers)
//!             64 exists  65 type  66 scan          (keyspace: answered by the server, 64..)
//!   ElemCode  0 u8 1 u16 2 u32 3 u64 4 i8 5 i16 6 i32 7 i64 8 f32 9 f64   (engine ElemType)
//!   func      update 0.., reduce 32.., filter 64.., user 1024..        (engine ops::builtin)
//!   status    0 ok  1 not found  2 not stored  3 cas mismatch  0x80|e error e (1..=63)
//!                                                                  (engine Status::code)
//! ```
//!
//! An op header has four bits for the opcode: codes 0..=14 are written there, and the nibble
//! 15 (`OP_CODE_EXTENDED`) says "the opcode is the next byte" (15..=255), so old frames keep
//! their one-byte headers and the numbering never runs out.
//!
//! Why a mirror and not one shared definition with the engine (the `duplicates` pairs D5, D6):
//! the dependency rule (ARCHITECTURE.md) keeps `engine` and `proto` free of workspace
//! dependencies, so one of them cannot import the other's enum; and the two sets are not the
//! same: the protocol has operations the engine has no kind for (exists, type, scan, which the
//! server answers around the engine), and the engine may grow kinds the protocol does not carry.
//! A third crate holding only the numbers would put the engine's internal numbering on the
//! wire by construction; the `protocol_mirrors` test in the server checks the two agree instead.
//!
//! Goals: one place a reviewer compares against the engine; names for messages.
//! Non-goals: semantics (the engine decides what a function does with an element type); the
//! codec passes function ids and element codes through unchecked, so an unknown one fails only
//! its own operation, in the engine.

/// What an operation does. The discriminant is the wire code (the engine's `OpKind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum OpCode {
    Get = 0,
    Put = 1,
    PutNx = 2,
    PutXx = 3,
    Delete = 4,
    Cas = 5,
    UpdateS2S = 6,
    UpdateS2V = 7,
    UpdateV2V = 8,
    Reduce = 9,
    Filter = 10,
    /// Appends the argument to the value (a missing key starts empty); the result is the new
    /// length, u64 LE.
    Append = 11,
    /// The value is a decimal integer string (a Redis counter); adds the i64 in the argument
    /// (8 bytes LE); the result is the new value as a decimal string. A missing key is 0.
    IncrBy = 12,
    /// Like `IncrBy` for a decimal floating-point string and an f64 argument.
    IncrByFloat = 13,
    /// Put with a deadline: `arg` the value, `arg2` the 9 bytes of [`expire_args`] (deadline
    /// in ms since the Unix epoch, `KEEP_DEADLINE` to keep the key's own; condition
    /// `cond::ANY`, `NX` or `XX`). A deadline already passed deletes the key. Not stored
    /// when the condition fails.
    PutExpire = 14,
    /// Sets an existing key's deadline: `arg` the 9 bytes of [`expire_args`], any conditions
    /// of `cond` (Redis's EXPIRE NX/XX/GT/LT). Ok; not stored (condition failed); not found.
    Expire = 15,
    /// Removes a key's deadline. Ok: it had one; not stored: it had none; not found.
    Persist = 16,
    /// A key's deadline: Ok with 16 bytes, the deadline and the milliseconds left (u64 LE
    /// each; both 0 for a key without a deadline); not found.
    Ttl = 17,
    /// Reads the value, then sets the deadline to `arg` (8 bytes u64 LE; `NO_DEADLINE`
    /// removes it; empty leaves it alone). Redis's GETEX.
    GetEx = 18,
    /// Writes `arg2` at byte offset `arg` (u64 LE), zero-padding; the new length (u64 LE).
    SetRange = 19,
    /// Sets bit `arg` (u64 LE) to `arg2` ([0] or [1]); the old bit.
    SetBit = 20,
    /// Ok if the key exists, not found otherwise; never data.
    Exists = 64,
    /// Ok with the key's type name (`TYPE_STRING`: every value is a string), not found.
    Type = 65,
    /// One step of a scan of the keyspace: `key` a prefix the keys must start with (empty:
    /// all), `arg` the 12 bytes of [`scan_args`](super::keyspace::scan_args) (cursor, count).
    /// Ok with the next cursor and keys (see `keyspace.rs`).
    Scan = 66,
}

/// Number of opcodes.
pub const OP_CODE_COUNT: usize = 24;

/// The op header nibble that says "the opcode is the next byte"; opcodes from this one up are
/// written that way.
pub const OP_CODE_EXTENDED: u8 = 15;

/// Opcodes from here up are answered by the server around the engine (no engine kind).
pub const OP_CODE_KEYSPACE_MIN: u8 = 64;

/// A deadline that keeps the key's current one (`OpCode::PutExpire`, Redis's KEEPTTL).
pub const KEEP_DEADLINE: u64 = u64::MAX;

/// `OpCode::GetEx`'s argument that removes the deadline (Redis's GETEX PERSIST).
pub const NO_DEADLINE: u64 = 0;

/// Conditions of `PutExpire` (NX, XX) and `Expire` (all), as bits that must all hold.
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
}

/// The argument bytes of `PutExpire` (as `arg2`) and `Expire` (as `arg`): the deadline in
/// milliseconds since the Unix epoch (u64 LE) and a condition of [`cond`].
pub const fn expire_args(deadline_ms: u64, condition: u8) -> [u8; 9] {
    let d = deadline_ms.to_le_bytes();
    [d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7], condition]
}

impl OpCode {
    /// Every opcode, in code order.
    pub const ALL: [OpCode; OP_CODE_COUNT] = [
        OpCode::Get,
        OpCode::Put,
        OpCode::PutNx,
        OpCode::PutXx,
        OpCode::Delete,
        OpCode::Cas,
        OpCode::UpdateS2S,
        OpCode::UpdateS2V,
        OpCode::UpdateV2V,
        OpCode::Reduce,
        OpCode::Filter,
        OpCode::Append,
        OpCode::IncrBy,
        OpCode::IncrByFloat,
        OpCode::PutExpire,
        OpCode::Expire,
        OpCode::Persist,
        OpCode::Ttl,
        OpCode::GetEx,
        OpCode::SetRange,
        OpCode::SetBit,
        OpCode::Exists,
        OpCode::Type,
        OpCode::Scan,
    ];

    /// The wire code.
    pub const fn code(self) -> u8 {
        self as u8
    }

    /// The opcode with wire code `code`.
    #[inline]
    pub fn from_code(code: u8) -> Option<OpCode> {
        BY_CODE[usize::from(code)]
    }

    /// True if the opcode is written as `OP_CODE_EXTENDED` and a code byte.
    #[inline]
    pub const fn is_extended(self) -> bool {
        self.code() >= OP_CODE_EXTENDED
    }

    /// True if the operation is the engine's kind with the same number; false for the
    /// keyspace operations the server answers itself (exists, type, scan).
    pub const fn is_engine(self) -> bool {
        self.code() < OP_CODE_KEYSPACE_MIN
    }

    /// True if the operation never changes the store, so resending it is harmless.
    pub const fn is_read_only(self) -> bool {
        matches!(
            self,
            OpCode::Get
                | OpCode::Reduce
                | OpCode::Filter
                | OpCode::Ttl
                | OpCode::Exists
                | OpCode::Type
                | OpCode::Scan
        )
    }

    /// True if the operation carries a function id and an element type.
    pub const fn has_func(self) -> bool {
        matches!(
            self,
            OpCode::UpdateS2S
                | OpCode::UpdateS2V
                | OpCode::UpdateV2V
                | OpCode::Reduce
                | OpCode::Filter
        )
    }

    /// True if the operation carries an argument (`arg`): all but the key-only ones (get,
    /// delete, persist, ttl, exists, type).
    pub const fn has_arg(self) -> bool {
        !matches!(
            self,
            OpCode::Get
                | OpCode::Delete
                | OpCode::Persist
                | OpCode::Ttl
                | OpCode::Exists
                | OpCode::Type
        )
    }

    /// True if the operation carries a second argument (`arg2`).
    pub const fn has_arg2(self) -> bool {
        matches!(
            self,
            OpCode::Cas | OpCode::PutExpire | OpCode::SetRange | OpCode::SetBit
        )
    }

    /// Lower-case name, as in the engine.
    pub fn name(self) -> &'static str {
        match self {
            OpCode::Get => "get",
            OpCode::Put => "put",
            OpCode::PutNx => "put_nx",
            OpCode::PutXx => "put_xx",
            OpCode::Delete => "delete",
            OpCode::Cas => "cas",
            OpCode::UpdateS2S => "update_scalar2scalar",
            OpCode::UpdateS2V => "update_scalar2vector",
            OpCode::UpdateV2V => "update_vector2vector",
            OpCode::Reduce => "reduce",
            OpCode::Filter => "filter",
            OpCode::Append => "append",
            OpCode::IncrBy => "incr_by",
            OpCode::IncrByFloat => "incr_by_float",
            OpCode::PutExpire => "put_expire",
            OpCode::Expire => "expire",
            OpCode::Persist => "persist",
            OpCode::Ttl => "ttl",
            OpCode::GetEx => "get_ex",
            OpCode::SetRange => "set_range",
            OpCode::SetBit => "set_bit",
            OpCode::Exists => "exists",
            OpCode::Type => "type",
            OpCode::Scan => "scan",
        }
    }
}

/// `OpCode::from_code` as one load: the opcode of every byte value, if any.
const BY_CODE: [Option<OpCode>; 256] = {
    let mut t = [None; 256];
    let mut i = 0;
    while i < OpCode::ALL.len() {
        t[OpCode::ALL[i] as usize] = Some(OpCode::ALL[i]);
        i += 1;
    }
    t
};

/// Element type of a vector value. The discriminant is the wire code (the engine's `ElemType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ElemCode {
    U8 = 0,
    U16 = 1,
    U32 = 2,
    U64 = 3,
    I8 = 4,
    I16 = 5,
    I32 = 6,
    I64 = 7,
    F32 = 8,
    F64 = 9,
}

impl ElemCode {
    /// Every element type, in code order.
    pub const ALL: [ElemCode; 10] = [
        ElemCode::U8,
        ElemCode::U16,
        ElemCode::U32,
        ElemCode::U64,
        ElemCode::I8,
        ElemCode::I16,
        ElemCode::I32,
        ElemCode::I64,
        ElemCode::F32,
        ElemCode::F64,
    ];

    /// The wire code.
    pub const fn code(self) -> u8 {
        self as u8
    }

    /// The element type with wire code `code`.
    pub fn from_code(code: u8) -> Option<ElemCode> {
        ElemCode::ALL.get(usize::from(code)).copied()
    }

    /// Width of one element in bytes.
    pub const fn width(self) -> usize {
        match self {
            ElemCode::U8 | ElemCode::I8 => 1,
            ElemCode::U16 | ElemCode::I16 => 2,
            ElemCode::U32 | ElemCode::I32 | ElemCode::F32 => 4,
            ElemCode::U64 | ElemCode::I64 | ElemCode::F64 => 8,
        }
    }

    /// Lower-case name: "u8" ... "f64".
    pub fn name(self) -> &'static str {
        match self {
            ElemCode::U8 => "u8",
            ElemCode::U16 => "u16",
            ElemCode::U32 => "u32",
            ElemCode::U64 => "u64",
            ElemCode::I8 => "i8",
            ElemCode::I16 => "i16",
            ElemCode::I32 => "i32",
            ElemCode::I64 => "i64",
            ElemCode::F32 => "f32",
            ElemCode::F64 => "f64",
        }
    }
}

// Opcodes ascend (one code each); the engine's kinds are contiguous from 0, as the engine
// numbers them; element types are in code order for `from_code` to be a plain index.
const _: () = {
    let mut i = 1;
    while i < OpCode::ALL.len() {
        assert!((OpCode::ALL[i - 1] as u8) < OpCode::ALL[i] as u8);
        let engine = (OpCode::ALL[i] as u8) < OP_CODE_KEYSPACE_MIN;
        assert!(!engine || OpCode::ALL[i] as usize == i);
        i += 1;
    }
    let mut i = 0;
    while i < ElemCode::ALL.len() {
        assert!(ElemCode::ALL[i] as usize == i);
        i += 1;
    }
    // The opcodes written in the header's low nibble leave its last value for the escape.
    assert!(OP_CODE_EXTENDED == 15);
};

/// Built-in function ids (the engine's `ops::builtin::FN_*`).
pub mod func {
    // Update functions: scalar2scalar, scalar2vector, vector2vector.
    pub const ADD: u16 = 0;
    pub const SUB: u16 = 1;
    pub const MUL: u16 = 2;
    pub const MIN: u16 = 3;
    pub const MAX: u16 = 4;
    pub const AND: u16 = 5;
    pub const OR: u16 = 6;
    pub const XOR: u16 = 7;
    /// Set: the result is the delta.
    pub const SWAP: u16 = 8;
    /// Two parameters: the delta is `expected ++ new`.
    pub const CAS: u16 = 9;
    pub const SAT_ADD: u16 = 10;
    pub const SAT_SUB: u16 = 11;
    pub const DIV: u16 = 12;
    // Reduce functions.
    pub const SUM: u16 = 32;
    pub const RMIN: u16 = 33;
    pub const RMAX: u16 = 34;
    /// Sigma and result are u64 LE whatever the element type.
    pub const COUNT: u16 = 35;
    /// Sigma and result are u64 LE whatever the element type.
    pub const COUNT_NONZERO: u16 = 36;
    // Filter functions.
    pub const EQ: u16 = 64;
    pub const NE: u16 = 65;
    pub const LT: u16 = 66;
    pub const LE: u16 = 67;
    pub const GT: u16 = 68;
    pub const GE: u16 = 69;
    pub const NONZERO: u16 = 70;
    /// Ids from here up are user functions registered at server start.
    pub const USER_MIN: u16 = 1024;
}

/// Per-operation status codes (the engine's `Status::code` and `OpError::code`).
pub mod status {
    pub const OK: u8 = 0;
    pub const NOT_FOUND: u8 = 1;
    pub const NOT_STORED: u8 = 2;
    pub const CAS_MISMATCH: u8 = 3;
    /// Set in every error status; the low six bits are the error code.
    pub const ERROR: u8 = 0x80;
    /// Largest error code: bit 6 of a status byte on the wire means "data follows".
    pub const ERROR_CODE_MAX: u8 = 0x3F;

    // Error codes (`OpError::code`), sent as `ERROR | code`.
    pub const ERR_KEY_EMPTY: u8 = 1;
    pub const ERR_KEY_TOO_LONG: u8 = 2;
    pub const ERR_VALUE_TOO_LARGE: u8 = 3;
    pub const ERR_WRONG_WIDTH: u8 = 4;
    pub const ERR_LENGTH_MISMATCH: u8 = 5;
    pub const ERR_UNKNOWN_FUNCTION: u8 = 6;
    pub const ERR_WRONG_FUNCTION_KIND: u8 = 7;
    pub const ERR_UNSUPPORTED_TYPE: u8 = 8;
    pub const ERR_DIVISION_BY_ZERO: u8 = 9;
    pub const ERR_UNKNOWN_ELEM_TYPE: u8 = 10;
    pub const ERR_OUT_OF_MEMORY: u8 = 11;
    pub const ERR_USER_FUNCTION: u8 = 12;
    /// incr_by on a value that is not a decimal integer.
    pub const ERR_NOT_AN_INTEGER: u8 = 13;
    /// incr_by_float on a value that is not a decimal float.
    pub const ERR_NOT_A_FLOAT: u8 = 14;
    /// incr_by would overflow an i64.
    pub const ERR_OVERFLOW: u8 = 15;
    /// incr_by_float whose result is not finite (an operand is infinite or the sum overflows).
    pub const ERR_NAN_OR_INFINITY: u8 = 16;
    /// The request's replies would exceed the server's results budget (`results_bytes_max`).
    pub const ERR_REPLY_TOO_LARGE: u8 = 17;
    /// A deadline argument is malformed (not 9 bytes for put_expire and expire, an unknown
    /// condition bit, not 0 or 8 bytes for get_ex).
    pub const ERR_BAD_DEADLINE: u8 = 18;
    // Codes from 32 up are the server's (keyspace operations); below, the engine's.
    /// A keyspace operation's argument is malformed (scan: not 12 bytes, a cursor naming a
    /// shard the server does not have).
    pub const ERR_BAD_ARGUMENT: u8 = 32;
    /// The shard that holds a keyspace operation's keys did not answer (the server stops).
    pub const ERR_UNAVAILABLE: u8 = 33;

    /// The status of error `code`.
    pub const fn error(code: u8) -> u8 {
        ERROR | (code & ERROR_CODE_MAX)
    }

    /// True if `status` is an error.
    pub const fn is_error(status: u8) -> bool {
        status & ERROR != 0
    }

    /// A short description of `status` for messages ("not found", "division by zero", ...).
    pub fn name(status: u8) -> &'static str {
        match status {
            OK => "ok",
            NOT_FOUND => "not found",
            NOT_STORED => "not stored",
            CAS_MISMATCH => "cas mismatch",
            s if is_error(s) => match s & !ERROR {
                ERR_KEY_EMPTY => "key is empty",
                ERR_KEY_TOO_LONG => "key too long",
                ERR_VALUE_TOO_LARGE => "value too large",
                ERR_WRONG_WIDTH => "value is not a whole number of elements",
                ERR_LENGTH_MISMATCH => "operand length does not match the value",
                ERR_UNKNOWN_FUNCTION => "unknown function id",
                ERR_WRONG_FUNCTION_KIND => "function cannot be used with this operation",
                ERR_UNSUPPORTED_TYPE => "function does not support this element type",
                ERR_DIVISION_BY_ZERO => "division by zero",
                ERR_UNKNOWN_ELEM_TYPE => "unknown element type",
                ERR_OUT_OF_MEMORY => "out of memory",
                ERR_USER_FUNCTION => "user function failed",
                ERR_NOT_AN_INTEGER => "value is not an integer or out of range",
                ERR_NOT_A_FLOAT => "value is not a valid float",
                ERR_OVERFLOW => "increment or decrement would overflow",
                ERR_NAN_OR_INFINITY => "increment would produce NaN or Infinity",
                ERR_REPLY_TOO_LARGE => "the request's replies are too large",
                ERR_BAD_DEADLINE => "malformed deadline argument",
                ERR_BAD_ARGUMENT => "malformed argument",
                ERR_UNAVAILABLE => "shard unavailable",
                _ => "unknown error",
            },
            _ => "unknown status",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opcodes_round_trip_and_families() {
        for (i, op) in OpCode::ALL.into_iter().enumerate() {
            if op.is_engine() {
                assert_eq!(usize::from(op.code()), i);
            }
            assert_eq!(OpCode::from_code(op.code()), Some(op));
            // Every operation with a function has exactly one argument.
            if op.has_func() {
                assert!(op.has_arg() && !op.has_arg2());
            }
        }
        assert_eq!(OpCode::from_code(14), Some(OpCode::PutExpire));
        assert_eq!(OpCode::from_code(21), None);
        assert_eq!(OpCode::from_code(66), Some(OpCode::Scan));
        assert!(OpCode::IncrBy.has_arg() && !OpCode::Append.has_func());
        assert!(!OpCode::PutExpire.is_extended() && OpCode::Expire.is_extended());
        assert!(OpCode::SetBit.is_engine() && !OpCode::Exists.is_engine());
        assert!(!OpCode::Ttl.has_arg() && OpCode::Scan.has_arg() && !OpCode::Scan.has_arg2());
        assert!(OpCode::PutExpire.has_arg2() && !OpCode::PutExpire.is_read_only());
        assert_eq!(OpCode::from_code(255), None);
        assert!(!OpCode::Get.has_arg() && !OpCode::Delete.has_arg());
        assert!(OpCode::Cas.has_arg() && OpCode::Cas.has_arg2());
        assert_eq!(OpCode::UpdateV2V.name(), "update_vector2vector");
    }

    #[test]
    fn elem_codes_match_engine_numbering() {
        let widths = [1, 2, 4, 8, 1, 2, 4, 8, 4, 8];
        for (i, e) in ElemCode::ALL.into_iter().enumerate() {
            assert_eq!(usize::from(e.code()), i);
            assert_eq!(ElemCode::from_code(e.code()), Some(e));
            assert_eq!(e.width(), widths[i]);
        }
        assert_eq!(ElemCode::from_code(10), None);
        assert_eq!(ElemCode::F64.name(), "f64");
    }

    #[test]
    fn status_codes_leave_the_data_bit_free() {
        for code in 1..=status::ERROR_CODE_MAX {
            let s = status::error(code);
            assert!(status::is_error(s));
            assert_eq!(s & 0x40, 0);
        }
        assert_eq!(status::error(status::ERR_DIVISION_BY_ZERO), 0x89);
        assert_eq!(status::name(0x89), "division by zero");
        assert_eq!(status::name(status::CAS_MISMATCH), "cas mismatch");
        assert_eq!(status::name(7), "unknown status");
        assert_eq!(status::name(0x92), "malformed deadline argument");
    }

    #[test]
    fn expire_args_are_deadline_then_condition() {
        let a = expire_args(0x0102_0304_0506_0708, cond::XX | cond::GT);
        assert_eq!(a, [8, 7, 6, 5, 4, 3, 2, 1, 6]);
    }
}
