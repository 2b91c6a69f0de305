//! Errors returned by engine operations.
//!
//! Every variant has a stable one-byte code (`OpError::code`) so the wire protocols can carry it
//! without knowing the engine's types, and a message that says what was wrong.

/// Why an operation failed. An operation that fails leaves the store unchanged; that includes
/// `ReplyTooLarge`: a write whose reply data would pass the budget is not applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum OpError {
    /// Not returned by the engine, which stores the empty key as Redis does; kept for its wire
    /// code (1) and for protocols that refuse empty keys themselves (memcached's).
    #[error("key is empty")]
    KeyEmpty,
    #[error("key is {len} bytes, longer than key_len_max {max}")]
    KeyTooLong { len: usize, max: usize },
    #[error("value is {len} bytes, larger than value_len_max {max}")]
    ValueTooLarge { len: usize, max: usize },
    #[error("value of {len} bytes is not a whole number of {width}-byte elements")]
    WrongWidth { len: usize, width: usize },
    #[error("operand of {operand} bytes does not match the value's {value} bytes")]
    LengthMismatch { operand: usize, value: usize },
    #[error("unknown function id {0}")]
    UnknownFunction(u16),
    #[error("function id {0} cannot be used with this operation")]
    WrongFunctionKind(u16),
    #[error("function id {func} does not support element type {elem}")]
    UnsupportedType { func: u16, elem: &'static str },
    #[error("division by zero")]
    DivisionByZero,
    #[error("unknown element type code {0}")]
    UnknownElemType(u8),
    #[error("out of memory: the arena has no free slab for this key-value")]
    OutOfMemory,
    #[error("user function failed: {0}")]
    UserFunction(&'static str),
    #[error("value is not an integer or out of range")]
    NotAnInteger,
    #[error("value is not a valid float")]
    NotAFloat,
    #[error("increment or decrement would overflow")]
    Overflow,
    #[error("increment would produce NaN or Infinity")]
    NanOrInfinity,
    /// The batch's results would pass `results_bytes_max`: this operation's reply data is
    /// refused (issue 19 item 5: 4096 GETs of a 1 MiB value once overflowed the 32-bit result
    /// offsets and panicked the server).
    #[error("the replies of this request would exceed results_bytes_max ({max} bytes); ask for fewer or smaller values per request")]
    ReplyTooLarge { max: usize },
    /// The deadline arguments of an expiry operation are malformed (`op::expire_args`).
    #[error("deadline arguments must be a u64 LE deadline and a condition byte of bits 0..=3 (9 bytes), or for get_ex 0 or 8 bytes")]
    BadDeadline,
    /// The arguments of a memcache operation are malformed (`op::mc`'s encodings).
    #[error("memcache operation arguments are malformed (see op::mc)")]
    BadMcArgs,
    /// The server's persistence log failed (a write or fdatasync error, disk full): writes are
    /// refused, not applied or not acknowledged, until an operator fixes the disk and
    /// restarts (the server's answer, as Redis's `MISCONF`). Never returned by the engine.
    #[error("the persistence log failed ({0}): writes are refused, reads are served; see the server log")]
    NotLogged(&'static str),
}

impl OpError {
    /// Stable wire code of this error (never 0, which means success on the wire).
    pub fn code(&self) -> u8 {
        match self {
            OpError::KeyEmpty => 1,
            OpError::KeyTooLong { .. } => 2,
            OpError::ValueTooLarge { .. } => 3,
            OpError::WrongWidth { .. } => 4,
            OpError::LengthMismatch { .. } => 5,
            OpError::UnknownFunction(_) => 6,
            OpError::WrongFunctionKind(_) => 7,
            OpError::UnsupportedType { .. } => 8,
            OpError::DivisionByZero => 9,
            OpError::UnknownElemType(_) => 10,
            OpError::OutOfMemory => 11,
            OpError::UserFunction(_) => 12,
            OpError::NotAnInteger => 13,
            OpError::NotAFloat => 14,
            OpError::Overflow => 15,
            OpError::NanOrInfinity => 16,
            OpError::ReplyTooLarge { .. } => 17,
            OpError::BadDeadline => 18,
            OpError::BadMcArgs => 19,
            OpError::NotLogged(_) => 20,
        }
    }
}
