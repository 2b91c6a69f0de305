//! The typed requests and the outcome of a parse. Keys and values borrow the caller's input
//! buffer; nothing here allocates.

use super::error::MemcacheError;
use super::meta::{MetaFlags, MetaKey};

/// memcached's longest key, bytes (`KEY_MAX_LENGTH`).
pub const KEY_BYTES_MAX: usize = 250;
/// Default `MemcacheLimits::value_bytes_max`: 1 MiB, memcached's default item size (`-I`).
/// memcached counts its item header (about 50 bytes) and the key in that size too, so it
/// refuses values a little shorter than this; directkv refuses only values over it.
pub const VALUE_BYTES_MAX_DEFAULT: usize = 1 << 20;
/// Default `MemcacheLimits::line_bytes_max`: memcached closes a connection that has sent this
/// many bytes without a `\n` (`try_read_command_ascii`), unless the line is a `get`/`gets`.
pub const LINE_BYTES_MAX_DEFAULT: usize = 2048;
/// Default `MemcacheLimits::get_line_bytes_max`: the longest `get`/`gets` line (memcached grows
/// its buffer without a limit for these).
pub const GET_LINE_BYTES_MAX_DEFAULT: usize = 1 << 20;
/// Default `MemcacheLimits::get_keys_max`: most keys in one `get`, `gets`, `gat` or `gats`.
pub const GET_KEYS_MAX_DEFAULT: usize = 1 << 16;
/// Most words in a meta command line, the command and the key included (memcached's
/// `MFLAG_MAX_OPT_LENGTH` of 20 tokens counts a terminating empty token).
pub const META_WORDS_MAX: usize = 19;
/// Longest `O` (opaque) token, its `O` included (memcached's `MFLAG_MAX_OPAQUE_LENGTH`).
pub const META_OPAQUE_BYTES_MAX: usize = 32;

/// Limits checked while parsing, before anything they bound is buffered or allocated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemcacheLimits {
    /// Longest value in a storage command, bytes; a longer one is refused with
    /// `SERVER_ERROR object too large for cache` and its data block swallowed unread.
    pub value_bytes_max: usize,
    /// Longest command line before its `\n`, bytes; a longer line closes the connection
    /// without a reply, as memcached does.
    pub line_bytes_max: usize,
    /// Longest `get`/`gets` line before its `\n`, bytes (closes the connection too).
    pub get_line_bytes_max: usize,
    /// Most keys in one retrieval command (`CLIENT_ERROR too many keys in one get`).
    pub get_keys_max: usize,
}

impl Default for MemcacheLimits {
    fn default() -> Self {
        Self {
            value_bytes_max: VALUE_BYTES_MAX_DEFAULT,
            line_bytes_max: LINE_BYTES_MAX_DEFAULT,
            get_line_bytes_max: GET_LINE_BYTES_MAX_DEFAULT,
            get_keys_max: GET_KEYS_MAX_DEFAULT,
        }
    }
}

/// The outcome of `parse_request`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Parse<'a> {
    /// A whole request, from the first `consumed` bytes of the input.
    Complete {
        request: Request<'a>,
        consumed: usize,
    },
    /// Every byte so far can still start a valid request: call again with more bytes.
    Incomplete,
    /// A whole request that memcached refuses: see `Refusal` for what to send and skip. The
    /// connection stays usable.
    Refused(Refusal),
    /// Hang up without a reply (a line over its length limit), as memcached does.
    Close,
}

/// A refused request: what to answer and how many bytes it covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub error: MemcacheError,
    /// Bytes of the input used: the command line, and the data block when it was read.
    pub consumed: usize,
    /// Bytes to discard after `consumed`, as they arrive, without buffering them: the data
    /// block (and its `\r\n`) of a storage command refused before its data was read.
    pub swallow: usize,
    /// `noreply` was given: send nothing (meta commands always send their errors).
    pub quiet: bool,
}

/// Which text storage command (`set` and friends); `Cas` carries the unique to compare.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreMode {
    Set,
    Add,
    Replace,
    Append,
    Prepend,
    Cas { unique: u64 },
}

impl StoreMode {
    /// The command word.
    pub fn name(self) -> &'static str {
        match self {
            Self::Set => "set",
            Self::Add => "add",
            Self::Replace => "replace",
            Self::Append => "append",
            Self::Prepend => "prepend",
            Self::Cas { .. } => "cas",
        }
    }
}

/// The keys of a retrieval command: the space-separated words of its line, validated (count
/// and lengths) by the parser and split again on each iteration, so holding them allocates
/// nothing. Two `Keys` are equal when they hold the same words, however they were spaced.
#[derive(Clone, Copy, Debug)]
pub struct Keys<'a> {
    raw: &'a [u8],
    count: usize,
}

impl<'a> Keys<'a> {
    pub(crate) fn new(raw: &'a [u8], count: usize) -> Self {
        Self { raw, count }
    }

    /// The keys of `raw`, space separated, for a client building a `get` to encode.
    pub fn from_words(raw: &'a [u8]) -> Self {
        Self {
            raw,
            count: words(raw).count(),
        }
    }

    /// Number of keys (repeats counted).
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The keys in the order sent.
    pub fn iter(&self) -> impl Iterator<Item = &'a [u8]> + 'a {
        words(self.raw)
    }
}

impl PartialEq for Keys<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.count == other.count && self.iter().eq(other.iter())
    }
}

impl Eq for Keys<'_> {}

/// The words of a line: runs of bytes between spaces (memcached splits on ' ' only).
pub(crate) fn words(line: &[u8]) -> Words<'_> {
    Words { line, pos: 0 }
}

/// The iterator of [`words`]: each word found by [`word_end`] (a multi-get's keys are split
/// when planned and again when answered).
pub(crate) struct Words<'a> {
    line: &'a [u8],
    pos: usize,
}

impl<'a> Iterator for Words<'a> {
    type Item = &'a [u8];

    #[inline]
    fn next(&mut self) -> Option<&'a [u8]> {
        let line = self.line;
        let mut pos = self.pos;
        while pos < line.len() && line[pos] == b' ' {
            pos += 1;
        }
        if pos == line.len() {
            self.pos = pos;
            return None;
        }
        let end = word_end(line, pos);
        self.pos = end;
        Some(&line[pos..end])
    }
}

/// The position of the first space in `line` at or after `pos` (`line.len()` if none): eight
/// bytes at a time while eight remain, a multi-get's keys being most of what a server parses
/// (callgrind: a byte-by-byte scan cost about 5 instructions per byte).
#[inline(always)]
pub(crate) fn word_end(line: &[u8], pos: usize) -> usize {
    find_byte(line, pos, b' ')
}

/// The position of the first `byte` in `line` at or after `pos` (`line.len()` if none), eight
/// bytes at a time while eight remain.
#[inline(always)]
pub(crate) fn find_byte(line: &[u8], mut pos: usize, byte: u8) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let pattern = ONES * u64::from(byte);
    while pos + 8 <= line.len() {
        let w = u64::from_le_bytes(line[pos..pos + 8].try_into().expect("8 bytes"));
        // The bytes equal to `byte` become zero; the lowest flagged byte is the first zero
        // one (a borrow can only flag bytes above a zero byte, never below it).
        let x = w ^ pattern;
        let zero = x.wrapping_sub(ONES) & !x & HIGHS;
        if zero != 0 {
            return pos + (zero.trailing_zeros() / 8) as usize;
        }
        pos += 8;
    }
    while pos < line.len() && line[pos] != byte {
        pos += 1;
    }
    pos
}

/// A parsed request. Semantics (what a negative exptime means, whether a key exists) are the
/// server's: the codec only reads the numbers as memcached reads them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Request<'a> {
    /// `get`/`gets` (`cas`: with the CAS unique in each VALUE line).
    Get { keys: Keys<'a>, cas: bool },
    /// `gat`/`gats <exptime> <key>*`: get and touch.
    GetAndTouch {
        exptime: i32,
        keys: Keys<'a>,
        cas: bool,
    },
    /// `set|add|replace|append|prepend <key> <flags> <exptime> <bytes> [noreply]`,
    /// `cas <key> <flags> <exptime> <bytes> <unique> [noreply]`, and the data block.
    Store {
        mode: StoreMode,
        key: &'a [u8],
        flags: u32,
        exptime: i32,
        value: &'a [u8],
        noreply: bool,
    },
    /// `incr|decr <key> <delta> [noreply]`.
    Arithmetic {
        key: &'a [u8],
        delta: u64,
        increment: bool,
        noreply: bool,
    },
    /// `delete <key> [0] [noreply]`.
    Delete { key: &'a [u8], noreply: bool },
    /// `touch <key> <exptime> [noreply]`.
    Touch {
        key: &'a [u8],
        exptime: i32,
        noreply: bool,
    },
    /// `flush_all [delay] [noreply]`.
    FlushAll { delay: Option<i32>, noreply: bool },
    /// `version`.
    Version,
    /// `verbosity <level> [noreply]`.
    Verbosity { level: u32, noreply: bool },
    /// `stats [group [args]]`: the words after `stats` (the server answers or says ERROR).
    Stats { args: Keys<'a> },
    /// `quit`: close the connection.
    Quit,
    /// `mg <key> <flags>*`.
    MetaGet {
        key: MetaKey<'a>,
        flags: MetaFlags<'a>,
    },
    /// `ms <key> <datalen> <flags>*` and the data block.
    MetaSet {
        key: MetaKey<'a>,
        flags: MetaFlags<'a>,
        value: &'a [u8],
    },
    /// `md <key> <flags>*`.
    MetaDelete {
        key: MetaKey<'a>,
        flags: MetaFlags<'a>,
    },
    /// `ma <key> <flags>*`.
    MetaArithmetic {
        key: MetaKey<'a>,
        flags: MetaFlags<'a>,
    },
    /// `mn`: the meta no-op (reply `MN`).
    MetaNoop,
    /// `me <key> [b]`: the meta debug line.
    MetaDebug { key: MetaKey<'a> },
}
