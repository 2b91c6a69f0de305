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
