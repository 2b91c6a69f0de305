//! directkv's native binary protocol: a sans-IO codec shared by the server and the client.
//!
//! What: frames of many operations (seed 002, "Vector Operation Decoder": client batching with
//! flags that copy the previous op's key length, value length or whole value), their batched
//! results, and the control frames HELLO (limits and shard map), PING, ATTACH and ERROR. The full
//! byte layout, the rules and the test vectors are in `docs/protocol.md`.
//!
//! ```text
//!   frame   = header(12) body                      little-endian everywhere
//!   header  = D7 01 kind flags frame_len:u32 request_id:u32
//!   REQUEST  (01) body = op_count:u16 op*          op = hdr [func:u16 elem:u8] [klen:u8] key
//!                                                       [alen:varint] [arg] [a2len:varint a2]
//!   RESPONSE (81) body = op_count:u16 result*      result = status [dlen:varint data]
//!   HELLO 02 / 82, PING 03 / 83, ATTACH 04 / 84, ERROR FF       (control.rs)
//!
//!   bytes ──► frame_len() ──► whole frame? ──► decode_request ──► RequestFrame ──► ops() ──► engine
//!                 │ no: Ok(None)          │ bad body: Err, skip = frame_len (resynchronisable)
//!                 └ bad magic/version/length: Err, skip = None (reply ERROR, close)
//! ```
//!
//! Goals: zero-copy decoding (an op's key and arguments borrow the frame wherever the bytes
//! physically are, copy flags resolved); no allocation while decoding ops or encoding into a
//! reserved buffer; "need more bytes" kept apart from "invalid", and invalid split into fatal and
//! resynchronisable; every length checked against a named limit (`NativeLimits`) before it is
//! trusted; one encoding per frame that the encoders produce, so test vectors round-trip
//! byte-for-byte; copy flags chosen by the encoder, so clients get the compression for free.
//!
//! Non-goals: I/O, connection state (authentication, ATTACH), and semantics: function ids and
//! element codes pass through untouched and fail only their own op, in the engine; empty keys
//! pass through too (the engine stores them, as Redis does). The numbers mirror the engine's (`codes.rs`) without depending on it.
//!
//! Layout of this module: `frame.rs` header and framing checks; `request.rs` ops and their
//! encoder; `response.rs` results and their (splitting) encoder; `control.rs` control frames and
//! the shard rule; `codes.rs` shared numbers; `error.rs` errors; `limits.rs` limits; `wire.rs`
//! cursor and varints. This file only dispatches on the frame kind.

mod codes;
mod control;
mod error;
mod frame;
mod keyspace;
mod limits;
mod request;
mod response;
mod wire;

pub use codes::{
    cond, expire_args, func, status, ElemCode, OpCode, KEEP_DEADLINE, NO_DEADLINE, OP_CODE_COUNT,
    OP_CODE_EXTENDED, OP_CODE_KEYSPACE_MIN,
};
pub use control::{
    shard_of_hash, ErrorReply, Hello, HelloReply, ShardMap, ERROR_FLAG_CLOSING, HASH_XXH3_64,
    PING_PAYLOAD_MAX, SHARD_COUNT_MAX, SHARD_PORT_ATTACH,
};
pub use error::{EncodeError, ErrorCode, NativeError};
pub use frame::{
    frame_len, is_native, FrameKind, FLAG_MORE, FRAME_LEN_PREFIX, HEADER_LEN, MAGIC, VERSION,
};
pub use keyspace::{
    parse_scan_args, parse_ttl_reply, scan_args, scan_cursor_shard, scan_reply_begin,
    scan_reply_finish, scan_reply_key, scan_reply_key_len, ScanPosition, ScanReply, SCAN_ARGS_LEN,
    SCAN_BUCKETS_PER_KEY, SCAN_COUNT_MAX, SCAN_CURSOR_BUCKET_MAX, SCAN_CURSOR_SKIP_MAX,
    SCAN_REPLY_BYTES_MAX, TYPE_STRING,
};
pub use limits::{
    NativeLimits, FRAME_LEN_MAX_DEFAULT, FRAME_OPS_MAX_DEFAULT, KEY_LEN_MAX_DEFAULT,
    UDP_PAYLOAD_MAX, UNAUTHENTICATED_FRAME_LEN_MAX, VALUE_LEN_MAX_DEFAULT,
};
pub use request::{NativeOp, OpBatch, OpFlags, OpIter, RequestEncoder};
pub use response::{
    response_op_len, ResponseBatch, ResponseEncoder, ResponseIter, ResponseOp, STATUS_HAS_DATA,
};

use frame::{begin_frame, end_frame, split_frame, RawFrame};

/// What a client sends.
#[derive(Debug, Clone)]
pub enum Request<'a> {
    /// REQUEST: a batch of operations.
    Ops(OpBatch<'a>),
    /// HELLO: password and client name.
    Hello(Hello<'a>),
    /// PING with its payload.
    Ping(&'a [u8]),
    /// ATTACH to this shard id.
    Attach(u16),
}

/// A decoded client frame.
#[derive(Debug, Clone)]
pub struct RequestFrame<'a> {
    pub request_id: u32,
    pub body: Request<'a>,
}

/// What a server sends.
#[derive(Debug, Clone)]
pub enum Response<'a> {
    /// RESPONSE: results in request order (possibly one part of several, see `more`).
    Ops(ResponseBatch<'a>),
    /// HELLO_REPLY: limits, shard map, server name.
    Hello(HelloReply),
    /// PONG with the PING's payload.
    Pong(&'a [u8]),
    /// ATTACH_REPLY: the connection is now served by this shard.
    Attach(u16),
    /// ERROR: a rejected frame.
    Error(ErrorReply<'a>),
}

/// A decoded server frame.
#[derive(Debug, Clone)]
pub struct ResponseFrame<'a> {
    pub request_id: u32,
    pub body: Response<'a>,
}

/// Decodes the client frame at the start of `buf`: `Ok(None)` until all of it is here, then the
/// frame and its length in bytes. A resynchronisable error (`skip` is `Some`) rejects only this
/// frame; otherwise the stream is lost.
pub fn decode_request<'a>(
    buf: &'a [u8],
    limits: &NativeLimits,
) -> Result<Option<(RequestFrame<'a>, usize)>, NativeError> {
    decode_request_with(buf, limits, |_| {})
}

/// [`decode_request`] that also appends the operations of a REQUEST frame to `ops`, from the
/// same pass that validates them, so a server need not parse them a second time through
/// [`OpBatch::iter`]. On any error, and for other frames, `ops` is left as it was.
pub fn decode_request_ops<'a>(
    buf: &'a [u8],
    limits: &NativeLimits,
    ops: &mut Vec<NativeOp<'a>>,
) -> Result<Option<(RequestFrame<'a>, usize)>, NativeError> {
    let before = ops.len();
    let r = decode_request_with(buf, limits, |op| ops.push(op));
    if !matches!(r, Ok(Some(_))) {
        ops.truncate(before);
    }
    r
}

fn decode_request_with<'a>(
    buf: &'a [u8],
    limits: &NativeLimits,
    each: impl FnMut(NativeOp<'a>),
) -> Result<Option<(RequestFrame<'a>, usize)>, NativeError> {
    let Some(f) = split_frame(buf, limits)? else {
        return Ok(None);
    };
    let body = match request_body(&f, limits, each) {
        Ok(body) => body,
        Err((code, op)) => return Err(f.error(code, op)),
    };
    let frame = RequestFrame {
        request_id: f.request_id,
        body,
    };
    Ok(Some((frame, f.len)))
}

/// A body parser's error, which is not about one operation.
fn plain<T>(r: Result<T, ErrorCode>) -> Result<T, (ErrorCode, Option<u16>)> {
    r.map_err(|code| (code, None))
}

fn request_body<'a>(
    f: &RawFrame<'a>,
    limits: &NativeLimits,
    each: impl FnMut(NativeOp<'a>),
) -> Result<Request<'a>, (ErrorCode, Option<u16>)> {
    let kind = FrameKind::from_code(f.kind).ok_or((ErrorCode::UnknownKind, None))?;
    if !matches!(
        kind,
        FrameKind::Request | FrameKind::Hello | FrameKind::Ping | FrameKind::Attach
    ) {
        return Err((ErrorCode::UnknownKind, None));
    }
    if f.flags != 0 {
        return Err((ErrorCode::BadFrameFlags, None));
    }
    Ok(match kind {
        FrameKind::Request => Request::Ops(request::parse_batch_with(f.body, limits, each)?),
        FrameKind::Hello => Request::Hello(plain(control::parse_hello(f.body))?),
        FrameKind::Ping => Request::Ping(plain(control::parse_ping(f.body))?),
        _ => Request::Attach(plain(control::parse_shard_id(f.body))?),
    })
}

/// Decodes the server frame at the start of `buf`, like `decode_request`.
pub fn decode_response<'a>(
    buf: &'a [u8],
    limits: &NativeLimits,
) -> Result<Option<(ResponseFrame<'a>, usize)>, NativeError> {
    let Some(f) = split_frame(buf, limits)? else {
        return Ok(None);
    };
    let body = match response_body(&f, limits) {
        Ok(body) => body,
        Err((code, op)) => return Err(f.error(code, op)),
    };
    let frame = ResponseFrame {
        request_id: f.request_id,
        body,
    };
    Ok(Some((frame, f.len)))
}

fn response_body<'a>(
    f: &RawFrame<'a>,
    limits: &NativeLimits,
) -> Result<Response<'a>, (ErrorCode, Option<u16>)> {
    let kind = FrameKind::from_code(f.kind).ok_or((ErrorCode::UnknownKind, None))?;
    let flags_allowed = match kind {
        FrameKind::Response => FLAG_MORE,
        FrameKind::HelloReply | FrameKind::Pong | FrameKind::AttachReply | FrameKind::Error => 0,
        _ => return Err((ErrorCode::UnknownKind, None)),
    };
    if f.flags & !flags_allowed != 0 {
        return Err((ErrorCode::BadFrameFlags, None));
    }
    Ok(match kind {
        FrameKind::Response => {
            let more = f.flags & FLAG_MORE != 0;
            Response::Ops(response::parse_response_batch(f.body, more, limits)?)
        }
        FrameKind::HelloReply => Response::Hello(plain(control::parse_hello_reply(f.body))?),
        FrameKind::Pong => Response::Pong(plain(control::parse_ping(f.body))?),
        FrameKind::AttachReply => Response::Attach(plain(control::parse_shard_id(f.body))?),
        _ => Response::Error(plain(control::parse_error(f.body))?),
    })
}

/// Checks that a datagram is exactly one frame. Every error only drops the datagram.
fn whole_datagram<T>(
    decoded: Option<(T, usize)>,
    request_id: impl Fn(&T) -> u32,
    datagram_len: usize,
) -> Result<T, NativeError> {
    match decoded {
        Some((frame, n)) if n == datagram_len => Ok(frame),
        Some((frame, _)) => Err(NativeError {
            code: ErrorCode::TrailingBytes,
            request_id: request_id(&frame),
            skip: Some(datagram_len),
            op_index: None,
        }),
        None => Err(NativeError {
            code: ErrorCode::Truncated,
            request_id: 0,
            skip: Some(datagram_len),
            op_index: None,
        }),
    }
}

/// Decodes a UDP datagram, which must hold exactly one client frame.
pub fn decode_request_datagram<'a>(
    datagram: &'a [u8],
    limits: &NativeLimits,
) -> Result<RequestFrame<'a>, NativeError> {
    let decoded = decode_request(datagram, limits)?;
    whole_datagram(decoded, |f| f.request_id, datagram.len())
}

/// Decodes a UDP datagram, which must hold exactly one server frame.
pub fn decode_response_datagram<'a>(
    datagram: &'a [u8],
    limits: &NativeLimits,
) -> Result<ResponseFrame<'a>, NativeError> {
    let decoded = decode_response(datagram, limits)?;
    whole_datagram(decoded, |f| f.request_id, datagram.len())
}

/// Runs `f` and, if it fails, truncates `out` back to where it was.
fn or_restore<T>(
    out: &mut Vec<u8>,
    f: impl FnOnce(&mut Vec<u8>) -> Result<T, EncodeError>,
) -> Result<T, EncodeError> {
    let start = out.len();
    let result = f(out);
    if result.is_err() {
        out.truncate(start);
    }
    result
}

/// Appends one REQUEST frame holding `ops`, with copy flags chosen by the encoder (see
/// `RequestEncoder`). On error `out` is unchanged.
pub fn encode_request(
    request_id: u32,
    ops: &[NativeOp<'_>],
    limits: &NativeLimits,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    or_restore(out, |out| {
        let mut enc = RequestEncoder::begin(out, request_id, limits);
        ops.iter().try_for_each(|op| enc.push(op))
    })
}

/// Appends the RESPONSE frame(s) holding `ops`: more than one, flagged MORE, if they do not
/// fit one frame (see `ResponseEncoder`). On error `out` is unchanged.
pub fn encode_response(
    request_id: u32,
    ops: &[ResponseOp<'_>],
    limits: &NativeLimits,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    encode_response_iter(request_id, ops.iter().copied(), limits, out)
}

/// [`encode_response`] from results made one by one (a server encoding straight from its
/// engine's results, without collecting them first). On error `out` is unchanged.
pub fn encode_response_iter<'a>(
    request_id: u32,
    ops: impl IntoIterator<Item = ResponseOp<'a>>,
    limits: &NativeLimits,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    encode_response_steps(request_id, ops, false, limits, out)
}

/// [`encode_response_iter`] for a response that continues: its last frame is flagged MORE too,
/// so the client waits for more frames of this request id (a server streaming a large response
/// in steps). On error `out` is unchanged.
pub fn encode_response_part_iter<'a>(
    request_id: u32,
    ops: impl IntoIterator<Item = ResponseOp<'a>>,
    limits: &NativeLimits,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    encode_response_steps(request_id, ops, true, limits, out)
}

/// Appends the RESPONSE frame(s) holding `ops`, the last flagged MORE if `more`.
fn encode_response_steps<'a>(
    request_id: u32,
    ops: impl IntoIterator<Item = ResponseOp<'a>>,
    more: bool,
    limits: &NativeLimits,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    or_restore(out, |out| {
        let mut enc = ResponseEncoder::begin(out, request_id, limits);
        ops.into_iter().try_for_each(|op| enc.push(op))?;
        if more {
            enc.finish_more();
        }
        Ok(())
    })
}

/// Appends a control frame whose body `put` writes, checked against `frame_len_max`.
fn encode_control(
    out: &mut Vec<u8>,
    kind: FrameKind,
    request_id: u32,
    limits: &NativeLimits,
    put: impl FnOnce(&mut Vec<u8>) -> Result<(), EncodeError>,
) -> Result<(), EncodeError> {
    or_restore(out, |out| {
        let start = begin_frame(out, kind, 0, request_id);
        put(out)?;
        let len = out.len() - start;
        if len > limits.frame_len_max as usize {
            return Err(EncodeError::FrameTooLong {
                len,
                max: limits.frame_len_max as usize,
            });
        }
        end_frame(out, start);
        Ok(())
    })
}

/// Appends any client frame: a decoded one re-encodes to the same bytes when it was produced
/// by these encoders (other senders may use fewer copy flags; the re-encoding is never longer).
pub fn encode_request_frame(
    frame: &RequestFrame<'_>,
    limits: &NativeLimits,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    let id = frame.request_id;
    match &frame.body {
        Request::Ops(batch) => or_restore(out, |out| {
            let mut enc = RequestEncoder::begin(out, id, limits);
            batch.iter().try_for_each(|op| enc.push(&op))
        }),
        Request::Hello(h) => encode_control(out, FrameKind::Hello, id, limits, |o| {
            control::put_hello(o, h)
        }),
        Request::Ping(p) => encode_control(out, FrameKind::Ping, id, limits, |o| {
            control::put_ping(o, p)
        }),
        Request::Attach(shard) => encode_control(out, FrameKind::Attach, id, limits, |o| {
            wire::put_u16(o, *shard);
            Ok(())
        }),
    }
}

/// Appends any server frame. A RESPONSE part is written as one frame with its `more` flag
/// (use `encode_response` or `ResponseEncoder` to split a large response).
pub fn encode_response_frame(
    frame: &ResponseFrame<'_>,
    limits: &NativeLimits,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    let id = frame.request_id;
    match &frame.body {
        Response::Ops(batch) => {
            response::encode_response_part(out, id, batch.more, batch.iter(), limits)
        }
        Response::Hello(r) => encode_control(out, FrameKind::HelloReply, id, limits, |o| {
            control::put_hello_reply(o, r)
        }),
        Response::Pong(p) => encode_control(out, FrameKind::Pong, id, limits, |o| {
            control::put_ping(o, p)
        }),
        Response::Attach(shard) => encode_control(out, FrameKind::AttachReply, id, limits, |o| {
            wire::put_u16(o, *shard);
            Ok(())
        }),
        Response::Error(e) => encode_control(out, FrameKind::Error, id, limits, |o| {
            control::put_error(o, e)
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const L: NativeLimits = NativeLimits::DEFAULT;

    #[test]
    fn request_frames_round_trip_and_report_their_length() {
        let mut out = Vec::new();
        encode_request(
            9,
            &[NativeOp::get(b"k"), NativeOp::delete(b"j")],
            &L,
            &mut out,
        )
        .unwrap();
        out.extend_from_slice(&[MAGIC, VERSION]);
        let (f, n) = decode_request(&out, &L).unwrap().unwrap();
        assert_eq!(n, out.len() - 2);
        assert_eq!(f.request_id, 9);
        let Request::Ops(batch) = f.body else {
            panic!("not ops")
        };
        let ops: Vec<_> = batch.iter().map(NativeOp::without_copy_flags).collect();
        assert_eq!(ops, [NativeOp::get(b"k"), NativeOp::delete(b"j")]);
        assert!(matches!(decode_request(&out[n..], &L), Ok(None)));
    }

    #[test]
    fn decode_request_ops_collects_the_validated_ops_or_leaves_the_vector_alone() {
        let v = b"value".to_vec();
        let want = [
            NativeOp::get(b"k"),
            NativeOp::put(b"j", &v),
            NativeOp::update_s2s(b"c", func::ADD, ElemCode::U64, &[1, 0, 0, 0, 0, 0, 0, 0]),
            NativeOp::delete(b"long"),
        ];
        let mut out = Vec::new();
        encode_request(3, &want, &L, &mut out).unwrap();
        let mut ops = vec![NativeOp::get(b"before")];
        let (f, n) = decode_request_ops(&out, &L, &mut ops).unwrap().unwrap();
        assert_eq!(n, out.len());
        let Request::Ops(batch) = f.body else {
            panic!("{:?}", f.body)
        };
        // The encoder may set its compression flags; what the ops say must survive.
        let meaning = |o: &NativeOp<'_>| (o.kind, o.func, o.elem, o.key.to_vec(), o.arg.to_vec());
        assert_eq!(ops[0], NativeOp::get(b"before"));
        let got: Vec<_> = ops[1..].iter().map(meaning).collect();
        assert_eq!(got, want.iter().map(meaning).collect::<Vec<_>>());
        assert_eq!(batch.iter().collect::<Vec<_>>(), &ops[1..]);
        // The fourth op's key is too long under these limits: the frame is refused and the
        // three ops validated before it are not left behind.
        let tight = NativeLimits {
            key_len_max: 3,
            ..L
        };
        let mut ops = vec![NativeOp::get(b"before")];
        let e = decode_request_ops(&out, &tight, &mut ops).unwrap_err();
        assert_eq!((e.code, e.op_index), (ErrorCode::KeyTooLong, Some(3)));
        assert_eq!(ops, [NativeOp::get(b"before")]);
        // Incomplete, and other kinds of frames: nothing is added.
        assert!(decode_request_ops(&out[..n - 1], &L, &mut ops)
            .unwrap()
            .is_none());
        let mut ping = Vec::new();
        let frame = RequestFrame {
            request_id: 4,
            body: Request::Ping(b"t"),
        };
        encode_request_frame(&frame, &L, &mut ping).unwrap();
        assert!(decode_request_ops(&ping, &L, &mut ops).unwrap().is_some());
        assert_eq!(ops, [NativeOp::get(b"before")]);
    }

    #[test]
    fn kinds_are_checked_per_direction() {
        let mut out = Vec::new();
        let ping = RequestFrame {
            request_id: 4,
            body: Request::Ping(b"t"),
        };
        encode_request_frame(&ping, &L, &mut out).unwrap();
        let e = decode_response(&out, &L).unwrap_err();
        assert_eq!(
            (e.code, e.request_id, e.skip),
            (ErrorCode::UnknownKind, 4, Some(13))
        );
        out[3] = 1;
        let e = decode_request(&out, &L).unwrap_err();
        assert_eq!(e.code, ErrorCode::BadFrameFlags);
        out[3] = 0;
        out[2] = FrameKind::Pong.code();
        let (f, _) = decode_response(&out, &L).unwrap().unwrap();
        assert!(matches!(f.body, Response::Pong(b"t")));
        // MORE is a RESPONSE flag only.
        out[3] = FLAG_MORE;
        assert_eq!(
            decode_response(&out, &L).unwrap_err().code,
            ErrorCode::BadFrameFlags
        );
    }

    #[test]
    fn datagrams_hold_exactly_one_frame() {
        let mut out = Vec::new();
        encode_request(1, &[NativeOp::get(b"k")], &L, &mut out).unwrap();
        assert!(decode_request_datagram(&out, &L).is_ok());
        let e = decode_request_datagram(&out[..out.len() - 1], &L).unwrap_err();
        assert_eq!(e.code, ErrorCode::Truncated);
        out.push(0);
        let e = decode_request_datagram(&out, &L).unwrap_err();
        assert_eq!((e.code, e.request_id), (ErrorCode::TrailingBytes, 1));
    }

    #[test]
    fn encoders_restore_out_on_error() {
        let mut out = vec![0xAA];
        let long = [0u8; 300];
        let e = encode_request(
            1,
            &[NativeOp::get(b"k"), NativeOp::get(&long)],
            &L,
            &mut out,
        );
        assert!(e.is_err());
        assert_eq!(out, [0xAA]);
        let ping = RequestFrame {
            request_id: 1,
            body: Request::Ping(&long),
        };
        assert!(encode_request_frame(&ping, &L, &mut out).is_err());
        assert_eq!(out, [0xAA]);
        let bad = [
            ResponseOp {
                status: 0,
                data: b"x",
            },
            ResponseOp {
                status: 0x41,
                data: b"",
            },
        ];
        assert_eq!(
            encode_response(1, &bad, &L, &mut out),
            Err(EncodeError::BadStatus(0x41))
        );
        assert_eq!(out, [0xAA]);
    }
}
