//! Hostile clients against the password and the protocol door (issue 19 items 1-3), over real
//! sockets: unauthenticated datagrams (native UDP on the server's port, OCSM on its own) with a
//! password set, an empty password, and a browser's cross-protocol `POST` carrying RESP inline
//! commands. Every check of "nothing changed" is made over an authenticated TCP connection.

use crate::common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use common::{bulk, config, info_field, metric, metrics, ok, start_with, Client};
use directkv_proto::native::{encode_request, NativeLimits, NativeOp};
use directkv_proto::ocsm::{encode_header, encode_message, Header, Kind, MessageOut};
use directkv_proto::ocsm::{MessageSize, Opcode};
use directkv_proto::resp::Reply;
use directkv_server::{Server, ServerConfig};

const PASSWORD: &str = "s3cret";
/// How long a datagram's answer is waited for; an answer is a failure, so this bounds the test
/// and is not a wait for readiness.
const REPLY_WAIT: Duration = Duration::from_millis(500);

/// A server with a password, OCSM on an ephemeral port, everything else as the tests' default.
fn start_with_password() -> Server {
    start_with(ServerConfig {
        requirepass: Some(PASSWORD.into()),
        ocsm_port: Some(0),
        ..config(2)
    })
}

fn authenticated(srv: &Server) -> Client {
    let mut c = Client::connect(srv);
    assert_eq!(c.cmd(&["AUTH", PASSWORD]), ok());
    c
}

/// Sends `datagram` to `to` and returns the answer, if one comes within `REPLY_WAIT`.
fn datagram_answer(to: SocketAddr, datagram: &[u8]) -> Option<Vec<u8>> {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    s.set_read_timeout(Some(REPLY_WAIT)).unwrap();
    // A send refused at once (nothing bound there) is as good as no answer.
    s.send_to(datagram, to).ok()?;
    let mut buf = vec![0u8; 65536];
    let (n, _) = s.recv_from(&mut buf).ok()?;
    Some(buf[..n].to_vec())
}

fn native_datagram(ops: &[NativeOp]) -> Vec<u8> {
    let mut req = Vec::new();
    encode_request(1, ops, &NativeLimits::DEFAULT, &mut req).unwrap();
    req
}

#[test]
fn native_udp_with_a_password_neither_reads_nor_writes() {
    let srv = start_with_password();
    let mut c = authenticated(&srv);
    assert_eq!(c.cmd(&["SET", "udp:secret", "classified"]), ok());
    assert_eq!(c.cmd(&["SET", "udp:keep", "kept"]), ok());

    let get = native_datagram(&[NativeOp::get(b"udp:secret")]);
    if let Some(answer) = datagram_answer(srv.addr(), &get) {
        assert!(
            !answer.windows(10).any(|w| w == b"classified"),
            "an unauthenticated datagram read a value: {answer:?}"
        );
    }
    let put = native_datagram(&[NativeOp::put(b"udp:pwned", b"yes")]);
    let _ = datagram_answer(srv.addr(), &put);
    let del = native_datagram(&[NativeOp::delete(b"udp:keep")]);
    let _ = datagram_answer(srv.addr(), &del);

    assert_eq!(c.cmd(&["GET", "udp:pwned"]), Reply::Bulk(None));
    assert_eq!(c.cmd(&["GET", "udp:keep"]), bulk("kept"));
    assert_eq!(c.cmd(&["DBSIZE"]), Reply::Integer(2));
    srv.stop();
}

#[test]
fn ocsm_with_a_password_changes_nothing() {
    let srv = start_with_password();
    let mut c = authenticated(&srv);
    if let Some(ocsm) = srv.ocsm_addr() {
        let mut d = Vec::new();
        encode_header(
            &Header {
                sequence: 1,
                response: false,
                size: MessageSize::B32,
                kind: Kind::Update,
                count: 1,
            },
            &mut d,
        );
        encode_message(
            MessageSize::B32,
            &MessageOut {
                key: *b"ocsm-pwned-1",
                value: b"yes",
                sequence: 0,
                length: 1,
                source: 9,
                destination: 1,
                opcode: Opcode::Insert as u8,
            },
            &mut d,
        )
        .unwrap();
        let _ = datagram_answer(ocsm, &d);
    }
    assert_eq!(c.cmd(&["DBSIZE"]), Reply::Integer(0));
    srv.stop();
}

#[test]
fn an_empty_password_is_refused() {
    let empty = ServerConfig {
        requirepass: Some(String::new()),
        ..config(1)
    };
    let err = empty.validate().expect_err("requirepass \"\" accepted");
    assert!(err.contains("requirepass"), "{err}");
    assert!(Server::start(empty).is_err());
    let from_file = ServerConfig::from_toml("requirepass = \"\"\n").unwrap();
    assert!(from_file.validate().is_err());
    // Not even behind a non-loopback address, which needs a (real) password.
    let exposed = ServerConfig {
        bind: "0.0.0.0".into(),
        requirepass: Some(String::new()),
        ..config(1)
    };
    assert!(exposed.validate().is_err());
}

/// What a browser sends when a web page posts a form (text/plain) to the server's port.
const HTTP_POST: &[u8] = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\n\
Content-Length: 23\r\n\r\nSET pwned-by-http yes\r\n";

/// Reads until the server closes the connection; panics if it stays open past the deadline.
fn read_until_closed(s: &mut TcpStream) -> Vec<u8> {
    let deadline = Instant::now() + Duration::from_secs(10);
    s.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let mut got = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        assert!(Instant::now() < deadline, "connection still open: {got:?}");
        match s.read(&mut chunk) {
            Ok(0) => return got,
            Ok(n) => got.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return got,
            Err(_) => continue,
        }
    }
}

#[test]
fn an_http_post_is_closed_and_runs_nothing() {
    let srv = start_with(config(2));
    let mut s = TcpStream::connect(srv.addr()).unwrap();
    s.write_all(HTTP_POST).unwrap();
    let answer = read_until_closed(&mut s);
    assert!(
        !answer.windows(3).any(|w| w == b"+OK"),
        "{:?}",
        String::from_utf8_lossy(&answer)
    );

    // A `Host:` line alone (a request whose first line was split off) closes it too.
    let mut s = TcpStream::connect(srv.addr()).unwrap();
    s.write_all(b"Host: x\r\nSET pwned-by-host yes\r\n")
        .unwrap();
    read_until_closed(&mut s);

    let mut c = Client::connect(&srv);
    assert_eq!(c.cmd(&["GET", "pwned-by-http"]), Reply::Bulk(None));
    assert_eq!(c.cmd(&["GET", "pwned-by-host"]), Reply::Bulk(None));
    assert_eq!(info_field(&mut c, "security_attacks"), 2);
    let page = metrics(&srv);
    assert_eq!(metric(&page, "directkv_security_attacks_total", ""), 2);
    // Lower-case `post` is the same attack; ordinary commands still work.
    let mut s = TcpStream::connect(srv.addr()).unwrap();
    s.write_all(b"post /x HTTP/1.0\r\n\r\nSET pwned-by-post yes\r\n")
        .unwrap();
    read_until_closed(&mut s);
    assert_eq!(c.cmd(&["GET", "pwned-by-post"]), Reply::Bulk(None));
    assert_eq!(c.cmd(&["SET", "fine", "1"]), ok());
    srv.stop();
}

#[test]
fn datagrams_with_a_password_need_an_explicit_acknowledgement() {
    let asked = ServerConfig {
        requirepass: Some(PASSWORD.into()),
        udp: Some(true),
        ..config(1)
    };
    let err = Server::start(asked.clone())
        .err()
        .expect("--udp yes with a password started without --udp-insecure");
    assert!(err.contains("--udp-insecure"), "{err}");
    // Acknowledged: served, as the operator asked (and warned about at start).
    let srv = start_with(ServerConfig {
        udp_insecure: true,
        ..asked
    });
    assert_eq!(srv.udp_addr(), Some(srv.addr()));
    assert!(srv.ocsm_addr().is_none(), "OCSM was not asked for");
    srv.stop();
    // Without a password on loopback both stay on, as before.
    let open = start_with(ServerConfig {
        ocsm_port: Some(0),
        ..config(1)
    });
    assert!(open.udp_addr().is_some() && open.ocsm_addr().is_some());
    open.stop();
}
