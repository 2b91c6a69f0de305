//! The native protocol over UDP: batches answered in one datagram, never larger than the
//! request (anti-amplification), malformed datagrams answered with an error frame.

use crate::common;
use std::net::UdpSocket;
use std::time::Duration;

use common::start;
use directkv_proto::native::{
    decode_response_datagram, encode_request, status, NativeLimits, NativeOp, Response,
};

fn exchange(sock: &UdpSocket, req: &[u8]) -> Vec<u8> {
    sock.send(req).unwrap();
    let mut buf = vec![0u8; 65536];
    let n = sock.recv(&mut buf).expect("a reply datagram");
    buf.truncate(n);
    buf
}

#[test]
fn batches_over_udp_with_replies_no_larger_than_requests() {
    let srv = start(2);
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    sock.connect(srv.addr()).unwrap();
    let limits = NativeLimits::DEFAULT;

    let mut req = Vec::new();
    encode_request(
        7,
        &[
            NativeOp::put(b"u1", b"12345678"),
            NativeOp::get(b"u1"),
            NativeOp::get(b"nope"),
        ],
        &limits,
        &mut req,
    )
    .unwrap();
    let reply = exchange(&sock, &req);
    assert!(reply.len() <= req.len());
    let f = decode_response_datagram(&reply, &limits).unwrap();
    assert_eq!(f.request_id, 7);
    let Response::Ops(b) = f.body else {
        panic!("{:?}", f.body)
    };
    let r: Vec<(u8, Vec<u8>)> = b.iter().map(|o| (o.status, o.data.to_vec())).collect();
    assert_eq!(
        r,
        vec![
            (status::OK, vec![]),
            (status::OK, b"12345678".to_vec()),
            (status::NOT_FOUND, vec![])
        ]
    );

    // A 1000-byte value asked for by a 20-byte request: the data is withheld.
    let big = vec![7u8; 1000];
    req.clear();
    encode_request(8, &[NativeOp::put(b"u2", &big)], &limits, &mut req).unwrap();
    exchange(&sock, &req);
    req.clear();
    encode_request(9, &[NativeOp::get(b"u2")], &limits, &mut req).unwrap();
    let reply = exchange(&sock, &req);
    assert!(reply.len() <= req.len());
    let Response::Ops(b) = decode_response_datagram(&reply, &limits).unwrap().body else {
        panic!()
    };
    let op = b.iter().next().unwrap();
    assert!(
        op.status & 0x80 != 0 && op.data.is_empty(),
        "status {:#x}",
        op.status
    );

    // Garbage gets an error frame when that is no larger than the garbage, and the server
    // keeps serving.
    let mut junk = vec![0xD7u8, 0x01, 0x01, 0x00, 0xff, 0xff, 0xff, 0x7f];
    junk.resize(200, 0);
    let reply = exchange(&sock, &junk);
    assert!(reply.len() <= junk.len());
    assert!(matches!(
        decode_response_datagram(&reply, &limits).unwrap().body,
        Response::Error(_)
    ));
    srv.stop();
}

/// The deadline and keyspace operations over UDP keep the datagram rules: a reply is never
/// larger than its request, and a scan's keys are held to what the reply can carry (a scan in a
/// small datagram gets "reply too large", never a larger reply).
#[test]
fn deadline_and_keyspace_operations_over_udp() {
    use directkv_proto::native::{expire_args, parse_ttl_reply, scan_args, ScanReply};
    let srv = start(1);
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    sock.connect(srv.addr()).unwrap();
    let limits = NativeLimits::DEFAULT;
    let deadline = 4_102_444_800_000u64; // 2100-01-01
    let args = expire_args(deadline, 0);
    let mut req = Vec::new();
    encode_request(
        1,
        &[
            NativeOp::put_expire(b"udp:1", b"value-1", &args),
            NativeOp::ttl(b"udp:1"),
            NativeOp::exists(b"udp:1"),
            NativeOp::type_of(b"udp:1"),
            NativeOp::persist(b"udp:1"),
            NativeOp::exists(b"udp:2"),
        ],
        &limits,
        &mut req,
    )
    .unwrap();
    let reply = exchange(&sock, &req);
    assert!(reply.len() <= req.len());
    let Response::Ops(b) = decode_response_datagram(&reply, &limits).unwrap().body else {
        panic!()
    };
    let r: Vec<_> = b.iter().collect();
    assert_eq!(r[0].status, status::OK);
    let (d, left) = parse_ttl_reply(r[1].data).unwrap();
    assert!(d == deadline && left > 0);
    assert_eq!((r[2].status, r[3].data), (status::OK, &b"string"[..]));
    assert_eq!((r[4].status, r[5].status), (status::OK, status::NOT_FOUND));

    // A scan alone in a small datagram: its pages of no keys fit, and at the bucket of the key
    // the reply would not fit: "reply too large" (no progress, never a larger reply).
    let step = |sock: &UdpSocket, id: u32, cursor: u64, pad: &[u8]| {
        let scan = scan_args(cursor, 10);
        let mut ops = vec![NativeOp::scan(b"", &scan)];
        if !pad.is_empty() {
            ops.push(NativeOp::exists(pad));
        }
        let mut req = Vec::new();
        encode_request(id, &ops, &limits, &mut req).unwrap();
        let reply = exchange(sock, &req);
        assert!(reply.len() <= req.len());
        let Response::Ops(b) = decode_response_datagram(&reply, &limits).unwrap().body else {
            panic!()
        };
        let op = b.iter().next().unwrap();
        let page = ScanReply::parse(op.data).map(|p| {
            (
                p.next_cursor,
                p.keys().map(<[u8]>::to_vec).collect::<Vec<_>>(),
            )
        });
        (op.status, page)
    };
    let mut cursor = 0;
    let mut steps = 0;
    let at_key = loop {
        let (st, page) = step(&sock, 2, cursor, b"");
        if st == status::error(status::ERR_REPLY_TOO_LARGE) {
            break cursor;
        }
        let (next, keys) = page.unwrap();
        assert!(keys.is_empty() && next != 0, "the key fit or was missed");
        cursor = next;
        steps += 1;
        assert!(steps < 1_000_000);
    };
    // The same step in a datagram with room (padded with an exists of a long key): the key.
    let (st, page) = step(&sock, 3, at_key, &[b'p'; 200]);
    assert_eq!(st, status::OK);
    assert_eq!(page.unwrap().1, [b"udp:1".to_vec()]);
    srv.stop();
}
