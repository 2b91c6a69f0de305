//! `parse_reply`: the client side's reply parser, for the Rust client, the RESP bench driver and
//! tests. It builds an owned `Reply` tree, so unlike the request parser it allocates.
//!
//! ```text
//!   +simple  -error  :integer  $bulk (-1: null)  *array (-1: null)     RESP2
//!   _null  ,double  #t/#f  %map  ~set  >push  =verbatim  !blob-error  (big-number   RESP3
//! ```
//!
//! Sets and pushes read as arrays, verbatim strings as bulk strings without their `txt:` prefix,
//! blob errors as errors and big numbers as simple strings holding the digits. Attributes (`|`)
//! are not supported. Every length is checked against a named limit before anything is
//! allocated, and an aggregate's vector is never reserved beyond what the bytes received could
//! hold, so a hostile length costs nothing until its bytes arrive.

use super::error::ProtocolError;

/// Most aggregates nested inside one another (an array in an array ... in an array).
pub const REPLY_NESTING_MAX: usize = 128;
/// Longest bulk string, verbatim string or blob error: Redis' largest string, 512 MiB.
pub const REPLY_BULK_LEN_MAX: usize = 512 << 20;
/// Most elements (or map pairs) in one aggregate.
pub const REPLY_AGGREGATE_LEN_MAX: usize = u32::MAX as usize;

/// Smallest encoding of one reply (`_\r\n`), which bounds the elements the input can hold.
const REPLY_LEN_MIN: usize = 3;

/// One reply, RESP2 and RESP3 types alike.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    Simple(String),
    Error(String),
    Integer(i64),
    /// `None` is RESP2's null bulk string, `$-1`.
    Bulk(Option<Vec<u8>>),
    /// `None` is RESP2's null array, `*-1`.
    Array(Option<Vec<Reply>>),
    /// RESP3's null, `_`.
    Null,
    Double(f64),
    Boolean(bool),
    Map(Vec<(Reply, Reply)>),
}

/// Parses the reply at the start of `input`: `Ok(Some((reply, consumed)))` once it is whole,
/// `Ok(None)` while more bytes are needed, `Err` when the input is not RESP.
#[must_use = "the reply, or the bytes still needed"]
pub fn parse_reply(input: &[u8]) -> Result<Option<(Reply, usize)>, ProtocolError> {
    parse_value(input, 0, 0)
}

/// A parsed piece and the offset just after it, `None` when the input ends first.
type Step<T> = Result<Option<(T, usize)>, ProtocolError>;

/// The reply at `input[pos]`, which sits inside `depth` aggregates.
fn parse_value(input: &[u8], pos: usize, depth: usize) -> Step<Reply> {
    let Some(&marker) = input.get(pos) else {
        return Ok(None);
    };
    if !b"+-:$*_,#%~>=!(".contains(&marker) {
        return Err(ProtocolError::ReplyTypeUnknown(marker));
    }
    let is_aggregate = matches!(marker, b'*' | b'~' | b'>' | b'%');
    if is_aggregate && depth >= REPLY_NESTING_MAX {
        return Err(ProtocolError::ReplyTooDeep);
    }
    let Some((line, next)) = read_line(input, pos + 1)? else {
        return Ok(None);
    };
    let reply = match marker {
        b'+' | b'(' => Reply::Simple(text(line)),
        b'-' => Reply::Error(text(line)),
        b':' => Reply::Integer(parse_number(line).ok_or(ProtocolError::ReplyIntegerInvalid)?),
        b',' => Reply::Double(parse_number(line).ok_or(ProtocolError::ReplyDoubleInvalid)?),
        b'#' => match line {
            b"t" => Reply::Boolean(true),
            b"f" => Reply::Boolean(false),
            _ => return Err(ProtocolError::ReplyBooleanInvalid),
        },
        b'_' if line.is_empty() => Reply::Null,
        b'_' => return Err(ProtocolError::ReplyLineInvalid),
        b'$' | b'=' | b'!' => return parse_blob(input, marker, line, next),
        b'%' => return parse_map(input, line, next, depth),
        _ => return parse_array(input, marker, line, next, depth),
    };
    Ok(Some((reply, next)))
}

/// `$`, `=` and `!`: a length line (already read) then that many bytes and `\r\n`.
fn parse_blob(input: &[u8], marker: u8, line: &[u8], start: usize) -> Step<Reply> {
    let Some(len) = parse_len(line, REPLY_BULK_LEN_MAX)? else {
        return match marker {
            b'$' => Ok(Some((Reply::Bulk(None), start))),
            _ => Err(ProtocolError::ReplyLengthInvalid),
        };
    };
    let end = start + len;
    let terminator = input.get(end..).unwrap_or_default();
    let terminator = &terminator[..terminator.len().min(2)];
    if terminator != &b"\r\n"[..terminator.len()] {
        return Err(ProtocolError::ReplyLineInvalid);
    }
    if terminator.len() < 2 {
        return Ok(None);
    }
    let data = &input[start..end];
    let reply = match marker {
        b'$' => Reply::Bulk(Some(data.to_vec())),
        b'!' => Reply::Error(text(data)),
        // Verbatim: a three-letter format and `:` before the text.
        _ => match data {
            [_, _, _, b':', rest @ ..] => Reply::Bulk(Some(rest.to_vec())),
            _ => return Err(ProtocolError::ReplyLengthInvalid),
        },
    };
    Ok(Some((reply, end + 2)))
}

/// `*`, `~` and `>`: a count line (already read) then that many replies.
fn parse_array(input: &[u8], marker: u8, line: &[u8], start: usize, depth: usize) -> Step<Reply> {
    let Some(count) = parse_len(line, REPLY_AGGREGATE_LEN_MAX)? else {
        return match marker {
            b'*' => Ok(Some((Reply::Array(None), start))),
            _ => Err(ProtocolError::ReplyLengthInvalid),
        };
    };
    let mut items = Vec::with_capacity(count.min((input.len() - start) / REPLY_LEN_MIN));
    let mut pos = start;
    for _ in 0..count {
        let Some((item, next)) = parse_value(input, pos, depth + 1)? else {
            return Ok(None);
        };
        items.push(item);
        pos = next;
    }
    Ok(Some((Reply::Array(Some(items)), pos)))
}

/// `%`: a pair count line (already read) then that many keys and values.
fn parse_map(input: &[u8], line: &[u8], start: usize, depth: usize) -> Step<Reply> {
    let Some(count) = parse_len(line, REPLY_AGGREGATE_LEN_MAX)? else {
        return Err(ProtocolError::ReplyLengthInvalid);
    };
    let mut pairs = Vec::with_capacity(count.min((input.len() - start) / (2 * REPLY_LEN_MIN)));
    let mut pos = start;
    for _ in 0..count {
        let Some((key, next)) = parse_value(input, pos, depth + 1)? else {
            return Ok(None);
        };
        let Some((value, next)) = parse_value(input, next, depth + 1)? else {
            return Ok(None);
        };
        pairs.push((key, value));
        pos = next;
    }
    Ok(Some((Reply::Map(pairs), pos)))
}

/// The line starting at `input[start]` without its `\r\n`, and the offset after the `\n`.
fn read_line(input: &[u8], start: usize) -> Step<&[u8]> {
    let rest = input.get(start..).unwrap_or_default();
    let Some(cr) = rest.iter().position(|&byte| byte == b'\r') else {
        return Ok(None);
    };
    match rest.get(cr + 1) {
        None => Ok(None),
        Some(b'\n') => Ok(Some((&rest[..cr], start + cr + 2))),
        Some(_) => Err(ProtocolError::ReplyLineInvalid),
    }
}

/// A length or count: `None` for the null `-1`, an error for other negatives or above `max`.
fn parse_len(line: &[u8], max: usize) -> Result<Option<usize>, ProtocolError> {
    match parse_number::<i64>(line) {
        Some(-1) => Ok(None),
        Some(len) => match usize::try_from(len) {
            Ok(len) if len <= max => Ok(Some(len)),
            _ => Err(ProtocolError::ReplyLengthInvalid),
        },
        None => Err(ProtocolError::ReplyLengthInvalid),
    }
}

fn parse_number<T: std::str::FromStr>(line: &[u8]) -> Option<T> {
    std::str::from_utf8(line).ok()?.parse().ok()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn whole(input: &[u8]) -> Reply {
        match parse_reply(input) {
            Ok(Some((reply, consumed))) => {
                assert_eq!(consumed, input.len(), "{reply:?}");
                reply
            }
            other => panic!("{:?}: {other:?}", String::from_utf8_lossy(input)),
        }
    }

    fn bulk(bytes: &[u8]) -> Reply {
        Reply::Bulk(Some(bytes.to_vec()))
    }

    #[test]
    fn scalars() {
        assert_eq!(whole(b"+OK\r\n"), Reply::Simple("OK".into()));
        assert_eq!(whole(b"-ERR x\r\n"), Reply::Error("ERR x".into()));
        assert_eq!(whole(b":-42\r\n"), Reply::Integer(-42));
        assert_eq!(whole(b"$3\r\na\r\n\r\n"), bulk(b"a\r\n"));
        assert_eq!(whole(b"$-1\r\n"), Reply::Bulk(None));
        assert_eq!(whole(b"_\r\n"), Reply::Null);
        assert_eq!(whole(b",1.5\r\n"), Reply::Double(1.5));
        assert_eq!(whole(b",-inf\r\n"), Reply::Double(f64::NEG_INFINITY));
        assert_eq!(whole(b"#t\r\n"), Reply::Boolean(true));
        assert_eq!(whole(b"#f\r\n"), Reply::Boolean(false));
        assert_eq!(whole(b"=8\r\ntxt:abcd\r\n"), bulk(b"abcd"));
        assert_eq!(whole(b"!5\r\nERR x\r\n"), Reply::Error("ERR x".into()));
        assert_eq!(
            whole(b"(123456789012345678901234567890\r\n"),
            Reply::Simple("123456789012345678901234567890".into())
        );
    }

    #[test]
    fn aggregates() {
        assert_eq!(whole(b"*-1\r\n"), Reply::Array(None));
        assert_eq!(whole(b"*0\r\n"), Reply::Array(Some(vec![])));
        assert_eq!(
            whole(b"*2\r\n:1\r\n*1\r\n$1\r\nx\r\n"),
            Reply::Array(Some(vec![
                Reply::Integer(1),
                Reply::Array(Some(vec![bulk(b"x")]))
            ]))
        );
        assert_eq!(
            whole(b"~1\r\n:1\r\n"),
            Reply::Array(Some(vec![Reply::Integer(1)]))
        );
        assert_eq!(
            whole(b">1\r\n:1\r\n"),
            Reply::Array(Some(vec![Reply::Integer(1)]))
        );
        assert_eq!(
            whole(b"%1\r\n+a\r\n#t\r\n"),
            Reply::Map(vec![(Reply::Simple("a".into()), Reply::Boolean(true))])
        );
    }

    #[test]
    fn partial_replies_need_more() {
        let input = b"*2\r\n%1\r\n+a\r\n$2\r\nbc\r\n,2.5\r\n";
        for len in 0..input.len() {
            assert_eq!(parse_reply(&input[..len]), Ok(None), "prefix of {len}");
        }
        assert!(matches!(parse_reply(input), Ok(Some((_, consumed))) if consumed == input.len()));
    }

    #[test]
    fn invalid_replies() {
        use ProtocolError::*;
        let cases: [(&[u8], ProtocolError); 14] = [
            (b"@", ReplyTypeUnknown(b'@')),
            (b"+OK\rx", ReplyLineInvalid),
            (b":1.5\r\n", ReplyIntegerInvalid),
            (b":\r\n", ReplyIntegerInvalid),
            (b",x\r\n", ReplyDoubleInvalid),
            (b"#x\r\n", ReplyBooleanInvalid),
            (b"_x\r\n", ReplyLineInvalid),
            (b"$-2\r\n", ReplyLengthInvalid),
            (b"$x\r\n", ReplyLengthInvalid),
            (b"$536870913\r\n", ReplyLengthInvalid),
            (b"$1\r\nab", ReplyLineInvalid),
            (b"=2\r\nab\r\n", ReplyLengthInvalid),
            (b"%-1\r\n", ReplyLengthInvalid),
            (b"~-1\r\n", ReplyLengthInvalid),
        ];
        for (input, error) in cases {
            assert_eq!(
                parse_reply(input),
                Err(error),
                "{:?}",
                String::from_utf8_lossy(input)
            );
        }
    }

    #[test]
    fn nesting_is_limited() {
        let nested = |depth: usize| {
            let mut input = b"*1\r\n".repeat(depth);
            input.extend_from_slice(b":1\r\n");
            input
        };
        let input = nested(REPLY_NESTING_MAX);
        assert!(matches!(parse_reply(&input), Ok(Some((_, consumed))) if consumed == input.len()));
        // Refused as soon as the aggregate one too deep begins, before the rest arrives.
        let input = nested(REPLY_NESTING_MAX + 1);
        let header_end = (REPLY_NESTING_MAX + 1) * 4 - 3;
        assert_eq!(
            parse_reply(&input[..header_end]),
            Err(ProtocolError::ReplyTooDeep)
        );
    }

    #[test]
    fn hostile_counts_reserve_only_what_arrived() {
        assert_eq!(parse_reply(b"*4294967295\r\n:1\r\n"), Ok(None));
        assert_eq!(parse_reply(b"%4294967295\r\n"), Ok(None));
        assert_eq!(
            parse_reply(b"*4294967296\r\n"),
            Err(ProtocolError::ReplyLengthInvalid)
        );
    }
}
