//! RESP, the Redis serialization protocol, as a sans-IO codec shared by the server and clients.
//!
//! What: the server side parses requests (`parse_command`: multibulk `*N\r\n$len\r\n...` and
//! inline `SET k v\n` lines) and writes replies in RESP2 or RESP3 (`RespWriter`, plus the exact
//! Redis error texts from the `err_*` functions); the client side encodes requests
//! (`encode_command`) and parses replies (`parse_reply`).
//!
//! Goals:
//! - Byte-for-byte Redis behaviour where clients can see it: the same protocol error texts, the
//!   same inline quoting rules, the same limits by default (`RespLimits`), the same error replies.
//! - Sans-IO: every function takes bytes already received and says how many it used; the caller
//!   owns the buffers and the sockets. "Need more bytes" (`Parse::Incomplete`) and "this is not
//!   RESP" (`Parse::Invalid`) are separate answers, and `Incomplete` is never given for input
//!   that no further bytes could make valid: lengths are checked against the limits digit by
//!   digit, before any of the bytes they announce arrive, and an unfinished inline line is
//!   checked for broken quoting as it grows. A verdict of `Invalid` (and its error) or
//!   `Complete` never changes when more bytes are appended.
//! - Zero-copy requests: a multibulk command's arguments are ranges into the caller's input
//!   buffer, collected in a caller-owned `Args` that is reused from command to command, so a
//!   warmed-up connection parses without allocating. Only inline commands, whose arguments may
//!   need unescaping, are copied, into the scratch buffer inside `Args`.
//!
//! Deliberate differences from Redis, none of which a well-formed client can see:
//! - The `\r` of a count or length line must be followed by `\n`, and a bulk payload by `\r\n`;
//!   Redis skips those bytes unchecked. Both give Redis' length error texts.
//! - Verdicts come as early as the bytes allow; Redis waits for the end of a line.
//! - Inline lines: a NUL byte is data (Redis stops at it, splitting a C string); the length
//!   limit holds for every line, not only for one still waiting for its `\n`; `args_max` also
//!   bounds the word count.
//! - Redis' tighter limits before AUTH (10 arguments, 16 KiB strings) are not built in: the
//!   server can pass smaller `RespLimits` until the client authenticates, and the errors then
//!   say "invalid" where Redis says "unauthenticated".
//!
//! Non-goals: I/O, async, buffering, command semantics (the server dispatches on `Command`),
//! resumable inline lines (a call after `Incomplete` rereads an unfinished inline line, at most
//! `inline_len_max` bytes; multibulk commands resume where they stopped with
//! `parse_command_resume`, issue 19 item 7), RESP3 attributes, and the
//! writer side of verbatim strings and big numbers.
//!
//! Request parse states (`parse_command`); any edge not drawn is `Invalid` with Redis' text:
//!
//! ```text
//!   first byte ──'*'──► COUNT  digits, '\r', '\n'    (> args_max: "invalid multibulk length")
//!       │                 │ count <= 0: Complete, zero args (Redis ignores `*0` and `*-1`)
//!       │                 ▼
//!       │              ┌► DOLLAR  '$'                 (other byte: "expected '$', got 'X'")
//!       │              │   ▼
//!       │              │  LENGTH  digits, '\r', '\n'  (> bulk_len_max: "invalid bulk length")
//!       │              │   ▼
//!       │              │  DATA    skip len bytes, then '\r', '\n'
//!       │              └───┘ until count arguments, then Complete { consumed }
//!       │
//!       └──other──► LINE  up to '\n' (optional '\r')  (> inline_len_max: "too big inline request")
//!                     ▼
//!                   SPLIT  words on blanks; "..." with \n \r \t \b \a \\ \" \xHH escapes,
//!                          '...' with \' ; a closing quote must end the word
//!                                                     ("unbalanced quotes in request")
//!                     ▼
//!                   Complete { consumed } (an empty line gives zero args: the caller skips it)
//!
//!   Running out of bytes before Complete is Incomplete, unless the bytes so far already break
//!   a rule (a length over its limit, a bad byte, a closed quote followed by a non-blank).
//! ```

mod command;
mod error;
mod error_text;
mod inline;
mod reply;
mod writer;

pub use command::{
    encode_command, parse_command, parse_command_resume, parse_command_unauthenticated, Args,
    Command, Parse, RespLimits, ARGS_MAX_DEFAULT, BULK_LEN_MAX_DEFAULT, INLINE_LEN_MAX_DEFAULT,
    UNAUTHENTICATED_ARGS_MAX, UNAUTHENTICATED_BULK_LEN_MAX, UNAUTHENTICATED_INLINE_LEN_MAX,
};
pub use error::ProtocolError;
pub use error_text::{
    err_db_index, err_decrement_overflow, err_nan_or_infinity, err_noauth, err_noproto,
    err_not_float, err_not_integer, err_overflow, err_protocol, err_syntax, err_unknown_command,
    err_unknown_subcommand, err_wrong_arity, err_wrong_type, err_wrongpass,
    UNKNOWN_COMMAND_TEXT_MAX,
};
pub use reply::{
    parse_reply, Reply, REPLY_AGGREGATE_LEN_MAX, REPLY_BULK_LEN_MAX, REPLY_NESTING_MAX,
};
pub use writer::{RespWriter, Version};
