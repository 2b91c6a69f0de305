//! memcached 1.6's text and meta protocols as a sans-IO codec: `parse_request` turns the front
//! of a byte buffer into a typed `Request` (the server's side), the `write_*` functions write
//! replies, and `encode_request` writes requests (a client's side).
//!
//! Goals:
//! - memcached's behaviour where a client can see it: the same commands, the same reading of
//!   numbers (`number.rs`: C's strto* plus memcached's checks, truncations included), the same
//!   error line for every refusal (`MemcacheError`, each text checked against memcached
//!   1.6.18 by crates/proto/tests/memcache_peer.rs), the same fate of the connection.
//! - Sans-IO and zero-copy: keys, values and flag words borrow the caller's buffer; the
//!   keys of a multi-get are validated and then re-split on iteration (`Keys`), so a parse
//!   never allocates.
//! - Limits checked before bytes are buffered: a line longer than `line_bytes_max` (2048, as
//!   memcached) or a get line longer than `get_line_bytes_max` gives `Parse::Close` as soon
//!   as that many bytes came without a `\n`; a value longer than `value_bytes_max` (1 MiB) is
//!   refused from its command line alone, and its data block is swallowed (`Refusal::swallow`)
//!   without ever being held; `get_keys_max` bounds the keys of one retrieval.
//!
//! Grammar (a line ends at `\n`, an optional `\r` before it is dropped; words are split on
//! spaces only, runs of spaces count as one; command names are case-sensitive):
//!
//! ```text
//!   get|gets <key>+                 gat|gats <exptime> <key>*
//!   set|add|replace|append|prepend <key> <flags> <exptime> <bytes> [noreply]\r\n<data>\r\n
//!   cas <key> <flags> <exptime> <bytes> <cas unique> [noreply]\r\n<data>\r\n
//!   incr|decr <key> <delta> [noreply]      delete <key> [0] [noreply]
//!   touch <key> <exptime> [noreply]        flush_all [delay] [noreply]
//!   verbosity <level> [noreply]            version     stats [<args>]     quit
//!   mg|md|ma <key> <flag>*    ms <key> <bytes> <flag>*\r\n<data>\r\n    mn    me <key> [b]
//! ```
//!
//! ```text
//!   bytes ──► LINE: '\n' within the line limit? ── no, and over it ──► Close (no reply)
//!               │ no, under it: Incomplete
//!               ▼ yes
//!             WORDS: dispatch on word 0 and the word count
//!               │ unknown / wrong count ──────────────────────────► Refused ERROR
//!               │ bad key or number ──────────────────────────────► Refused CLIENT_ERROR ...
//!               │ storage, value over value_bytes_max ────────────► Refused SERVER_ERROR ...,
//!               │                                                     swallow <bytes> + 2
//!               ▼ storage: DATA <bytes> then "\r\n"? ── not yet: Incomplete
//!               │                              └─ other 2 bytes: Refused bad data chunk
//!               ▼
//!             Complete { request, consumed }
//! ```
//!
//! Refusals leave the connection usable, as in memcached; only an over-long line closes it
//! (and `quit`, which the server carries out). `noreply` makes a text command's refusal
//! quiet (`Refusal::quiet`); meta commands always answer errors. A refused `ms` swallows its
//! data block when the refusal comes after its length was read, as memcached does; a
//! refused text storage command does not (memcached reads the data as the next command),
//! except for a too-large value.
//!
//! Deliberate differences from memcached 1.6.18, none visible to a well-behaved client:
//! - A line over its limit closes the connection even when its `\n` came in the same read
//!   (memcached answers such a line if its buffer happened to hold it whole).
//! - `value_bytes_max` bounds the value alone; memcached also counts its item header.
//! - `E` (explicit CAS) is accepted as memcached 1.6.21+ accepts it (1.6.18: invalid flag).
//! - `get_keys_max` is directkv's own (memcached has no limit, and no error for it).
//! - Commands outside the grammar (shutdown, cache_memlimit, slabs, lru_crawler, watch,
//!   the binary protocol, ...) are answered `ERROR`.
//!
//! Non-goals: I/O, resumable parsing of a long line (a call after `Incomplete` rereads it:
//! at most `get_line_bytes_max` bytes), command semantics (what exptime, CAS, modes and quiet
//! mode mean is the server's), parsing replies.

mod base64;
mod error;
mod meta;
mod number;
mod parse;
mod reply;
mod request;

pub use base64::encode_base64;
pub use error::MemcacheError;
pub use meta::{MetaFlags, MetaKey};
pub use parse::parse_request;
pub use reply::{
    encode_request, write_client_error, write_error, write_meta_end, write_meta_flag,
    write_meta_flag_number, write_meta_status, write_meta_value_header, write_number,
    write_server_error, write_stat, write_status, write_value, write_version, MetaStatus, Status,
};
pub use request::{
    Keys, MemcacheLimits, Parse, Refusal, Request, StoreMode, GET_KEYS_MAX_DEFAULT,
    GET_LINE_BYTES_MAX_DEFAULT, KEY_BYTES_MAX, LINE_BYTES_MAX_DEFAULT, META_OPAQUE_BYTES_MAX,
    META_WORDS_MAX, VALUE_BYTES_MAX_DEFAULT,
};
