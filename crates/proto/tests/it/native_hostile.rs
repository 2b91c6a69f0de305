//! Hostile input to the native decoder: partial frames, lying lengths, limits at their edges,
//! and recovery after a bad frame in a stream.

use directkv_proto::native::{
    decode_request, decode_request_datagram, decode_response, encode_request, encode_request_frame,
    encode_response, encode_response_frame, frame_len, func, ElemCode, ErrorCode, ErrorReply,
    Hello, HelloReply, NativeLimits, NativeOp, Request, RequestFrame, Response, ResponseFrame,
    ResponseOp, ShardMap, HASH_XXH3_64, MAGIC, VERSION,
};

const L: NativeLimits = NativeLimits::DEFAULT;

fn header(kind: u8, len: u32, id: u32) -> Vec<u8> {
    let mut h = vec![MAGIC, VERSION, kind, 0];
    h.extend_from_slice(&len.to_le_bytes());
    h.extend_from_slice(&id.to_le_bytes());
    h
}

/// One valid frame of every client kind.
fn client_frames() -> Vec<Vec<u8>> {
    let delta = 1u64.to_le_bytes();
    let ops = [
        NativeOp::get(b"key:0001"),
        NativeOp::put(b"key:0002", &[9; 300]),
        NativeOp::cas(b"k", b"", b"new"),
        NativeOp::update_s2s(b"ctr:a", func::ADD, ElemCode::U64, &delta).no_return(),
        NativeOp::update_s2s(b"ctr:b", func::ADD, ElemCode::U64, &delta).no_return(),
    ];
    let mut frames = Vec::new();
    let mut f = Vec::new();
    encode_request(1, &ops, &L, &mut f).unwrap();
    frames.push(f);
    for body in [
        Request::Hello(Hello {
            password: b"pw",
            client_name: b"me",
        }),
        Request::Ping(b"12345678"),
        Request::Attach(3),
    ] {
        let mut f = Vec::new();
        encode_request_frame(
            &RequestFrame {
                request_id: 2,
                body,
            },
            &L,
            &mut f,
        )
        .unwrap();
        frames.push(f);
    }
    frames
}

/// One valid frame of every server kind.
fn server_frames() -> Vec<Vec<u8>> {
    let mut frames = Vec::new();
    let mut f = Vec::new();
    let results = [
        ResponseOp {
            status: 0,
            data: &[1; 200],
        },
        ResponseOp {
            status: 1,
            data: &[],
        },
        ResponseOp {
            status: 0x89,
            data: &[],
        },
    ];
    encode_response(1, &results, &L, &mut f).unwrap();
    frames.push(f);
    let reply = HelloReply {
        limits: L,
        shard_map: ShardMap {
            hash: HASH_XXH3_64,
            ports: vec![0; 16],
        },
        server_name: "directkv test".into(),
    };
    let error = ErrorReply {
        code: ErrorCode::Truncated.code(),
        closing: false,
        op_index: Some(4),
        message: ErrorCode::Truncated.message(),
    };
    for body in [
        Response::Hello(reply),
        Response::Pong(b"abc"),
        Response::Attach(3),
        Response::Error(error),
    ] {
        let mut f = Vec::new();
        encode_response_frame(
            &ResponseFrame {
                request_id: 2,
                body,
            },
            &L,
            &mut f,
        )
        .unwrap();
        frames.push(f);
    }
    frames
}

#[test]
fn every_prefix_of_a_valid_frame_is_incomplete() {
    for frame in client_frames() {
        for cut in 0..frame.len() {
            assert!(
                matches!(decode_request(&frame[..cut], &L), Ok(None)),
                "cut {cut}"
            );
        }
        assert!(matches!(decode_request(&frame, &L), Ok(Some((_, n))) if n == frame.len()));
    }
    for frame in server_frames() {
        for cut in 0..frame.len() {
            assert!(
                matches!(decode_response(&frame[..cut], &L), Ok(None)),
                "cut {cut}"
            );
        }
        assert!(matches!(decode_response(&frame, &L), Ok(Some((_, n))) if n == frame.len()));
    }
}

#[test]
fn a_frame_claiming_four_gib_is_rejected_from_its_first_eight_bytes() {
    let claim = &header(0x01, u32::MAX, 1)[..8];
    let e = decode_request(claim, &L).unwrap_err();
    assert_eq!((e.code, e.skip), (ErrorCode::FrameTooLong, None));
    assert!(e.reply().closing);
    // One past the limit is already too long; the limit itself is fine and waits for the bytes.
    let over = header(0x01, L.frame_len_max + 1, 1);
    assert_eq!(
        decode_request(&over, &L).unwrap_err().code,
        ErrorCode::FrameTooLong
    );
    let at = header(0x01, L.frame_len_max, 1);
    assert!(matches!(decode_request(&at, &L), Ok(None)));
    assert_eq!(frame_len(&at, &L), Ok(Some(L.frame_len_max as usize)));
    // Over UDP the same frame is over the datagram limit.
    let udp = L.for_udp();
    let big = header(0x01, 70_000, 1);
    assert_eq!(
        decode_request(&big, &udp).unwrap_err().code,
        ErrorCode::FrameTooLong
    );
}

#[test]
fn counts_and_lengths_are_bounded_by_the_frame_before_any_loop() {
    // 4096 ops announced, 2 bytes present.
    let mut f = header(0x01, 16, 1);
    f.extend_from_slice(&[0x00, 0x10, 0x00, 0x00]);
    let e = decode_request(&f, &L).unwrap_err();
    assert_eq!(
        (e.code, e.skip, e.request_id),
        (ErrorCode::Truncated, Some(16), 1)
    );
    // A PUT whose varint length says 4 GiB - 1: over value_len_max, never trusted.
    let mut f = header(0x01, 12 + 2 + 3 + 5, 2);
    f.extend_from_slice(&[1, 0, 0x01, 1, b'k', 0xff, 0xff, 0xff, 0xff, 0x0f]);
    assert_eq!(
        decode_request(&f, &L).unwrap_err().code,
        ErrorCode::ValueTooLarge
    );
    // A HELLO_REPLY announcing 4096 shards with 2 bytes of ports: rejected before allocating.
    let mut f = header(0x82, 12 + 14 + 2, 3);
    f.extend_from_slice(&[0; 12]);
    f.extend_from_slice(&4096u16.to_le_bytes());
    f.extend_from_slice(&[0, 0]);
    assert_eq!(
        decode_response(&f, &L).unwrap_err().code,
        ErrorCode::Truncated
    );
}

#[test]
fn a_full_frame_of_one_byte_ops_decodes() {
    // frame_ops_max GETs of empty keys, each a single COPY_KEY_LEN byte after the first: the
    // codec passes empty keys through (to the engine, which stores the empty key as Redis does).
    let mut f = header(0x01, 0, 1);
    f.extend_from_slice(&L.frame_ops_max.to_le_bytes());
    f.extend_from_slice(&[0x00, 0x00]);
    f.extend(std::iter::repeat_n(
        0x20u8,
        usize::from(L.frame_ops_max) - 1,
    ));
    let len = f.len() as u32;
    f[4..8].copy_from_slice(&len.to_le_bytes());
    let (frame, n) = decode_request(&f, &L).unwrap().unwrap();
    assert_eq!(n, f.len());
    let Request::Ops(batch) = frame.body else {
        panic!("not ops")
    };
    assert_eq!(batch.len(), 4096);
    assert!(batch.iter().all(|op| op.key.is_empty()));
    // One more op is over frame_ops_max.
    f[12..14].copy_from_slice(&4097u16.to_le_bytes());
    f.push(0x20);
    let len = f.len() as u32;
    f[4..8].copy_from_slice(&len.to_le_bytes());
    assert_eq!(
        decode_request(&f, &L).unwrap_err().code,
        ErrorCode::TooManyOps
    );
}

#[test]
fn a_stream_recovers_after_a_malformed_frame() {
    let mut stream = Vec::new();
    encode_request(1, &[NativeOp::get(b"a")], &L, &mut stream).unwrap();
    // Frame 2: well framed, but its op's opcode is 0x0F (extended) followed by 01, a short
    // opcode written long: not a valid encoding.
    let mut bad = header(0x01, 12 + 2 + 3, 2);
    bad.extend_from_slice(&[1, 0, 0x0F, 1, b'x']);
    stream.extend_from_slice(&bad);
    encode_request(3, &[NativeOp::delete(b"c")], &L, &mut stream).unwrap();

    let mut ids = Vec::new();
    let mut errors = Vec::new();
    let mut buf = &stream[..];
    while !buf.is_empty() {
        match decode_request(buf, &L) {
            Ok(Some((f, n))) => {
                ids.push(f.request_id);
                buf = &buf[n..];
            }
            Ok(None) => panic!("stream ended inside a frame"),
            Err(e) => {
                errors.push((e.request_id, e.code, e.op_index));
                buf = &buf[e.skip.expect("resynchronisable")..];
            }
        }
    }
    assert_eq!(ids, [1, 3]);
    assert_eq!(errors, [(2, ErrorCode::UnknownOpcode, Some(0))]);
}

#[test]
fn garbage_after_a_good_frame_is_fatal_at_its_first_byte() {
    let mut stream = Vec::new();
    encode_request(1, &[NativeOp::get(b"a")], &L, &mut stream).unwrap();
    let n = stream.len();
    stream.extend_from_slice(b"GET / HTTP/1.1\r\n");
    assert!(decode_request(&stream, &L).is_ok());
    let e = decode_request(&stream[n..n + 1], &L).unwrap_err();
    assert_eq!((e.code, e.skip), (ErrorCode::BadMagic, None));
}

#[test]
fn datagrams_must_be_exactly_one_frame() {
    let mut two = Vec::new();
    encode_request(1, &[NativeOp::get(b"a")], &L, &mut two).unwrap();
    encode_request(2, &[NativeOp::get(b"b")], &L, &mut two).unwrap();
    let e = decode_request_datagram(&two, &L).unwrap_err();
    assert_eq!((e.code, e.request_id), (ErrorCode::TrailingBytes, 1));
    let e = decode_request_datagram(&two[..5], &L).unwrap_err();
    assert_eq!(e.code, ErrorCode::Truncated);
}

#[test]
fn response_kinds_are_not_requests_and_vice_versa() {
    for frame in server_frames() {
        let e = decode_request(&frame, &L).unwrap_err();
        assert_eq!(
            (e.code, e.skip),
            (ErrorCode::UnknownKind, Some(frame.len()))
        );
    }
    for frame in client_frames() {
        let e = decode_response(&frame, &L).unwrap_err();
        assert_eq!(
            (e.code, e.skip),
            (ErrorCode::UnknownKind, Some(frame.len()))
        );
    }
}
