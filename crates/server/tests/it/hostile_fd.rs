//! Idle clients and the `timeout` setting (issue 19 item 8; Redis's `timeout`): with
//! `timeout = 1`, a connection that sends nothing for a second is closed, whatever its
//! protocol and whether it ever sent a byte, so silent sockets cannot hold file descriptors
//! and connection slots for ever; a client that keeps talking is never closed. (The other half
//! of item 8, the file-descriptor limit, needs a process of its own:
//! crates/cli/tests/it/hostile_fd.rs.)
//!
//! Silent sockets on the metrics port: the endpoint serves at most 16 connections at once, and
//! 16 sockets that connect and say nothing used to fill it for their whole read timeout, so a
//! scrape was closed unanswered; now the oldest silent one makes way (issue 19 item 14's loose
//! end).

use crate::common;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::{metric, metrics, start_with, Client};
use directkv_proto::native::{encode_request_frame, Hello, NativeLimits, Request, RequestFrame};
use directkv_proto::resp::Reply;
use directkv_server::ServerConfig;

/// How long a closed idle client may take to see the close (timeout 1 s, plus slack).
const CLOSE_DEADLINE: Duration = Duration::from_secs(5);

fn server_with_timeout() -> directkv_server::Server {
    // From the configuration file, as a user sets it.
    let cfg = ServerConfig::from_toml(
        "timeout = 1\nport = 0\nshards = 1\nmemory_bytes = 33554432\nudp = false\nocsm = false\n",
    )
    .expect("timeout is a setting");
    start_with(cfg)
}

/// Whether the peer closed `s` within `CLOSE_DEADLINE` (anything it sent is skipped).
fn closed_by_server(s: &mut TcpStream) -> bool {
    s.set_read_timeout(Some(CLOSE_DEADLINE)).unwrap();
    let started = Instant::now();
    let mut buf = [0u8; 256];
    while started.elapsed() < CLOSE_DEADLINE {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
    false
}

#[test]
fn idle_clients_are_closed_after_the_timeout_and_active_ones_are_not() {
    let srv = server_with_timeout();
    // Silent from the start (never a byte), idle after one RESP command, idle after a native
    // HELLO.
    let mut silent = TcpStream::connect(srv.addr()).unwrap();
    let mut resp = TcpStream::connect(srv.addr()).unwrap();
    resp.write_all(b"*1\r\n$4\r\nPING\r\n").unwrap();
    let mut native = TcpStream::connect(srv.addr()).unwrap();
    let mut hello = Vec::new();
    let frame = RequestFrame {
        request_id: 1,
        body: Request::Hello(Hello {
            password: b"",
            client_name: b"idle",
        }),
    };
    encode_request_frame(&frame, &NativeLimits::DEFAULT, &mut hello).unwrap();
    native.write_all(&hello).unwrap();
    // An active client: a PING every 200 ms for 2.5 timeouts, each answered.
    let mut active = Client::connect(&srv);
    let talking = Instant::now();
    while talking.elapsed() < Duration::from_millis(2500) {
        assert_eq!(active.cmd(&["PING"]), Reply::Simple("PONG".into()));
        std::thread::sleep(Duration::from_millis(200));
    }
    for (name, s) in [
        ("silent", &mut silent),
        ("resp", &mut resp),
        ("native", &mut native),
    ] {
        assert!(closed_by_server(s), "{name} client not closed when idle");
    }
    assert_eq!(active.cmd(&["PING"]), Reply::Simple("PONG".into()));
    assert_eq!(
        metric(&metrics(&srv), "directkv_idle_timeouts_total", ""),
        3
    );
}

#[test]
fn a_scrape_is_answered_while_silent_sockets_fill_the_metrics_port() {
    let srv = start_with(ServerConfig {
        udp: Some(false),
        ocsm: Some(false),
        ..common::config(1)
    });
    let addr = srv.metrics_addr().unwrap();
    // More silent sockets than the endpoint serves at once (16), each held open.
    let silent: Vec<TcpStream> = (0..24).map(|_| TcpStream::connect(addr).unwrap()).collect();
    for _ in 0..3 {
        let page = metrics(&srv);
        assert!(
            page.contains("directkv_connections"),
            "scrape not answered: {page:?}"
        );
    }
    drop(silent);
}
