//! Writing: the server's replies (`write_*`, text and meta) and the client's requests
//! (`encode_request`), appended to a caller's buffer.
//!
//! Reply lines as memcached 1.6 writes them:
//!
//! ```text
//!   VALUE <key> <flags> <bytes> [<cas>]\r\n<data>\r\n ... END\r\n     get, gets, gat, gats
//!   STORED | NOT_STORED | EXISTS | NOT_FOUND | DELETED | TOUCHED | OK | END \r\n
//!   <number>\r\n                                                        incr, decr
//!   STAT <name> <value>\r\n ... END\r\n                                 stats
//!   VERSION <version>\r\n
//!   ERROR | CLIENT_ERROR <text> | SERVER_ERROR <text> \r\n
//!   HD|EN|NF|NS|EX|MN [<flag><token>]*\r\n   VA <bytes> [<flag><token>]*\r\n<data>\r\n   meta
//! ```

use super::error::MemcacheError;
use super::request::{Request, StoreMode};

/// A reply that is one fixed word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    Stored,
    NotStored,
    Exists,
    NotFound,
    Deleted,
    Touched,
    Ok,
    End,
    Reset,
}

impl Status {
    pub fn text(self) -> &'static str {
        match self {
            Self::Stored => "STORED",
            Self::NotStored => "NOT_STORED",
            Self::Exists => "EXISTS",
            Self::NotFound => "NOT_FOUND",
            Self::Deleted => "DELETED",
            Self::Touched => "TOUCHED",
            Self::Ok => "OK",
            Self::End => "END",
            Self::Reset => "RESET",
        }
    }
}

/// The status code that starts a meta reply line (`VA` is written by `write_meta_value`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetaStatus {
    /// HD: success, no value.
    Header,
    /// EN: miss (mg).
    Miss,
    /// NF: not found (md, ma, ms in some modes).
    NotFound,
    /// NS: not stored.
    NotStored,
    /// EX: the CAS did not match.
    Exists,
    /// MN: the reply to mn.
    Noop,
}

impl MetaStatus {
    pub fn text(self) -> &'static str {
        match self {
            Self::Header => "HD",
            Self::Miss => "EN",
            Self::NotFound => "NF",
            Self::NotStored => "NS",
            Self::Exists => "EX",
            Self::Noop => "MN",
        }
    }
}

fn line(out: &mut Vec<u8>, text: &[u8]) {
    out.extend_from_slice(text);
    out.extend_from_slice(b"\r\n");
}

fn number<T: itoa_like::Decimal>(out: &mut Vec<u8>, value: T) {
    value.append_to(out);
}

/// Decimal formatting without allocation or `fmt` machinery.
mod itoa_like {
    pub trait Decimal {
        fn append_to(self, out: &mut Vec<u8>);
    }

    impl Decimal for u64 {
        #[inline]
        fn append_to(self, out: &mut Vec<u8>) {
            // Flags of 0 and short lengths, most of a `VALUE` line's numbers: no loop.
            if self < 10 {
                out.push(b'0' + self as u8);
                return;
            }
            if self < 100 {
                out.extend_from_slice(&[b'0' + (self / 10) as u8, b'0' + (self % 10) as u8]);
                return;
            }
            let mut digits = [0u8; 20];
            let mut pos = digits.len();
            let mut rest = self;
            loop {
                pos -= 1;
                digits[pos] = b'0' + (rest % 10) as u8;
                rest /= 10;
                if rest == 0 {
                    break;
                }
            }
            out.extend_from_slice(&digits[pos..]);
        }
    }

    impl Decimal for i64 {
        fn append_to(self, out: &mut Vec<u8>) {
            if self < 0 {
                out.push(b'-');
            }
            self.unsigned_abs().append_to(out);
        }
    }
}

/// `STORED`, `END`, ... and its `\r\n`.
pub fn write_status(out: &mut Vec<u8>, status: Status) {
    line(out, status.text().as_bytes());
}

/// An error line: `ERROR`, `CLIENT_ERROR ...`, `SERVER_ERROR ...`.
pub fn write_error(out: &mut Vec<u8>, error: MemcacheError) {
    line(out, error.text().as_bytes());
}

/// `CLIENT_ERROR <text>` for a refusal the server decides (e.g. incr on a non-number:
/// "cannot increment or decrement non-numeric value").
pub fn write_client_error(out: &mut Vec<u8>, text: &str) {
    out.extend_from_slice(b"CLIENT_ERROR ");
    line(out, text.as_bytes());
}

/// `SERVER_ERROR <text>` (e.g. "out of memory storing object").
pub fn write_server_error(out: &mut Vec<u8>, text: &str) {
    out.extend_from_slice(b"SERVER_ERROR ");
    line(out, text.as_bytes());
}

/// One `VALUE` of a retrieval reply; `cas` for gets and gats. End the reply with
/// `write_status(out, Status::End)`.
#[inline]
pub fn write_value(out: &mut Vec<u8>, key: &[u8], flags: u32, value: &[u8], cas: Option<u64>) {
    // A short key and value (a cache's usual item) are composed with the line in one
    // fixed-size stack buffer, appended whole (a copy the compiler inlines) and cut back to
    // the block's length: each by two overlapping fixed-size copies, not a call to `memcpy`,
    // and one capacity check for the whole block (callgrind: about 60 instructions less per
    // `VALUE` than appending its five parts).
    if is_short(key) && is_short(value) {
        let mut block = [0u8; SHORT_BLOCK_BYTES];
        block[..6].copy_from_slice(b"VALUE ");
        copy_short(&mut block, 6, key);
        let at = value_tail(&mut block, 6 + key.len(), flags, value.len(), cas);
        copy_short(&mut block, at, value);
        let at = at + value.len();
        block[at..at + 2].copy_from_slice(b"\r\n");
        let end = out.len() + at + 2;
        out.extend_from_slice(&block);
        out.truncate(end);
        return;
    }
    // The numbers are written into a fixed-size stack buffer, which is appended whole and cut
    // back to the line's length: a push per digit and separator, each with its own capacity
    // check, cost more, and so does a copy of just the used bytes (a call to `memcpy`).
    let mut tail = [0u8; VALUE_TAIL_BYTES_MAX];
    let at = value_tail(&mut tail, 0, flags, value.len(), cas);
    out.reserve(6 + key.len() + VALUE_TAIL_BYTES_MAX + value.len() + 2);
    out.extend_from_slice(b"VALUE ");
    out.extend_from_slice(key);
    let end = out.len() + at;
    out.extend_from_slice(&tail);
    out.truncate(end);
    line(out, value);
}

/// Bytes of a `VALUE` line after its key, at most: ` <flags u32> <bytes> <cas u64>\r\n`.
const VALUE_TAIL_BYTES_MAX: usize = 1 + 10 + 1 + 20 + 1 + 20 + 2;

/// Longest key or value `write_value` composes in its stack buffer.
const SHORT_BYTES_MAX: usize = 16;

/// A whole `VALUE` block of a short key and value, at most.
const SHORT_BLOCK_BYTES: usize = 6 + SHORT_BYTES_MAX + VALUE_TAIL_BYTES_MAX + SHORT_BYTES_MAX + 2;

/// Whether `b` is copied by [`copy_short`]: 4 to 16 bytes.
#[inline(always)]
fn is_short(b: &[u8]) -> bool {
    (4..=SHORT_BYTES_MAX).contains(&b.len())
}

/// Copies `src` (4 to 16 bytes, [`is_short`]) to `buf[at..]` by two fixed-size copies of its
/// first and last 8 (or 4) bytes, which overlap when it is shorter than 16 (8).
#[inline(always)]
fn copy_short(buf: &mut [u8], at: usize, src: &[u8]) {
    let n = src.len();
    debug_assert!(is_short(src));
    if n >= 8 {
        buf[at..at + 8].copy_from_slice(&src[..8]);
        buf[at + n - 8..at + n].copy_from_slice(&src[n - 8..]);
    } else {
        buf[at..at + 4].copy_from_slice(&src[..4]);
        buf[at + n - 4..at + n].copy_from_slice(&src[n - 4..]);
    }
}

/// Writes ` <flags> <bytes>[ <cas>]\r\n` into `buf` from `at` on (room for
/// `VALUE_TAIL_BYTES_MAX`); returns the position after it.
#[inline(always)]
fn value_tail(buf: &mut [u8], at: usize, flags: u32, bytes: usize, cas: Option<u64>) -> usize {
    buf[at] = b' ';
    let mut at = digits_forward(buf, at + 1, u64::from(flags));
    buf[at] = b' ';
    at = digits_forward(buf, at + 1, bytes as u64);
    if let Some(cas) = cas {
        buf[at] = b' ';
        at = digits_forward(buf, at + 1, cas);
    }
    buf[at..at + 2].copy_from_slice(b"\r\n");
    at + 2
}

/// Writes `n` in decimal into `buf` from `at` on; returns the position after it. `buf` must
/// have room for its digits (20 at most).
#[inline(always)]
fn digits_forward(buf: &mut [u8], at: usize, n: u64) -> usize {
    // One digit (flags 0, most clients' value): no division at all.
    if n < 10 {
        buf[at] = b'0' + n as u8;
        return at + 1;
    }
    let mut len = 1;
    let mut rest = n / 10;
    while rest > 0 {
        len += 1;
        rest /= 10;
    }
    let end = at + len;
    let mut rest = n;
    for d in buf[at..end].iter_mut().rev() {
        *d = b'0' + (rest % 10) as u8;
        rest /= 10;
    }
    end
}

/// The reply to incr and decr: the new value.
pub fn write_number(out: &mut Vec<u8>, value: u64) {
    number(out, value);
    out.extend_from_slice(b"\r\n");
}

/// One `STAT <name> <value>` line of a stats reply (end it with `Status::End`).
pub fn write_stat(out: &mut Vec<u8>, name: &str, value: &str) {
    out.extend_from_slice(b"STAT ");
    out.extend_from_slice(name.as_bytes());
    out.push(b' ');
    line(out, value.as_bytes());
}

/// `VERSION <version>`.
pub fn write_version(out: &mut Vec<u8>, version: &str) {
    out.extend_from_slice(b"VERSION ");
    line(out, version.as_bytes());
}

/// Starts a meta reply without a value (`HD`, `EN`, ...); add return flags with
/// `write_meta_flag`/`write_meta_flag_number`, then finish with `write_meta_end`.
pub fn write_meta_status(out: &mut Vec<u8>, status: MetaStatus) {
    out.extend_from_slice(status.text().as_bytes());
}

/// Starts a `VA <bytes>` meta reply; return flags follow, then `write_meta_end(out,
/// Some(value))`.
pub fn write_meta_value_header(out: &mut Vec<u8>, value_len: usize) {
    out.extend_from_slice(b"VA ");
    number(out, value_len as u64);
}

/// A return flag: ` <letter><token>` (`kfoo`, `O123`, a lone `b` or `W`).
pub fn write_meta_flag(out: &mut Vec<u8>, letter: u8, token: &[u8]) {
    out.push(b' ');
    out.push(letter);
    out.extend_from_slice(token);
}

/// A numeric return flag: ` <letter><number>` (`t-1`, `s5`, `c42`, `f0`).
pub fn write_meta_flag_number(out: &mut Vec<u8>, letter: u8, value: i64) {
    out.push(b' ');
    out.push(letter);
    number(out, value);
}

/// Ends a meta reply line, and writes its value block after a `VA` header.
pub fn write_meta_end(out: &mut Vec<u8>, value: Option<&[u8]>) {
    out.extend_from_slice(b"\r\n");
    if let Some(value) = value {
        line(out, value);
    }
}

/// Encodes `request` as a client sends it; `parse_request` reads it back as the same request.
/// The keys, flag words and value must be valid (no spaces or line ends in a key, flag
/// tokens as parsed), as the parser returns them.
pub fn encode_request(request: &Request<'_>, out: &mut Vec<u8>) {
    let noreply_word = |out: &mut Vec<u8>, noreply: bool| {
        if noreply {
            out.extend_from_slice(b" noreply");
        }
    };
    let key_words = |out: &mut Vec<u8>, keys: &mut dyn Iterator<Item = &[u8]>| {
        for key in keys {
            out.push(b' ');
            out.extend_from_slice(key);
        }
    };
    match *request {
        Request::Get { keys, cas } => {
            out.extend_from_slice(if cas { b"gets" } else { b"get" });
            key_words(out, &mut keys.iter());
        }
        Request::GetAndTouch { exptime, keys, cas } => {
            out.extend_from_slice(if cas { b"gats " } else { b"gat " });
            number(out, i64::from(exptime));
            key_words(out, &mut keys.iter());
        }
        Request::Store {
            mode,
            key,
            flags,
            exptime,
            value,
            noreply,
        } => {
            out.extend_from_slice(mode.name().as_bytes());
            key_words(out, &mut std::iter::once(key));
            out.push(b' ');
            number(out, u64::from(flags));
            out.push(b' ');
            number(out, i64::from(exptime));
            out.push(b' ');
            number(out, value.len() as u64);
            if let StoreMode::Cas { unique } = mode {
                out.push(b' ');
                number(out, unique);
            }
            noreply_word(out, noreply);
            out.extend_from_slice(b"\r\n");
            out.extend_from_slice(value);
        }
        Request::Arithmetic {
            key,
            delta,
            increment,
            noreply,
        } => {
            out.extend_from_slice(if increment { b"incr " } else { b"decr " });
            out.extend_from_slice(key);
            out.push(b' ');
            number(out, delta);
            noreply_word(out, noreply);
        }
        Request::Delete { key, noreply } => {
            out.extend_from_slice(b"delete ");
            out.extend_from_slice(key);
            noreply_word(out, noreply);
        }
        Request::Touch {
            key,
            exptime,
            noreply,
        } => {
            out.extend_from_slice(b"touch ");
            out.extend_from_slice(key);
            out.push(b' ');
            number(out, i64::from(exptime));
            noreply_word(out, noreply);
        }
        Request::FlushAll { delay, noreply } => {
            out.extend_from_slice(b"flush_all");
            if let Some(delay) = delay {
                out.push(b' ');
                number(out, i64::from(delay));
            }
            noreply_word(out, noreply);
        }
        Request::Version => out.extend_from_slice(b"version"),
        Request::Verbosity { level, noreply } => {
            out.extend_from_slice(b"verbosity ");
            number(out, u64::from(level));
            noreply_word(out, noreply);
        }
        Request::Stats { args } => {
            out.extend_from_slice(b"stats");
            key_words(out, &mut args.iter());
        }
        Request::Quit => out.extend_from_slice(b"quit"),
        Request::MetaGet { key, flags }
        | Request::MetaDelete { key, flags }
        | Request::MetaArithmetic { key, flags } => {
            out.extend_from_slice(match request {
                Request::MetaGet { .. } => b"mg ",
                Request::MetaDelete { .. } => b"md ",
                _ => b"ma ",
            });
            out.extend_from_slice(key.raw());
            key_words(out, &mut crate::memcache::request::words(flags.raw()));
        }
        Request::MetaSet { key, flags, value } => {
            out.extend_from_slice(b"ms ");
            out.extend_from_slice(key.raw());
            out.push(b' ');
            number(out, value.len() as u64);
            key_words(out, &mut crate::memcache::request::words(flags.raw()));
            out.extend_from_slice(b"\r\n");
            out.extend_from_slice(value);
        }
        Request::MetaNoop => out.extend_from_slice(b"mn"),
        Request::MetaDebug { key } => {
            out.extend_from_slice(b"me ");
            out.extend_from_slice(key.raw());
            if key.is_base64() {
                out.extend_from_slice(b" b");
            }
        }
    }
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::write_value;

    /// The fixed-size number buffer and the short block (keys and values of 4 to 16 bytes)
    /// give memcached's line at every key and value length around the short ones, and for
    /// numbers of one, two and three digits and the extreme ones.
    #[test]
    fn value_lines_are_exact_at_every_short_length() {
        for klen in 1..=20usize {
            for vlen in 0..=20usize {
                let key: Vec<u8> = (0..klen).map(|i| b'a' + i as u8).collect();
                let value: Vec<u8> = (0..vlen).map(|i| b'A' + i as u8).collect();
                for (flags, cas) in [
                    (0, None),
                    (9, Some(10)),
                    (99, Some(100)),
                    (u32::MAX, Some(u64::MAX)),
                ] {
                    let mut out = b"x".to_vec();
                    write_value(&mut out, &key, flags, &value, cas);
                    let mut want = b"xVALUE ".to_vec();
                    want.extend_from_slice(&key);
                    want.extend_from_slice(format!(" {flags} {vlen}").as_bytes());
                    if let Some(c) = cas {
                        want.extend_from_slice(format!(" {c}").as_bytes());
                    }
                    want.extend_from_slice(b"\r\n");
                    want.extend_from_slice(&value);
                    want.extend_from_slice(b"\r\n");
                    assert_eq!(out, want, "key {klen} value {vlen}");
                }
            }
        }
    }
}
