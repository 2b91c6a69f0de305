//! Requests: `parse_command` (server side) and `encode_command` (client side).
//!
//! A multibulk command is parsed in place: its arguments become ranges into the caller's buffer.
//! Inline commands go through `inline.rs`, which unescapes into the scratch buffer of `Args`.
//! `parse_command` keeps no state between calls: after `Incomplete` the caller appends bytes
//! and calls again with the whole buffer from the same start, and the parse starts over.
//! `parse_command_resume` (the server's, issue 19 item 7) keeps the state of an unfinished
//! multibulk in `Args` instead: the arguments already validated and the offset where the next
//! one begins, so a command trickled in one byte per read costs O(new bytes) per call rather
//! than a rescan from its first byte.

use std::ops::Range;

use super::error::ProtocolError;
use super::inline;

/// Default `RespLimits::args_max`: Redis' multibulk limit of 1024 * 1024 arguments.
pub const ARGS_MAX_DEFAULT: usize = 1 << 20;
/// Default `RespLimits::bulk_len_max`: 512 MiB, Redis' default `proto-max-bulk-len`.
pub const BULK_LEN_MAX_DEFAULT: usize = 512 << 20;
/// Default `RespLimits::inline_len_max`: 64 KiB, Redis' inline request limit.
pub const INLINE_LEN_MAX_DEFAULT: usize = 64 << 10;

/// Redis 7's limits on a client that has not authenticated while a password is required: more
/// arguments than this is `unauthenticated multibulk length` (issue 19 item 4).
pub const UNAUTHENTICATED_ARGS_MAX: usize = 10;
/// ... and a longer bulk is `unauthenticated bulk length`.
pub const UNAUTHENTICATED_BULK_LEN_MAX: usize = 16 << 10;
/// The inline line an unauthenticated client may send (Redis has no such limit; an AUTH with
/// a password of up to `UNAUTHENTICATED_BULK_LEN_MAX` bytes fits).
pub const UNAUTHENTICATED_INLINE_LEN_MAX: usize = 16 << 10;

/// Limits checked while parsing, as the bytes that announce a size arrive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RespLimits {
    /// Most arguments in one command (multibulk count; also the word count of an inline line).
    pub args_max: usize,
    /// Longest multibulk argument, in bytes.
    pub bulk_len_max: usize,
    /// Longest inline line, in bytes, without its `\n` or `\r\n`.
    pub inline_len_max: usize,
}

impl RespLimits {
    /// The limits on a client that has not authenticated (see `UNAUTHENTICATED_ARGS_MAX`):
    /// nothing it sends can make the server buffer more than a few tens of kilobytes.
    pub const UNAUTHENTICATED: RespLimits = RespLimits {
        args_max: UNAUTHENTICATED_ARGS_MAX,
        bulk_len_max: UNAUTHENTICATED_BULK_LEN_MAX,
        inline_len_max: UNAUTHENTICATED_INLINE_LEN_MAX,
    };
}

impl Default for RespLimits {
    fn default() -> Self {
        Self {
            args_max: ARGS_MAX_DEFAULT,
            bulk_len_max: BULK_LEN_MAX_DEFAULT,
            inline_len_max: INLINE_LEN_MAX_DEFAULT,
        }
    }
}

/// The outcome of `parse_command`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Parse {
    /// A whole command: the first `consumed` bytes of the input were used, and `Args` holds its
    /// arguments (read them with `Args::command`). Zero arguments means an empty command (`*0`,
    /// `*-1`, a blank inline line) that Redis ignores: skip it and parse on.
    Complete { consumed: usize },
    /// Every byte so far can still start a valid command: call again with more bytes appended.
    Incomplete,
    /// Not RESP, whatever follows: the stream cannot be resynchronised. Reply `err_protocol`
    /// with the error, then close the connection.
    Invalid(ProtocolError),
}

/// Caller-owned storage for one command's arguments, reused from command to command.
///
/// After `Parse::Complete` it holds one range per argument. A multibulk command's ranges point
/// into the input buffer (zero-copy); an inline command's point into `Args`' own scratch buffer,
/// where its unescaped words were written. `command` picks the right buffer, so callers never
/// need to know which kind they got. After `Incomplete` or `Invalid` it is empty.
///
/// Both vectors keep their capacity: once they have grown to a connection's largest command,
/// parsing allocates nothing.
#[derive(Clone, Debug, Default)]
pub struct Args {
    ranges: Vec<Range<usize>>,
    scratch: Vec<u8>,
    inline: bool,
    /// While a multibulk is unfinished (`parse_command_resume` said `Incomplete`): its count,
    /// and the offset of its first unfinished argument, whose complete predecessors are in
    /// `ranges`. `resume_pos` is 0 otherwise (a pending argument never starts at 0).
    resume_count: usize,
    resume_pos: usize,
}

impl Args {
    pub fn new() -> Self {
        Self::default()
    }

    /// Storage sized up front for `args` arguments and `scratch_len` bytes of inline words.
    pub fn with_capacity(args: usize, scratch_len: usize) -> Self {
        Self {
            ranges: Vec::with_capacity(args),
            scratch: Vec::with_capacity(scratch_len),
            inline: false,
            resume_count: 0,
            resume_pos: 0,
        }
    }

    /// Number of arguments, the command name included.
    pub fn len(&self) -> usize {
        self.complete_ranges().len()
    }

    pub fn is_empty(&self) -> bool {
        self.complete_ranges().is_empty()
    }

    /// The ranges of a complete command; none while a multibulk is pending.
    fn complete_ranges(&self) -> &[Range<usize>] {
        if self.resume_pos == 0 {
            &self.ranges
        } else {
            &[]
        }
    }

    /// True when the last command parsed was inline (its arguments live in the scratch buffer).
    pub fn is_inline(&self) -> bool {
        self.inline
    }

    /// The arguments of the last command parsed. `input` must be the buffer that was given to
    /// `parse_command` (it is not read for inline commands).
    ///
    /// # Panics
    /// If `input` is shorter than the command that was parsed from it.
    pub fn command<'a>(&'a self, input: &'a [u8]) -> Command<'a> {
        let bytes = if self.inline {
            &self.scratch[..]
        } else {
            input
        };
        Command {
            bytes,
            ranges: self.complete_ranges(),
        }
    }

    /// Offset in the input at which the next `parse_command_resume` starts reading: where the
    /// first unfinished argument of a pending multibulk begins, or 0.
    pub fn resume_offset(&self) -> usize {
        self.resume_pos
    }

    fn clear(&mut self) {
        self.ranges.clear();
        self.scratch.clear();
        self.inline = false;
        self.resume_count = 0;
        self.resume_pos = 0;
    }
}

/// A parsed command's arguments, borrowed from `Args` and the input buffer.
#[derive(Clone, Copy, Debug)]
pub struct Command<'a> {
    bytes: &'a [u8],
    ranges: &'a [Range<usize>],
}

impl<'a> Command<'a> {
    /// Number of arguments, the command name included.
    pub fn len(&self) -> usize {
        self.ranges.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// The command name as sent (any case); `None` for an empty command.
    pub fn name(&self) -> Option<&'a [u8]> {
        self.get(0)
    }

    /// Argument `index`, 0 being the command name.
    pub fn get(&self, index: usize) -> Option<&'a [u8]> {
        let bytes = self.bytes;
        self.ranges.get(index).map(|range| &bytes[range.clone()])
    }

    /// All arguments in order, the command name first.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &'a [u8]> + 'a {
        let bytes = self.bytes;
        self.ranges.iter().map(move |range| &bytes[range.clone()])
    }
}

/// Parses the command at the start of `input` into `args`. See `Parse` for the outcomes and the
/// module comment of `resp` for the states.
#[must_use = "a Complete command must be executed and its bytes consumed"]
pub fn parse_command(input: &[u8], limits: &RespLimits, args: &mut Args) -> Parse {
    args.clear();
    let parse = match input.first() {
        None => Parse::Incomplete,
        Some(b'*') => parse_multibulk(input, limits, &mut args.ranges),
        Some(_) => {
            args.inline = true;
            inline::parse_inline(input, limits, &mut args.ranges, &mut args.scratch)
        }
    };
    if !matches!(parse, Parse::Complete { .. }) {
        args.clear();
    }
    parse
}

/// `parse_command` for a caller that, after `Incomplete`, calls again with the same bytes and
/// more appended: an unfinished multibulk is resumed at its first unfinished argument (the
/// arguments before it were validated by earlier calls and are not read again). The verdicts
/// are those of `parse_command` on the same bytes. Until `Complete`, `Args` shows no arguments.
///
/// Handing it other bytes after `Incomplete` is a caller bug; input shorter than the resume
/// point or not starting with `*` is caught and parsed afresh, other changes are not.
#[must_use = "a Complete command must be executed and its bytes consumed"]
pub fn parse_command_resume(input: &[u8], limits: &RespLimits, args: &mut Args) -> Parse {
    if input.first() != Some(&b'*') {
        return parse_command(input, limits, args);
    }
    if args.resume_pos != 0 && input.len() >= args.resume_pos {
        let (count, pos) = (args.resume_count, args.resume_pos);
        args.resume_pos = 0;
        return multibulk_outcome(input, limits, args, count, pos);
    }
    args.clear();
    let (count, pos) = match read_length(input, 1, Sign::NegativeAllowed, limits.args_max) {
        Length::Value { value, end } => (value, end),
        Length::Negative { end } => return Parse::Complete { consumed: end },
        Length::Incomplete => return Parse::Incomplete,
        Length::Invalid => return Parse::Invalid(ProtocolError::InvalidMultibulkLength),
    };
    multibulk_outcome(input, limits, args, count, pos)
}

/// Parses the arguments of a multibulk of `count` from `pos` (`args.ranges` holding those
/// before it) and keeps the progress in `args` when it is `Incomplete`.
#[inline(always)]
fn multibulk_outcome(
    input: &[u8],
    limits: &RespLimits,
    args: &mut Args,
    count: usize,
    pos: usize,
) -> Parse {
    match multibulk_args(input, limits, &mut args.ranges, count, pos) {
        Ok(parse @ Parse::Complete { .. }) => parse,
        Ok(parse) => {
            args.clear();
            parse
        }
        Err(next) => {
            args.resume_count = count;
            args.resume_pos = next;
            Parse::Incomplete
        }
    }
}

/// `parse_command_resume` for a client that has not authenticated: `RespLimits::UNAUTHENTICATED`
/// apply, and a command refused only by them (it would pass `limits`, the authenticated
/// client's) gets Redis's texts for that case, `unauthenticated multibulk length` or
/// `unauthenticated bulk length`. Input that is not RESP at all keeps its usual error.
#[must_use = "a Complete command must be executed and its bytes consumed"]
pub fn parse_command_unauthenticated(input: &[u8], limits: &RespLimits, args: &mut Args) -> Parse {
    let pre = RespLimits {
        args_max: limits.args_max.min(UNAUTHENTICATED_ARGS_MAX),
        bulk_len_max: limits.bulk_len_max.min(UNAUTHENTICATED_BULK_LEN_MAX),
        inline_len_max: limits.inline_len_max.min(UNAUTHENTICATED_INLINE_LEN_MAX),
    };
    let parse = parse_command_resume(input, &pre, args);
    let refused = match parse {
        Parse::Invalid(ProtocolError::InvalidMultibulkLength) => {
            ProtocolError::UnauthenticatedMultibulkLength
        }
        Parse::Invalid(ProtocolError::InvalidBulkLength) => {
            ProtocolError::UnauthenticatedBulkLength
        }
        _ => return parse,
    };
    // The same bytes under the authenticated limits: the input is short (the refusal came
    // within about `UNAUTHENTICATED_ARGS_MAX` bulks of the unauthenticated size), so parsing
    // it once more costs little, and only on this error path.
    match parse_command(input, limits, &mut Args::new()) {
        Parse::Invalid(_) => parse,
        _ => Parse::Invalid(refused),
    }
}

/// `*<count>\r\n` then `count` times `$<len>\r\n<len bytes>\r\n`.
fn parse_multibulk(input: &[u8], limits: &RespLimits, ranges: &mut Vec<Range<usize>>) -> Parse {
    let (count, pos) = match read_length(input, 1, Sign::NegativeAllowed, limits.args_max) {
        Length::Value { value, end } => (value, end),
        Length::Negative { end } => return Parse::Complete { consumed: end },
        Length::Incomplete => return Parse::Incomplete,
        Length::Invalid => return Parse::Invalid(ProtocolError::InvalidMultibulkLength),
    };
    match multibulk_args(input, limits, ranges, count, pos) {
        Ok(parse) => parse,
        Err(_) => Parse::Incomplete,
    }
}

/// The arguments of a multibulk of `count` from `pos`, where the first `ranges.len()` are
/// already parsed. `Err(pos)` is `Incomplete`, `pos` being where the unfinished argument starts.
#[inline(always)]
fn multibulk_args(
    input: &[u8],
    limits: &RespLimits,
    ranges: &mut Vec<Range<usize>>,
    count: usize,
    mut pos: usize,
) -> Result<Parse, usize> {
    // Bounded by `args_max`; every turn consumes at least the 6 bytes of `$0\r\n\r\n`.
    for _ in ranges.len()..count {
        let Some(&marker) = input.get(pos) else {
            return Err(pos);
        };
        if marker != b'$' {
            return Ok(Parse::Invalid(ProtocolError::ExpectedDollar(marker)));
        }
        let (len, data_start) =
            match read_length(input, pos + 1, Sign::PositiveOnly, limits.bulk_len_max) {
                Length::Value { value, end } => (value, end),
                Length::Incomplete => return Err(pos),
                Length::Negative { .. } | Length::Invalid => {
                    return Ok(Parse::Invalid(ProtocolError::InvalidBulkLength))
                }
            };
        // No buffer reaches `usize::MAX` bytes, so an overflow could never complete.
        let Some(data_end) = data_start.checked_add(len) else {
            return Ok(Parse::Invalid(ProtocolError::InvalidBulkLength));
        };
        // Check whatever part of the terminator has arrived before asking for more (byte by
        // byte: a slice comparison of a length known only at run time is a memcmp call).
        match (input.get(data_end), input.get(data_end.wrapping_add(1))) {
            (Some(b'\r'), Some(b'\n')) => {}
            (Some(b'\r'), None) | (None, _) => return Err(pos),
            _ => return Ok(Parse::Invalid(ProtocolError::InvalidBulkLength)),
        }
        ranges.push(data_start..data_end);
        pos = data_end + 2;
    }
    Ok(Parse::Complete { consumed: pos })
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Sign {
    /// `*` counts: any negative number is an empty command, as in Redis.
    NegativeAllowed,
    /// `$` lengths: a `-` can never become valid.
    PositiveOnly,
}

#[derive(Debug, PartialEq, Eq)]
enum Length {
    /// A number in `0..=max` and the offset just after its `\r\n`.
    Value {
        value: usize,
        end: usize,
    },
    /// A negative number that fits an `i64`, and the offset just after its `\r\n`.
    Negative {
        end: usize,
    },
    Incomplete,
    Invalid,
}

/// Most bytes a valid length line can have before its `\r`: `-9223372036854775808`.
const LENGTH_DIGITS_MAX: usize = 20;

/// Reads the decimal number that starts at `input[start]` and ends with `\r\n`, with the rules
/// of Redis' `string2ll`: an optional `-`, then `0` alone or digits not starting with `0`; no
/// `+`, no blanks, no `-0`. Every byte is judged as it arrives, so a number that is already
/// above `max` (or malformed) is `Invalid` without waiting for its `\r\n`.
#[inline(always)]
fn read_length(input: &[u8], start: usize, sign: Sign, max: usize) -> Length {
    // Short path for the usual one- and two-digit counts and lengths (`*2`, `$3`, `$16`): the
    // same answer as the loop below for these inputs, fewer checks.
    if let Some(&[a, b, c, d]) = input
        .get(start..start + 4)
        .map(|w| <&[u8; 4]>::try_from(w).unwrap())
    {
        if (b'1'..=b'9').contains(&a) {
            if b == b'\r' && c == b'\n' {
                let value = usize::from(a - b'0');
                if value <= max {
                    return Length::Value {
                        value,
                        end: start + 3,
                    };
                }
            } else if b.is_ascii_digit() && c == b'\r' && d == b'\n' {
                let value = usize::from(a - b'0') * 10 + usize::from(b - b'0');
                if value <= max {
                    return Length::Value {
                        value,
                        end: start + 4,
                    };
                }
            }
        }
    }
    read_length_digits(input, start, sign, max)
}

/// [`read_length`] without its short path: every byte judged in turn.
#[inline(never)]
fn read_length_digits(input: &[u8], start: usize, sign: Sign, max: usize) -> Length {
    let max = u64::try_from(max).unwrap_or(u64::MAX);
    let mut negative = false;
    let mut magnitude: u64 = 0;
    let mut digits = 0usize;
    let mut pos = start;
    loop {
        // A digit after a leading zero, or an overflow, is rejected, so the loop ends in at most
        // `LENGTH_DIGITS_MAX + 2` turns whatever the input.
        debug_assert!(pos - start <= LENGTH_DIGITS_MAX + 1);
        let Some(&byte) = input.get(pos) else {
            return Length::Incomplete;
        };
        match byte {
            b'-' if pos == start && sign == Sign::NegativeAllowed => negative = true,
            b'0'..=b'9' => {
                let leading_zero = digits == 1 && magnitude == 0;
                let minus_zero = negative && digits == 0 && byte == b'0';
                if leading_zero || minus_zero {
                    return Length::Invalid;
                }
                let bound = if negative { 1 << 63 } else { max };
                match magnitude
                    .checked_mul(10)
                    .and_then(|m| m.checked_add(u64::from(byte - b'0')))
                {
                    Some(next) if next <= bound => magnitude = next,
                    _ => return Length::Invalid,
                }
                digits += 1;
            }
            b'\r' if digits > 0 => {
                return match input.get(pos + 1) {
                    None => Length::Incomplete,
                    Some(b'\n') if negative => Length::Negative { end: pos + 2 },
                    Some(b'\n') => match usize::try_from(magnitude) {
                        Ok(value) => Length::Value {
                            value,
                            end: pos + 2,
                        },
                        Err(_) => Length::Invalid,
                    },
                    Some(_) => Length::Invalid,
                };
            }
            _ => return Length::Invalid,
        }
        pos += 1;
    }
}

/// Appends `args` to `out` as one multibulk command, the form every Redis client sends.
pub fn encode_command(args: &[&[u8]], out: &mut Vec<u8>) {
    let payload: usize = args.iter().map(|arg| arg.len() + 16).sum();
    out.reserve(payload + 16);
    push_header(out, b'*', args.len());
    for arg in args {
        push_header(out, b'$', arg.len());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
}

/// `<marker><len>\r\n`.
pub(super) fn push_header(out: &mut Vec<u8>, marker: u8, len: usize) {
    out.push(marker);
    push_decimal(out, u64::try_from(len).expect("usize fits u64"), false);
    out.extend_from_slice(b"\r\n");
}

/// Appends `magnitude` in decimal, after a `-` when `negative`, without going through `fmt`.
pub(super) fn push_decimal(out: &mut Vec<u8>, mut magnitude: u64, negative: bool) {
    // One and two digits (bulk lengths of short keys and values) without the digit buffer.
    if !negative && magnitude < 100 {
        let m = magnitude as u8;
        if m < 10 {
            out.push(b'0' + m);
        } else {
            out.extend_from_slice(&[b'0' + m / 10, b'0' + m % 10]);
        }
        return;
    }
    let mut digits = [0u8; 20];
    let mut start = digits.len();
    loop {
        start -= 1;
        digits[start] = b'0' + (magnitude % 10) as u8;
        magnitude /= 10;
        if magnitude == 0 {
            break;
        }
    }
    if negative {
        out.push(b'-');
    }
    out.extend_from_slice(&digits[start..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(input: &[u8]) -> (Parse, Vec<Vec<u8>>) {
        let mut args = Args::new();
        let parse = parse_command(input, &RespLimits::default(), &mut args);
        let words = args.command(input).iter().map(<[u8]>::to_vec).collect();
        (parse, words)
    }

    fn length(input: &[u8], sign: Sign, max: usize) -> Length {
        read_length(input, 0, sign, max)
    }

    #[test]
    fn lengths_follow_string2ll() {
        use Length::*;
        let max = 1000;
        assert_eq!(
            length(b"0\r\n", Sign::PositiveOnly, max),
            Value { value: 0, end: 3 }
        );
        assert_eq!(
            length(b"1000\r\n", Sign::PositiveOnly, max),
            Value {
                value: 1000,
                end: 6
            }
        );
        assert_eq!(length(b"1001", Sign::PositiveOnly, max), Invalid);
        assert_eq!(length(b"100", Sign::PositiveOnly, max), Incomplete);
        assert_eq!(length(b"100\r", Sign::PositiveOnly, max), Incomplete);
        assert_eq!(length(b"100\rx", Sign::PositiveOnly, max), Invalid);
        assert_eq!(length(b"01", Sign::PositiveOnly, max), Invalid);
        assert_eq!(length(b"+1", Sign::PositiveOnly, max), Invalid);
        assert_eq!(length(b" 1", Sign::PositiveOnly, max), Invalid);
        assert_eq!(length(b"\r\n", Sign::PositiveOnly, max), Invalid);
        assert_eq!(length(b"-1", Sign::PositiveOnly, max), Invalid);
        assert_eq!(
            length(b"-1\r\n", Sign::NegativeAllowed, max),
            Negative { end: 4 }
        );
        assert_eq!(length(b"-0", Sign::NegativeAllowed, max), Invalid);
        assert_eq!(length(b"-\r\n", Sign::NegativeAllowed, max), Invalid);
        assert_eq!(length(b"--1", Sign::NegativeAllowed, max), Invalid);
        assert_eq!(length(b"1-", Sign::NegativeAllowed, max), Invalid);
    }

    #[test]
    fn lengths_stop_at_i64_and_u64_bounds() {
        use Length::*;
        let min = b"-9223372036854775808\r\n";
        assert_eq!(
            length(min, Sign::NegativeAllowed, 10),
            Negative { end: min.len() }
        );
        assert_eq!(
            length(b"-9223372036854775809", Sign::NegativeAllowed, 10),
            Invalid
        );
        let max = b"18446744073709551615\r\n";
        assert_eq!(
            length(max, Sign::PositiveOnly, usize::MAX),
            Value {
                value: usize::MAX,
                end: 22
            }
        );
        assert_eq!(
            length(b"18446744073709551616", Sign::PositiveOnly, usize::MAX),
            Invalid
        );
        assert_eq!(
            length(b"99999999999999999999", Sign::PositiveOnly, usize::MAX),
            Invalid
        );
    }

    #[test]
    fn multibulk_arguments_point_into_the_input() {
        let input = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\nrest";
        let mut args = Args::new();
        let parse = parse_command(input, &RespLimits::default(), &mut args);
        assert_eq!(
            parse,
            Parse::Complete {
                consumed: input.len() - 4
            }
        );
        assert!(!args.is_inline());
        let command = args.command(input);
        assert_eq!(command.len(), 2);
        assert_eq!(command.name(), Some(&b"GET"[..]));
        assert_eq!(command.get(1), Some(&b"k"[..]));
        assert_eq!(command.get(2), None);
        let name = command.name().unwrap();
        assert!(std::ptr::eq(name.as_ptr(), input[8..].as_ptr()));
    }

    #[test]
    fn empty_multibulk_commands_are_complete_with_no_args() {
        for input in [&b"*0\r\n"[..], b"*-1\r\n", b"*-20\r\n"] {
            assert_eq!(
                parse(input),
                (
                    Parse::Complete {
                        consumed: input.len()
                    },
                    vec![]
                )
            );
        }
    }

    #[test]
    fn empty_and_binary_bulk_arguments() {
        let input = b"*3\r\n$0\r\n\r\n$2\r\n\r\n\r\n$1\r\n\0\r\n";
        let (parse, words) = parse(input);
        assert_eq!(
            parse,
            Parse::Complete {
                consumed: input.len()
            }
        );
        assert_eq!(words, vec![b"".to_vec(), b"\r\n".to_vec(), b"\0".to_vec()]);
    }

    #[test]
    fn payload_must_end_with_crlf() {
        let invalid = Parse::Invalid(ProtocolError::InvalidBulkLength);
        assert_eq!(parse(b"*1\r\n$1\r\nab\r\n").0, invalid);
        assert_eq!(parse(b"*1\r\n$1\r\na\rb").0, invalid);
        assert_eq!(parse(b"*1\r\n$1\r\na\r").0, Parse::Incomplete);
    }

    #[test]
    fn failed_parses_leave_args_empty() {
        let mut args = Args::new();
        let limits = RespLimits::default();
        assert!(matches!(
            parse_command(b"GET a\n", &limits, &mut args),
            Parse::Complete { .. }
        ));
        assert_eq!(args.len(), 2);
        assert_eq!(
            parse_command(b"*1\r\n$3\r\nGE", &limits, &mut args),
            Parse::Incomplete
        );
        assert!(args.is_empty() && !args.is_inline());
    }

    #[test]
    fn encode_writes_multibulk() {
        let mut out = b"x".to_vec();
        encode_command(&[b"SET", b"key", b""], &mut out);
        assert_eq!(out, b"x*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$0\r\n\r\n");
    }

    #[test]
    fn length_short_path_agrees_with_the_digit_loop() {
        // Every input of up to 5 bytes over digits, CR, LF, '-' and another byte, at offsets 0
        // and 1, for both signs and bounds around one and two digits.
        let alphabet = b"0159\r\n-x";
        for len in 0..=5u32 {
            for mut code in 0..(alphabet.len() as u32).pow(len) {
                let mut input = Vec::new();
                for _ in 0..len {
                    input.push(alphabet[(code % alphabet.len() as u32) as usize]);
                    code /= alphabet.len() as u32;
                }
                for start in [0, 1] {
                    for sign in [Sign::NegativeAllowed, Sign::PositiveOnly] {
                        for max in [0, 1, 5, 9, 10, 15, 19, 42, 99, 100, usize::MAX] {
                            assert_eq!(
                                read_length(&input, start, sign, max),
                                read_length_digits(&input, start, sign, max),
                                "{input:?} from {start}, max {max}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn decimals_cover_the_extremes() {
        let mut out = Vec::new();
        push_decimal(&mut out, 0, false);
        out.push(b' ');
        push_decimal(&mut out, u64::MAX, false);
        out.push(b' ');
        push_decimal(&mut out, 1 << 63, true);
        assert_eq!(out, b"0 18446744073709551615 -9223372036854775808");
        // Around the short paths' edges, against the standard formatting.
        for n in (0..=1001u64).chain([u64::MAX - 1, 1 << 32]) {
            for negative in [false, true] {
                let mut out = Vec::new();
                push_decimal(&mut out, n, negative);
                let want = format!("{}{n}", if negative { "-" } else { "" });
                assert_eq!(out, want.as_bytes());
            }
        }
    }
}
