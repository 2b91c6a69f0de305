//! RESP, the Redis serialization protocol, as a sans-IO codec shared by the server and clients.
//!
//! What: the server side parses requests (`parse_command`: multibulk `*N\r\n$len\r\n...` and
//! inline `SET k v\n` lines) and writes replies in RESP2 or RESP3 (`RespWriter`, plus the exact
//! Redis error texts in `error_text`); the client side encodes requests (`encode_command`) and
//! parses replies (`parse_reply`).
//!
//! Goals:
//! - Byte-for-byte Redis behaviour where clients can see it: the same protocol error texts, the
//!   same inline quoting rules, the same limits by default (`RespLimits`), the same error replies.
//! - Sans-IO: every function takes bytes already received and says how many it used; the caller
//!   owns the buffers and the sockets. "Need more bytes" (`Parse::Incomplete`) and "this is not
//!   RESP" (`Parse::Invalid`) are separate answers, and `Incomplete` is never given for input
//!   that no further bytes could make valid: lengths are checked against the limits digit by
//!   digit, before any of the bytes they announce arrive.
//! - Zero-copy requests: a multibulk command's arguments are ranges into the caller's input
//!   buffer, collected in a caller-owned `Args` that is reused from command to command, so a
//!   warmed-up connection parses without allocating. Only inline commands, whose arguments may
//!   need unescaping, are copied, into the scratch buffer inside `Args`.
//!
//! Non-goals: I/O, async, buffering, command semantics (the server dispatches on `Command`),
//! resumable parsing (a call after `Incomplete` starts again from the first byte; bulk payloads
//! are skipped by length, so that costs a rescan of the headers only), RESP3 attributes, and the
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
//!   Running out of bytes in any state before Complete is Incomplete.
//! ```

mod command;
mod error;
mod error_text;
mod inline;
mod reply;
mod writer;

pub use command::{
    encode_command, parse_command, Args, Command, Parse, RespLimits, ARGS_MAX_DEFAULT,
    BULK_LEN_MAX_DEFAULT, INLINE_LEN_MAX_DEFAULT,
};
pub use error::ProtocolError;
pub use error_text::{
    err_db_index, err_nan_or_infinity, err_noauth, err_noproto, err_not_float, err_not_integer,
    err_overflow, err_protocol, err_syntax, err_unknown_command, err_unknown_subcommand,
    err_wrong_arity, err_wrong_type, err_wrongpass, UNKNOWN_COMMAND_TEXT_MAX,
};
pub use reply::{
    parse_reply, Reply, REPLY_AGGREGATE_LEN_MAX, REPLY_BULK_LEN_MAX, REPLY_NESTING_MAX,
};
pub use writer::{RespWriter, Version};
