//! Raw RESP replies for differential tests: a frame splitter that finds where one reply ends
//! without interpreting it, and a client that hands back each reply's exact bytes.
//!
//! The project's own parser (`directkv_proto::resp::parse_reply`) maps RESP3 types onto fewer
//! variants, so a comparison through it cannot tell a map (`%`) from an array (`*`), a null
//! (`_`) from a null bulk (`$-1`), or a verbatim string (`=`) from a bulk one. Differential
//! tests compare these bytes instead.
//!
//! ```text
//!   socket bytes ──frame_len──> Ok(Some(n)): the first n bytes are one whole reply
//!                           └─> Ok(None): need more bytes   Err: not RESP
//!   RESP2: + - : (line)  $ (length, -1 null)  * (count, -1 null)
//!   RESP3: _ , # ( (line)  ! = (length)  % (2 x count)  ~ > (count)  | (2 x count, then a reply)
//! ```
//!
//! Non-goals: streamed (`$?`) replies, which neither directkv nor Redis 7 sends; interpreting
//! anything (callers that must, e.g. to compare floats numerically, parse the frame's bytes
//! with the project's parser after the split).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// Longest header line (type byte, length or text, CRLF) before the input is called not RESP;
/// error and status lines can be long (Redis quotes up to 128 bytes of each argument).
pub const LINE_LEN_MAX: usize = 64 << 10;
/// Deepest nesting of aggregates followed (Redis nests replies a handful of levels).
pub const DEPTH_MAX: usize = 32;
/// How long a client waits for a reply, or for the server to close, before failing the test.
pub const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// The length of the first whole reply in `buf`, `None` when it is not all there yet.
pub fn frame_len(buf: &[u8]) -> Result<Option<usize>, String> {
    frame_at(buf, 0, 0)
}

/// The end of the reply starting at `at`.
fn frame_at(buf: &[u8], at: usize, depth: usize) -> Result<Option<usize>, String> {
    if depth > DEPTH_MAX {
        return Err(format!("replies nested deeper than {DEPTH_MAX}"));
    }
    let Some((line, next)) = line_at(buf, at)? else {
        return Ok(None);
    };
    let (kind, text) = (line[0], &line[1..]);
    let count = |t: &[u8]| -> Result<i64, String> {
        std::str::from_utf8(t)
            .ok()
            .and_then(|t| t.parse().ok())
            .ok_or_else(|| format!("bad length {:?}", String::from_utf8_lossy(line)))
    };
    match kind {
        b'+' | b'-' | b':' | b'_' | b',' | b'#' | b'(' => Ok(Some(next)),
        b'$' | b'!' | b'=' => match count(text)? {
            -1 if kind == b'$' => Ok(Some(next)),
            n if n >= 0 => {
                let end = next + n as usize + 2;
                if buf.len() < end {
                    return Ok(None);
                }
                if &buf[end - 2..end] != b"\r\n" {
                    return Err(format!("a {n}-byte string not ended by CRLF"));
                }
                Ok(Some(end))
            }
            n => Err(format!("string length {n}")),
        },
        b'*' | b'~' | b'>' | b'%' | b'|' => {
            let n = count(text)?;
            if n == -1 && kind == b'*' {
                return Ok(Some(next));
            }
            if n < 0 {
                return Err(format!("aggregate length {n}"));
            }
            let mut elements = n as usize * if matches!(kind, b'%' | b'|') { 2 } else { 1 };
            // An attribute annotates the reply that follows it.
            if kind == b'|' {
                elements += 1;
            }
            let mut end = next;
            for _ in 0..elements {
                match frame_at(buf, end, depth + 1)? {
                    Some(e) => end = e,
                    None => return Ok(None),
                }
            }
            Ok(Some(end))
        }
        k => Err(format!("unknown reply type {:?}", k as char)),
    }
}

/// The line at `at` without its CRLF, and where the next one starts.
fn line_at(buf: &[u8], at: usize) -> Result<Option<(&[u8], usize)>, String> {
    let rest = &buf[at.min(buf.len())..];
    match rest.windows(2).position(|w| w == b"\r\n") {
        Some(0) => Err("an empty line where a reply starts".to_string()),
        Some(i) => Ok(Some((&rest[..i], at + i + 2))),
        None if rest.len() > LINE_LEN_MAX => Err(format!("a line over {LINE_LEN_MAX} bytes")),
        None => Ok(None),
    }
}

/// A connection that reads replies as raw frames.
pub struct RawClient {
    s: TcpStream,
    buf: Vec<u8>,
}

impl RawClient {
    pub fn connect(addr: SocketAddr) -> RawClient {
        let s = TcpStream::connect(addr).expect("connect");
        s.set_read_timeout(Some(READ_TIMEOUT)).expect("timeout");
        s.set_nodelay(true).expect("nodelay");
        RawClient { s, buf: Vec::new() }
    }

    /// A second handle on the socket, to write from another thread while this one reads.
    pub fn writer(&self) -> TcpStream {
        self.s.try_clone().expect("clone the socket")
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.s.write_all(bytes).expect("send");
    }

    /// Sends one command as a RESP array of bulk strings.
    pub fn send(&mut self, args: &[&[u8]]) {
        self.send_raw(&encode(args));
    }

    /// Sends one command and returns its reply's bytes.
    pub fn call(&mut self, args: &[&[u8]]) -> Vec<u8> {
        self.send(args);
        self.read()
    }

    /// `call` with text arguments.
    pub fn cmd(&mut self, args: &[&str]) -> Vec<u8> {
        let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
        self.call(&a)
    }

    /// The next reply's bytes (panics on timeout, close or bytes that are not RESP).
    pub fn read(&mut self) -> Vec<u8> {
        match self.try_read() {
            Ok(Some(frame)) => frame,
            Ok(None) => panic!("the server closed the connection before replying"),
            Err(e) => panic!("{e}"),
        }
    }

    /// The next reply's bytes; `Ok(None)` when the server closed the connection first.
    pub fn try_read(&mut self) -> Result<Option<Vec<u8>>, String> {
        loop {
            if let Some(n) = frame_len(&self.buf)? {
                return Ok(Some(self.buf.drain(..n).collect()));
            }
            let mut chunk = [0u8; 64 << 10];
            match self.s.read(&mut chunk) {
                Ok(0) => return Ok(None),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return Ok(None),
                Err(e) => return Err(format!("read: {e}")),
            }
        }
    }

    /// Whether the server closes the connection within `READ_TIMEOUT`, after sending whatever
    /// it still had to send (discarded). False if it is still open then.
    pub fn closes(&mut self) -> bool {
        let deadline = Instant::now() + READ_TIMEOUT;
        let mut chunk = [0u8; 4096];
        while Instant::now() < deadline {
            match self.s.read(&mut chunk) {
                Ok(0) => return true,
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
                Err(_) => return false,
            }
        }
        false
    }
}

/// `args` as a RESP array of bulk strings.
pub fn encode(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// Reply bytes for a message: escaped, shortened past `limit` bytes.
pub fn show(b: &[u8], limit: usize) -> String {
    let s = b.escape_ascii().to_string();
    if s.len() > limit {
        format!("\"{}...\" ({} bytes)", &s[..limit], b.len())
    } else {
        format!("\"{s}\"")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_whole_replies_of_every_type() {
        let cases: &[&[u8]] = &[
            b"+OK\r\n",
            b"-ERR x\r\n",
            b":-5\r\n",
            b"$-1\r\n",
            b"*-1\r\n",
            b"$0\r\n\r\n",
            b"$4\r\na\r\nb\r\n",
            b"_\r\n",
            b",1.5\r\n",
            b"#t\r\n",
            b"(123456789012345678901234567890\r\n",
            b"=7\r\ntxt:abc\r\n",
            b"!3\r\nERR\r\n",
            b"*2\r\n$1\r\na\r\n*0\r\n",
            b"%1\r\n$1\r\nk\r\n:1\r\n",
            b"~2\r\n:1\r\n:2\r\n",
            b">2\r\n+m\r\n$1\r\nx\r\n",
            b"|1\r\n+a\r\n+b\r\n:7\r\n",
        ];
        for &c in cases {
            let mut with_next = c.to_vec();
            with_next.extend_from_slice(b"+NEXT\r\n");
            assert_eq!(frame_len(&with_next), Ok(Some(c.len())), "{}", show(c, 80));
            for cut in 0..c.len() {
                assert_eq!(
                    frame_len(&c[..cut]),
                    Ok(None),
                    "{} cut at {cut}",
                    show(c, 80)
                );
            }
        }
    }

    #[test]
    fn refuses_what_is_not_resp() {
        for bad in [
            &b"x\r\n"[..],
            b"$-2\r\n",
            b"*-3\r\n",
            b"%-1\r\n",
            b"$1\r\nab\r\n",
            b"\r\n",
        ] {
            assert!(frame_len(bad).is_err(), "{}", show(bad, 80));
        }
    }
}
