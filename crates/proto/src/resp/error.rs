//! `ProtocolError`: why bytes are not RESP. Its `Display` text is what Redis says in the same
//! case, so the server can reply with it (`err_protocol` adds the `ERR ` code) before closing.

use std::fmt;

/// The input cannot be RESP, whatever bytes follow; the stream cannot be resynchronised.
///
/// The first five variants come from request parsing and display as Redis' own texts. The
/// `Reply`-prefixed ones come from `parse_reply` (client side), where Redis has no text to copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProtocolError {
    /// `*` count that is not a number or is above `RespLimits::args_max`; also an inline line
    /// of more than `args_max` words (Redis has no such limit for inline commands).
    InvalidMultibulkLength,
    /// `$` length that is not a number, is negative or above `RespLimits::bulk_len_max`; or
    /// (stricter than Redis, which skips them unchecked) the two bytes after the payload are
    /// not `\r\n`.
    InvalidBulkLength,
    /// A multibulk argument that does not start with `$`; holds the byte found instead.
    ExpectedDollar(u8),
    /// An inline line longer than `RespLimits::inline_len_max`.
    InlineTooBig,
    /// An inline line with an unterminated quote, or a closing quote followed by a non-blank.
    UnbalancedQuotes,
    /// A client that has not authenticated sent a `*` count above
    /// `UNAUTHENTICATED_ARGS_MAX` (Redis 7's text and limit).
    UnauthenticatedMultibulkLength,
    /// A client that has not authenticated sent a `$` length above
    /// `UNAUTHENTICATED_BULK_LEN_MAX` (Redis 7's text and limit).
    UnauthenticatedBulkLength,
    /// A reply starting with a byte that is no RESP2/RESP3 type; holds the byte.
    ReplyTypeUnknown(u8),
    /// A reply length or count that is not a number, is negative (other than the null `-1`),
    /// or is above `REPLY_BULK_LEN_MAX` / `REPLY_AGGREGATE_LEN_MAX`.
    ReplyLengthInvalid,
    /// A `:` reply that is not a 64-bit signed integer.
    ReplyIntegerInvalid,
    /// A `,` reply that is not a floating-point number.
    ReplyDoubleInvalid,
    /// A `#` reply other than `t` or `f`.
    ReplyBooleanInvalid,
    /// A reply line whose `\r` is not followed by `\n`, or a payload not followed by `\r\n`.
    ReplyLineInvalid,
    /// Aggregates nested deeper than `REPLY_NESTING_MAX`.
    ReplyTooDeep,
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Protocol error: ")?;
        match self {
            Self::InvalidMultibulkLength => f.write_str("invalid multibulk length"),
            Self::InvalidBulkLength => f.write_str("invalid bulk length"),
            Self::ExpectedDollar(byte) => write!(f, "expected '$', got '{}'", ShownByte(*byte)),
            Self::InlineTooBig => f.write_str("too big inline request"),
            Self::UnbalancedQuotes => f.write_str("unbalanced quotes in request"),
            Self::UnauthenticatedMultibulkLength => f.write_str("unauthenticated multibulk length"),
            Self::UnauthenticatedBulkLength => f.write_str("unauthenticated bulk length"),
            Self::ReplyTypeUnknown(byte) => write!(f, "unknown reply type '{}'", ShownByte(*byte)),
            Self::ReplyLengthInvalid => f.write_str("invalid reply length"),
            Self::ReplyIntegerInvalid => f.write_str("invalid integer reply"),
            Self::ReplyDoubleInvalid => f.write_str("invalid double reply"),
            Self::ReplyBooleanInvalid => f.write_str("invalid boolean reply"),
            Self::ReplyLineInvalid => f.write_str("reply line not terminated by CRLF"),
            Self::ReplyTooDeep => f.write_str("reply nested too deeply"),
        }
    }
}

impl std::error::Error for ProtocolError {}

/// One input byte inside an error text. Printable ASCII is shown as itself, as Redis does. CR
/// and LF become spaces, as Redis does for every error reply. Other bytes, which Redis would
/// send raw, are shown as `\xHH` so the text stays printable UTF-8.
struct ShownByte(u8);

impl fmt::Display for ShownByte {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            b'\r' | b'\n' => f.write_str(" "),
            byte @ b' '..=b'~' => write!(f, "{}", char::from(byte)),
            byte => write!(f, "\\x{byte:02x}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_are_redis_texts() {
        let cases = [
            (
                ProtocolError::InvalidMultibulkLength,
                "Protocol error: invalid multibulk length",
            ),
            (
                ProtocolError::InvalidBulkLength,
                "Protocol error: invalid bulk length",
            ),
            (
                ProtocolError::ExpectedDollar(b'x'),
                "Protocol error: expected '$', got 'x'",
            ),
            (
                ProtocolError::InlineTooBig,
                "Protocol error: too big inline request",
            ),
            (
                ProtocolError::UnbalancedQuotes,
                "Protocol error: unbalanced quotes in request",
            ),
        ];
        for (error, text) in cases {
            assert_eq!(error.to_string(), text);
        }
    }

    #[test]
    fn unprintable_bytes_stay_on_one_printable_line() {
        let shown = |byte| ProtocolError::ExpectedDollar(byte).to_string();
        assert_eq!(shown(b'\r'), "Protocol error: expected '$', got ' '");
        assert_eq!(shown(b'\n'), "Protocol error: expected '$', got ' '");
        assert_eq!(shown(0), "Protocol error: expected '$', got '\\x00'");
        assert_eq!(shown(0xff), "Protocol error: expected '$', got '\\xff'");
        assert_eq!(
            ProtocolError::ReplyTypeUnknown(b'@').to_string(),
            "Protocol error: unknown reply type '@'"
        );
    }
}
