//! Meta commands (`mg`, `ms`, `md`, `ma`, `mn`, `me`): the key, and the flags read the way
//! memcached 1.6's `_meta_flag_preparse` reads them.
//!
//! A flag is one word: its first byte names it, the rest is its token (`T30`, `O123`, `v`).
//! Every meta command accepts the same flag letters (memcached's preparse is shared); a flag
//! a command has no use for is accepted and left to the server to ignore, as memcached does.
//! The first unknown or repeated letter stops the parse (`invalid flag`, `duplicate flag`);
//! a bad token is remembered and the scan goes on, so the last one names the error. `md`
//! and `ma` answer every flag error with `invalid or duplicate flag`.
//!
//! Flags: b (key in base64) c f h k l O (opaque) P L q s t u v I (invalidate) and, with a
//! token, N (vivify TTL) T (TTL) R (recache TTL) F (client flags) C (compare CAS) E (explicit
//! CAS) J (initial) D (delta) M (mode). `E` is read as memcached 1.6.21 and later read it;
//! 1.6.18 answers `invalid flag` to it.

use super::base64;
use super::error::MemcacheError;
use super::number::{parse_i32_truncating, parse_u32_truncating, parse_u64};
use super::request::{words, KEY_BYTES_MAX, META_OPAQUE_BYTES_MAX};

/// A meta command's key as sent, and whether the `b` flag says it is base64.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MetaKey<'a> {
    raw: &'a [u8],
    base64: bool,
}

impl<'a> MetaKey<'a> {
    pub(crate) fn new(raw: &'a [u8], base64: bool) -> Self {
        Self { raw, base64 }
    }

    /// The key word as sent (base64 text when `is_base64`).
    pub fn raw(&self) -> &'a [u8] {
        self.raw
    }

    pub fn is_base64(&self) -> bool {
        self.base64
    }

    /// The key itself: `raw`, or its decoding into `buf` (the parser checked it decodes).
    pub fn decode<'s>(&'s self, buf: &'s mut [u8; KEY_BYTES_MAX]) -> &'s [u8] {
        if !self.base64 {
            return self.raw;
        }
        let len = base64::decode(self.raw, buf).unwrap_or(0);
        &buf[..len]
    }
}

/// The flags of a meta command: the words as sent (for the return flags, which a reply lists
/// in the order asked) and the values of those that carry a number.
#[derive(Clone, Copy, Debug, Default)]
pub struct MetaFlags<'a> {
    raw: &'a [u8],
    seen: u128,
    /// T: the TTL to set, as memcached reads an exptime.
    pub ttl: Option<i32>,
    /// N: vivify on miss, with this TTL.
    pub vivify_ttl: Option<i32>,
    /// R: win the recache race when the TTL left is below this.
    pub recache_ttl: Option<i32>,
    /// F: client flags (ms).
    pub client_flags: Option<u32>,
    /// C: compare CAS.
    pub compare_cas: Option<u64>,
    /// E: the CAS unique to give the item.
    pub explicit_cas: Option<u64>,
    /// J: initial value (ma with N).
    pub initial: Option<u64>,
    /// D: delta (ma).
    pub delta: Option<u64>,
    /// M: the mode letter (ms E A P R S, ma I + D -).
    pub mode: Option<u8>,
    /// O: the opaque token, without its `O`, echoed in the reply.
    pub opaque: Option<&'a [u8]>,
}

impl<'a> MetaFlags<'a> {
    /// Whether the flag `letter` was given.
    pub fn has(&self, letter: u8) -> bool {
        letter < 128 && self.seen & (1u128 << letter) != 0
    }

    /// `q`: quiet mode.
    pub fn quiet(&self) -> bool {
        self.has(b'q')
    }

    /// The flags in the order sent: the letter and its token (possibly empty).
    pub fn iter(&self) -> impl Iterator<Item = (u8, &'a [u8])> + 'a {
        words(self.raw).map(|word| (word[0], &word[1..]))
    }

    /// The words as sent, space separated.
    pub fn raw(&self) -> &'a [u8] {
        self.raw
    }
}

impl PartialEq for MetaFlags<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.iter().eq(other.iter())
    }
}

impl Eq for MetaFlags<'_> {}

/// Which meta command the flags belong to: it picks the error texts and the modes allowed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MetaKind {
    Get,
    Set,
    Delete,
    Arithmetic,
}

/// Reads the flag words `raw` of a command whose key word is `key` (already checked against
/// `KEY_BYTES_MAX`). `Err` is the error memcached answers with.
pub(crate) fn parse_flags<'a>(
    kind: MetaKind,
    key: &'a [u8],
    raw: &'a [u8],
) -> Result<(MetaKey<'a>, MetaFlags<'a>), MemcacheError> {
    let preparsed = preparse(key, raw);
    let (key, flags) = match (kind, preparsed) {
        (_, Ok(parsed)) => parsed,
        (MetaKind::Delete | MetaKind::Arithmetic, Err(_)) => {
            return Err(MemcacheError::MetaInvalidOrDuplicateFlag)
        }
        (_, Err(error)) => return Err(error),
    };
    match (kind, flags.mode) {
        (MetaKind::Set, Some(mode)) if !b"EAPRS".contains(&mode) => {
            return Err(MemcacheError::MetaSetMode)
        }
        (MetaKind::Arithmetic, Some(mode)) if !b"I+D-".contains(&mode) => {
            return Err(MemcacheError::MetaArithmeticMode)
        }
        _ => {}
    }
    // memcached checks the opaque's length in mg, ms and md, not in ma.
    if kind != MetaKind::Arithmetic
        && flags
            .opaque
            .is_some_and(|opaque| opaque.len() + 1 > META_OPAQUE_BYTES_MAX)
    {
        return Err(MemcacheError::MetaOpaqueTooLong);
    }
    Ok((key, flags))
}

/// memcached's `_meta_flag_preparse`, shared by every meta command.
fn preparse<'a>(
    key: &'a [u8],
    raw: &'a [u8],
) -> Result<(MetaKey<'a>, MetaFlags<'a>), MemcacheError> {
    let mut flags = MetaFlags {
        raw,
        ..MetaFlags::default()
    };
    let mut key = MetaKey::new(key, false);
    // A bad token does not stop the scan; the last one sets the error ("bad command line
    // format" when only F was bad, as memcached's default text).
    let mut failed = false;
    let mut error = None;
    for word in words(raw) {
        let letter = word[0];
        let token = &word[1..];
        if letter >= 127 || flags.has(letter) {
            return Err(MemcacheError::MetaDuplicateFlag);
        }
        flags.seen |= 1u128 << letter;
        let mut bad = |e: Option<MemcacheError>| {
            failed = true;
            if e.is_some() {
                error = e;
            }
        };
        match letter {
            b'b' => {
                let mut buf = [0u8; KEY_BYTES_MAX];
                key = MetaKey::new(key.raw, true);
                if base64::decode(key.raw, &mut buf).is_none() {
                    bad(Some(MemcacheError::MetaKeyDecoding));
                }
            }
            b'N' | b'T' | b'R' => match parse_i32_truncating(token) {
                Some(ttl) if letter == b'N' => flags.vivify_ttl = Some(ttl),
                Some(ttl) if letter == b'T' => flags.ttl = Some(ttl),
                Some(ttl) => flags.recache_ttl = Some(ttl),
                None => bad(Some(MemcacheError::MetaBadToken)),
            },
            b'F' => match parse_u32_truncating(token) {
                Some(value) => flags.client_flags = Some(value),
                None => bad(None),
            },
            b'C' | b'E' => match parse_u64(token) {
                Some(cas) if letter == b'C' => flags.compare_cas = Some(cas),
                Some(cas) => flags.explicit_cas = Some(cas),
                None => bad(Some(MemcacheError::MetaBadToken)),
            },
            b'J' => match parse_u64(token) {
                Some(value) => flags.initial = Some(value),
                None => bad(Some(MemcacheError::MetaBadInitial)),
            },
            b'D' => match parse_u64(token) {
                Some(value) => flags.delta = Some(value),
                None => bad(Some(MemcacheError::MetaBadDelta)),
            },
            b'M' => {
                if token.len() == 1 {
                    flags.mode = Some(token[0]);
                } else {
                    bad(Some(MemcacheError::MetaModeLength));
                }
            }
            b'O' => flags.opaque = Some(token),
            b'P' | b'L' | b'l' | b'k' | b's' | b't' | b'c' | b'f' | b'v' | b'h' | b'u' | b'q'
            | b'I' => {}
            _ => return Err(MemcacheError::MetaInvalidFlag),
        }
    }
    if failed {
        return Err(error.unwrap_or(MemcacheError::BadCommandLine));
    }
    Ok((key, flags))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(kind: MetaKind, raw: &[u8]) -> Result<MetaFlags<'_>, MemcacheError> {
        parse_flags(kind, b"mk", raw).map(|(_, flags)| flags)
    }

    #[test]
    fn numbers_and_letters_are_read() {
        let f = flags(MetaKind::Set, b"T30 F7 C9 E11 MA O12 q  v").unwrap();
        assert_eq!(f.ttl, Some(30));
        assert_eq!(f.client_flags, Some(7));
        assert_eq!(f.compare_cas, Some(9));
        assert_eq!(f.explicit_cas, Some(11));
        assert_eq!(f.mode, Some(b'A'));
        assert_eq!(f.opaque, Some(&b"12"[..]));
        assert!(f.quiet() && f.has(b'v') && !f.has(b'k'));
        let letters: Vec<u8> = f.iter().map(|(letter, _)| letter).collect();
        assert_eq!(letters, b"TFCEMOqv");
    }

    #[test]
    fn errors_are_memcacheds() {
        use MemcacheError::*;
        assert_eq!(flags(MetaKind::Get, b"v Z").unwrap_err(), MetaInvalidFlag);
        assert_eq!(flags(MetaKind::Get, b"k k").unwrap_err(), MetaDuplicateFlag);
        assert_eq!(flags(MetaKind::Get, b"Tx").unwrap_err(), MetaBadToken);
        assert_eq!(flags(MetaKind::Set, b"Fx").unwrap_err(), BadCommandLine);
        assert_eq!(flags(MetaKind::Set, b"Tx Fx").unwrap_err(), MetaBadToken);
        assert_eq!(flags(MetaKind::Set, b"MX").unwrap_err(), MetaSetMode);
        assert_eq!(flags(MetaKind::Set, b"MSS").unwrap_err(), MetaModeLength);
        assert_eq!(
            flags(MetaKind::Arithmetic, b"Mi").unwrap_err(),
            MetaArithmeticMode
        );
        assert_eq!(
            flags(MetaKind::Arithmetic, b"Dx").unwrap_err(),
            MetaInvalidOrDuplicateFlag
        );
        assert_eq!(
            flags(MetaKind::Delete, b"x").unwrap_err(),
            MetaInvalidOrDuplicateFlag
        );
        assert_eq!(flags(MetaKind::Get, b"Jx").unwrap_err(), MetaBadInitial);
        assert_eq!(flags(MetaKind::Get, b"Dx").unwrap_err(), MetaBadDelta);
        let long = [b'O'; 33];
        assert_eq!(flags(MetaKind::Get, &long).unwrap_err(), MetaOpaqueTooLong);
        assert!(flags(MetaKind::Get, &long[..32]).is_ok());
        assert_eq!(
            parse_flags(MetaKind::Get, b"!!", b"b").unwrap_err(),
            MetaKeyDecoding
        );
    }

    #[test]
    fn base64_keys_decode_into_a_buffer() {
        let (key, _) = parse_flags(MetaKind::Get, b"bWs=", b"b v").unwrap();
        let mut buf = [0u8; KEY_BYTES_MAX];
        assert!(key.is_base64());
        assert_eq!(key.decode(&mut buf), b"mk");
    }
}
