//! One shard's part of a batch on its connection: encode the frames, then write them and read
//! the results at the same time, placing each result at its operation's index.
//!
//! ```text
//!   order:  [3, 7, 8, 12 ...]      indexes (in the batch) of this shard's operations
//!   wbuf:   | REQUEST id=41, ops 0..4096 | REQUEST id=42, ops 4096.. |     frames: [(41, 4096), ..]
//!   rbuf:   | RESPONSE 41 (MORE) | RESPONSE 41 | RESPONSE 42 | ...         split by the server
//!           rstart ^               rend ^                                 when results are large
//!
//!   poll:  write what the socket takes ─> decode every whole frame in rbuf ─> read more
//!          (Pending only after both the write and the read said Pending, so both wake us)
//! ```
//!
//! Writing and reading together matters: a batch larger than the socket buffers would
//! otherwise deadlock, the server blocked on writing results nobody reads and the client
//! blocked on writing requests the server no longer reads. The client polls every shard's
//! round from one task, so all shards work at once without spawning anything.
//!
//! Goals: no allocation once the buffers have grown; every reply checked (request id, result
//! count per frame, nothing unasked). Non-goals: retry and reconnect (the caller's policy).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use directkv_proto::native::{
    decode_response, EncodeError, NativeLimits, RequestEncoder, Response,
};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use crate::batch::Staging;
use crate::conn::server_error;
use crate::error::ClientError;
use crate::reply::Replies;

/// One REQUEST frame of a round.
#[derive(Debug, Clone, Copy)]
struct FrameInfo {
    request_id: u32,
    ops: usize,
}

/// How a round failed: the connection (worth a retry for read-only work) or anything else.
#[derive(Debug)]
pub(crate) enum RoundError {
    Io(io::Error),
    Other(ClientError),
}

impl From<ClientError> for RoundError {
    fn from(e: ClientError) -> RoundError {
        RoundError::Other(e)
    }
}

/// A shard's part of the current batch, and its buffers (kept between batches).
#[derive(Debug, Default)]
pub(crate) struct ShardRound {
    /// Indexes of this shard's operations in the batch, in the order sent.
    pub(crate) order: Vec<u32>,
    /// Every operation of the round leaves the store unchanged.
    pub(crate) read_only: bool,
    wbuf: Vec<u8>,
    frames: Vec<FrameInfo>,
    sent: usize,
    rbuf: Vec<u8>,
    rstart: usize,
    rend: usize,
    /// Frames whose results are complete; results of frame `frame_idx` received so far;
    /// operations (of `order`) before frame `frame_idx`.
    frame_idx: usize,
    in_frame: usize,
    base: usize,
    /// Set when the round has finished, successfully or not.
    pub(crate) outcome: Option<Result<(), RoundError>>,
}

fn encode_error(e: EncodeError) -> ClientError {
    match e {
        EncodeError::KeyTooLong { len, max } => ClientError::KeyTooLong { len, max },
        EncodeError::ValueTooLarge { len, max } => ClientError::ValueTooLarge { len, max },
        other => ClientError::Protocol(format!("cannot encode a request: {other}")),
    }
}

impl ShardRound {
    /// Encodes this shard's operations as REQUEST frames of at most the server's
    /// `frame_ops_max` operations and `frame_len_max` bytes. Request ids come from
    /// `next_request_id`.
    pub(crate) fn encode(
        &mut self,
        staging: &Staging,
        limits: &NativeLimits,
        next_request_id: &mut u32,
    ) -> Result<(), ClientError> {
        self.wbuf.clear();
        self.frames.clear();
        self.read_only = true;
        let mut i = 0;
        while i < self.order.len() {
            let request_id = *next_request_id;
            *next_request_id = next_request_id.wrapping_add(1);
            let mut enc = RequestEncoder::begin(&mut self.wbuf, request_id, limits);
            let first = i;
            while i < self.order.len() {
                let index = self.order[i] as usize;
                self.read_only &= staging.ops[index].is_read_only();
                match enc.push(&staging.op(index)) {
                    Ok(()) => i += 1,
                    // The frame is full: send it and start the next one.
                    Err(EncodeError::TooManyOps { .. } | EncodeError::FrameTooLong { .. })
                        if i > first =>
                    {
                        break
                    }
                    Err(e) => return Err(encode_error(e)),
                }
            }
            self.frames.push(FrameInfo {
                request_id,
                ops: i - first,
            });
        }
        Ok(())
    }

    /// Prepares to (re)send the encoded frames on a connection.
    pub(crate) fn start(&mut self, read_buffer_bytes: usize) {
        self.sent = 0;
        self.rstart = 0;
        self.rend = 0;
        if self.rbuf.len() < read_buffer_bytes {
            self.rbuf.resize(read_buffer_bytes, 0);
        }
        self.frame_idx = 0;
        self.in_frame = 0;
        self.base = 0;
        self.outcome = None;
    }

    /// Drives the round on `stream`. Ready once every result is in `replies`, or on failure.
    pub(crate) fn poll_io(
        &mut self,
        cx: &mut Context<'_>,
        stream: &mut TcpStream,
        limits: &NativeLimits,
        replies: &mut Replies,
    ) -> Poll<Result<(), RoundError>> {
        loop {
            while self.sent < self.wbuf.len() {
                match Pin::new(&mut *stream).poll_write(cx, &self.wbuf[self.sent..]) {
                    Poll::Ready(Ok(0)) => {
                        let e = io::Error::new(io::ErrorKind::WriteZero, "socket took no bytes");
                        return Poll::Ready(Err(RoundError::Io(e)));
                    }
                    Poll::Ready(Ok(n)) => self.sent += n,
                    Poll::Ready(Err(e)) => return Poll::Ready(Err(RoundError::Io(e))),
                    Poll::Pending => break,
                }
            }
            if let Err(e) = self.take_frames(limits, replies) {
                return Poll::Ready(Err(e.into()));
            }
            if self.frame_idx == self.frames.len() {
                if self.rstart != self.rend {
                    let e = ClientError::Protocol("bytes after the last reply".into());
                    return Poll::Ready(Err(e.into()));
                }
                return Poll::Ready(Ok(()));
            }
            self.make_room(limits);
            let mut rb = ReadBuf::new(&mut self.rbuf[self.rend..]);
            match Pin::new(&mut *stream).poll_read(cx, &mut rb) {
                Poll::Ready(Ok(())) => {
                    let n = rb.filled().len();
                    if n == 0 {
                        let e = io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            "server closed the connection",
                        );
                        return Poll::Ready(Err(RoundError::Io(e)));
                    }
                    self.rend += n;
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(RoundError::Io(e))),
                Poll::Pending => return Poll::Pending,
            }
        }
    }

    /// Makes sure there is free space after `rend`: moves a partial frame to the front, and
    /// grows the buffer (up to `frame_len_max`) when one frame does not fit.
    fn make_room(&mut self, limits: &NativeLimits) {
        if self.rstart == self.rend {
            self.rstart = 0;
            self.rend = 0;
        }
        if self.rend < self.rbuf.len() {
            return;
        }
        if self.rstart > 0 {
            self.rbuf.copy_within(self.rstart..self.rend, 0);
            self.rend -= self.rstart;
            self.rstart = 0;
        }
        if self.rend == self.rbuf.len() {
            // decode_response rejects frames above frame_len_max, so this bound suffices.
            let cap = (limits.frame_len_max as usize).max(self.rbuf.len() + 1);
            let grown = (self.rbuf.len() * 2).clamp(self.rbuf.len() + 1, cap);
            self.rbuf.resize(grown, 0);
        }
    }

    /// Decodes every whole frame in the read buffer and places its results.
    fn take_frames(
        &mut self,
        limits: &NativeLimits,
        replies: &mut Replies,
    ) -> Result<(), ClientError> {
        while self.rstart < self.rend {
            let (frame, n) = match decode_response(&self.rbuf[self.rstart..self.rend], limits) {
                Ok(Some(f)) => f,
                Ok(None) => return Ok(()),
                Err(e) => return Err(ClientError::Protocol(e.to_string())),
            };
            let batch = match frame.body {
                Response::Ops(batch) => batch,
                Response::Error(e) => return Err(server_error(&e)),
                other => {
                    return Err(ClientError::Protocol(format!(
                        "unexpected reply to a request: {other:?}"
                    )))
                }
            };
            let Some(info) = self.frames.get(self.frame_idx).copied() else {
                return Err(ClientError::Protocol(format!(
                    "reply for request {} that was not sent",
                    frame.request_id
                )));
            };
            if frame.request_id != info.request_id {
                return Err(ClientError::Protocol(format!(
                    "reply for request {} while waiting for {}",
                    frame.request_id, info.request_id
                )));
            }
            if self.in_frame + batch.len() > info.ops {
                return Err(ClientError::Protocol(format!(
                    "more results than the {} operations of request {}",
                    info.ops, info.request_id
                )));
            }
            for r in batch.iter() {
                let index = self.order[self.base + self.in_frame] as usize;
                replies.set(index, r.status, r.data);
                self.in_frame += 1;
            }
            if !batch.more {
                if self.in_frame != info.ops {
                    return Err(ClientError::Protocol(format!(
                        "{} results for the {} operations of request {}",
                        self.in_frame, info.ops, info.request_id
                    )));
                }
                self.base += info.ops;
                self.in_frame = 0;
                self.frame_idx += 1;
            }
            self.rstart += n;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use directkv_proto::native::{
        encode_response, encode_response_frame, ErrorCode, ErrorReply, NativeOp, ResponseFrame,
        ResponseOp,
    };

    use crate::reply::Reply;

    const SMALL: NativeLimits = NativeLimits {
        frame_ops_max: 2,
        ..NativeLimits::DEFAULT
    };

    /// A round of five gets (keys "0".."4"), all on one shard, encoded with `SMALL`.
    fn round() -> (ShardRound, Staging) {
        let mut staging = Staging::default();
        let mut r = ShardRound::default();
        for i in 0..5u8 {
            let key = [b'0' + i];
            r.order.push(staging.push(&NativeOp::get(&key), 0) as u32);
        }
        let mut id = 40;
        r.encode(&staging, &SMALL, &mut id).unwrap();
        r.start(64);
        (r, staging)
    }

    /// Puts `bytes` in the round's receive buffer, as if read from the socket.
    fn receive(r: &mut ShardRound, bytes: &[u8]) {
        r.rbuf = bytes.to_vec();
        r.rstart = 0;
        r.rend = bytes.len();
    }

    fn ok(data: &[u8]) -> ResponseOp<'_> {
        ResponseOp { status: 0, data }
    }

    #[test]
    fn frames_follow_frame_ops_max_and_results_land_by_index() {
        let (mut r, _staging) = round();
        let shape: Vec<_> = r.frames.iter().map(|f| (f.request_id, f.ops)).collect();
        assert_eq!(shape, [(40, 2), (41, 2), (42, 1)]);
        assert!(r.read_only);
        // The server may split a response further (MORE): here frame 41 comes as two parts.
        let mut bytes = Vec::new();
        encode_response(40, &[ok(b"a"), ok(b"b")], &SMALL, &mut bytes).unwrap();
        let tiny = NativeLimits {
            frame_ops_max: 1,
            ..SMALL
        };
        encode_response(
            41,
            &[
                ok(b"c"),
                ResponseOp {
                    status: 1,
                    data: b"",
                },
            ],
            &tiny,
            &mut bytes,
        )
        .unwrap();
        encode_response(42, &[ok(b"e")], &SMALL, &mut bytes).unwrap();
        receive(&mut r, &bytes);
        let mut replies = Replies::new();
        replies.reset(5);
        r.take_frames(&SMALL, &mut replies).unwrap();
        assert_eq!(r.frame_idx, 3);
        let got: Vec<_> = replies.iter().collect();
        assert_eq!(
            got,
            [
                Reply::Ok(b"a"),
                Reply::Ok(b"b"),
                Reply::Ok(b"c"),
                Reply::NotFound,
                Reply::Ok(b"e")
            ]
        );
    }

    #[test]
    fn replies_that_do_not_match_the_requests_are_protocol_errors() {
        let cases: [(u32, &[ResponseOp<'_>], &str); 3] = [
            (7, &[ok(b"a"), ok(b"b")], "while waiting for 40"),
            (40, &[ok(b"a")], "1 results for the 2 operations"),
            (40, &[ok(b"a"), ok(b"b"), ok(b"c")], "more results than"),
        ];
        for (id, results, want) in cases {
            let (mut r, _staging) = round();
            let mut bytes = Vec::new();
            let loose = NativeLimits::DEFAULT;
            encode_response(id, results, &loose, &mut bytes).unwrap();
            receive(&mut r, &bytes);
            let mut replies = Replies::new();
            replies.reset(5);
            let e = r.take_frames(&loose, &mut replies).unwrap_err();
            assert!(e.to_string().contains(want), "{e} (wanted {want})");
        }
    }

    #[test]
    fn an_error_frame_is_a_server_error_with_its_operation() {
        let (mut r, _staging) = round();
        let frame = ResponseFrame {
            request_id: 40,
            body: Response::Error(ErrorReply {
                code: ErrorCode::UnknownOpcode.code(),
                closing: false,
                op_index: Some(1),
                message: ErrorCode::UnknownOpcode.message(),
            }),
        };
        let mut bytes = Vec::new();
        encode_response_frame(&frame, &SMALL, &mut bytes).unwrap();
        receive(&mut r, &bytes);
        let mut replies = Replies::new();
        replies.reset(5);
        let e = r.take_frames(&SMALL, &mut replies).unwrap_err();
        assert!(
            matches!(
                &e,
                ClientError::Server { code: 8, op_index: Some(1), closing: false, message }
                    if message == "unknown opcode"
            ),
            "{e}"
        );
        assert_eq!(
            e.to_string(),
            "server error 8: unknown opcode (operation 1 of the frame)"
        );
    }

    #[test]
    fn writes_are_not_read_only_and_limits_fail_before_sending() {
        let mut staging = Staging::default();
        let mut r = ShardRound::default();
        r.order.push(staging.push(&NativeOp::get(b"k"), 0) as u32);
        r.order
            .push(staging.push(&NativeOp::put(b"k", b"v"), 0) as u32);
        let mut id = 1;
        r.encode(&staging, &SMALL, &mut id).unwrap();
        assert!(!r.read_only);
        let long = [b'k'; 251];
        r.order.push(staging.push(&NativeOp::get(&long), 0) as u32);
        let e = r.encode(&staging, &SMALL, &mut id).unwrap_err();
        assert!(matches!(e, ClientError::KeyTooLong { len: 251, max: 250 }));
    }

    #[test]
    fn the_read_buffer_grows_for_a_frame_larger_than_itself() {
        let (mut r, _staging) = round();
        r.rbuf = vec![0; 8];
        r.rstart = 3;
        r.rend = 8;
        r.make_room(&SMALL);
        assert_eq!(
            (r.rstart, r.rend),
            (0, 5),
            "the partial frame moved to the front"
        );
        r.rend = 8;
        r.make_room(&SMALL);
        assert_eq!(r.rbuf.len(), 16);
    }
}
