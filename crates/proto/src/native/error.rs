//! Frame-level errors of the native protocol: what the decoder rejects, what the encoder
//! refuses, and the codes an ERROR frame carries.
//!
//! What: `ErrorCode` (stable one-byte codes with a fixed message each), `NativeError` (a rejected
//! frame: its code, request id, and how many bytes to skip to reach the next frame, if the
//! stream can be resynchronised at all) and `EncodeError`.
//!
//! ```text
//!   fatal   (skip = None)    magic, version or frame length wrong: the length cannot be trusted,
//!                            so nothing after it can be found. Reply ERROR (closing), close.
//!   resync  (skip = Some(n)) the header was sound and all n bytes of the frame arrived, but the
//!                            body is malformed. Reply ERROR with the request id, drop n bytes,
//!                            carry on with the next frame.
//! ```
//!
//! Per-operation failures (unknown function, wrong width, ...) are not frame errors: they are a
//! status in the response, decided by the engine.

use std::fmt;

use super::control::ErrorReply;

/// Why a frame was rejected. The discriminant is the code in an ERROR frame. Codes 1..=31 are
/// produced by the decoder, 32.. only by a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ErrorCode {
    /// The first byte is not `MAGIC` (fatal).
    BadMagic = 1,
    /// The version byte is not `VERSION` (fatal).
    BadVersion = 2,
    /// `frame_len` is smaller than the header (fatal).
    FrameTooShort = 3,
    /// `frame_len` is above `frame_len_max` (fatal).
    FrameTooLong = 4,
    /// Unknown frame kind, or a kind that does not travel in this direction.
    UnknownKind = 5,
    /// A reserved frame flag is set.
    BadFrameFlags = 6,
    /// The op count is above `frame_ops_max`.
    TooManyOps = 7,
    /// An op header names an unassigned opcode.
    UnknownOpcode = 8,
    /// A copy flag with nothing to copy, or one that does not apply to the operation.
    BadOpFlags = 9,
    /// A key is longer than `key_len_max`.
    KeyTooLong = 10,
    /// An argument or response data is longer than `value_len_max`.
    ValueTooLarge = 11,
    /// A field runs past the end of the frame.
    Truncated = 12,
    /// Bytes are left after the last field of the frame.
    TrailingBytes = 13,
    /// A length is not a shortest-form varint below 2^32.
    BadVarint = 14,
    /// A response status has the data bit set with zero bytes of data.
    BadStatus = 15,
    /// A control frame's body is malformed (bad UTF-8, too many shards, payload too long, ...).
    BadControl = 16,
    /// The server requires HELLO with a password before anything else.
    AuthRequired = 32,
    /// The password in HELLO was wrong.
    AuthFailed = 33,
    /// ATTACH named a shard that does not exist.
    BadShard = 34,
    /// The frame is valid but not served here (for example ATTACH over UDP).
    Unsupported = 35,
    /// The server is over a limit (connections, in-flight frames) and drops the connection.
    Busy = 36,
    /// Anything else the server could not do.
    Internal = 37,
}

impl ErrorCode {
    /// Every code, in code order.
    pub const ALL: [ErrorCode; 22] = [
        ErrorCode::BadMagic,
        ErrorCode::BadVersion,
        ErrorCode::FrameTooShort,
        ErrorCode::FrameTooLong,
        ErrorCode::UnknownKind,
        ErrorCode::BadFrameFlags,
        ErrorCode::TooManyOps,
        ErrorCode::UnknownOpcode,
        ErrorCode::BadOpFlags,
        ErrorCode::KeyTooLong,
        ErrorCode::ValueTooLarge,
        ErrorCode::Truncated,
        ErrorCode::TrailingBytes,
        ErrorCode::BadVarint,
        ErrorCode::BadStatus,
        ErrorCode::BadControl,
        ErrorCode::AuthRequired,
        ErrorCode::AuthFailed,
        ErrorCode::BadShard,
        ErrorCode::Unsupported,
        ErrorCode::Busy,
        ErrorCode::Internal,
    ];

    /// The wire code.
    pub const fn code(self) -> u8 {
        self as u8
    }

    /// The error code with wire code `code`.
    pub fn from_code(code: u8) -> Option<ErrorCode> {
        ErrorCode::ALL.into_iter().find(|c| c.code() == code)
    }

    /// The fixed message sent in an ERROR frame for this code. Test vectors depend on these
    /// strings: change them only with the vectors.
    pub const fn message(self) -> &'static str {
        match self {
            ErrorCode::BadMagic => "bad magic byte",
            ErrorCode::BadVersion => "unsupported protocol version",
            ErrorCode::FrameTooShort => "frame length below header length",
            ErrorCode::FrameTooLong => "frame length above frame_len_max",
            ErrorCode::UnknownKind => "unknown frame kind",
            ErrorCode::BadFrameFlags => "reserved frame flag set",
            ErrorCode::TooManyOps => "op count above frame_ops_max",
            ErrorCode::UnknownOpcode => "unknown opcode",
            ErrorCode::BadOpFlags => "copy flag not applicable",
            ErrorCode::KeyTooLong => "key longer than key_len_max",
            ErrorCode::ValueTooLarge => "argument longer than value_len_max",
            ErrorCode::Truncated => "field runs past end of frame",
            ErrorCode::TrailingBytes => "bytes after last field of frame",
            ErrorCode::BadVarint => "malformed varint",
            ErrorCode::BadStatus => "malformed status",
            ErrorCode::BadControl => "malformed control frame",
            ErrorCode::AuthRequired => "authentication required",
            ErrorCode::AuthFailed => "wrong password",
            ErrorCode::BadShard => "no such shard",
            ErrorCode::Unsupported => "not supported here",
            ErrorCode::Busy => "server busy",
            ErrorCode::Internal => "internal error",
        }
    }
}

/// A frame the decoder rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NativeError {
    pub code: ErrorCode,
    /// The rejected frame's request id; 0 when the stream is not resynchronisable (the id
    /// may not have arrived and cannot be trusted).
    pub request_id: u32,
    /// Bytes to drop to reach the next frame, or `None` if the stream cannot be
    /// resynchronised (the connection must be closed after replying).
    pub skip: Option<usize>,
    /// Index of the operation that was malformed, when one was.
    pub op_index: Option<u16>,
}

impl NativeError {
    /// An error that ends the stream.
    pub(crate) fn fatal(code: ErrorCode) -> NativeError {
        NativeError {
            code,
            request_id: 0,
            skip: None,
            op_index: None,
        }
    }

    /// True if the caller can drop `skip` bytes and decode the next frame.
    pub fn is_resynchronisable(&self) -> bool {
        self.skip.is_some()
    }

    /// The ERROR frame body a server sends for this error: the code's fixed message, and
    /// "closing" when the stream cannot be resynchronised.
    pub fn reply(&self) -> ErrorReply<'static> {
        ErrorReply {
            code: self.code.code(),
            closing: !self.is_resynchronisable(),
            op_index: self.op_index,
            message: self.code.message(),
        }
    }
}

impl fmt::Display for NativeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "native frame rejected: {}", self.code.message())?;
        if let Some(i) = self.op_index {
            write!(f, " (op {i})")?;
        }
        if self.skip.is_some() {
            write!(f, " (request {})", self.request_id)
        } else {
            write!(f, " (stream cannot be resynchronised)")
        }
    }
}

impl std::error::Error for NativeError {}

/// Why an encoder refused to append something. `out` is left as it was before the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EncodeError {
    /// A key is longer than `key_len_max`.
    KeyTooLong { len: usize, max: usize },
    /// An argument or response data is longer than `value_len_max`.
    ValueTooLarge { len: usize, max: usize },
    /// The frame already holds `frame_ops_max` operations.
    TooManyOps { max: usize },
    /// The frame would grow to `len` bytes, above `frame_len_max`.
    FrameTooLong { len: usize, max: usize },
    /// A response status with bit 6 set (reserved on the wire for "data follows").
    BadStatus(u8),
    /// A shard map with no shards or more than `SHARD_COUNT_MAX`.
    BadShardCount(usize),
    /// A control field is longer than its length field or limit allows.
    FieldTooLong {
        field: &'static str,
        len: usize,
        max: usize,
    },
}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            EncodeError::KeyTooLong { len, max } => {
                write!(f, "key is {len} bytes, longer than key_len_max {max}")
            }
            EncodeError::ValueTooLarge { len, max } => {
                write!(f, "value is {len} bytes, larger than value_len_max {max}")
            }
            EncodeError::TooManyOps { max } => {
                write!(f, "frame already holds frame_ops_max {max} operations")
            }
            EncodeError::FrameTooLong { len, max } => {
                write!(f, "frame would be {len} bytes, above frame_len_max {max}")
            }
            EncodeError::BadStatus(s) => write!(f, "status {s:#04x} has reserved bit 6 set"),
            EncodeError::BadShardCount(n) => write!(f, "{n} shards: a shard map has 1..=4096"),
            EncodeError::FieldTooLong { field, len, max } => {
                write!(f, "{field} is {len} bytes, longer than {max}")
            }
        }
    }
}

impl std::error::Error for EncodeError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_and_round_trip() {
        for (i, c) in ErrorCode::ALL.into_iter().enumerate() {
            assert_eq!(ErrorCode::from_code(c.code()), Some(c));
            assert!(!c.message().is_empty() && c.message().len() <= 255);
            for d in &ErrorCode::ALL[i + 1..] {
                assert_ne!(c.code(), d.code());
            }
        }
        assert_eq!(ErrorCode::from_code(0), None);
        assert_eq!(ErrorCode::from_code(17), None);
    }

    #[test]
    fn reply_closes_only_when_not_resynchronisable() {
        let fatal = NativeError::fatal(ErrorCode::BadMagic);
        assert!(fatal.reply().closing);
        assert!(fatal.to_string().contains("cannot be resynchronised"));
        let resync = NativeError {
            code: ErrorCode::UnknownOpcode,
            request_id: 9,
            skip: Some(20),
            op_index: Some(1),
        };
        let r = resync.reply();
        assert!(!r.closing);
        assert_eq!(
            (r.code, r.op_index, r.message),
            (8, Some(1), "unknown opcode")
        );
        assert_eq!(
            resync.to_string(),
            "native frame rejected: unknown opcode (op 1) (request 9)"
        );
    }
}
