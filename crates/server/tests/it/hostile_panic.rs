//! Hostile requests that used to panic the server (issue 19 item 5): a batch whose results
//! outgrow what the engine's 32-bit result offsets address. 4096 GETs of a 1 MiB value ask for
//! 4 GiB of results; the server must answer them with errors, over every protocol, and keep
//! serving: the UDP thread stays alive, a TCP connection keeps working, and no connection slot
//! leaks (with `connections_max = 3`, three such requests once locked out every client).

use crate::common;
use std::io::{Read, Write};
use std::net::{TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use common::{config, info_field, metric, metrics, ok, start_with, Client};
use directkv_proto::native::{
    decode_response, decode_response_datagram, encode_request, encode_request_frame, NativeLimits,
    NativeOp, Request, RequestFrame, Response,
};
use directkv_proto::resp::Reply;
use directkv_server::{Server, ServerConfig};

/// GETs in the hostile batch: the native protocol's `frame_ops_max`.
const GETS: usize = 4096;
const VALUE_LEN: usize = 1 << 20;
/// How long the server may take to notice a closed connection.
const DEADLINE: Duration = Duration::from_secs(20);

fn server(cfg: ServerConfig) -> Server {
    let srv = start_with(cfg);
    let mut c = Client::connect(&srv);
    c.send(&[b"SET", b"k", &vec![b'v'; VALUE_LEN]]);
    assert_eq!(c.read(), ok());
    srv
}

fn hostile_frame(request_id: u32) -> Vec<u8> {
    let ops = vec![NativeOp::get(b"k"); GETS];
    let mut req = Vec::new();
    encode_request(request_id, &ops, &NativeLimits::DEFAULT, &mut req).unwrap();
    req
}

/// A native TCP connection that reads whole responses (every part of a split one).
struct Native {
    s: TcpStream,
    buf: Vec<u8>,
}

impl Native {
    fn connect(srv: &Server) -> Native {
        let s = TcpStream::connect(srv.addr()).unwrap();
        s.set_read_timeout(Some(DEADLINE)).unwrap();
        let mut n = Native { s, buf: Vec::new() };
        let mut out = Vec::new();
        let hello = RequestFrame {
            request_id: 1,
            body: Request::Hello(directkv_proto::native::Hello {
                password: b"",
                client_name: b"hostile",
            }),
        };
        encode_request_frame(&hello, &NativeLimits::DEFAULT, &mut out).unwrap();
        n.s.write_all(&out).unwrap();
        n.read_statuses();
        n
    }

    /// Reads one response (all its parts): the status of every operation (none for a reply
    /// that is not an operation batch).
    fn read_statuses(&mut self) -> Vec<u8> {
        let mut statuses = Vec::new();
        loop {
            let decoded =
                decode_response(&self.buf, &NativeLimits::DEFAULT).expect("valid response");
            if let Some((frame, n)) = decoded {
                let more = match frame.body {
                    Response::Ops(b) => {
                        statuses.extend(b.iter().map(|o| o.status));
                        b.more
                    }
                    _ => false,
                };
                self.buf.drain(..n);
                if !more {
                    return statuses;
                }
                continue;
            }
            let mut chunk = vec![0u8; 1 << 20];
            let n = self.s.read(&mut chunk).expect("a response");
            assert!(n > 0, "the server closed the connection");
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    fn exchange(&mut self, req: &[u8]) -> Vec<u8> {
        self.s.write_all(req).unwrap();
        self.read_statuses()
    }
}

fn is_error(status: u8) -> bool {
    status & 0x80 != 0
}

#[test]
fn udp_datagram_of_4096_gets_of_a_large_value_gets_an_error_reply_and_udp_keeps_serving() {
    let srv = server(config(1));
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(DEADLINE)).unwrap();
    sock.connect(srv.addr()).unwrap();
    let req = hostile_frame(77);
    sock.send(&req).unwrap();
    let mut buf = vec![0u8; 65536];
    let n = sock.recv(&mut buf).expect("an error reply datagram");
    let f = decode_response_datagram(&buf[..n], &NativeLimits::DEFAULT).unwrap();
    assert_eq!(f.request_id, 77);
    let Response::Ops(b) = f.body else {
        panic!("{:?}", f.body)
    };
    assert_eq!(b.len(), GETS);
    assert!(b.iter().all(|o| is_error(o.status) && o.data.is_empty()));

    // The UDP thread is still alive: a small GET is answered.
    let mut small = Vec::new();
    encode_request(
        78,
        &[NativeOp::get(b"nope")],
        &NativeLimits::DEFAULT,
        &mut small,
    )
    .unwrap();
    sock.send(&small).unwrap();
    let n = sock
        .recv(&mut buf)
        .expect("the UDP thread answers after the hostile datagram");
    let f = decode_response_datagram(&buf[..n], &NativeLimits::DEFAULT).unwrap();
    assert_eq!(f.request_id, 78);
}

#[test]
fn native_frame_of_4096_gets_of_a_large_value_gets_errors_and_the_connection_keeps_working() {
    let srv = server(config(1));
    let mut c = Native::connect(&srv);
    let statuses = c.exchange(&hostile_frame(5));
    assert_eq!(statuses.len(), GETS);
    assert!(
        statuses.iter().any(|&s| is_error(s)),
        "results past the budget are refused with an error status"
    );
    let mut small = Vec::new();
    encode_request(
        6,
        &[NativeOp::get(b"nope")],
        &NativeLimits::DEFAULT,
        &mut small,
    )
    .unwrap();
    assert_eq!(c.exchange(&small).len(), 1);
    drop(c);
    let mut r = Client::connect(&srv);
    assert_eq!(r.cmd(&["PING"]), Reply::Simple("PONG".into()));
}

#[test]
fn resp_mget_of_4096_large_values_gets_an_error_and_the_connection_keeps_working() {
    let srv = server(config(1));
    let mut c = Client::connect(&srv);
    let mut args: Vec<&[u8]> = vec![b"MGET"];
    args.extend(std::iter::repeat_n(&b"k"[..], GETS));
    c.send(&args);
    match c.read() {
        Reply::Error(e) => assert!(e.starts_with("ERR "), "{e}"),
        r => panic!("expected an error, got {}", describe(&r)),
    }
    assert_eq!(c.cmd(&["PING"]), Reply::Simple("PONG".into()));
}

fn describe(r: &Reply) -> String {
    match r {
        Reply::Array(Some(a)) => format!("an array of {}", a.len()),
        r => format!("{r:?}"),
    }
}

#[test]
fn three_hostile_requests_do_not_lock_out_a_fourth_client() {
    let srv = server(ServerConfig {
        connections_max: 3,
        ..config(1)
    });
    for id in 0..3u32 {
        let mut c = Native::connect(&srv);
        c.s.write_all(&hostile_frame(100 + id)).unwrap();
        // Whether the reply comes or the connection breaks, the client leaves.
        let mut chunk = vec![0u8; 1 << 20];
        let _ = c.s.read(&mut chunk);
    }
    // The three connections are closed; a fourth client gets in once the server noticed.
    let start = Instant::now();
    loop {
        let mut c = Client::connect(&srv);
        c.send(&[b"PING"]);
        let mut reply = [0u8; 64];
        let n = c.writer().read(&mut reply).unwrap_or(0);
        if reply[..n].starts_with(b"+PONG") {
            break;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "still locked out: {:?}",
            String::from_utf8_lossy(&reply[..n])
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn panics_are_counted_in_info_and_metrics() {
    let srv = start_with(config(1));
    let mut c = Client::connect(&srv);
    assert_eq!(info_field(&mut c, "panics"), 0);
    let page = metrics(&srv);
    assert!(
        page.contains("# TYPE directkv_panics_total counter"),
        "{page}"
    );
    assert_eq!(metric(&page, "directkv_panics_total", ""), 0);
}
