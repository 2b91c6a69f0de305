//! What one request and one client can make the server buffer (issue 19 items 4 and 6): reply
//! memory is bounded per request (`results_bytes_max`), per connection (a native client that
//! does not read is disconnected, as a RESP one is), and for all clients together
//! (`maxmemory_clients`, the largest client disconnected first); a UDP request whose reply
//! does not fit a datagram is answered, never larger than itself; buffers shrink back once a
//! large request is done. INFO's `client_buffer_bytes` (the registry's total) is the figure
//! the tests read; `client_buffer_bytes_peak` its high-water mark.

use crate::common;
use std::io::{Read, Write};
use std::net::{TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use common::{config, info_field, ok, start_with, Client};
use directkv_proto::native::{
    decode_response, decode_response_datagram, encode_request, status, NativeLimits, NativeOp,
    Response,
};
use directkv_proto::resp::Reply;
use directkv_server::{Server, ServerConfig};

const MIB: usize = 1 << 20;
const DEADLINE: Duration = Duration::from_secs(30);

fn server(cfg: ServerConfig) -> Server {
    let srv = start_with(cfg);
    let mut c = Client::connect(&srv);
    c.send(&[b"SET", b"k", &vec![b'v'; MIB]]);
    assert_eq!(c.read(), ok());
    srv
}

fn gets(request_id: u32, n: usize) -> Vec<u8> {
    let mut req = Vec::new();
    let ops = vec![NativeOp::get(b"k"); n];
    encode_request(request_id, &ops, &NativeLimits::DEFAULT, &mut req).unwrap();
    req
}

/// Reads one whole native response (all its parts) from `s`: the statuses of its operations.
fn read_response(s: &mut TcpStream, buf: &mut Vec<u8>) -> Vec<u8> {
    let mut statuses = Vec::new();
    loop {
        if let Some((frame, n)) = decode_response(buf, &NativeLimits::DEFAULT).unwrap() {
            let more = match frame.body {
                Response::Ops(b) => {
                    statuses.extend(b.iter().map(|o| o.status));
                    b.more
                }
                b => panic!("{b:?}"),
            };
            buf.drain(..n);
            if !more {
                return statuses;
            }
            continue;
        }
        let mut chunk = vec![0u8; MIB];
        let n = s.read(&mut chunk).unwrap();
        assert!(n > 0, "the server closed the connection");
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Polls INFO until `cond` holds for field `name`; returns its last value.
fn wait_for(c: &mut Client, name: &str, cond: impl Fn(u64) -> bool) -> u64 {
    let start = Instant::now();
    loop {
        let v = info_field(c, name);
        if cond(v) || start.elapsed() > DEADLINE {
            return v;
        }
        std::thread::yield_now();
    }
}

#[test]
fn buffers_shrink_back_once_a_large_request_is_done() {
    // 40 MiB of MGET replies and 40 MiB of native ones at once, each with its results:
    // room under the server-wide cap (the default, 128 MiB, would disconnect one).
    let srv = server(ServerConfig {
        maxmemory_clients: 256 * MIB,
        ..config(2)
    });
    let mut resp = Client::connect(&srv);
    let mut args: Vec<&[u8]> = vec![b"MGET"];
    args.extend(std::iter::repeat_n(&b"k"[..], 40));
    resp.send(&args);
    match resp.read() {
        Reply::Array(Some(a)) => assert_eq!(a.len(), 40),
        r => panic!("{r:?}"),
    }
    let mut native = TcpStream::connect(srv.addr()).unwrap();
    native.write_all(&gets(1, 40)).unwrap();
    let mut buf = Vec::new();
    assert_eq!(read_response(&mut native, &mut buf), vec![status::OK; 40]);
    // Both connections are idle now: their input, output and results buffers are back to a
    // small capacity (the registry holds a few times READ_CHUNK_BYTES per connection).
    let mut probe = Client::connect(&srv);
    let idle_max = 3 * (512 << 10);
    let idle = wait_for(&mut probe, "client_buffer_bytes", |b| b <= idle_max);
    assert!(idle <= idle_max, "idle clients hold {idle} bytes");
    let peak = info_field(&mut probe, "client_buffer_bytes_peak");
    assert!(
        peak >= 40 * MIB as u64,
        "the peak saw the large replies: {peak}"
    );
    // And they still work.
    assert_eq!(resp.cmd(&["PING"]), Reply::Simple("PONG".into()));
    native.write_all(&gets(2, 1)).unwrap();
    assert_eq!(read_response(&mut native, &mut buf), vec![status::OK]);
    srv.stop();
}

#[test]
fn the_largest_client_is_disconnected_first_at_maxmemory_clients() {
    let srv = server(ServerConfig {
        maxmemory_clients: 16 * MIB,
        ..config(2)
    });
    let mut small = Client::connect(&srv);
    assert_eq!(small.cmd(&["SET", "a", "1"]), ok());
    // A medium client half-way through a 1 MiB SET.
    let mut medium = Client::connect(&srv);
    medium.send_raw(format!("*3\r\n$3\r\nSET\r\n$1\r\nm\r\n${MIB}\r\n").as_bytes());
    medium.send_raw(&vec![b'm'; MIB / 2]);
    let mut probe = Client::connect(&srv);
    wait_for(&mut probe, "client_buffer_bytes", |b| b >= MIB as u64 / 2);
    // A large one announces 60 MiB and sends 24: past the cap, it is the one to go.
    let mut large = TcpStream::connect(srv.addr()).unwrap();
    large.set_write_timeout(Some(DEADLINE)).unwrap();
    large
        .write_all(format!("*3\r\n$3\r\nSET\r\n$1\r\nb\r\n${}\r\n", 60 * MIB).as_bytes())
        .unwrap();
    let chunk = vec![b'b'; MIB];
    for _ in 0..24 {
        if large.write_all(&chunk).is_err() {
            break;
        }
    }
    large.set_read_timeout(Some(DEADLINE)).unwrap();
    let mut rest = Vec::new();
    // End of stream, or a reset (the server closed with unread input); not a timeout.
    let closed = match large.read_to_end(&mut rest) {
        Ok(_) => true,
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
    };
    assert!(closed, "the largest client was disconnected");
    let evicted = wait_for(&mut probe, "evicted_clients", |n| n >= 1);
    assert_eq!(evicted, 1);
    let held = info_field(&mut probe, "client_buffer_bytes");
    assert!(held <= 16 * MIB as u64, "clients hold {held} bytes");
    // The small and the medium clients were left alone and still work.
    assert_eq!(small.cmd(&["GET", "a"]), common::bulk("1"));
    medium.send_raw(&vec![b'm'; MIB / 2]);
    medium.send_raw(b"\r\n");
    assert_eq!(medium.read(), ok());
    srv.stop();
}

#[test]
fn a_native_client_that_does_not_read_is_disconnected_with_bounded_replies() {
    let srv = server(ServerConfig {
        reply_write_timeout_secs: 1,
        ..config(1)
    });
    let mut probe = Client::connect(&srv);
    let before = info_field(&mut probe, "connected_clients");
    let mut s = TcpStream::connect(srv.addr()).unwrap();
    // 30 frames of 16 GETs of 1 MiB: 480 MiB of replies asked for by 1.6 KB, never read.
    let mut frames = Vec::new();
    for id in 0..30 {
        frames.extend(gets(id, 16));
    }
    s.write_all(&frames).unwrap();
    let left = wait_for(&mut probe, "connected_clients", |n| n < before + 1);
    assert_eq!(left, before, "the non-reading client was disconnected");
    let peak = info_field(&mut probe, "client_buffer_bytes_peak");
    assert!(
        peak <= 80 * MIB as u64,
        "one non-reading client made the server hold {peak} bytes"
    );
    srv.stop();
}

#[test]
fn a_large_native_read_is_answered_in_steps_with_bounded_memory() {
    // The soak's "native-1024-gets": one 4 KB frame asks for 1024 copies of a 1 MiB value. It
    // is answered with `results_bytes_max` (64 MiB) of values in all, but in steps of about
    // `RESPONSE_STEP_BYTES` (1 MiB), so the connection never holds the whole response: before,
    // the request held 64 MiB of results plus 64 MiB of encoded reply at once.
    for shards in [1, 2] {
        let srv = server(config(shards));
        let mut s = TcpStream::connect(srv.addr()).unwrap();
        s.write_all(&gets(7, 1024)).unwrap();
        let mut buf = Vec::new();
        let statuses = read_response(&mut s, &mut buf);
        assert_eq!(statuses.len(), 1024);
        let ok = statuses.iter().take_while(|&&st| st == status::OK).count();
        assert!((60..=64).contains(&ok), "{ok} values answered");
        let refused = status::error(status::ERR_REPLY_TOO_LARGE);
        assert!(
            statuses[ok..].iter().all(|&st| st == refused),
            "past the budget every GET is refused"
        );
        let mut probe = Client::connect(&srv);
        let peak = info_field(&mut probe, "client_buffer_bytes_peak");
        assert!(
            peak <= 24 * MIB as u64,
            "{shards} shard(s): one large read made the server hold {peak} bytes"
        );
        // The connection goes on: a small request after the large one.
        s.write_all(&gets(8, 2)).unwrap();
        assert_eq!(read_response(&mut s, &mut buf), vec![status::OK; 2]);
        srv.stop();
    }
}

#[test]
fn a_udp_request_whose_reply_does_not_fit_is_answered_within_its_size() {
    let srv = start_with(config(2));
    let mut c = Client::connect(&srv);
    assert_eq!(c.cmd(&["SET", "k", "abcdef"]), ok());
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    sock.connect(srv.addr()).unwrap();
    let req = gets(41, 100);
    sock.send(&req).unwrap();
    let mut buf = vec![0u8; 65536];
    let n = sock.recv(&mut buf).expect("an answer, not silence");
    assert!(
        n <= req.len(),
        "reply {n} bytes for a {}-byte request",
        req.len()
    );
    let f = decode_response_datagram(&buf[..n], &NativeLimits::DEFAULT).unwrap();
    assert_eq!(f.request_id, 41);
    match f.body {
        Response::Ops(b) => {
            let statuses: Vec<u8> = b.iter().map(|o| o.status).collect();
            assert_eq!(statuses.len(), 100);
            assert!(statuses.contains(&status::OK));
            assert!(statuses.contains(&status::error(status::ERR_REPLY_TOO_LARGE)));
        }
        b => panic!("{b:?}"),
    }
    srv.stop();
}

#[test]
fn an_update_whose_reply_is_refused_is_not_applied() {
    // The request holds its 64 MiB of results and their 64 MiB encoding at once: room for
    // both under the server-wide cap (the default, 128 MiB, would disconnect it first).
    let srv = server(ServerConfig {
        maxmemory_clients: 256 * MIB,
        ..config(1)
    });
    let mut s = TcpStream::connect(srv.addr()).unwrap();
    // 64 GETs of 1 MiB fill the 64 MiB results budget; the INCRBY after them is refused.
    let mut ops = vec![NativeOp::get(b"k"); 64];
    let one = 1i64.to_le_bytes();
    ops.push(NativeOp::incr_by(b"ctr", &one));
    let mut req = Vec::new();
    encode_request(3, &ops, &NativeLimits::DEFAULT, &mut req).unwrap();
    s.write_all(&req).unwrap();
    let mut buf = Vec::new();
    let statuses = read_response(&mut s, &mut buf);
    let last = *statuses.last().unwrap();
    let mut c = Client::connect(&srv);
    let stored = c.cmd(&["GET", "ctr"]);
    if status::is_error(last) {
        assert_eq!(last, status::error(status::ERR_REPLY_TOO_LARGE));
        assert_eq!(stored, Reply::Bulk(None), "a refused INCRBY was applied");
    } else {
        assert_eq!(stored, common::bulk("1"));
    }
    srv.stop();
}
