//! The 12-byte header every native frame starts with, and the framing checks.
//!
//! ```text
//!    0      1       2      3      4             8             12
//!   +------+-------+------+------+-------------+-------------+------------
//!   | 0xD7 | 0x01  | kind | flags| frame_len   | request_id  | body ...
//!   | magic|version|      |      | u32 LE      | u32 LE      |
//!   +------+-------+------+------+-------------+-------------+------------
//!           frame_len counts the whole frame, header included (12 ..= frame_len_max)
//! ```
//!
//! Goals: decide "need more bytes" / "fatal" / "whole frame here" from the first 8 bytes, before
//! anything is allocated or the length is trusted; a frame claiming 4 GiB is rejected as soon as
//! its length field arrives.
//! Non-goals: the body (see `request.rs`, `response.rs`, `control.rs`).

use super::error::{ErrorCode, NativeError};
use super::limits::NativeLimits;
use super::wire::{patch_u32, put_u32};

/// First byte of every native frame. Not ASCII, so a server tells native from RESP (whose
/// commands start with `*` or a letter) by a connection's first byte.
pub const MAGIC: u8 = 0xD7;
/// The protocol version this crate speaks.
pub const VERSION: u8 = 1;
/// Bytes in the frame header.
pub const HEADER_LEN: usize = 12;
/// Bytes needed to know a frame's length: magic, version, kind, flags, frame_len.
pub const FRAME_LEN_PREFIX: usize = 8;

/// Frame flag (RESPONSE only): more RESPONSE frames with this request id follow; the
/// operations' results continue in them, in order.
pub const FLAG_MORE: u8 = 0x01;

/// What a frame's body is. Client-to-server kinds are below 0x80; each reply kind is its
/// request kind with the top bit set; ERROR is 0xFF.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum FrameKind {
    /// A batch of operations.
    Request = 0x01,
    /// Handshake: optional password, client name.
    Hello = 0x02,
    /// Liveness / latency probe with an echoed payload.
    Ping = 0x03,
    /// Bind this connection to a shard's thread.
    Attach = 0x04,
    /// Results of a batch, in request order.
    Response = 0x81,
    /// Server info, limits and the shard map.
    HelloReply = 0x82,
    Pong = 0x83,
    AttachReply = 0x84,
    /// A rejected frame: code, message, whether the server is closing.
    Error = 0xFF,
}

impl FrameKind {
    pub const ALL: [FrameKind; 9] = [
        FrameKind::Request,
        FrameKind::Hello,
        FrameKind::Ping,
        FrameKind::Attach,
        FrameKind::Response,
        FrameKind::HelloReply,
        FrameKind::Pong,
        FrameKind::AttachReply,
        FrameKind::Error,
    ];

    pub const fn code(self) -> u8 {
        self as u8
    }

    pub fn from_code(code: u8) -> Option<FrameKind> {
        FrameKind::ALL.into_iter().find(|k| k.code() == code)
    }
}

/// True if a connection whose first byte is `first_byte` speaks the native protocol.
pub const fn is_native(first_byte: u8) -> bool {
    first_byte == MAGIC
}

/// The length of the frame at the start of `buf`, once its first 8 bytes are here: `Ok(None)`
/// means "need more bytes". Checks magic and version on whatever bytes are present, so garbage
/// is rejected at its first byte.
pub fn frame_len(buf: &[u8], limits: &NativeLimits) -> Result<Option<usize>, NativeError> {
    if let Some(&b) = buf.first() {
        if b != MAGIC {
            return Err(NativeError::fatal(ErrorCode::BadMagic));
        }
    }
    if let Some(&v) = buf.get(1) {
        if v != VERSION {
            return Err(NativeError::fatal(ErrorCode::BadVersion));
        }
    }
    if buf.len() < FRAME_LEN_PREFIX {
        return Ok(None);
    }
    let len = u32::from_le_bytes([buf[4], buf[5], buf[6], buf[7]]);
    if (len as usize) < HEADER_LEN {
        return Err(NativeError::fatal(ErrorCode::FrameTooShort));
    }
    if len > limits.frame_len_max {
        return Err(NativeError::fatal(ErrorCode::FrameTooLong));
    }
    Ok(Some(len as usize))
}

/// A whole frame's header fields and body.
pub(crate) struct RawFrame<'a> {
    pub kind: u8,
    pub flags: u8,
    pub request_id: u32,
    /// Frame length, header included: what to skip after this frame.
    pub len: usize,
    pub body: &'a [u8],
}

impl RawFrame<'_> {
    /// A resynchronisable error in this frame.
    pub(crate) fn error(&self, code: ErrorCode, op_index: Option<u16>) -> NativeError {
        NativeError {
            code,
            request_id: self.request_id,
            skip: Some(self.len),
            op_index,
        }
    }
}

/// The frame at the start of `buf` once all of it is here.
pub(crate) fn split_frame<'a>(
    buf: &'a [u8],
    limits: &NativeLimits,
) -> Result<Option<RawFrame<'a>>, NativeError> {
    let Some(len) = frame_len(buf, limits)? else {
        return Ok(None);
    };
    if buf.len() < len {
        return Ok(None);
    }
    Ok(Some(RawFrame {
        kind: buf[2],
        flags: buf[3],
        request_id: u32::from_le_bytes([buf[8], buf[9], buf[10], buf[11]]),
        len,
        body: &buf[HEADER_LEN..len],
    }))
}

/// Appends a header whose `frame_len` covers only itself; returns where the frame starts.
/// `end_frame` fixes the length once the body is written.
pub(crate) fn begin_frame(out: &mut Vec<u8>, kind: FrameKind, flags: u8, request_id: u32) -> usize {
    let start = out.len();
    out.extend_from_slice(&[MAGIC, VERSION, kind.code(), flags]);
    put_u32(out, HEADER_LEN as u32);
    put_u32(out, request_id);
    start
}

/// Sets the `frame_len` of the frame starting at `start` to everything appended since.
pub(crate) fn end_frame(out: &mut [u8], start: usize) {
    let len = out.len() - start;
    debug_assert!(len <= u32::MAX as usize);
    patch_u32(out, start + 4, len as u32);
}

/// Sets flag bits in the header of the frame starting at `start`.
pub(crate) fn set_frame_flags(out: &mut [u8], start: usize, flags: u8) {
    out[start + 3] |= flags;
}

#[cfg(test)]
mod tests {
    use super::*;

    const L: NativeLimits = NativeLimits::DEFAULT;

    #[test]
    fn header_layout() {
        let mut out = vec![0xEE];
        let start = begin_frame(&mut out, FrameKind::Ping, 0, 0x0403_0201);
        out.extend_from_slice(b"ab");
        end_frame(&mut out, start);
        assert_eq!(start, 1);
        assert_eq!(
            out,
            [0xEE, 0xD7, 1, 3, 0, 14, 0, 0, 0, 1, 2, 3, 4, b'a', b'b']
        );
        let f = split_frame(&out[1..], &L).unwrap().unwrap();
        assert_eq!(
            (f.kind, f.flags, f.request_id, f.len),
            (3, 0, 0x0403_0201, 14)
        );
        assert_eq!(f.body, b"ab");
    }

    #[test]
    fn garbage_is_rejected_at_its_first_byte() {
        assert_eq!(frame_len(&[], &L), Ok(None));
        assert_eq!(frame_len(&[MAGIC], &L), Ok(None));
        assert_eq!(frame_len(b"*", &L).unwrap_err().code, ErrorCode::BadMagic);
        assert_eq!(
            frame_len(&[MAGIC, 2], &L).unwrap_err().code,
            ErrorCode::BadVersion
        );
        assert!(frame_len(b"G", &L).unwrap_err().skip.is_none());
    }

    #[test]
    fn length_is_checked_before_the_frame_arrives() {
        let huge = [MAGIC, VERSION, 1, 0, 0xff, 0xff, 0xff, 0xff];
        let e = frame_len(&huge, &L).unwrap_err();
        assert_eq!((e.code, e.skip), (ErrorCode::FrameTooLong, None));
        let short = [MAGIC, VERSION, 1, 0, 11, 0, 0, 0];
        assert_eq!(
            frame_len(&short, &L).unwrap_err().code,
            ErrorCode::FrameTooShort
        );
        let ok = [MAGIC, VERSION, 1, 0, 12, 0, 0, 0];
        assert_eq!(frame_len(&ok, &L), Ok(Some(12)));
        assert!(split_frame(&ok, &L).unwrap().is_none());
    }

    #[test]
    fn kinds_round_trip() {
        for k in FrameKind::ALL {
            assert_eq!(FrameKind::from_code(k.code()), Some(k));
        }
        assert_eq!(FrameKind::from_code(0), None);
        assert!(is_native(0xD7) && !is_native(b'*') && !is_native(b'P'));
    }
}
