//! Redis-compatible counters on decimal strings: Redis keeps `INCR` counters as the decimal text
//! of a 64-bit integer, so clients read them back with `GET`. Strict parsing as Redis does: an
//! optional minus sign, no plus sign, no spaces, no leading zeros, within i64.

use crate::error::OpError;

/// Longest decimal string of an i64 ("-9223372036854775808").
const I64_DECIMAL_LEN_MAX: usize = 20;
/// Longest string accepted as a float: Redis' string2ld refuses 5120 bytes
/// (MAX_LONG_DOUBLE_CHARS) and more.
const FLOAT_TEXT_LEN_MAX: usize = 5119;

/// Parses a decimal i64 the way Redis' string2ll does.
pub fn parse_i64(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > I64_DECIMAL_LEN_MAX {
        return None;
    }
    let (neg, digits) = match s[0] {
        b'-' => (true, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() || (digits[0] == b'0' && (digits.len() > 1 || neg)) {
        return None;
    }
    let mut v: i64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        let d = (d - b'0') as i64;
        v = v.checked_mul(10)?;
        v = if neg {
            v.checked_sub(d)?
        } else {
            v.checked_add(d)?
        };
    }
    Some(v)
}

/// Parses a float as Redis' INCRBYFLOAT accepts it (strtold's syntax, no spaces): NaN is
/// refused, and so is a numeral too large for the type, but "inf", "-infinity" and the like are
/// read as infinities, which then make the sum infinite (`OpError::NanOrInfinity`), as in
/// Redis. Differences left: Redis reads into a long double, so 1e400 is a number there, and
/// strtold also reads hexadecimal floats ("0x1p3").
pub fn parse_f64(s: &[u8]) -> Option<f64> {
    if s.is_empty()
        || s.len() > FLOAT_TEXT_LEN_MAX
        || s[0].is_ascii_whitespace()
        || s[s.len() - 1].is_ascii_whitespace()
    {
        return None;
    }
    let v: f64 = std::str::from_utf8(s).ok()?.parse().ok()?;
    (v.is_finite() || (v.is_infinite() && !s.iter().any(u8::is_ascii_digit))).then_some(v)
}

/// `out` = decimal text of `cur + delta` (`delta` is an i64 LE in 8 bytes). A missing key
/// (`None`) counts as 0; a stored empty string is not an integer, as in Redis.
pub fn incr_by(cur: Option<&[u8]>, delta: &[u8], out: &mut Vec<u8>) -> Result<(), OpError> {
    let d = i64::from_le_bytes(delta.try_into().map_err(|_| OpError::WrongWidth {
        len: delta.len(),
        width: 8,
    })?);
    let v = match cur {
        None => 0,
        Some(cur) => parse_i64(cur).ok_or(OpError::NotAnInteger)?,
    };
    let n = v.checked_add(d).ok_or(OpError::Overflow)?;
    use std::io::Write;
    write!(out, "{n}").expect("writing to a Vec cannot fail");
    Ok(())
}

/// `out` = text of `cur + delta` (`delta` is an f64 LE in 8 bytes), formatted as the shortest
/// text that reads back to the same double (Redis prints up to 17 significant digits). A
/// missing key counts as 0; a stored empty string is not a float. A sum that is not finite
/// (an infinite operand) is `NanOrInfinity` and stores nothing.
pub fn incr_by_float(cur: Option<&[u8]>, delta: &[u8], out: &mut Vec<u8>) -> Result<(), OpError> {
    let d = f64::from_le_bytes(delta.try_into().map_err(|_| OpError::WrongWidth {
        len: delta.len(),
        width: 8,
    })?);
    let v = match cur {
        None => 0.0,
        Some(cur) => parse_f64(cur).ok_or(OpError::NotAFloat)?,
    };
    let n = v + d;
    if !n.is_finite() {
        return Err(OpError::NanOrInfinity);
    }
    use std::io::Write;
    write!(out, "{n}").expect("writing to a Vec cannot fail");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_like_redis() {
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"-12"), Some(-12));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        for bad in [
            &b""[..],
            b"-",
            b"+1",
            b" 1",
            b"1 ",
            b"01",
            b"-0",
            b"1a",
            b"9223372036854775808",
        ] {
            assert_eq!(parse_i64(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
        assert_eq!(parse_f64(b"1.5"), Some(1.5));
        assert_eq!(parse_f64(b" 1.5"), None);
        // Infinity literals are floats to Redis (strtold), NaN and overflowing numerals not.
        assert_eq!(parse_f64(b"inf"), Some(f64::INFINITY));
        assert_eq!(parse_f64(b"-Infinity"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_f64(b"+INF"), Some(f64::INFINITY));
        assert_eq!(parse_f64(b"nan"), None);
        assert_eq!(parse_f64(b"1e400"), None);
        assert_eq!(parse_f64(b"-1e400"), None);
        // 5119 bytes is Redis' longest float text.
        let mut long = vec![b'0'; 5118];
        long.push(b'1');
        assert_eq!(parse_f64(&long), Some(1.0));
        long.insert(0, b'0');
        assert_eq!(parse_f64(&long), None);
    }

    #[test]
    fn increments() {
        let mut out = Vec::new();
        incr_by(None, &5i64.to_le_bytes(), &mut out).unwrap();
        assert_eq!(out, b"5");
        out.clear();
        incr_by(Some(b"-3"), &1i64.to_le_bytes(), &mut out).unwrap();
        assert_eq!(out, b"-2");
        out.clear();
        assert_eq!(
            incr_by(Some(b"9223372036854775807"), &1i64.to_le_bytes(), &mut out),
            Err(OpError::Overflow)
        );
        assert_eq!(
            incr_by(Some(b"abc"), &1i64.to_le_bytes(), &mut out),
            Err(OpError::NotAnInteger)
        );
        // A stored empty string is not a number (Redis: SET k "" then INCR k is an error);
        // only a missing key starts from zero.
        assert_eq!(
            incr_by(Some(b""), &1i64.to_le_bytes(), &mut out),
            Err(OpError::NotAnInteger)
        );
        assert_eq!(
            incr_by_float(Some(b""), &1f64.to_le_bytes(), &mut out),
            Err(OpError::NotAFloat)
        );
        // An infinite operand, stored or given, is a float but makes the sum infinite.
        assert_eq!(
            incr_by_float(Some(b"1"), &f64::INFINITY.to_le_bytes(), &mut out),
            Err(OpError::NanOrInfinity)
        );
        assert_eq!(
            incr_by_float(Some(b"-inf"), &1f64.to_le_bytes(), &mut out),
            Err(OpError::NanOrInfinity)
        );
        assert_eq!(
            incr_by_float(Some(b"inf"), &f64::NEG_INFINITY.to_le_bytes(), &mut out),
            Err(OpError::NanOrInfinity)
        );
        assert_eq!(
            incr_by_float(Some(b"1e308"), &1e308f64.to_le_bytes(), &mut out),
            Err(OpError::NanOrInfinity)
        );
        assert_eq!(
            incr_by_float(Some(b"nan"), &1f64.to_le_bytes(), &mut out),
            Err(OpError::NotAFloat)
        );
        out.clear();
        incr_by_float(None, &0.5f64.to_le_bytes(), &mut out).unwrap();
        assert_eq!(out, b"0.5");
        out.clear();
        incr_by_float(Some(b"10.5"), &0.1f64.to_le_bytes(), &mut out).unwrap();
        assert_eq!(out, b"10.6");
    }
}
