//! Numbers as memcached reads them: C's `strtol`/`strtoul`/`strtoull` followed by memcached's
//! `safe_strto*` checks, byte for byte, because clients see the differences.
//!
//! - Leading white space is skipped and a sign is allowed (`+1` is 1).
//! - The digits may be followed by white space and anything after it (`1\tx` is 1), since C
//!   stops at the first non-digit and memcached only checks that it is white space.
//! - Overflow of the C type (64 bits) is an error; a negative value is an error for the
//!   unsigned forms except that strtoul's wrap of a small negative number is caught only when
//!   it lands in the upper half (it always does for a 64-bit wrap).
//! - The 32-bit forms truncate the 64-bit result (`4294967297` is 1), as memcached's casts do.

/// C's `isspace` in the "C" locale.
pub(crate) fn is_c_space(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// `strtoull`-like scan: the sign, the magnitude (None on overflow) and the end of the
/// digits; `None` when there are no digits.
fn scan(token: &[u8]) -> Option<(bool, Option<u64>, usize)> {
    let mut pos = 0;
    while pos < token.len() && is_c_space(token[pos]) {
        pos += 1;
    }
    let mut negative = false;
    if pos < token.len() && (token[pos] == b'+' || token[pos] == b'-') {
        negative = token[pos] == b'-';
        pos += 1;
    }
    let digits_start = pos;
    let mut magnitude = Some(0u64);
    while pos < token.len() && token[pos].is_ascii_digit() {
        let digit = u64::from(token[pos] - b'0');
        magnitude = magnitude.and_then(|m| m.checked_mul(10)?.checked_add(digit));
        pos += 1;
    }
    if pos == digits_start {
        return None;
    }
    // memcached accepts the number only when C stopped at white space or at the end (NUL).
    if pos < token.len() && !is_c_space(token[pos]) && token[pos] != 0 {
        return None;
    }
    Some((negative, magnitude, pos))
}

/// `safe_strtoull`: a 64-bit unsigned number, no minus sign on a value past `i64::MAX`.
pub(crate) fn parse_u64(token: &[u8]) -> Option<u64> {
    let (negative, magnitude, _) = scan(token)?;
    let magnitude = magnitude?;
    let value = if negative {
        magnitude.wrapping_neg()
    } else {
        magnitude
    };
    // strtoull negates a "-N" into 2^64 - N; memcached refuses it only when that looks
    // negative as a signed number (always, unless N is 0).
    if negative && (value as i64) < 0 {
        return None;
    }
    Some(value)
}

/// `safe_strtoul` into 32 bits (client flags): `parse_u64` truncated, as memcached stores it.
pub(crate) fn parse_u32_truncating(token: &[u8]) -> Option<u32> {
    parse_u64(token).map(|value| value as u32)
}

/// `safe_strtol` into 32 bits (exptime, data length): a 64-bit `strtol` truncated.
pub(crate) fn parse_i32_truncating(token: &[u8]) -> Option<i32> {
    let (negative, magnitude, _) = scan(token)?;
    let magnitude = magnitude?;
    let value: i64 = if negative {
        // strtol's range is [-2^63, 2^63 - 1].
        if magnitude > 1 << 63 {
            return None;
        }
        (magnitude as i64).wrapping_neg()
    } else {
        i64::try_from(magnitude).ok()?
    };
    Some(value as i32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsigned_numbers_follow_strtoull_and_memcached() {
        assert_eq!(parse_u64(b"0"), Some(0));
        assert_eq!(parse_u64(b"+12"), Some(12));
        assert_eq!(parse_u64(b"  12"), Some(12));
        assert_eq!(parse_u64(b"12\tx"), Some(12));
        assert_eq!(parse_u64(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_u64(b"18446744073709551616"), None);
        assert_eq!(parse_u64(b"-1"), None);
        assert_eq!(parse_u64(b"-0"), Some(0));
        assert_eq!(parse_u64(b"1x"), None);
        assert_eq!(parse_u64(b""), None);
        assert_eq!(parse_u64(b"+"), None);
        assert_eq!(parse_u64(b"1\0x"), Some(1));
    }

    #[test]
    fn narrow_numbers_truncate_like_memcached() {
        assert_eq!(parse_u32_truncating(b"4294967295"), Some(u32::MAX));
        assert_eq!(parse_u32_truncating(b"4294967296"), Some(0));
        assert_eq!(parse_u32_truncating(b"4294967297"), Some(1));
        assert_eq!(parse_i32_truncating(b"-1"), Some(-1));
        assert_eq!(parse_i32_truncating(b"4294967296"), Some(0));
        assert_eq!(parse_i32_truncating(b"2147483648"), Some(i32::MIN));
        assert_eq!(parse_i32_truncating(b"9223372036854775807"), Some(-1));
        assert_eq!(parse_i32_truncating(b"9223372036854775808"), None);
        assert_eq!(parse_i32_truncating(b"-9223372036854775808"), Some(0));
        assert_eq!(parse_i32_truncating(b"-9223372036854775809"), None);
        assert_eq!(parse_i32_truncating(b"x"), None);
    }
}
