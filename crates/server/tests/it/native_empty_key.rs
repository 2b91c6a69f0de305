//! The empty key over the native protocol (issue 20): a key like any other, as over RESP
//! (`redis_differential_empty_key.rs`), on the shard the shard rule gives it. Each operation
//! family on it in one frame, its own batch beside other keys', and across shards. memcached's
//! port keeps memcached's answer: its protocol has no way to send an empty key
//! (`memcache_*` tests).

use crate::common;
use std::io::{Read, Write};
use std::net::TcpStream;

use common::start;
use directkv_proto::native::{
    decode_response, encode_request, func, status, ElemCode, NativeLimits, NativeOp, Response,
};

/// Sends `ops` as one request and returns each result's (status, data).
fn round_trip(s: &mut TcpStream, id: u32, ops: &[NativeOp<'_>]) -> Vec<(u8, Vec<u8>)> {
    let mut out = Vec::new();
    encode_request(id, ops, &NativeLimits::DEFAULT, &mut out).unwrap();
    s.write_all(&out).unwrap();
    let mut buf = Vec::new();
    loop {
        if let Some((frame, _)) =
            decode_response(&buf, &NativeLimits::DEFAULT).expect("valid response")
        {
            return match frame.body {
                Response::Ops(b) => b.iter().map(|o| (o.status, o.data.to_vec())).collect(),
                r => panic!("{r:?}"),
            };
        }
        let mut chunk = [0u8; 65536];
        let n = s.read(&mut chunk).unwrap();
        assert!(n > 0, "closed");
        buf.extend_from_slice(&chunk[..n]);
    }
}

#[test]
fn the_empty_key_is_a_key_over_the_native_protocol() {
    for shards in [1, 3] {
        let srv = start(shards);
        let mut s = TcpStream::connect(srv.addr()).unwrap();
        let one = 1u64.to_le_bytes();
        let r = round_trip(
            &mut s,
            1,
            &[
                NativeOp::get(b""),
                NativeOp::exists(b""),
                NativeOp::put(b"", b"12345678"),
                NativeOp::put(b"other", b"x"),
                NativeOp::update_s2s(b"", func::ADD, ElemCode::U64, &one),
                NativeOp::get(b""),
                NativeOp::exists(b""),
                NativeOp::append(b"", b"!"),
                NativeOp::get(b""),
            ],
        );
        assert_eq!(r[0].0, status::NOT_FOUND);
        assert_eq!(r[1].0, status::NOT_FOUND);
        assert_eq!(r[2].0, status::OK);
        assert_eq!(r[4], (status::OK, b"12345678".to_vec()));
        let bumped = (u64::from_le_bytes(*b"12345678") + 1).to_le_bytes();
        assert_eq!(r[5], (status::OK, bumped.to_vec()));
        assert_eq!(r[6].0, status::OK);
        let mut appended = bumped.to_vec();
        appended.push(b'!');
        assert_eq!(r[8], (status::OK, appended.clone()));
        // RESP sees the same key.
        let mut c = common::Client::connect(&srv);
        assert_eq!(
            c.cmd(&["STRLEN", ""]),
            directkv_proto::resp::Reply::Integer(9)
        );
        let r = round_trip(
            &mut s,
            2,
            &[
                NativeOp::delete(b""),
                NativeOp::get(b""),
                NativeOp::delete(b""),
            ],
        );
        assert_eq!(r[0].0, status::OK);
        assert_eq!(r[1].0, status::NOT_FOUND);
        assert_eq!(r[2].0, status::NOT_FOUND);
        srv.stop();
    }
}
