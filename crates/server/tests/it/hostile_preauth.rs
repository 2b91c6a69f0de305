//! What a client can make the server hold before it authenticates (issue 19 item 4): with
//! `requirepass` set, an unauthenticated RESP client is held to Redis 7's limits (at most 10
//! arguments, bulks of at most 16384 bytes, with Redis's exact error texts, then closed) and
//! to a short inline line; a native client to a small frame before HELLO. Once authenticated,
//! the usual limits apply again.

use crate::common;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::{config, ok, start_with, Client};
use directkv_proto::native::{self, NativeLimits};
use directkv_proto::resp::Reply;
use directkv_server::{Server, ServerConfig};

fn server() -> Server {
    start_with(ServerConfig {
        requirepass: Some("pw".into()),
        ..config(2)
    })
}

/// Sends `bytes` and returns everything the server sends back until it closes the connection
/// (panics if it stays open for 10 s).
fn reply_then_close(srv: &Server, bytes: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(srv.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(bytes).unwrap();
    let mut got = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match s.read(&mut chunk) {
            Ok(0) => return got,
            Ok(n) => got.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return got,
            Err(e) => panic!("the connection stayed open ({e}); got {got:?}"),
        }
    }
}

#[test]
fn unauthenticated_multibulk_of_more_than_10_arguments_gets_redis_text_and_is_closed() {
    let srv = server();
    let got = reply_then_close(&srv, b"*11\r\n");
    assert_eq!(
        String::from_utf8_lossy(&got),
        "-ERR Protocol error: unauthenticated multibulk length\r\n"
    );
    // Not a number is the usual error, as in Redis.
    let got = reply_then_close(&srv, b"*abc\r\n");
    assert_eq!(
        String::from_utf8_lossy(&got),
        "-ERR Protocol error: invalid multibulk length\r\n"
    );
    srv.stop();
}

#[test]
fn unauthenticated_bulk_longer_than_16384_bytes_gets_redis_text_and_is_closed() {
    let srv = server();
    // The announcement alone is refused: the 64 MiB never has to arrive.
    let got = reply_then_close(&srv, b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$67108864\r\n");
    assert_eq!(
        String::from_utf8_lossy(&got),
        "-ERR Protocol error: unauthenticated bulk length\r\n"
    );
    let got = reply_then_close(&srv, b"*2\r\n$4\r\nAUTH\r\n$16385\r\n");
    assert_eq!(
        String::from_utf8_lossy(&got),
        "-ERR Protocol error: unauthenticated bulk length\r\n"
    );
    srv.stop();
}

#[test]
fn unauthenticated_long_inline_line_is_refused_and_closed() {
    let srv = server();
    let mut line = b"GET ".to_vec();
    line.resize(64 << 10, b'a');
    let got = reply_then_close(&srv, &line);
    assert_eq!(
        String::from_utf8_lossy(&got),
        "-ERR Protocol error: too big inline request\r\n"
    );
    srv.stop();
}

#[test]
fn requests_within_the_pre_auth_limits_work_and_auth_lifts_them() {
    let srv = server();
    let mut c = Client::connect(&srv);
    // Ten arguments and a 16384-byte bulk are still fine before AUTH (NOAUTH, not closed).
    let big = vec![b'x'; 16384];
    let mut args: Vec<&[u8]> = vec![b"MSET"];
    args.extend([&b"a"[..], &big, b"b", b"c", b"d", b"e", b"f", b"g", b"h"]);
    c.send(&args);
    match c.read() {
        Reply::Error(e) => assert!(e.starts_with("NOAUTH"), "{e}"),
        r => panic!("{r:?}"),
    }
    assert_eq!(c.cmd(&["AUTH", "pw"]), ok());
    // After AUTH, in the same read as the AUTH too: large requests are served.
    let value = vec![b'v'; 1 << 20];
    c.send(&[b"SET", b"k", &value]);
    assert_eq!(c.read(), ok());
    let mut c2 = Client::connect(&srv);
    let mut both = Vec::new();
    directkv_proto::resp::encode_command(&[b"AUTH", b"pw"], &mut both);
    let many: Vec<&[u8]> = std::iter::once(&b"MGET"[..])
        .chain(std::iter::repeat_n(&b"k"[..], 20))
        .collect();
    directkv_proto::resp::encode_command(&many, &mut both);
    c2.send_raw(&both);
    assert_eq!(c2.read(), ok());
    match c2.read() {
        Reply::Array(Some(a)) => assert_eq!(a.len(), 20),
        r => panic!("{r:?}"),
    }
    srv.stop();
}

#[test]
fn native_frame_before_hello_is_bounded_small() {
    let srv = server();
    // A REQUEST header announcing a 4 MiB frame, before HELLO: refused at the header, without
    // waiting for (and buffering) the 4 MiB.
    let mut header = vec![native::MAGIC, native::VERSION, 0x01, 0x00];
    header.extend_from_slice(&(4u32 << 20).to_le_bytes());
    header.extend_from_slice(&9u32.to_le_bytes());
    header.extend_from_slice(&[0u8; 100]);
    let got = reply_then_close(&srv, &header);
    let (frame, _) = native::decode_response(&got, &NativeLimits::DEFAULT)
        .expect("an error frame")
        .expect("a whole frame");
    match frame.body {
        native::Response::Error(e) => {
            assert!(e.closing);
            assert_eq!(e.code, native::ErrorCode::FrameTooLong.code(), "{e:?}");
        }
        b => panic!("{b:?}"),
    }
    srv.stop();
}
