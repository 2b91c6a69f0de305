//! The error lines memcached 1.6 sends, one enum value each, with their exact text.
//!
//! Every text here was checked against memcached 1.6.18 (crates/proto/tests/memcache_peer.rs
//! compares them with a live memcached). `TooManyKeys` is directkv's own: memcached has no
//! limit on the keys of one `get`.

/// A request memcached refuses, and the line it answers with (`text`, without `\r\n`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MemcacheError {
    /// `ERROR`: an unknown command, or a known one with the wrong number of words.
    UnknownCommand,
    /// `CLIENT_ERROR bad command line format`: a key over the limit, a bad number.
    BadCommandLine,
    /// `CLIENT_ERROR bad data chunk`: a data block not followed by `\r\n`.
    BadDataChunk,
    /// `SERVER_ERROR object too large for cache`: a value over the item size; its data block
    /// is swallowed.
    TooLarge,
    /// `CLIENT_ERROR invalid numeric delta argument` (incr, decr).
    BadDelta,
    /// `CLIENT_ERROR invalid exptime argument` (touch, gat, gats, flush_all).
    BadExptime,
    /// `CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]`.
    DeleteUsage,
    /// `CLIENT_ERROR invalid flag` (meta: an unknown flag letter).
    MetaInvalidFlag,
    /// `CLIENT_ERROR duplicate flag` (mg, ms: a flag given twice).
    MetaDuplicateFlag,
    /// `CLIENT_ERROR invalid or duplicate flag` (md, ma: any flag error).
    MetaInvalidOrDuplicateFlag,
    /// `CLIENT_ERROR bad token in command line format` (a bad number after N, T, R, C or E).
    MetaBadToken,
    /// `CLIENT_ERROR incorrect length for M token`.
    MetaModeLength,
    /// `CLIENT_ERROR invalid numeric initial value` (J).
    MetaBadInitial,
    /// `CLIENT_ERROR invalid numeric delta value` (D).
    MetaBadDelta,
    /// `CLIENT_ERROR error decoding key` (b with a key that is not base64).
    MetaKeyDecoding,
    /// `CLIENT_ERROR opaque token too long` (O with more than 31 bytes).
    MetaOpaqueTooLong,
    /// `CLIENT_ERROR options flags are too long` (mg with too many flags).
    MetaGetTooManyFlags,
    /// `CLIENT_ERROR options flags too long` (ms, md, ma with too many flags).
    MetaTooManyFlags,
    /// `CLIENT_ERROR invalid mode for ms M token`.
    MetaSetMode,
    /// `CLIENT_ERROR invalid mode for ma M token`.
    MetaArithmeticMode,
    /// `CLIENT_ERROR too many keys in one get` (directkv's own, see `GET_KEYS_MAX_DEFAULT`).
    TooManyKeys,
}

impl MemcacheError {
    /// The reply line, without its `\r\n`.
    pub fn text(self) -> &'static str {
        match self {
            Self::UnknownCommand => "ERROR",
            Self::BadCommandLine => "CLIENT_ERROR bad command line format",
            Self::BadDataChunk => "CLIENT_ERROR bad data chunk",
            Self::TooLarge => "SERVER_ERROR object too large for cache",
            Self::BadDelta => "CLIENT_ERROR invalid numeric delta argument",
            Self::BadExptime => "CLIENT_ERROR invalid exptime argument",
            Self::DeleteUsage => {
                "CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]"
            }
            Self::MetaInvalidFlag => "CLIENT_ERROR invalid flag",
            Self::MetaDuplicateFlag => "CLIENT_ERROR duplicate flag",
            Self::MetaInvalidOrDuplicateFlag => "CLIENT_ERROR invalid or duplicate flag",
            Self::MetaBadToken => "CLIENT_ERROR bad token in command line format",
            Self::MetaModeLength => "CLIENT_ERROR incorrect length for M token",
            Self::MetaBadInitial => "CLIENT_ERROR invalid numeric initial value",
            Self::MetaBadDelta => "CLIENT_ERROR invalid numeric delta value",
            Self::MetaKeyDecoding => "CLIENT_ERROR error decoding key",
            Self::MetaOpaqueTooLong => "CLIENT_ERROR opaque token too long",
            Self::MetaGetTooManyFlags => "CLIENT_ERROR options flags are too long",
            Self::MetaTooManyFlags => "CLIENT_ERROR options flags too long",
            Self::MetaSetMode => "CLIENT_ERROR invalid mode for ms M token",
            Self::MetaArithmeticMode => "CLIENT_ERROR invalid mode for ma M token",
            Self::TooManyKeys => "CLIENT_ERROR too many keys in one get",
        }
    }

    /// Every value, for tests.
    pub const ALL: [MemcacheError; 21] = [
        Self::UnknownCommand,
        Self::BadCommandLine,
        Self::BadDataChunk,
        Self::TooLarge,
        Self::BadDelta,
        Self::BadExptime,
        Self::DeleteUsage,
        Self::MetaInvalidFlag,
        Self::MetaDuplicateFlag,
        Self::MetaInvalidOrDuplicateFlag,
        Self::MetaBadToken,
        Self::MetaModeLength,
        Self::MetaBadInitial,
        Self::MetaBadDelta,
        Self::MetaKeyDecoding,
        Self::MetaOpaqueTooLong,
        Self::MetaGetTooManyFlags,
        Self::MetaTooManyFlags,
        Self::MetaSetMode,
        Self::MetaArithmeticMode,
        Self::TooManyKeys,
    ];
}

impl std::fmt::Display for MemcacheError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.text())
    }
}

impl std::error::Error for MemcacheError {}
