//! The native protocol over a real socket: HELLO with the shard map, batches of every family
//! across shards, PING, and a malformed frame.

use crate::common;
use std::io::{Read, Write};
use std::net::TcpStream;

use common::{start, start_with};
use directkv_proto::native::{
    decode_response, encode_request, encode_request_frame, func, status, ElemCode, Hello,
    NativeLimits, NativeOp, Request, RequestFrame, Response,
};
use directkv_server::config::ServerConfig;

struct Native {
    s: TcpStream,
    buf: Vec<u8>,
}

impl Native {
    fn send(&mut self, bytes: &[u8]) {
        self.s.write_all(bytes).unwrap();
    }

    /// Reads one response frame and hands it to `f`.
    fn read<T>(&mut self, f: impl FnOnce(Response<'_>) -> T) -> T {
        loop {
            if let Some((frame, n)) =
                decode_response(&self.buf, &NativeLimits::DEFAULT).expect("valid response")
            {
                let r = f(frame.body);
                self.buf.drain(..n);
                return r;
            }
            let mut chunk = [0u8; 65536];
            let n = self.s.read(&mut chunk).unwrap();
            assert!(n > 0, "closed");
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

#[test]
fn hello_ping_and_batches_across_shards() {
    let srv = start(3);
    let mut c = Native {
        s: TcpStream::connect(srv.addr()).unwrap(),
        buf: Vec::new(),
    };
    let mut out = Vec::new();
    let hello = RequestFrame {
        request_id: 1,
        body: Request::Hello(Hello {
            password: b"",
            client_name: b"test",
        }),
    };
    encode_request_frame(&hello, &NativeLimits::DEFAULT, &mut out).unwrap();
    c.send(&out);
    let shards = c.read(|r| match r {
        Response::Hello(h) => h.shard_map.shard_count(),
        r => panic!("{r:?}"),
    });
    assert_eq!(shards, 3);

    let keys: Vec<Vec<u8>> = (0..100u32).map(|i| format!("n{i}").into_bytes()).collect();
    let one = 1u64.to_le_bytes();
    let mut ops = Vec::new();
    for k in &keys {
        ops.push(NativeOp::put(k, b"12345678"));
        ops.push(NativeOp::update_s2s(k, func::ADD, ElemCode::U64, &one));
        ops.push(NativeOp::get(k));
    }
    ops.push(NativeOp::get(b"missing"));
    out.clear();
    encode_request(2, &ops, &NativeLimits::DEFAULT, &mut out).unwrap();
    c.send(&out);
    let results: Vec<(u8, Vec<u8>)> = c.read(|r| match r {
        Response::Ops(b) => b.iter().map(|o| (o.status, o.data.to_vec())).collect(),
        r => panic!("{r:?}"),
    });
    assert_eq!(results.len(), 301);
    let mut expect = u64::from_le_bytes(*b"12345678").to_le_bytes().to_vec();
    for i in 0..100 {
        assert_eq!(results[3 * i].0, status::OK);
        assert_eq!(
            results[3 * i + 1],
            (status::OK, expect.clone()),
            "original value"
        );
        let mut bumped = u64::from_le_bytes(expect[..].try_into().unwrap());
        bumped += 1;
        assert_eq!(
            results[3 * i + 2],
            (status::OK, bumped.to_le_bytes().to_vec())
        );
    }
    expect.clear();
    assert_eq!(results[300].0, status::NOT_FOUND);

    out.clear();
    encode_request_frame(
        &RequestFrame {
            request_id: 3,
            body: Request::Ping(b"hi"),
        },
        &NativeLimits::DEFAULT,
        &mut out,
    )
    .unwrap();
    c.send(&out);
    c.read(|r| assert!(matches!(r, Response::Pong(p) if p == b"hi")));
    srv.stop();
}

#[test]
fn malformed_frame_gets_an_error_frame_and_a_close() {
    let srv = start(1);
    let mut c = Native {
        s: TcpStream::connect(srv.addr()).unwrap(),
        buf: Vec::new(),
    };
    // Magic and a wrong version: the stream cannot be trusted after this.
    c.send(&[0xD7, 0x09, 0x01, 0x00, 16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    c.read(|r| assert!(matches!(r, Response::Error(e) if e.closing), "{r:?}"));
    let mut rest = Vec::new();
    assert_eq!(
        c.s.read_to_end(&mut rest).unwrap(),
        0,
        "server closed the connection"
    );
    // Other connections are unaffected.
    let mut ok = common::Client::connect(&srv);
    assert_eq!(
        ok.cmd(&["PING"]),
        directkv_proto::resp::Reply::Simple("PONG".into())
    );
    srv.stop();
}

#[test]
fn attach_moves_the_connection_and_it_keeps_working() {
    let srv = start(3);
    let limits = NativeLimits::DEFAULT;
    // Connections are accepted round robin (0, 1, 2, 0), so each ATTACH below moves one.
    for shard in [2u16, 0, 1, 7] {
        let mut c = Native {
            s: TcpStream::connect(srv.addr()).unwrap(),
            buf: Vec::new(),
        };
        let mut out = Vec::new();
        encode_request_frame(
            &RequestFrame {
                request_id: 1,
                body: Request::Attach(shard),
            },
            &limits,
            &mut out,
        )
        .unwrap();
        c.send(&out);
        let got = c.read(|r| match r {
            Response::Attach(s) => s,
            r => panic!("{r:?}"),
        });
        // An out-of-range shard leaves the connection where it is (on some valid shard).
        if shard < 3 {
            assert_eq!(got, shard);
        } else {
            assert!(got < 3);
        }
        for round in 0..3u32 {
            out.clear();
            let key = format!("a{shard}-{round}");
            encode_request(
                2 + round,
                &[
                    NativeOp::put(key.as_bytes(), b"v"),
                    NativeOp::get(key.as_bytes()),
                ],
                &limits,
                &mut out,
            )
            .unwrap();
            c.send(&out);
            let data = c.read(|r| match r {
                Response::Ops(b) => b.iter().nth(1).unwrap().data.to_vec(),
                r => panic!("{r:?}"),
            });
            assert_eq!(data, b"v");
        }
    }
    srv.stop();
}

/// With a password, a connection that said HELLO and then moved with ATTACH stays
/// authenticated on its new shard; one that never said HELLO is refused there too.
#[test]
fn attach_keeps_the_authentication_it_had() {
    let srv = start_with(ServerConfig {
        port: 0,
        shards: 3,
        memory_bytes: 8 << 20,
        requirepass: Some("pw".into()),
        appendonly: false,
        ..Default::default()
    });
    let limits = NativeLimits::DEFAULT;
    let frame = |request_id: u32, body: Request<'_>| {
        let mut out = Vec::new();
        encode_request_frame(&RequestFrame { request_id, body }, &limits, &mut out).unwrap();
        out
    };
    let mut ops = Vec::new();
    encode_request(
        3,
        &[NativeOp::put(b"auth-k", b"v"), NativeOp::get(b"auth-k")],
        &limits,
        &mut ops,
    )
    .unwrap();
    // Accepted round robin, so the first connection lands on shard 0; ATTACH 2 moves it.
    let mut c = Native {
        s: TcpStream::connect(srv.addr()).unwrap(),
        buf: Vec::new(),
    };
    let hello = Request::Hello(Hello {
        password: b"pw",
        client_name: b"test",
    });
    c.send(&frame(1, hello));
    c.read(|r| assert!(matches!(r, Response::Hello(_)), "{r:?}"));
    c.send(&frame(2, Request::Attach(2)));
    assert_eq!(
        c.read(|r| match r {
            Response::Attach(s) => s,
            r => panic!("{r:?}"),
        }),
        2
    );
    c.send(&ops);
    let data = c.read(|r| match r {
        Response::Ops(b) => b.iter().nth(1).unwrap().data.to_vec(),
        r => panic!("expected results without a second HELLO, got {r:?}"),
    });
    assert_eq!(data, b"v");

    // No HELLO: ATTACH is refused like any other request before authentication.
    let mut d = Native {
        s: TcpStream::connect(srv.addr()).unwrap(),
        buf: Vec::new(),
    };
    d.send(&frame(1, Request::Attach(2)));
    d.read(|r| assert!(matches!(r, Response::Error(_)), "{r:?}"));
    srv.stop();
}

/// One frame with an operation the engine cannot take (an unknown element type) between good
/// ones: answered in place with its error, the others as usual. A one-shard server runs such a
/// frame on its engine in place (no plan); a three-shard server, reached without ATTACH, plans
/// it across shards. Both must answer alike.
#[test]
fn an_operation_that_fails_translation_is_answered_in_place_on_both_paths() {
    let (one, five) = (1u64.to_le_bytes(), 5u64.to_le_bytes());
    let mut bad = NativeOp::update_s2s(b"ctr", func::ADD, ElemCode::U64, &one);
    bad.elem = 200;
    let ops = [
        NativeOp::put(b"ctr", &five),
        bad,
        NativeOp::update_s2s(b"ctr", func::ADD, ElemCode::U64, &one),
        bad,
        NativeOp::get(b"ctr"),
        NativeOp::get(b"missing"),
        bad,
    ];
    let want: Vec<(u8, Vec<u8>)> = vec![
        (status::OK, vec![]),
        (status::error(status::ERR_UNKNOWN_ELEM_TYPE), vec![]),
        (status::OK, 5u64.to_le_bytes().to_vec()),
        (status::error(status::ERR_UNKNOWN_ELEM_TYPE), vec![]),
        (status::OK, 6u64.to_le_bytes().to_vec()),
        (status::NOT_FOUND, vec![]),
        (status::error(status::ERR_UNKNOWN_ELEM_TYPE), vec![]),
    ];
    for shards in [1, 3] {
        let srv = start(shards);
        let mut c = Native {
            s: TcpStream::connect(srv.addr()).unwrap(),
            buf: Vec::new(),
        };
        let mut out = Vec::new();
        encode_request(9, &ops, &NativeLimits::DEFAULT, &mut out).unwrap();
        c.send(&out);
        let got: Vec<(u8, Vec<u8>)> = c.read(|r| match r {
            Response::Ops(b) => b.iter().map(|o| (o.status, o.data.to_vec())).collect(),
            r => panic!("{r:?}"),
        });
        assert_eq!(got, want, "{shards} shard(s)");
        srv.stop();
    }
}
