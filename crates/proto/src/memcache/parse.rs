//! `parse_request`: one request from the front of a byte buffer. The line is found (and its
//! length limit applied) first, then split into words and dispatched on the first one; a
//! storage command then waits for its data block.

use super::error::MemcacheError;
use super::meta::{parse_flags, MetaKey, MetaKind};
use super::number::{parse_i32_truncating, parse_u32_truncating, parse_u64};
use super::request::{
    find_byte, word_end, Keys, MemcacheLimits, Parse, Refusal, Request, StoreMode, KEY_BYTES_MAX,
    META_WORDS_MAX,
};

/// Most leading spaces before `get ` that still earn a long line (memcached's rule).
const GET_LEADING_SPACES_MAX: usize = 100;

/// The words of one command line, at most this many looked at individually: no command takes
/// more, and the rest of a longer line stays in `rest` (a multi-key get).
const LINE_WORDS_MAX: usize = 8;

/// Parses one request from the start of `input`. Stateless: after `Incomplete`, call again
/// with the same start and more bytes. Never allocates.
pub fn parse_request<'a>(input: &'a [u8], limits: &MemcacheLimits) -> Parse<'a> {
    let line_max = if is_get_line(input) {
        limits.get_line_bytes_max.max(limits.line_bytes_max)
    } else {
        limits.line_bytes_max
    };
    let search = &input[..input.len().min(line_max.saturating_add(1))];
    let newline = find_byte(search, 0, b'\n');
    let Some(newline) = (newline < search.len()).then_some(newline) else {
        return if input.len() > line_max {
            Parse::Close
        } else {
            Parse::Incomplete
        };
    };
    let mut line = &input[..newline];
    if let [head @ .., b'\r'] = line {
        line = head;
    }
    let consumed = newline + 1;
    let refuse = |error: MemcacheError, quiet: bool| {
        Parse::Refused(Refusal {
            error,
            consumed,
            swallow: 0,
            quiet,
        })
    };
    let split = Line::new(line);
    let Some(command) = split.word(0) else {
        return refuse(MemcacheError::UnknownCommand, false);
    };
    let request = match command {
        b"get" | b"gets" => retrieval(&split, None, limits),
        b"gat" | b"gats" => match split.word(1) {
            None => Err((MemcacheError::UnknownCommand, false)),
            Some(exptime) => match parse_i32_truncating(exptime) {
                None => Err((MemcacheError::BadExptime, false)),
                Some(exptime) => retrieval(&split, Some(exptime), limits),
            },
        },
        b"set" | b"add" | b"replace" | b"append" | b"prepend" | b"cas" => {
            return store(input, consumed, &split, limits)
        }
        b"ms" => return meta_set(input, consumed, &split, limits),
        b"incr" | b"decr" => arithmetic(&split),
        b"delete" => delete(&split),
        b"touch" => touch(&split),
        b"flush_all" => flush_all(&split),
        b"verbosity" => verbosity(&split),
        b"version" => Ok(Request::Version),
        b"quit" => Ok(Request::Quit),
        b"stats" => Ok(Request::Stats {
            args: Keys::new(split.rest(1), split.count - 1),
        }),
        b"mn" => Ok(Request::MetaNoop),
        b"me" => meta_debug(&split),
        b"mg" | b"md" | b"ma" => meta(&split),
        _ => Err((MemcacheError::UnknownCommand, false)),
    };
    match request {
        Ok(request) => Parse::Complete { request, consumed },
        Err((error, quiet)) => refuse(error, quiet),
    }
}

/// Whether `input` starts like a line memcached lets grow past the line limit.
fn is_get_line(input: &[u8]) -> bool {
    let spaces = input.iter().take_while(|&&b| b == b' ').count();
    let rest = &input[spaces..];
    spaces <= GET_LEADING_SPACES_MAX && (rest.starts_with(b"get ") || rest.starts_with(b"gets "))
}

/// A command line split into words: the first `LINE_WORDS_MAX` by position, the count of all.
struct Line<'a> {
    line: &'a [u8],
    /// Start and end of each of the first words.
    spans: [(usize, usize); LINE_WORDS_MAX],
    count: usize,
    /// One more than the index of the last word longer than a key may be (0: none), found in
    /// the same pass, so that a multi-get's keys are not walked again to check them.
    after_long: usize,
}

impl<'a> Line<'a> {
    fn new(line: &'a [u8]) -> Self {
        let mut spans = [(0, 0); LINE_WORDS_MAX];
        let mut count = 0;
        let mut after_long = 0;
        let mut pos = 0;
        while pos < line.len() {
            if line[pos] == b' ' {
                pos += 1;
                continue;
            }
            let start = pos;
            pos = word_end(line, pos);
            if count < LINE_WORDS_MAX {
                spans[count] = (start, pos);
            }
            count += 1;
            if pos - start > KEY_BYTES_MAX {
                after_long = count;
            }
        }
        Self {
            line,
            spans,
            count,
            after_long,
        }
    }

    /// Whether every word from `index` on is short enough to be a key.
    fn keys_ok_from(&self, index: usize) -> bool {
        self.after_long <= index
    }

    fn word(&self, index: usize) -> Option<&'a [u8]> {
        (index < self.count.min(LINE_WORDS_MAX)).then(|| {
            let (start, end) = self.spans[index];
            &self.line[start..end]
        })
    }

    /// The line from word `index` on (empty when there are fewer words).
    fn rest(&self, index: usize) -> &'a [u8] {
        if index >= self.count {
            return &[];
        }
        if index < LINE_WORDS_MAX {
            return &self.line[self.spans[index].0..];
        }
        let mut seen = 0;
        let mut pos = 0;
        while pos < self.line.len() {
            if self.line[pos] != b' ' && (pos == 0 || self.line[pos - 1] == b' ') {
                if seen == index {
                    return &self.line[pos..];
                }
                seen += 1;
            }
            pos += 1;
        }
        &[]
    }

    /// memcached's `set_noreply_maybe`: the last word is exactly `noreply`.
    fn noreply(&self) -> bool {
        self.count <= LINE_WORDS_MAX && self.word(self.count - 1) == Some(b"noreply")
    }
}

type Parsed<'a> = Result<Request<'a>, (MemcacheError, bool)>;

fn key_ok(key: &[u8]) -> bool {
    key.len() <= KEY_BYTES_MAX
}

/// get, gets (`exptime` None) and gat, gats: the keys after the command (and exptime).
fn retrieval<'a>(line: &Line<'a>, exptime: Option<i32>, limits: &MemcacheLimits) -> Parsed<'a> {
    let first_key = if exptime.is_some() { 2 } else { 1 };
    if exptime.is_none() && line.count < 2 {
        return Err((MemcacheError::UnknownCommand, false));
    }
    let raw = line.rest(first_key);
    let count = line.count - first_key;
    if count > limits.get_keys_max {
        return Err((MemcacheError::TooManyKeys, false));
    }
    if !line.keys_ok_from(first_key) {
        return Err((MemcacheError::BadCommandLine, false));
    }
    let keys = Keys::new(raw, count);
    let cas = line.word(0).is_some_and(|command| command.ends_with(b"s"));
    Ok(match exptime {
        None => Request::Get { keys, cas },
        Some(exptime) => Request::GetAndTouch { exptime, keys, cas },
    })
}

/// set, add, replace, append, prepend, cas: the line, then the data block.
fn store<'a>(
    input: &'a [u8],
    consumed: usize,
    line: &Line<'a>,
    limits: &MemcacheLimits,
) -> Parse<'a> {
    let command = line.word(0).unwrap_or_default();
    let is_cas = command == b"cas";
    let words_needed = if is_cas { 6 } else { 5 };
    let noreply = line.noreply();
    let refuse = |error, swallow| {
        Parse::Refused(Refusal {
            error,
            consumed,
            swallow,
            quiet: noreply,
        })
    };
    if line.count != words_needed && line.count != words_needed + 1 {
        // The wrong number of words is ERROR before noreply is looked at.
        return Parse::Refused(Refusal {
            error: MemcacheError::UnknownCommand,
            consumed,
            swallow: 0,
            quiet: false,
        });
    }
    let word = |index| line.word(index).unwrap_or_default();
    let key = word(1);
    if !key_ok(key) {
        return refuse(MemcacheError::BadCommandLine, 0);
    }
    let (Some(flags), Some(exptime), Some(len)) = (
        parse_u32_truncating(word(2)),
        parse_i32_truncating(word(3)),
        parse_i32_truncating(word(4)),
    ) else {
        return refuse(MemcacheError::BadCommandLine, 0);
    };
    let mode = match command {
        b"set" => StoreMode::Set,
        b"add" => StoreMode::Add,
        b"replace" => StoreMode::Replace,
        b"append" => StoreMode::Append,
        b"prepend" => StoreMode::Prepend,
        _ => match parse_u64(word(5)) {
            Some(unique) => StoreMode::Cas { unique },
            None => return refuse(MemcacheError::BadCommandLine, 0),
        },
    };
    let Some(len) = data_len(len) else {
        return refuse(MemcacheError::BadCommandLine, 0);
    };
    if len > limits.value_bytes_max {
        return refuse(MemcacheError::TooLarge, len + 2);
    }
    match data_block(input, consumed, len) {
        None => Parse::Incomplete,
        Some(Err(end)) => Parse::Refused(Refusal {
            error: MemcacheError::BadDataChunk,
            consumed: end,
            swallow: 0,
            quiet: noreply,
        }),
        Some(Ok((value, end))) => Parse::Complete {
            request: Request::Store {
                mode,
                key,
                flags,
                exptime,
                value,
                noreply,
            },
            consumed: end,
        },
    }
}

/// A data length as memcached accepts it: not negative, and room for its `\r\n` in an int.
fn data_len(len: i32) -> Option<usize> {
    if !(0..=i32::MAX - 2).contains(&len) {
        return None;
    }
    usize::try_from(len).ok()
}

/// The data block of `len` bytes after the line: `None` until it and its two terminating
/// bytes are in; then the value and the end offset, or `Err(end)` when the two bytes after
/// it are not `\r\n`.
fn data_block(input: &[u8], start: usize, len: usize) -> Option<Result<(&[u8], usize), usize>> {
    let end = start.checked_add(len)?.checked_add(2)?;
    if input.len() < end {
        return None;
    }
    if &input[end - 2..end] != b"\r\n" {
        return Some(Err(end));
    }
    Some(Ok((&input[start..end - 2], end)))
}

/// The shape incr, decr and touch share: `NAME key value [noreply]`. Returns the key and
/// whether noreply was given, or the error for a wrong word count or a bad key.
fn key_and_value_line<'a>(line: &Line<'a>) -> Result<(&'a [u8], bool), (MemcacheError, bool)> {
    let noreply = line.noreply();
    if line.count != 3 && line.count != 4 {
        return Err((MemcacheError::UnknownCommand, false));
    }
    let key = line.word(1).unwrap_or_default();
    if !key_ok(key) {
        return Err((MemcacheError::BadCommandLine, noreply));
    }
    Ok((key, noreply))
}

fn arithmetic<'a>(line: &Line<'a>) -> Parsed<'a> {
    let (key, noreply) = key_and_value_line(line)?;
    let Some(delta) = parse_u64(line.word(2).unwrap_or_default()) else {
        return Err((MemcacheError::BadDelta, noreply));
    };
    Ok(Request::Arithmetic {
        key,
        delta,
        increment: line.word(0) == Some(b"incr"),
        noreply,
    })
}

fn delete<'a>(line: &Line<'a>) -> Parsed<'a> {
    if !(2..=4).contains(&line.count) {
        return Err((MemcacheError::UnknownCommand, false));
    }
    let noreply = line.count > 2 && line.noreply();
    if line.count > 2 {
        let hold_is_zero = line.word(2) == Some(b"0");
        let valid = (line.count == 3 && (hold_is_zero || noreply))
            || (line.count == 4 && hold_is_zero && noreply);
        if !valid {
            return Err((MemcacheError::DeleteUsage, noreply));
        }
    }
    let key = line.word(1).unwrap_or_default();
    if !key_ok(key) {
        return Err((MemcacheError::BadCommandLine, noreply));
    }
    Ok(Request::Delete { key, noreply })
}

fn touch<'a>(line: &Line<'a>) -> Parsed<'a> {
    let (key, noreply) = key_and_value_line(line)?;
    let Some(exptime) = parse_i32_truncating(line.word(2).unwrap_or_default()) else {
        return Err((MemcacheError::BadExptime, noreply));
    };
    Ok(Request::Touch {
        key,
        exptime,
        noreply,
    })
}

fn flush_all<'a>(line: &Line<'a>) -> Parsed<'a> {
    if line.count > 3 {
        return Err((MemcacheError::UnknownCommand, false));
    }
    let noreply = line.noreply();
    let delay = if line.count == if noreply { 2 } else { 1 } {
        None
    } else {
        match parse_i32_truncating(line.word(1).unwrap_or_default()) {
            Some(delay) => Some(delay),
            None => return Err((MemcacheError::BadExptime, noreply)),
        }
    };
    Ok(Request::FlushAll { delay, noreply })
}

fn verbosity<'a>(line: &Line<'a>) -> Parsed<'a> {
    if line.count != 2 && line.count != 3 {
        return Err((MemcacheError::UnknownCommand, false));
    }
    let noreply = line.noreply();
    match parse_u32_truncating(line.word(1).unwrap_or_default()) {
        Some(level) => Ok(Request::Verbosity { level, noreply }),
        None => Err((MemcacheError::BadCommandLine, noreply)),
    }
}

fn meta_debug<'a>(line: &Line<'a>) -> Parsed<'a> {
    let Some(key) = line.word(1).filter(|key| key_ok(key)) else {
        return Err((MemcacheError::BadCommandLine, false));
    };
    let base64 = line.word(2) == Some(b"b");
    if base64 {
        let mut buf = [0u8; KEY_BYTES_MAX];
        // me says "bad command line format" where the other meta commands say "error
        // decoding key".
        if super::base64::decode(key, &mut buf).is_none() {
            return Err((MemcacheError::BadCommandLine, false));
        }
    }
    Ok(Request::MetaDebug {
        key: MetaKey::new(key, base64),
    })
}

/// mg, md, ma: `<command> <key> <flags>*`.
fn meta<'a>(line: &Line<'a>) -> Parsed<'a> {
    let command = line.word(0).unwrap_or_default();
    let Some(key) = line.word(1) else {
        return Err((MemcacheError::UnknownCommand, false));
    };
    if !key_ok(key) {
        return Err((MemcacheError::BadCommandLine, false));
    }
    let kind = match command {
        b"mg" => MetaKind::Get,
        b"md" => MetaKind::Delete,
        _ => MetaKind::Arithmetic,
    };
    if line.count > META_WORDS_MAX {
        return Err((too_many_flags(kind), false));
    }
    let (key, flags) = parse_flags(kind, key, line.rest(2)).map_err(|e| (e, false))?;
    Ok(match kind {
        MetaKind::Get => Request::MetaGet { key, flags },
        MetaKind::Delete => Request::MetaDelete { key, flags },
        _ => Request::MetaArithmetic { key, flags },
    })
}

fn too_many_flags(kind: MetaKind) -> MemcacheError {
    if kind == MetaKind::Get {
        MemcacheError::MetaGetTooManyFlags
    } else {
        MemcacheError::MetaTooManyFlags
    }
}

/// ms: `ms <key> <datalen> <flags>*`, then the data block. Errors found after the data length
/// was read swallow the data block, as memcached does.
fn meta_set<'a>(
    input: &'a [u8],
    consumed: usize,
    line: &Line<'a>,
    limits: &MemcacheLimits,
) -> Parse<'a> {
    let refuse = |error, swallow| {
        Parse::Refused(Refusal {
            error,
            consumed,
            swallow,
            quiet: false,
        })
    };
    let Some(key) = line.word(1) else {
        return refuse(MemcacheError::UnknownCommand, 0);
    };
    if !key_ok(key) || line.count == 2 {
        return refuse(MemcacheError::BadCommandLine, 0);
    }
    if line.count > META_WORDS_MAX {
        return refuse(MemcacheError::MetaTooManyFlags, 0);
    }
    let Some(len) = parse_i32_truncating(line.word(2).unwrap_or_default()).and_then(data_len)
    else {
        return refuse(MemcacheError::BadCommandLine, 0);
    };
    let (key, flags) = match parse_flags(MetaKind::Set, key, line.rest(3)) {
        Ok(parsed) => parsed,
        Err(error) => return refuse(error, len + 2),
    };
    if len > limits.value_bytes_max {
        return refuse(MemcacheError::TooLarge, len + 2);
    }
    match data_block(input, consumed, len) {
        None => Parse::Incomplete,
        Some(Err(end)) => Parse::Refused(Refusal {
            error: MemcacheError::BadDataChunk,
            consumed: end,
            swallow: 0,
            quiet: false,
        }),
        Some(Ok((value, end))) => Parse::Complete {
            request: Request::MetaSet { key, flags, value },
            consumed: end,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::super::request::{find_byte, word_end, words};

    /// The eight-bytes-at-a-time scan finds the first space (and newline) exactly where a
    /// byte-by-byte scan does: at every length, start and place of the byte, with bytes that
    /// differ from it by one bit around it.
    #[test]
    fn word_end_and_find_byte_are_the_first_match_at_every_position() {
        for target in [b' ', b'\n'] {
            for len in 0..=24usize {
                for at in 0..=len {
                    for filler in [b'a', 0x00, target ^ 1, target ^ 0x80, target ^ 0x40] {
                        let mut line = vec![filler; len];
                        if at < len {
                            line[at] = target;
                            // A second one later must not be the one found.
                            if at + 3 < len {
                                line[at + 3] = target;
                            }
                        }
                        for start in 0..=at {
                            let want = line[start..]
                                .iter()
                                .position(|&b| b == target)
                                .map_or(len, |p| start + p);
                            let got = find_byte(&line, start, target);
                            assert_eq!(got, want, "{line:?} from {start}");
                            if target == b' ' {
                                assert_eq!(word_end(&line, start), want);
                            }
                        }
                    }
                }
            }
        }
    }

    /// `words` splits as memcached does (runs of bytes between spaces, empty ones skipped),
    /// the same as a split on ' ' without the empty pieces, for every line of spaces and
    /// letters up to 12 bytes.
    #[test]
    fn words_are_the_nonempty_pieces_between_spaces() {
        for len in 0..=12u32 {
            for bits in 0..(1u32 << len) {
                let line: Vec<u8> = (0..len)
                    .map(|i| {
                        if bits >> i & 1 == 1 {
                            b' '
                        } else {
                            b'k' + i as u8
                        }
                    })
                    .collect();
                let want: Vec<&[u8]> = line
                    .split(|&b| b == b' ')
                    .filter(|w| !w.is_empty())
                    .collect();
                assert_eq!(words(&line).collect::<Vec<_>>(), want, "{line:?}");
            }
        }
    }
}
