//! A real `directkv serve` process at its file-descriptor limit (issue 19 item 8). It used to
//! spin its acceptor at 100% of a core on EMFILE while new clients hung with no answer. Now
//! it raises its soft `RLIMIT_NOFILE` to the hard limit at start, warns when `connections_max`
//! is more than the limit allows, and at the limit answers a new client
//! `-ERR max number of clients reached` and closes it, without burning CPU, and serves again
//! as soon as clients leave. Every server runs under a low limit set by the shell that execs
//! it (`ServerProcess::directkv_serve_with_open_files`) and is stopped by PID when dropped.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

use directkv_sys::process::ServerProcess;

const EXE: &str = env!("CARGO_BIN_EXE_directkv");
/// The open-file limit the servers run under: room for a few dozen clients.
const OPEN_FILES: u64 = 64;
/// How long a client may wait for an answer before the server counts as hung.
const ANSWER_DEADLINE: Duration = Duration::from_secs(5);
/// CPU the server may use over a second at its limit (it used to use a whole second).
const IDLE_CPU_SECS_MAX: f64 = 0.2;

const PING: &[u8] = b"*1\r\n$4\r\nPING\r\n";
const REFUSED: &[u8] = b"-ERR max number of clients reached\r\n";

fn serve(soft: u64, hard: u64) -> ServerProcess {
    ServerProcess::directkv_serve_with_open_files(
        Path::new(EXE),
        &["--shards", "1", "--memory", "8M", "--ocsm-port", "0"],
        soft,
        hard,
    )
    .expect("directkv serve starts")
}

/// What a new client got for a PING.
enum Answer {
    /// +PONG: the connection is served (kept open).
    Pong(TcpStream),
    /// An error line, then the connection closed.
    Refused(Vec<u8>),
    /// Closed without a word.
    Closed,
}

/// Connects and sends PING; panics if nothing comes back within `ANSWER_DEADLINE`.
fn ping(addr: SocketAddr) -> Answer {
    let mut s = TcpStream::connect(addr).expect("connect (the kernel's backlog accepts)");
    s.set_read_timeout(Some(ANSWER_DEADLINE)).unwrap();
    // A refused client may be closed before the PING arrives: the write may fail then.
    let _ = s.write_all(PING);
    let mut got = Vec::new();
    let mut buf = [0u8; 64];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::ConnectionReset) => break,
            Err(e) => panic!("no answer within {ANSWER_DEADLINE:?} ({e}); got {got:?}"),
        }
        if got == b"+PONG\r\n" {
            return Answer::Pong(s);
        }
    }
    if got.is_empty() {
        Answer::Closed
    } else {
        Answer::Refused(got)
    }
}

/// Opens served connections until the server refuses one; returns them.
fn fill(addr: SocketAddr) -> Vec<TcpStream> {
    let mut held = Vec::new();
    for _ in 0..OPEN_FILES {
        match ping(addr) {
            Answer::Pong(s) => held.push(s),
            Answer::Refused(line) => {
                assert_eq!(line, REFUSED, "{}", String::from_utf8_lossy(&line));
                return held;
            }
            Answer::Closed => return held,
        }
    }
    panic!(
        "{} clients served under a limit of {OPEN_FILES} files",
        held.len()
    );
}

/// A new client is served again within the deadline (the server may need a moment to notice
/// the closed connections).
fn served_again(addr: SocketAddr) {
    let deadline = Instant::now() + ANSWER_DEADLINE;
    loop {
        if let Answer::Pong(_) = ping(addr) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "no client served after the others left"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn at_the_file_limit_a_new_client_is_refused_without_spinning_and_served_after() {
    let server = serve(OPEN_FILES, OPEN_FILES);
    let held = fill(server.addr);
    assert!(held.len() > 10, "only {} clients served", held.len());
    // At the limit: the server must not spin, and each further client gets the error line.
    let cpu_before = server.cpu_seconds().unwrap();
    let window = Instant::now();
    let mut refused = 0;
    while window.elapsed() < Duration::from_secs(1) {
        match ping(server.addr) {
            Answer::Pong(_) => panic!("served a client at the file limit"),
            Answer::Refused(line) => assert_eq!(line, REFUSED),
            Answer::Closed => {}
        }
        refused += 1;
        std::thread::sleep(Duration::from_millis(100));
    }
    let cpu = server.cpu_seconds().unwrap() - cpu_before;
    assert!(refused > 0);
    assert!(
        cpu <= IDLE_CPU_SECS_MAX,
        "the server used {cpu:.2} s of CPU in 1 s at its file limit"
    );
    drop(held);
    served_again(server.addr);
}

#[test]
fn the_soft_limit_is_raised_to_the_hard_one_at_start() {
    // Soft 64, hard 4 x 64: the clients of `fill` above fit only if the server raised it.
    let server = serve(OPEN_FILES, 4 * OPEN_FILES);
    let held: Vec<TcpStream> = (0..2 * OPEN_FILES)
        .map(|i| match ping(server.addr) {
            Answer::Pong(s) => s,
            _ => panic!("client {i} refused: the soft limit was not raised"),
        })
        .collect();
    assert_eq!(held.len() as u64, 2 * OPEN_FILES);
    let log = server.start_log.join("\n");
    assert!(log.contains("open files"), "{log}");
}

#[test]
fn connections_max_above_the_file_limit_is_warned_at_start() {
    let server = serve(OPEN_FILES, OPEN_FILES);
    let log = server.start_log.join("\n");
    let warn = server
        .start_log
        .iter()
        .find(|l| l.contains("WARN") && l.contains("connections_max"))
        .unwrap_or_else(|| panic!("no warning about connections_max in:\n{log}"));
    // The effective figure: the limit minus the server's own files.
    assert!(warn.contains("10000") && warn.contains("64"), "{warn}");
}
