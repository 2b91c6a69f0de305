//! Hostile clients against the parsers (issue 19 items 7 and 16), over real sockets: a RESP
//! client trickling a large multibulk command one argument per read (the parse must resume
//! where it stopped, not rescan the command from its first byte), and a native client sending
//! garbage (counted as a protocol error in INFO and /metrics).

use crate::common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::{info_field, metric, metrics, ok, start, Client};

/// How long one server-side effect is polled for before the test fails.
const DEADLINE: Duration = Duration::from_secs(10);

/// Polls INFO field `name` until it differs from `old`.
fn wait_change(c: &mut Client, name: &str, old: u64) -> u64 {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let now = info_field(c, name);
        if now != old {
            return now;
        }
        assert!(Instant::now() < deadline, "{name} stayed at {old}");
        std::thread::yield_now();
    }
}

#[test]
fn a_trickled_multibulk_is_scanned_about_once() {
    const ARGS: usize = 2000;
    let srv = start(1);
    let mut watch = Client::connect(&srv);
    let mut c = Client::connect(&srv);
    c.send_raw(format!("*{}\r\n$4\r\nMSET\r\n", ARGS * 2 + 1).as_bytes());
    let mut scanned = wait_change(&mut watch, "resp_incomplete_bytes_scanned", 0);
    let mut sent = 0usize;
    // One key-value pair per read: the test waits for the server to have parsed each one.
    for i in 0..ARGS {
        let pair = format!("$6\r\nk{i:05}\r\n$1\r\nv\r\n");
        sent += pair.len();
        c.send_raw(pair.as_bytes());
        if i + 1 < ARGS {
            scanned = wait_change(&mut watch, "resp_incomplete_bytes_scanned", scanned);
        }
    }
    assert_eq!(c.read(), ok());
    assert_eq!(c.cmd(&["GET", "k01999"]), common::bulk("v"));
    // Rescanning from the first byte would read about ARGS * sent / 2 bytes (some 20 MB).
    assert!(
        scanned <= sent as u64 * 4,
        "{scanned} bytes scanned for {sent} bytes trickled"
    );
    srv.stop();
}

#[test]
fn native_garbage_is_counted_as_a_protocol_error() {
    let srv = start(1);
    let mut watch = Client::connect(&srv);
    let before = info_field(&mut watch, "protocol_errors");
    for _ in 0..3 {
        let mut s = TcpStream::connect(srv.addr()).unwrap();
        s.set_read_timeout(Some(DEADLINE)).unwrap();
        // The native magic byte, then garbage: a wrong version closes the connection.
        s.write_all(&[0xD7, 0x77, 0xFF, 0xFF, 16, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8])
            .unwrap();
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest);
    }
    let deadline = Instant::now() + DEADLINE;
    while info_field(&mut watch, "native_protocol_errors") < 3 {
        assert!(Instant::now() < deadline, "native errors not counted");
        std::thread::yield_now();
    }
    assert_eq!(info_field(&mut watch, "protocol_errors"), before + 3);
    let page = metrics(&srv);
    assert_eq!(
        metric(&page, "directkv_native_protocol_errors_total", ""),
        3
    );
    assert_eq!(
        metric(&page, "directkv_protocol_errors_total", ""),
        before + 3
    );
    srv.stop();
}
