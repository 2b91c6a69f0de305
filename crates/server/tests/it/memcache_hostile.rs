//! Hostile clients on the memcached port: oversized lengths, a line that never ends, garbage,
//! a client that never reads, huge multi-gets. After each the server still serves others.

use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::common::{self, info_field, Client};
use crate::memcache_client::Mc;
use directkv_server::{Server, ServerConfig};

const MIB: usize = 1 << 20;
const DEADLINE: Duration = Duration::from_secs(30);

/// Another client still gets answers.
fn still_serves(srv: &Server) {
    let mut c = Mc::connect(srv);
    c.expect(
        "set ok 0 0 2\r\nok\r\nget ok\r\n",
        &["STORED", "VALUE ok 0 2", "ok", "END"],
    );
}

/// Polls INFO until `cond` holds for field `name`; returns its last value.
fn wait_for(c: &mut Client, name: &str, cond: impl Fn(u64) -> bool) -> u64 {
    let start = Instant::now();
    loop {
        let v = info_field(c, name);
        if cond(v) || start.elapsed() > DEADLINE {
            return v;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn an_oversized_value_is_refused_and_its_data_swallowed_unbuffered() {
    let srv = common::start(1);
    let mut c = Mc::connect(&srv);
    // 8 MiB announced and sent: refused from the command line, the data dropped as it comes.
    let n = 8 * MIB;
    let mut req = format!("set big 0 0 {n}\r\n").into_bytes();
    req.extend(std::iter::repeat_n(b'v', n));
    req.extend_from_slice(b"\r\nget big\r\n");
    let mut w = c.s.try_clone().unwrap();
    let writer = std::thread::spawn(move || w.write_all(&req).unwrap());
    assert_eq!(c.line(), "SERVER_ERROR object too large for cache");
    assert_eq!(c.line(), "END");
    writer.join().unwrap();
    let mut r = Client::connect(&srv);
    let peak = info_field(&mut r, "client_buffer_bytes_peak");
    assert!(
        peak < 4 * MIB as u64,
        "an 8 MiB refused value was buffered: {peak}"
    );
    // A length that does not fit any integer is a bad command line.
    c.expect(
        "set k 0 0 99999999999999999999\r\n",
        &["CLIENT_ERROR bad command line format"],
    );
    c.expect(
        "set k 0 0 -1\r\n",
        &["CLIENT_ERROR bad command line format"],
    );
    still_serves(&srv);
    srv.stop();
}

#[test]
fn a_line_that_never_ends_closes_the_connection() {
    let srv = common::start(1);
    let mut c = Mc::connect(&srv);
    // No '\n' in 64 KiB: over memcache_line_bytes_max (2048).
    let junk = vec![b'a'; 64 << 10];
    let _ = c.s.write_all(&junk);
    assert!(c.closed(), "the server kept a line without end");
    // A get line grows to memcache_get_line_bytes_max (1 MiB) and no further.
    let mut g = Mc::connect(&srv);
    let mut line = b"get ".to_vec();
    line.extend(std::iter::repeat_n(b'k', 2 * MIB));
    let _ = g.s.write_all(&line);
    assert!(g.closed(), "the server kept a get line of 2 MiB");
    let mut r = Client::connect(&srv);
    assert_eq!(info_field(&mut r, "memcache_line_too_long"), 2);
    still_serves(&srv);
    srv.stop();
}

#[test]
fn garbage_gets_error_lines_and_the_server_stays_usable() {
    let srv = common::start(2);
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    for round in 0..20 {
        let mut s = TcpStream::connect(srv.memcache_addr().unwrap()).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let mut bytes = Vec::new();
        for _ in 0..4096 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            // Some rounds are mostly printable with line ends, some raw.
            let b = (state >> 24) as u8;
            bytes.push(if round % 2 == 0 && b.is_multiple_of(16) {
                b'\n'
            } else if round % 2 == 0 {
                b' ' + b % 90
            } else {
                b
            });
        }
        let _ = s.write_all(&bytes);
        drop(s);
        still_serves(&srv);
    }
    srv.stop();
}

#[test]
fn a_client_that_never_reads_is_disconnected_with_bounded_replies() {
    let srv = common::start_with(ServerConfig {
        reply_write_timeout_secs: 1,
        ..common::config(1)
    });
    let mut c = Mc::connect(&srv);
    let value = vec![b'v'; MIB / 2];
    let mut req = format!("set big 0 0 {}\r\n", value.len()).into_bytes();
    req.extend_from_slice(&value);
    req.extend_from_slice(b"\r\n");
    c.send(&req);
    assert_eq!(c.line(), "STORED");
    let mut probe = Client::connect(&srv);
    let mut s = TcpStream::connect(srv.memcache_addr().unwrap()).unwrap();
    assert_eq!(
        wait_for(&mut probe, "memcache_curr_connections", |n| n == 2),
        2
    );
    // 2000 gets of 512 KiB: 1000 MiB of replies asked for by 16 KB, never read.
    let gets = b"get big\r\n".repeat(2000);
    let _ = s.write_all(&gets);
    let left = wait_for(&mut probe, "memcache_curr_connections", |n| n == 1);
    assert_eq!(left, 1, "the non-reading client was disconnected");
    let peak = info_field(&mut probe, "client_buffer_bytes_peak");
    assert!(
        peak <= 80 * MIB as u64,
        "one non-reading client made the server hold {peak} bytes"
    );
    still_serves(&srv);
    srv.stop();
}

#[test]
fn ten_thousand_keys_in_one_get_and_too_many_keys() {
    let srv = common::start(2);
    let mut c = Mc::connect(&srv);
    let mut sets = String::new();
    for i in (0..10_000).step_by(10) {
        sets.push_str(&format!("set k{i} 0 0 1 noreply\r\nx\r\n"));
    }
    c.send(sets.as_bytes());
    c.sync();
    let keys: Vec<String> = (0..10_000).map(|i| format!("k{i}")).collect();
    c.send(format!("get {}\r\n", keys.join(" ")).as_bytes());
    for i in (0..10_000).step_by(10) {
        assert_eq!(c.line(), format!("VALUE k{i} 0 1"));
        assert_eq!(c.line(), "x");
    }
    assert_eq!(c.line(), "END");
    // Over memcache_get_keys_max (65536): refused whole, and the connection stays.
    let many = "k ".repeat(70_000);
    c.expect(
        &format!("get {many}\r\n"),
        &["CLIENT_ERROR too many keys in one get"],
    );
    still_serves(&srv);
    srv.stop();
}

#[test]
fn at_connections_max_memcached_clients_get_memcacheds_refusal() {
    let srv = common::start_with(ServerConfig {
        connections_max: 1,
        ..common::config(1)
    });
    let mut first = Mc::connect(&srv);
    first.expect("version\r\n", &["VERSION 1.6.18"]);
    let mut second = Mc::connect(&srv);
    assert_eq!(second.line(), "ERROR Too many open connections");
    assert!(second.closed());
    first.expect("version\r\n", &["VERSION 1.6.18"]);
    srv.stop();
}

#[test]
fn an_http_post_from_a_web_page_is_closed_before_its_body_runs() {
    let srv = common::start(1);
    let mut c = Mc::connect(&srv);
    c.send(
        b"POST / HTTP/1.1\r\nHost: 127.0.0.1:11211\r\nContent-Type: text/plain\r\n\r\nset pwned 0 0 1\r\nx\r\n",
    );
    assert!(c.closed());
    let mut r = Client::connect(&srv);
    assert_eq!(info_field(&mut r, "security_attacks"), 1);
    let mut d = Mc::connect(&srv);
    d.expect("get pwned\r\n", &["END"]);
    // A key that merely starts with a slash is served.
    d.expect(
        "set /k 0 0 1\r\nx\r\nget /k\r\n",
        &["STORED", "VALUE /k 0 1", "x", "END"],
    );
    srv.stop();
}
