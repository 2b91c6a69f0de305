//! The codec against the real memcached (1.6.18 from the system's packages): for each probe,
//! the codec's verdicts predict memcached's replies, and the test checks the prediction.
//!
//! ```text
//!   probe + "mn\r\n" ──parse_request, repeatedly──► expected: the error lines (Refused and
//!        │                                          not quiet), in order; a close (Close,
//!        │                                          quit); swallowed bytes skipped
//!        └──────────────── memcached ─────────────► its reply, walked line by line (VALUE
//!                                                   and VA data blocks skipped): the error
//!                                                   lines, and whether it closed
//! ```
//!
//! Equal error lines prove the texts, which requests are refused, the `noreply` rule, and
//! where each refused request ends (a wrong `consumed` or `swallow` would misread the bytes
//! after it and the trailing `mn` would not line up). Probes come from a fixed list of edge
//! cases and from a seeded generator. memcached missing: skipped, or failed under
//! `DIRECTKV_REQUIRE_PEERS` (see `directkv_testkit::peer`).

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use directkv_proto::memcache::{parse_request, MemcacheLimits, Parse, Request};
use directkv_sys::process::ServerProcess;
use directkv_testkit::peer::require_program;

/// Longest wait for memcached's whole answer to one probe.
const REPLY_DEADLINE: Duration = Duration::from_secs(10);
/// Random probes per run.
const RANDOM_PROBES: usize = 3000;
/// memcached's answer to a semantic refusal (the value is not a number), which the codec
/// cannot predict: left out of the comparison.
const SEMANTIC_ERROR: &str = "CLIENT_ERROR cannot increment or decrement non-numeric value";
const STARTS_TRIED: usize = 5;

fn start_memcached() -> Option<ServerProcess> {
    require_program("memcached", "memcached")?;
    let mut last_error = String::new();
    for _ in 0..STARTS_TRIED {
        match ServerProcess::memcached(64, None) {
            Ok(server) => return Some(server),
            Err(e) => last_error = e,
        }
    }
    panic!("memcached did not start: {last_error}");
}

/// What the codec predicts for a byte stream.
#[derive(Debug, PartialEq, Eq)]
struct Prediction {
    errors: Vec<String>,
    closes: bool,
    /// `MN` lines expected before the end (when it does not close).
    noops: usize,
    /// The stream ends with a whole `mn`: its MN is the last line of the answer.
    ends_with_noop: bool,
}

/// Runs the codec over `stream`; `None` when it ends inside a request (the probe is not
/// self-contained: a data block longer than what follows, a swallow past the end).
fn predict(stream: &[u8]) -> Option<Prediction> {
    let limits = MemcacheLimits::default();
    let mut prediction = Prediction {
        errors: Vec::new(),
        closes: false,
        noops: 0,
        ends_with_noop: false,
    };
    let mut pos = 0;
    while pos < stream.len() {
        match parse_request(&stream[pos..], &limits) {
            Parse::Complete { request, consumed } => {
                match request {
                    Request::Quit => {
                        prediction.closes = true;
                        return Some(prediction);
                    }
                    Request::MetaNoop => {
                        prediction.noops += 1;
                        prediction.ends_with_noop = pos + consumed == stream.len();
                    }
                    _ => {}
                }
                pos += consumed;
            }
            Parse::Refused(refusal) => {
                if !refusal.quiet {
                    prediction.errors.push(refusal.error.text().to_string());
                }
                pos += refusal.consumed + refusal.swallow;
                if pos > stream.len() {
                    return None;
                }
            }
            Parse::Close => {
                prediction.closes = true;
                return Some(prediction);
            }
            Parse::Incomplete => return None,
        }
    }
    Some(prediction)
}

/// memcached's reply walked: its top-level lines (data blocks skipped), or `None` when it
/// ends inside a data block.
fn reply_lines(reply: &[u8]) -> Option<Vec<String>> {
    let mut lines = Vec::new();
    let mut pos = 0;
    while pos < reply.len() {
        let end = pos + reply[pos..].windows(2).position(|w| w == b"\r\n")?;
        let line = String::from_utf8_lossy(&reply[pos..end]).into_owned();
        pos = end + 2;
        let words: Vec<&str> = line.split(' ').collect();
        let data_len = match words.as_slice() {
            ["VALUE", _, _, len, ..] => len.parse::<usize>().ok(),
            ["VA", len, ..] => len.parse::<usize>().ok(),
            _ => None,
        };
        if let Some(len) = data_len {
            pos += len + 2;
            if pos > reply.len() {
                return None;
            }
        }
        lines.push(line);
    }
    Some(lines)
}

/// Sends `stream` on a new connection and reads memcached's answer: the error lines and
/// whether it closed, once `noops` MN lines came or the connection closed.
fn ask(addr: SocketAddr, stream: &[u8], noops: usize) -> (Vec<String>, bool) {
    let mut conn = TcpStream::connect(addr).expect("connect to memcached");
    conn.set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    conn.write_all(stream).expect("send to memcached");
    let deadline = Instant::now() + REPLY_DEADLINE;
    let mut reply = Vec::new();
    let mut buf = [0u8; 65536];
    let mut closed = false;
    loop {
        if let Some(lines) = reply_lines(&reply) {
            if noops > 0 && lines.iter().filter(|line| *line == "MN").count() >= noops {
                break;
            }
        }
        assert!(
            Instant::now() < deadline,
            "memcached did not finish answering {:?}: {:?}",
            String::from_utf8_lossy(&stream[..stream.len().min(300)]),
            String::from_utf8_lossy(&reply)
        );
        match conn.read(&mut buf) {
            Ok(0) => {
                closed = true;
                break;
            }
            Ok(n) => reply.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) if e.kind() == ErrorKind::ConnectionReset => {
                closed = true;
                break;
            }
            Err(e) => panic!("reading from memcached: {e}"),
        }
    }
    let lines = reply_lines(&reply).unwrap_or_default();
    let errors = lines
        .into_iter()
        .filter(|line| {
            (line.starts_with("ERROR")
                || line.starts_with("CLIENT_ERROR")
                || line.starts_with("SERVER_ERROR"))
                && line != SEMANTIC_ERROR
        })
        .collect();
    (errors, closed)
}

/// Checks one probe; false when it was skipped (not self-contained).
fn check(addr: SocketAddr, probe: &[u8]) -> bool {
    // A probe the codec hangs up on is sent alone: memcached closes once it has the bytes.
    if predict(probe).is_some_and(|p| p.closes) {
        let expected = predict(probe).unwrap();
        let (errors, closed) = ask(addr, probe, 0);
        assert!(
            closed,
            "memcached kept {:?} open",
            String::from_utf8_lossy(&probe[..80])
        );
        assert_eq!(errors, expected.errors);
        return true;
    }
    // memcached can carry a connection's pending `noreply` over to a later connection that
    // gets the same descriptor; its first reply line (VERSION, never compared) absorbs it.
    let mut stream = b"version\r\n".to_vec();
    stream.extend_from_slice(probe);
    stream.extend_from_slice(b"mn\r\n");
    // Skipped when the codec ends inside a request, or when the trailing mn became data.
    let Some(expected) = predict(&stream).filter(|p| p.closes || p.ends_with_noop) else {
        return false;
    };
    let (errors, closed) = ask(
        addr,
        &stream,
        if expected.closes { 0 } else { expected.noops },
    );
    assert_eq!(
        (&errors, closed),
        (&expected.errors, expected.closes),
        "probe {:?}",
        String::from_utf8_lossy(&probe[..probe.len().min(400)])
    );
    true
}

fn edge_probes() -> Vec<Vec<u8>> {
    let k250 = "a".repeat(250);
    let k251 = "a".repeat(251);
    let mut probes: Vec<Vec<u8>> = [
        "foo\r\n",
        "get\r\n",
        "GET k\r\n",
        "\r\n",
        "\n",
        "   \r\n",
        "get k\n",
        "get  \r\n",
        "get k  \r\n",
        "gat 10\r\n",
        "gat x k\r\n",
        "gats 10 k\r\n",
        "set k 0 0 1\r\nab\r\n",
        "set k 0 0 -1\r\n",
        "set k 0 0 x\r\n",
        "set k x 0 1\r\na\r\n",
        "set k 0 x 1\r\na\r\n",
        "set k 0 -1 1\r\na\r\n",
        "set k 0 0\r\n",
        "set k 0 0 1 2 3\r\n",
        "set k 0 0 1 noreply\r\na\r\n",
        "set k 0 0 1 bogus\r\na\r\n",
        "set k 0 0 1 noreply\r\nab\r\n",
        "set k 4294967297 0 1\r\na\r\n",
        "set k 0 4294967296 1\r\na\r\n",
        "set k 0 0 2147483646\r\n",
        "set k 0 0 99999999999999999999\r\n",
        "set k 0 0 1\r\n\r\n\r\n",
        "set k 0 0 1 \r\na\r\n",
        "set k 0 0 01\r\na\r\n",
        "set k 0 0 +1\r\na\r\n",
        "set  k  0 0 1\r\na\r\n",
        "set k 0 0 1 noreply x\r\na\r\n",
        "cas k 0 0 1\r\na\r\n",
        "cas k 0 0 1 x\r\na\r\n",
        "cas k 0 0 1 -1\r\na\r\n",
        "cas k 0 0 1 5 noreply\r\na\r\n",
        "set n 0 0 2\r\n10\r\nincr n 5\r\ndecr n 100\r\nincr n -1\r\nincr n x\r\n",
        "incr n 18446744073709551616\r\nincr nokey 1\r\nincr n\r\nincr n 1 2\r\n",
        "incr n 1 noreply x\r\nincr n x noreply\r\n",
        "touch k\r\ntouch k x\r\ntouch k 10\r\n",
        "touch k 10 noreply\r\ntouch k x noreply\r\n",
        "delete k 0\r\ndelete k 5\r\ndelete k noreply\r\ndelete\r\ndelete k 0 noreply\r\n",
        "delete k 5 noreply\r\ndelete k 0 0 0\r\n",
        "flush_all\r\nflush_all 0\r\nflush_all x\r\nflush_all -1\r\nflush_all noreply\r\n",
        "flush_all 1 2\r\nflush_all 0 noreply\r\nflush_all 1 2 3\r\nflush_all x noreply\r\n",
        "verbosity\r\nverbosity 1\r\nverbosity x\r\nverbosity 1 noreply\r\nverbosity 1 2 3\r\n",
        "verbosity 1 2\r\nverbosity noreply\r\n",
        "version\r\nversion x\r\n",
        "quit\r\n",
        "quit x\r\n",
        "stats\r\n",
        "mn\r\nmn x\r\n",
        "ms mk 2\r\nhi\r\nmg mk v f t s c k O123 q\r\nmg nokey v\r\nmg nokey v q\r\n",
        "mg mk v Z\r\n",
        "mg\r\n",
        "mg mk vv\r\n",
        "ms mk\r\n",
        "ms mk x\r\n",
        "ms mk -1\r\n",
        "ms mk 2 MX\r\nhi\r\n",
        "ms mk 2 MA\r\nhi\r\n",
        "ms mk 2 T-1\r\nhi\r\n",
        "ms mk 2 Tx\r\nhi\r\n",
        "ms mk 2 Fx\r\nhi\r\n",
        "ms mk 2\r\nhix\r\n",
        "ms mk 2 q\r\nhix\r\n",
        "md mk q\r\nmd mk\r\n",
        "ma mk\r\nma mk N0 J13\r\n",
        "ma mk MD D5 v\r\nma mk Mx\r\nma mk Dx\r\n",
        "me mk\r\nme\r\nme mk x\r\n",
        "mg bWs= b v\r\nmg b!! b v\r\nme bWs= b\r\n",
        "mg mk k k k\r\n",
        "mz mk\r\n",
        "mg mk a b c d e f g h i j k l m n o p q r\r\n",
        "mg mk a b c d e f g h i j k l m n o p q\r\n",
        "mg mk s t c f k O1 v q h l N5 T5 u I R5\r\n",
        "ms mk 1 Z\r\na\r\n",
        "ms mk 1 k k\r\na\r\n",
        "ms mk 1 noreply\r\na\r\n",
        "ms mk 1 T1 T2\r\na\r\n",
        "ms mk 1 a b c d e f g h i j k l m n o p q\r\na\r\n",
        "ms mk 1 Mxx\r\na\r\n",
        "ms mk 1 Ms\r\na\r\nms mk 1 MR\r\na\r\nms bWs= 1 b MZ\r\na\r\n",
        "md mk x\r\nmd mk C5 I T5 q\r\nmd\r\n",
        "ma mk Z\r\nma mk Mi\r\nma mk M+\r\n",
        "md mk a b c d e f g h i j k l m n o p q r\r\n",
        "ma mk a b c d e f g h i j k l m n o p q r\r\n",
        "mg mk\tv\r\n",
        "mg mk O1111111111111111111111111111111\r\n",
        "mg mk O11111111111111111111111111111111\r\n",
        "md mk O11111111111111111111111111111111\r\n",
        "ma mk O11111111111111111111111111111111\r\n",
        "ms mk 1 O11111111111111111111111111111111\r\na\r\n",
        "mg mk T\r\nmg mk M\r\n",
        "mg mk Tx Jx\r\nmg mk Jx Tx\r\nms mk 1 Tx Fx\r\na\r\nms mk 1 Fx Tx\r\na\r\n",
        "set k 0 0 1\r\na\r\nincr k 1\r\nma k\r\n",
    ]
    .iter()
    .map(|probe| probe.as_bytes().to_vec())
    .collect();
    for line in [
        format!("get {k251}\r\n"),
        format!("get {k250}\r\n"),
        format!("get a {k251} b\r\n"),
        format!("set {k251} 0 0 1\r\na\r\n"),
        format!("set {k250} 0 0 1\r\na\r\n"),
        format!("mg {k251} v\r\n"),
        format!("ms {k251} 1\r\na\r\n"),
        format!("incr {k251} 1\r\ntouch {k251} 1\r\ndelete {k251}\r\n"),
        format!("get {}\r\n", "k ".repeat(1500)),
    ] {
        probes.push(line.into_bytes());
    }
    // Too large: refused from the line, the data swallowed, the next command read.
    for head in [
        "set k 0 0 2000000\r\n",
        "set k 0 0 2000000 noreply\r\n",
        "ms mk 2000000 T1\r\n",
    ] {
        let mut probe = head.as_bytes().to_vec();
        probe.resize(probe.len() + 2_000_002, b'x');
        probe.extend_from_slice(b"get k\r\n");
        probes.push(probe);
    }
    // Over-long lines close the connection; get and gets are let through.
    probes.push(vec![b'x'; 2049]);
    probes.push([b"gat ".as_slice(), &[b'x'; 3000]].concat());
    probes.push([b"   set k ".as_slice(), &[b'1'; 3000]].concat());
    probes
}

#[test]
fn edge_cases_get_memcacheds_replies() {
    let Some(memcached) = start_memcached() else {
        return;
    };
    for probe in edge_probes() {
        assert!(
            check(memcached.addr, &probe),
            "edge probe not self-contained: {:?}",
            String::from_utf8_lossy(&probe[..probe.len().min(200)])
        );
    }
}

/// xorshift64*: a fixed sequence, so a failure replays.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

const COMMANDS: &[&str] = &[
    "get",
    "gets",
    "gat",
    "gats",
    "set",
    "add",
    "replace",
    "append",
    "prepend",
    "cas",
    "incr",
    "decr",
    "delete",
    "touch",
    "flush_all",
    "verbosity",
    "version",
    "mn",
    "mg",
    "ms",
    "md",
    "ma",
    "me",
    "foo",
    "GET",
];
const KEYS: &[&str] = &["k", "kk", "n", "bWs=", "!!", "a b"];
const NUMBERS: &[&str] = &[
    "0",
    "1",
    "2",
    "-1",
    "+2",
    "x",
    "01",
    "4294967297",
    "2147483646",
    "99999999999999999999",
    "18446744073709551615",
    "18446744073709551616",
    "-0",
    "1x",
    "30",
];
/// Meta flags, without `E` (memcached 1.6.18 does not know it).
const FLAGS: &[&str] = &[
    "v", "k", "f", "t", "s", "c", "q", "h", "l", "u", "I", "b", "O1", "T10", "T-1", "Tx", "T",
    "N5", "Nx", "R5", "F3", "Fx", "C5", "Cx", "J5", "Jx", "D5", "Dx", "MA", "MS", "ME", "MR", "MP",
    "MI", "M+", "M-", "MD", "Mx", "MSS", "M", "Z", "x", "P", "L", "noreply", "O123456",
];

/// One random request: a command, words drawn by kind, maybe a data block.
fn random_probe(rng: &mut Rng) -> Vec<u8> {
    let command = rng.pick(COMMANDS);
    let mut words = vec![command.to_string()];
    let meta = command.len() == 2 && command.starts_with('m');
    let words_max = if meta { 8 } else { 7 };
    let mut data_len = None;
    for index in 1..=rng.below(words_max) {
        let word = if index == 1 && rng.below(10) < 8 {
            rng.pick(KEYS).to_string()
        } else if meta && index > 1 && !(command == "ms" && index == 2) {
            rng.pick(FLAGS).to_string()
        } else if rng.below(10) < 7 {
            rng.below(4).to_string()
        } else if rng.below(10) < 8 {
            rng.pick(NUMBERS).to_string()
        } else {
            rng.pick(&["noreply", "x", "0"]).to_string()
        };
        let length_word = if command == "ms" { 2 } else { 4 };
        if index == length_word {
            data_len = word.parse::<usize>().ok().filter(|&len| len < 8);
        }
        words.push(word);
    }
    if rng.below(8) == 0 {
        words.push("noreply".into());
    }
    let separator = if rng.below(6) == 0 { "  " } else { " " };
    let mut probe = words.join(separator).into_bytes();
    probe.extend_from_slice(if rng.below(8) == 0 { b"\n" } else { b"\r\n" });
    if let Some(len) = data_len {
        probe.extend(std::iter::repeat_n(b'z', len));
        probe.extend_from_slice(match rng.below(10) {
            0 => b"xy",
            1 => b"",
            _ => b"\r\n",
        });
    }
    probe
}

#[test]
fn random_requests_get_memcacheds_replies() {
    let Some(memcached) = start_memcached() else {
        return;
    };
    // A fixed seed by default; DIRECTKV_MEMCACHE_SEED (decimal) explores others.
    let seed = std::env::var("DIRECTKV_MEMCACHE_SEED")
        .ok()
        .and_then(|seed| seed.parse().ok())
        .unwrap_or(0x6d65_6d63_6163_6865);
    let mut rng = Rng(seed);
    let mut checked = 0;
    for _ in 0..RANDOM_PROBES {
        // Two requests per probe, so the first one's end is checked by the second.
        let mut probe = random_probe(&mut rng);
        probe.extend(random_probe(&mut rng));
        if check(memcached.addr, &probe) {
            checked += 1;
        }
    }
    assert!(
        checked > RANDOM_PROBES / 2,
        "only {checked} probes were self-contained"
    );
    eprintln!("seed {seed:#x}: {checked} of {RANDOM_PROBES} random probes checked");
}

/// The numbers the codec reads are the ones memcached stores: flags truncated to 32 bits,
/// a sign and white space accepted.
#[test]
fn stored_flags_are_read_as_memcached_reads_them() {
    let Some(memcached) = start_memcached() else {
        return;
    };
    for flags in ["4294967297", "4294967295", "+7", "0", "12\t3"] {
        let set = format!("set fk {flags} 0 2\r\nab\r\n");
        let Parse::Complete {
            request: Request::Store { flags: parsed, .. },
            ..
        } = parse_request(set.as_bytes(), &MemcacheLimits::default())
        else {
            panic!("{set:?} not parsed as a store");
        };
        let mut conn = TcpStream::connect(memcached.addr).unwrap();
        conn.write_all(set.as_bytes()).unwrap();
        conn.write_all(b"get fk\r\n").unwrap();
        let expected = format!("STORED\r\nVALUE fk {parsed} 2\r\nab\r\nEND\r\n");
        let mut reply = vec![0u8; expected.len()];
        conn.set_read_timeout(Some(REPLY_DEADLINE)).unwrap();
        conn.read_exact(&mut reply).unwrap();
        assert_eq!(String::from_utf8_lossy(&reply), expected, "flags {flags:?}");
    }
}

/// One connection to memcached, asked one request at a time.
struct Session {
    conn: TcpStream,
}

impl Session {
    fn new(addr: SocketAddr) -> Self {
        let conn = TcpStream::connect(addr).expect("connect to memcached");
        conn.set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        Self { conn }
    }

    /// Sends `request` and returns memcached's reply, which must be exactly as long as
    /// `expected_len` bytes (the length of what the writers produced).
    fn ask(&mut self, request: &[u8], expected_len: usize) -> Vec<u8> {
        self.conn.write_all(request).unwrap();
        let deadline = Instant::now() + REPLY_DEADLINE;
        let mut reply = Vec::new();
        let mut buf = [0u8; 4096];
        while reply.len() < expected_len || !reply.ends_with(b"\r\n") {
            assert!(
                Instant::now() < deadline,
                "no whole reply to {:?}: {:?}",
                String::from_utf8_lossy(request),
                String::from_utf8_lossy(&reply)
            );
            match self.conn.read(&mut buf) {
                Ok(0) => panic!("memcached closed on {:?}", String::from_utf8_lossy(request)),
                Ok(n) => reply.extend_from_slice(&buf[..n]),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(e) => panic!("reading from memcached: {e}"),
            }
        }
        reply
    }

    /// Asks `request` and checks memcached's reply is byte for byte what `write` writes.
    fn expect(&mut self, request: &str, write: impl FnOnce(&mut Vec<u8>)) {
        let mut expected = Vec::new();
        write(&mut expected);
        let reply = self.ask(request.as_bytes(), expected.len());
        assert_eq!(
            String::from_utf8_lossy(&reply),
            String::from_utf8_lossy(&expected),
            "reply to {request:?}"
        );
    }

    /// The CAS unique of `key`, read with `gets`.
    fn cas_of(&mut self, key: &str) -> u64 {
        self.conn
            .write_all(format!("mg {key} c\r\n").as_bytes())
            .unwrap();
        let reply = self.ask(b"", 4);
        let text = String::from_utf8(reply).unwrap();
        text.trim_end()
            .strip_prefix("HD c")
            .and_then(|cas| cas.parse().ok())
            .unwrap_or_else(|| panic!("no CAS in {text:?}"))
    }
}

/// The writers produce memcached's own reply bytes for every kind of reply.
#[test]
fn replies_are_written_as_memcached_writes_them() {
    use directkv_proto::memcache::{
        write_client_error, write_meta_end, write_meta_flag, write_meta_flag_number,
        write_meta_status, write_meta_value_header, write_number, write_status, write_value,
        write_version, MetaStatus, Status,
    };
    let Some(memcached) = start_memcached() else {
        return;
    };
    let mut s = Session::new(memcached.addr);
    s.expect("flush_all\r\n", |o| write_status(o, Status::Ok));
    s.expect("version\r\n", |o| write_version(o, "1.6.18"));
    s.expect("set a 7 0 2\r\nhi\r\n", |o| write_status(o, Status::Stored));
    s.expect("add a 0 0 1\r\nx\r\n", |o| {
        write_status(o, Status::NotStored)
    });
    s.expect("get a nokey\r\n", |o| {
        write_value(o, b"a", 7, b"hi", None);
        write_status(o, Status::End);
    });
    let cas = s.cas_of("a");
    s.expect("gets a\r\n", |o| {
        write_value(o, b"a", 7, b"hi", Some(cas));
        write_status(o, Status::End);
    });
    s.expect(&format!("cas a 0 0 1 {}\r\nx\r\n", cas + 1000), |o| {
        write_status(o, Status::Exists)
    });
    s.expect("cas nokey 0 0 1 1\r\nx\r\n", |o| {
        write_status(o, Status::NotFound)
    });
    s.expect("touch a 100\r\n", |o| write_status(o, Status::Touched));
    s.expect("delete a\r\n", |o| write_status(o, Status::Deleted));
    s.expect("delete a\r\n", |o| write_status(o, Status::NotFound));
    s.expect("set n 0 0 20\r\n18446744073709551615\r\n", |o| {
        write_status(o, Status::Stored)
    });
    s.expect("incr n 2\r\n", |o| write_number(o, 1));
    s.expect("decr n 5\r\n", |o| write_number(o, 0));
    s.expect("set t 0 0 1\r\nx\r\n", |o| write_status(o, Status::Stored));
    s.expect("incr t 1\r\n", |o| {
        write_client_error(o, "cannot increment or decrement non-numeric value")
    });
    s.expect("mn\r\n", |o| {
        write_meta_status(o, MetaStatus::Noop);
        write_meta_end(o, None);
    });
    s.expect("ms m 2 F5 T0\r\nhi\r\n", |o| {
        write_meta_status(o, MetaStatus::Header);
        write_meta_end(o, None);
    });
    s.expect("mg m v f t s k O77\r\n", |o| {
        write_meta_value_header(o, 2);
        write_meta_flag_number(o, b'f', 5);
        write_meta_flag_number(o, b't', -1);
        write_meta_flag_number(o, b's', 2);
        write_meta_flag(o, b'k', b"m");
        write_meta_flag(o, b'O', b"77");
        write_meta_end(o, Some(b"hi"));
    });
    s.expect("mg nokey v\r\n", |o| {
        write_meta_status(o, MetaStatus::Miss);
        write_meta_end(o, None);
    });
    s.expect("md nokey\r\n", |o| {
        write_meta_status(o, MetaStatus::NotFound);
        write_meta_end(o, None);
    });
    s.expect("ms m 1 C1\r\nx\r\n", |o| {
        write_meta_status(o, MetaStatus::Exists);
        write_meta_end(o, None);
    });
    s.expect("ms nokey 1 MR\r\nx\r\n", |o| {
        write_meta_status(o, MetaStatus::NotStored);
        write_meta_end(o, None);
    });
    s.expect("mg newkey N30 s\r\n", |o| {
        write_meta_status(o, MetaStatus::Header);
        write_meta_flag_number(o, b's', 0);
        write_meta_flag(o, b'W', b"");
        write_meta_end(o, None);
    });
}
