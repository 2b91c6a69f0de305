//! `RespWriter`: replies in RESP2 or RESP3 (`HELLO 3`), appended to a caller-owned buffer.
//!
//! One method per reply type; the version decides the bytes where the two protocols differ:
//!
//! ```text
//!   method            RESP2                      RESP3
//!   null()            $-1\r\n                    _\r\n
//!   null_array()      *-1\r\n                    _\r\n
//!   map_len(n)        *<2n>\r\n                  %<n>\r\n
//!   double(1.5)       $3\r\n1.5\r\n              ,1.5\r\n
//!   boolean(true)     :1\r\n                     #t\r\n
//! ```
//!
//! The writer never fails and never checks the shape of what it writes: after `array_len(n)`
//! the caller writes exactly `n` replies. Text lines (`simple`, `error`) get every CR and LF
//! replaced by a space, as Redis does, so no caller can break the framing.

use std::io::Write;

use super::command::{push_decimal, push_header};

/// The protocol a connection speaks: RESP2 until the client sends `HELLO 3`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Version {
    #[default]
    Resp2,
    Resp3,
}

/// Writes replies to the end of `out`.
#[derive(Debug)]
pub struct RespWriter<'a> {
    out: &'a mut Vec<u8>,
    version: Version,
}

/// Longest text `{}` gives for an `f64` (`-0.000...5e-324` has 327 bytes), with room to spare.
const DOUBLE_TEXT_LEN_MAX: usize = 400;

impl<'a> RespWriter<'a> {
    pub fn new(out: &'a mut Vec<u8>, version: Version) -> Self {
        Self { out, version }
    }

    pub fn version(&self) -> Version {
        self.version
    }

    /// `+text`, e.g. `simple("OK")`.
    pub fn simple(&mut self, text: &str) {
        self.line(b'+', text.as_bytes());
    }

    /// `-text`. The text starts with the error code: `"ERR syntax error"`,
    /// `"WRONGTYPE Operation ..."`; the `err_*` functions give Redis' standard texts.
    pub fn error(&mut self, text: &str) {
        self.error_bytes(text.as_bytes());
    }

    /// `-text` from bytes that need not be UTF-8 (an error echoing a client's bytes raw, as
    /// Redis does).
    pub fn error_bytes(&mut self, text: &[u8]) {
        // As Redis's addReplyErrorFormat: line breaks at either end are trimmed, the ones
        // inside become spaces (`line`).
        let crlf = |b: &u8| *b == b'\r' || *b == b'\n';
        let start = text.iter().position(|b| !crlf(b)).unwrap_or(text.len());
        let end = text.iter().rposition(|b| !crlf(b)).map_or(start, |i| i + 1);
        self.line(b'-', &text[start..end]);
    }

    /// `:value`.
    pub fn integer(&mut self, value: i64) {
        self.out.push(b':');
        push_decimal(self.out, value.unsigned_abs(), value < 0);
        self.out.extend_from_slice(b"\r\n");
    }

    /// `$len` and the bytes.
    pub fn bulk(&mut self, bytes: &[u8]) {
        self.out.reserve(bytes.len() + 24);
        push_header(self.out, b'$', bytes.len());
        self.out.extend_from_slice(bytes);
        self.out.extend_from_slice(b"\r\n");
    }

    /// A missing value (GET of a missing key): `$-1` in RESP2, `_` in RESP3.
    pub fn null(&mut self) {
        self.out.extend_from_slice(match self.version {
            Version::Resp2 => b"$-1\r\n",
            Version::Resp3 => b"_\r\n",
        });
    }

    /// A missing aggregate: `*-1` in RESP2, `_` in RESP3.
    pub fn null_array(&mut self) {
        self.out.extend_from_slice(match self.version {
            Version::Resp2 => b"*-1\r\n",
            Version::Resp3 => b"_\r\n",
        });
    }

    /// `*len`; the caller then writes `len` replies.
    pub fn array_len(&mut self, len: usize) {
        push_header(self.out, b'*', len);
    }

    /// `%len` in RESP3, `*2len` in RESP2; the caller then writes `len` key-value pairs.
    pub fn map_len(&mut self, len: usize) {
        match self.version {
            Version::Resp2 => {
                let elements = len.checked_mul(2).expect("a map of usize::MAX / 2 pairs");
                push_header(self.out, b'*', elements);
            }
            Version::Resp3 => push_header(self.out, b'%', len),
        }
    }

    /// `,value` in RESP3, a bulk string in RESP2. The text is the shortest that reads back as
    /// the same `f64` (`1.5`, `3`, `0.1`, never an exponent), and `inf`, `-inf` or `nan`.
    pub fn double(&mut self, value: f64) {
        let mut text = [0u8; DOUBLE_TEXT_LEN_MAX];
        let len = format_double(value, &mut text);
        match self.version {
            Version::Resp2 => self.bulk(&text[..len]),
            Version::Resp3 => {
                self.out.push(b',');
                self.out.extend_from_slice(&text[..len]);
                self.out.extend_from_slice(b"\r\n");
            }
        }
    }

    /// `#t` / `#f` in RESP3, the integer 1 / 0 in RESP2.
    pub fn boolean(&mut self, value: bool) {
        let bytes: &[u8] = match (self.version, value) {
            (Version::Resp2, true) => b":1\r\n",
            (Version::Resp2, false) => b":0\r\n",
            (Version::Resp3, true) => b"#t\r\n",
            (Version::Resp3, false) => b"#f\r\n",
        };
        self.out.extend_from_slice(bytes);
    }

    /// `<marker>text\r\n` with CR and LF in `text` replaced by spaces.
    fn line(&mut self, marker: u8, text: &[u8]) {
        self.out.push(marker);
        let start = self.out.len();
        self.out.extend_from_slice(text);
        for byte in &mut self.out[start..] {
            if *byte == b'\r' || *byte == b'\n' {
                *byte = b' ';
            }
        }
        self.out.extend_from_slice(b"\r\n");
    }
}

/// Writes the text of `value` to the start of `text`, returns its length.
fn format_double(value: f64, text: &mut [u8; DOUBLE_TEXT_LEN_MAX]) -> usize {
    let mut cursor = &mut text[..];
    let written = if value.is_nan() {
        cursor.write_all(b"nan")
    } else if value.is_infinite() {
        cursor.write_all(if value > 0.0 { b"inf" } else { b"-inf" })
    } else {
        write!(cursor, "{value}")
    };
    written.expect("every f64 text fits DOUBLE_TEXT_LEN_MAX");
    DOUBLE_TEXT_LEN_MAX - cursor.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(version: Version, write: impl FnOnce(&mut RespWriter<'_>)) -> Vec<u8> {
        let mut out = Vec::new();
        write(&mut RespWriter::new(&mut out, version));
        out
    }

    fn double_text(value: f64) -> String {
        let mut text = [0u8; DOUBLE_TEXT_LEN_MAX];
        let len = format_double(value, &mut text);
        String::from_utf8(text[..len].to_vec()).unwrap()
    }

    #[test]
    fn doubles_use_the_shortest_text() {
        assert_eq!(double_text(1.5), "1.5");
        assert_eq!(double_text(3.0), "3");
        assert_eq!(double_text(0.1), "0.1");
        assert_eq!(double_text(-0.0), "-0");
        assert_eq!(double_text(1e20), "100000000000000000000");
        assert_eq!(double_text(f64::INFINITY), "inf");
        assert_eq!(double_text(f64::NEG_INFINITY), "-inf");
        assert_eq!(double_text(f64::NAN), "nan");
    }

    #[test]
    fn extreme_doubles_fit_and_read_back() {
        let extremes = [
            f64::MAX,
            f64::MIN,
            f64::MIN_POSITIVE,
            -f64::MIN_POSITIVE,
            5e-324,
            -5e-324,
        ];
        for value in extremes {
            let text = double_text(value);
            assert!(text.len() <= 327, "{value:e}: {} bytes", text.len());
            assert_eq!(text.parse::<f64>().unwrap(), value);
        }
    }

    #[test]
    fn lines_cannot_break_framing() {
        let out = written(Version::Resp2, |w| w.error("ERR a\r\nb\nc"));
        assert_eq!(out, b"-ERR a  b c\r\n");
        let out = written(Version::Resp2, |w| {
            w.error_bytes(b"ERR Unsupported option \r\n")
        });
        assert_eq!(out, b"-ERR Unsupported option \r\n");
        let out = written(Version::Resp3, |w| w.simple("\n"));
        assert_eq!(out, b"+ \r\n");
    }

    #[test]
    fn integers_cover_the_extremes() {
        let out = written(Version::Resp2, |w| {
            w.integer(i64::MIN);
            w.integer(i64::MAX);
            w.integer(0);
            w.integer(-1);
        });
        assert_eq!(
            out,
            b":-9223372036854775808\r\n:9223372036854775807\r\n:0\r\n:-1\r\n"
        );
    }
}
