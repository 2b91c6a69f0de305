//! Inline commands: one line, split into words with the quoting rules of Redis' `sdssplitargs`,
//! which is what `telnet` users and scripts piping text rely on.
//!
//! ```text
//!   line   := bytes up to '\n'; a '\r' just before it is dropped
//!   words  := separated by blanks (' ' '\t' '\r' '\n' end a word; '\v' '\f' are also skipped
//!             between words, as C's isspace does)
//!   "..."  := \xHH (two hex digits) \n \r \t \b \a, and \<any> is <any>
//!   '...'  := \' is ', nothing else is an escape
//!   a quote may start mid-word (a"b c" is `ab c`); a closing quote must be followed by a
//!   blank or the end of the line, otherwise "unbalanced quotes in request"
//! ```
//!
//! Unlike Redis, which splits a C string, a NUL byte is an ordinary byte here rather than the
//! end of the line. Words are unescaped into the caller's scratch buffer, which never grows
//! beyond the line (unescaping only shrinks).

use std::ops::Range;

use super::command::{Parse, RespLimits};
use super::error::ProtocolError;

/// Parses the inline command at the start of `input` (which does not start with `*`).
///
/// The verdict never changes as bytes are appended: a line that breaks a quoting rule or has
/// too many words is refused as soon as the offending byte arrives, even before its `\n`, and a
/// line too long is refused for the first such rule broken within its first `inline_len_max`
/// bytes, or else for its length.
pub(super) fn parse_inline(
    input: &[u8],
    limits: &RespLimits,
    ranges: &mut Vec<Range<usize>>,
    scratch: &mut Vec<u8>,
) -> Parse {
    let len_max = limits.inline_len_max;
    // A line of `inline_len_max` bytes plus `\r\n` is the longest acceptable; look no further.
    let window = &input[..input.len().min(len_max.saturating_add(2))];
    match window.iter().position(|&byte| byte == b'\n') {
        Some(newline) => {
            let line_end = newline - usize::from(newline > 0 && input[newline - 1] == b'\r');
            if line_end <= len_max {
                return match split_words(&input[..line_end], limits.args_max, ranges, scratch) {
                    Ok(()) => Parse::Complete {
                        consumed: newline + 1,
                    },
                    Err(SplitError::Unterminated) => {
                        Parse::Invalid(ProtocolError::UnbalancedQuotes)
                    }
                    Err(SplitError::Invalid(error)) => Parse::Invalid(error),
                };
            }
        }
        None => {
            let may_fit = input.len() <= len_max
                || (input.len() == len_max.saturating_add(1) && input.last() == Some(&b'\r'));
            if may_fit {
                return match split_words(input, limits.args_max, ranges, scratch) {
                    Err(SplitError::Invalid(error)) => Parse::Invalid(error),
                    Ok(()) | Err(SplitError::Unterminated) => Parse::Incomplete,
                };
            }
        }
    }
    // Too long: `input` holds more than `inline_len_max` bytes before any newline.
    match split_words(&input[..len_max], limits.args_max, ranges, scratch) {
        Err(SplitError::Invalid(error)) => Parse::Invalid(error),
        Ok(()) | Err(SplitError::Unterminated) => Parse::Invalid(ProtocolError::InlineTooBig),
    }
}

/// Why a line does not split into words.
#[derive(Debug, PartialEq, Eq)]
enum SplitError {
    /// It ends inside a quoted word: invalid for a whole line, but more bytes may close it.
    Unterminated,
    /// No byte that follows can make it valid.
    Invalid(ProtocolError),
}

/// Splits `line` into words appended to `scratch`, one range per word in `ranges`.
fn split_words(
    line: &[u8],
    args_max: usize,
    ranges: &mut Vec<Range<usize>>,
    scratch: &mut Vec<u8>,
) -> Result<(), SplitError> {
    let mut pos = 0;
    // Every turn consumes at least one byte of the line.
    loop {
        while line.get(pos).is_some_and(|&byte| is_c_space(byte)) {
            pos += 1;
        }
        if pos == line.len() {
            return Ok(());
        }
        if ranges.len() == args_max {
            return Err(SplitError::Invalid(ProtocolError::InvalidMultibulkLength));
        }
        let start = scratch.len();
        pos = read_word(line, pos, scratch)?;
        ranges.push(start..scratch.len());
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Quote {
    None,
    Double,
    Single,
}

/// Appends the word starting at `line[pos]` (not a blank) to `out`, returns where it ended.
fn read_word(line: &[u8], mut pos: usize, out: &mut Vec<u8>) -> Result<usize, SplitError> {
    let mut quote = Quote::None;
    loop {
        let byte = line.get(pos).copied();
        match (quote, byte) {
            (Quote::None, None | Some(b' ' | b'\t' | b'\r' | b'\n')) => return Ok(pos),
            (Quote::None, Some(b'"')) => quote = Quote::Double,
            (Quote::None, Some(b'\'')) => quote = Quote::Single,
            (Quote::Double | Quote::Single, None) => return Err(SplitError::Unterminated),
            (Quote::Double, Some(b'"')) | (Quote::Single, Some(b'\'')) => {
                return match line.get(pos + 1) {
                    Some(&next) if !is_c_space(next) => {
                        Err(SplitError::Invalid(ProtocolError::UnbalancedQuotes))
                    }
                    _ => Ok(pos + 1),
                };
            }
            (Quote::Double, Some(b'\\')) if pos + 1 < line.len() => {
                let (byte, used) = unescape(&line[pos + 1..]);
                out.push(byte);
                pos += used;
            }
            (Quote::Single, Some(b'\\')) if line.get(pos + 1) == Some(&b'\'') => {
                out.push(b'\'');
                pos += 1;
            }
            (_, Some(byte)) => out.push(byte),
        }
        pos += 1;
    }
}

/// The byte meant by the escape whose text (after the backslash, never empty) starts `rest`,
/// and how many bytes of `rest` it used.
fn unescape(rest: &[u8]) -> (u8, usize) {
    if let [b'x', high, low, ..] = *rest {
        if let (Some(high), Some(low)) = (hex_value(high), hex_value(low)) {
            return (high << 4 | low, 3);
        }
    }
    let byte = match rest[0] {
        b'n' => b'\n',
        b'r' => b'\r',
        b't' => b'\t',
        b'b' => 0x08,
        b'a' => 0x07,
        other => other,
    };
    (byte, 1)
}

fn hex_value(byte: u8) -> Option<u8> {
    char::from(byte).to_digit(16).map(|digit| digit as u8)
}

/// C's `isspace` in the "C" locale.
fn is_c_space(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

#[cfg(test)]
mod tests {
    use super::*;

    const BAD_CLOSE: SplitError = SplitError::Invalid(ProtocolError::UnbalancedQuotes);

    fn words(line: &[u8]) -> Result<Vec<Vec<u8>>, SplitError> {
        let mut ranges = Vec::new();
        let mut scratch = Vec::new();
        split_words(line, usize::MAX, &mut ranges, &mut scratch)?;
        Ok(ranges
            .into_iter()
            .map(|range| scratch[range].to_vec())
            .collect())
    }

    fn ok(list: &[&[u8]]) -> Result<Vec<Vec<u8>>, SplitError> {
        Ok(list.iter().map(|word| word.to_vec()).collect())
    }

    fn parse(input: &[u8], args_max: usize) -> Parse {
        let limits = RespLimits {
            args_max,
            ..RespLimits::default()
        };
        parse_inline(input, &limits, &mut Vec::new(), &mut Vec::new())
    }

    #[test]
    fn splits_on_blanks() {
        assert_eq!(words(b"SET  k\tv "), ok(&[b"SET", b"k", b"v"]));
        assert_eq!(words(b"  "), ok(&[]));
        assert_eq!(words(b""), ok(&[]));
        assert_eq!(words(b"a\x0bb \x0cc"), ok(&[b"a\x0bb", b"c"]));
        assert_eq!(words(b"a\rb"), ok(&[b"a", b"b"]));
        assert_eq!(words(b"a\0b"), ok(&[b"a\0b"]));
    }

    #[test]
    fn double_quotes_unescape() {
        let escapes = words(br#""a b" "\n\r\t\b\a\\\"\q""#);
        assert_eq!(escapes, ok(&[b"a b", b"\n\r\t\x08\x07\\\"q"]));
        assert_eq!(words(br#""\x41\x7a\xFf""#), ok(&[b"Az\xff"]));
        assert_eq!(words(br#""\x4" "\xg0""#), ok(&[b"x4", b"xg0"]));
        assert_eq!(words(br#""""#), ok(&[b""]));
        assert_eq!(words(br#"a"b c"d"#), Err(BAD_CLOSE));
        assert_eq!(words(br#"a"b c" d"#), ok(&[b"ab c", b"d"]));
    }

    #[test]
    fn single_quotes_know_only_one_escape() {
        let escapes = words(br"'it\'s' '\n' 'a\b'");
        assert_eq!(escapes, ok(&[b"it's", b"\\n", b"a\\b"]));
        // The second backslash escapes the closing quote, so the quote is left open.
        assert_eq!(words(br"'\\'"), Err(SplitError::Unterminated));
    }

    #[test]
    fn unbalanced_quotes() {
        for line in [&br#""abc"#[..], br"'abc", br#""abc\""#, br#""\"#] {
            assert_eq!(words(line), Err(SplitError::Unterminated), "{line:?}");
        }
        for line in [&br#""a"b"#[..], br"'a'b"] {
            assert_eq!(words(line), Err(BAD_CLOSE), "{line:?}");
        }
        assert_eq!(words(b"\"a\"\x0b"), ok(&[b"a"]));
    }

    #[test]
    fn word_count_is_limited() {
        let mut ranges = Vec::new();
        let mut scratch = Vec::new();
        assert_eq!(
            split_words(b"a b c", 2, &mut ranges, &mut scratch),
            Err(SplitError::Invalid(ProtocolError::InvalidMultibulkLength))
        );
        ranges.clear();
        assert_eq!(split_words(b"a b ", 2, &mut ranges, &mut scratch), Ok(()));
    }

    #[test]
    fn partial_lines_fail_as_soon_as_they_cannot_recover() {
        assert_eq!(parse(br#"SET "ab"#, 8), Parse::Incomplete);
        assert_eq!(parse(br#"SET "ab""#, 8), Parse::Incomplete);
        assert_eq!(
            parse(br#"SET "ab"c"#, 8),
            Parse::Invalid(ProtocolError::UnbalancedQuotes)
        );
        assert_eq!(parse(b"a b", 2), Parse::Incomplete);
        assert_eq!(
            parse(b"a b c", 2),
            Parse::Invalid(ProtocolError::InvalidMultibulkLength)
        );
    }
}
