//! A client that pipelines without reading is slowed (the server stops reading while its
//! replies are unread), its memory cost stays bounded, and it is disconnected after
//! `reply_write_timeout_secs`.
//!
//! A test binary of its own (not in `tests/it/`): it reads the resident memory of the whole
//! process, which other tests' servers would move.

use directkv_testkit::server as common;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::{start_with, Client};
use directkv_server::ServerConfig;

fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

#[test]
fn non_reading_client_is_bounded_then_disconnected() {
    let srv = start_with(ServerConfig {
        port: 0,
        shards: 1,
        memory_bytes: 16 << 20,
        reply_write_timeout_secs: 2,
        appendonly: false,
        ..ServerConfig::default()
    });
    let mut setup = Client::connect(&srv);
    let big = "v".repeat(512 << 10);
    setup.cmd(&["SET", "big", &big]);
    let before = rss_bytes();

    // 4000 GETs of a 512 KiB value would be 2 GiB of replies if the server buffered them.
    let mut s = TcpStream::connect(srv.addr()).unwrap();
    s.set_nonblocking(true).unwrap();
    let one = b"*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n";
    let mut sent_cmds = 0usize;
    let mut pending: &[u8] = &[];
    let deadline = Instant::now() + Duration::from_secs(3);
    while sent_cmds < 4000 && Instant::now() < deadline {
        if pending.is_empty() {
            pending = one;
            sent_cmds += 1;
        }
        match s.write(pending) {
            Ok(n) => pending = &pending[n..],
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(5))
            }
            Err(_) => break,
        }
    }
    // The commands fit in the kernel's socket buffers; the replies do not. Give the server time
    // to fill what it may, then look at its memory.
    std::thread::sleep(Duration::from_millis(1000));
    let grown = rss_bytes().saturating_sub(before);
    assert!(
        grown < 64 << 20,
        "memory grew by {grown} bytes for {sent_cmds} unread replies of 512 KiB"
    );

    // Still not reading: once the write timeout passes, the server drops the connection, so
    // what is left to read is only what the kernel buffered.
    std::thread::sleep(Duration::from_secs(3));
    s.set_nonblocking(false).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut buf = vec![0u8; 1 << 20];
    let mut read_total = 0usize;
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => read_total += n,
            // Closing a socket with unread input sends a reset: also a disconnect.
            Err(e) if e.kind() == ErrorKind::ConnectionReset => break,
            Err(e) => panic!("expected the server to close the connection: {e}"),
        }
        assert!(
            read_total < 256 << 20,
            "the server kept sending after its write timeout"
        );
    }
    // Other clients are fine.
    assert_eq!(
        setup.cmd(&["STRLEN", "big"]),
        directkv_proto::resp::Reply::Integer(512 << 10)
    );
    srv.stop();
}
