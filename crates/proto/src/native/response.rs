//! Results in a RESPONSE frame: one status byte per operation, data only when there is some.
//!
//! ```text
//!   RESPONSE body:  op_count u16 | result 0 | result 1 | ...
//!
//!   result:  +--------+-----------------+--------+
//!            | status | data_len varint | data   |    data_len and data only if bit 6 is set
//!            +--------+-----------------+--------+
//!   status bits: 7 error  6 HAS_DATA  5..0 code      (0 ok, 1 not found, 2 not stored,
//!                                                    3 cas mismatch, 0x80|e error e)
//! ```
//!
//! A result has data iff the server has bytes to return: HAS_DATA with a zero length is
//! malformed, so every result has one encoding. A no-return update costs one byte.
//!
//! A response larger than `frame_len_max` (4096 GETs of 1 MiB values would be 4 GiB) is split
//! into several RESPONSE frames with the same request id, all but the last with frame flag MORE;
//! the results continue in order. `ResponseEncoder` splits by itself.
//!
//! Goals: the server streams results into one reusable buffer without knowing the split rule.
//! Non-goals: pairing results with requests (the client knows its batch).

use std::fmt;

use super::error::{EncodeError, ErrorCode};
use super::frame::{begin_frame, end_frame, set_frame_flags, FrameKind, FLAG_MORE, HEADER_LEN};
use super::limits::NativeLimits;
use super::wire::{batch_views, patch_u16, put_u16, put_varint, varint_len, Cursor};

/// Bit 6 of a status byte on the wire: a data length and data follow.
pub const STATUS_HAS_DATA: u8 = 0x40;

/// The result of one operation: a status (see `codes::status`; bit 6 clear) and its data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResponseOp<'a> {
    pub status: u8,
    pub data: &'a [u8],
}

/// Bytes one result takes on the wire.
pub const fn response_op_len(data_len: usize) -> usize {
    if data_len == 0 {
        1
    } else {
        1 + varint_len(data_len as u32) + data_len
    }
}

fn parse_result<'a>(
    c: &mut Cursor<'a>,
    limits: &NativeLimits,
) -> Result<ResponseOp<'a>, ErrorCode> {
    let byte = c.u8()?;
    let status = byte & !STATUS_HAS_DATA;
    if byte & STATUS_HAS_DATA == 0 {
        return Ok(ResponseOp { status, data: &[] });
    }
    let len = c.varint()?;
    if len == 0 {
        return Err(ErrorCode::BadStatus);
    }
    if len > limits.value_len_max {
        return Err(ErrorCode::ValueTooLarge);
    }
    let data = c.bytes(len as usize)?;
    Ok(ResponseOp { status, data })
}

fn put_result(out: &mut Vec<u8>, op: &ResponseOp<'_>) {
    let n = op.data.len();
    if n == 0 {
        out.push(op.status);
    } else if n < 0x80 {
        // The common case: status and a one-byte length in one two-byte store.
        out.extend_from_slice(&[op.status | STATUS_HAS_DATA, n as u8]);
        out.extend_from_slice(op.data);
    } else {
        out.push(op.status | STATUS_HAS_DATA);
        put_varint(out, op.data.len() as u32);
        out.extend_from_slice(op.data);
    }
}

/// Checks what every encoder of results checks.
fn check_result(op: &ResponseOp<'_>, limits: &NativeLimits) -> Result<(), EncodeError> {
    if op.status & STATUS_HAS_DATA != 0 {
        return Err(EncodeError::BadStatus(op.status));
    }
    if op.data.len() > limits.value_len_max as usize {
        return Err(EncodeError::ValueTooLarge {
            len: op.data.len(),
            max: limits.value_len_max as usize,
        });
    }
    Ok(())
}

/// The validated results of one RESPONSE frame.
#[derive(Clone, Copy)]
pub struct ResponseBatch<'a> {
    /// More RESPONSE frames with this request id follow (frame flag MORE).
    pub more: bool,
    count: u16,
    ops: &'a [u8],
}

impl<'a> ResponseBatch<'a> {
    pub fn iter(&self) -> ResponseIter<'a> {
        ResponseIter {
            c: Cursor::new(self.ops),
            left: self.count,
        }
    }
}

impl fmt::Debug for ResponseBatch<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseBatch")
            .field("more", &self.more)
            .field("ops", &self.iter().collect::<Vec<_>>())
            .finish()
    }
}

/// The results of a `ResponseBatch`, in order.
pub struct ResponseIter<'a> {
    c: Cursor<'a>,
    left: u16,
}

impl<'a> ResponseIter<'a> {
    fn parse_next(&mut self) -> Result<ResponseOp<'a>, ErrorCode> {
        parse_result(&mut self.c, &NativeLimits::UNCHECKED)
    }
}

batch_views!(ResponseBatch, ResponseIter, ResponseOp);

/// Validates a RESPONSE body.
pub(crate) fn parse_response_batch<'a>(
    body: &'a [u8],
    more: bool,
    limits: &NativeLimits,
) -> Result<ResponseBatch<'a>, (ErrorCode, Option<u16>)> {
    let mut c = Cursor::new(body);
    let count = c.u16().map_err(|e| (e, None))?;
    if count > limits.frame_ops_max {
        return Err((ErrorCode::TooManyOps, None));
    }
    if usize::from(count) > c.remaining() {
        return Err((ErrorCode::Truncated, None));
    }
    let ops = &body[2..];
    for i in 0..count {
        parse_result(&mut c, limits).map_err(|e| (e, Some(i)))?;
    }
    if c.remaining() != 0 {
        return Err((ErrorCode::TrailingBytes, None));
    }
    Ok(ResponseBatch { more, count, ops })
}

/// Appends exactly one RESPONSE frame holding `ops` (no splitting); on error `out` is unchanged.
pub(crate) fn encode_response_part<'d>(
    out: &mut Vec<u8>,
    request_id: u32,
    more: bool,
    ops: impl Iterator<Item = ResponseOp<'d>>,
    limits: &NativeLimits,
) -> Result<(), EncodeError> {
    let start = out.len();
    let result = write_response_part(out, request_id, more, ops, limits);
    if result.is_err() {
        out.truncate(start);
    }
    result
}

fn write_response_part<'d>(
    out: &mut Vec<u8>,
    request_id: u32,
    more: bool,
    ops: impl Iterator<Item = ResponseOp<'d>>,
    limits: &NativeLimits,
) -> Result<(), EncodeError> {
    let flags = if more { FLAG_MORE } else { 0 };
    let start = begin_frame(out, FrameKind::Response, flags, request_id);
    put_u16(out, 0);
    let mut count: u16 = 0;
    for op in ops {
        check_result(&op, limits)?;
        if count >= limits.frame_ops_max {
            return Err(EncodeError::TooManyOps {
                max: usize::from(limits.frame_ops_max),
            });
        }
        put_result(out, &op);
        count += 1;
    }
    let len = out.len() - start;
    if len > limits.frame_len_max as usize {
        return Err(EncodeError::FrameTooLong {
            len,
            max: limits.frame_len_max as usize,
        });
    }
    patch_u16(out, start + HEADER_LEN, count);
    end_frame(out, start);
    Ok(())
}

/// Streams the results of one request into `out` as one or more RESPONSE frames, starting a
/// new frame (and flagging the previous one MORE) whenever the next result would break
/// `frame_len_max` or `frame_ops_max`. The frames in `out` are complete after every `push`.
pub struct ResponseEncoder<'o> {
    out: &'o mut Vec<u8>,
    limits: NativeLimits,
    request_id: u32,
    /// Where the first frame starts.
    first: usize,
    /// Where the current frame starts.
    start: usize,
    count: u16,
}

impl<'o> ResponseEncoder<'o> {
    /// Appends the header of an empty RESPONSE frame to `out`.
    pub fn begin(out: &'o mut Vec<u8>, request_id: u32, limits: &NativeLimits) -> Self {
        let start = out.len();
        let mut enc = ResponseEncoder {
            out,
            limits: *limits,
            request_id,
            first: start,
            start,
            count: 0,
        };
        enc.open_frame();
        enc
    }

    fn open_frame(&mut self) {
        self.start = begin_frame(self.out, FrameKind::Response, 0, self.request_id);
        put_u16(self.out, 0);
        self.count = 0;
    }

    /// Writes the current frame's op count and length into its header: once per frame (when
    /// the next one opens, and on drop), not once per op.
    fn seal(&mut self) {
        patch_u16(self.out, self.start + HEADER_LEN, self.count);
        end_frame(self.out, self.start);
    }

    /// Appends one result. Refused (with `out` unchanged) if its status has bit 6 set, its data
    /// is above `value_len_max`, or it cannot fit even in a frame of its own: the server then
    /// pushes an error status for that op instead (over UDP a 1 MiB value does not fit).
    pub fn push(&mut self, op: ResponseOp<'_>) -> Result<(), EncodeError> {
        check_result(&op, &self.limits)?;
        let size = response_op_len(op.data.len());
        let frame_len = self.out.len() - self.start;
        // An op that fits the current frame also fits a frame of its own, and frame_ops_max 0
        // always takes the other branch: the rest of the checks are only needed there.
        if self.count >= self.limits.frame_ops_max
            || frame_len + size > self.limits.frame_len_max as usize
        {
            self.next_frame(size)?;
        }
        put_result(self.out, &op);
        self.count += 1;
        Ok(())
    }

    /// Closes the current frame (flag MORE) and opens the next for an op of `size` bytes,
    /// unless that op cannot be sent at all.
    #[cold]
    #[inline(never)]
    fn next_frame(&mut self, size: usize) -> Result<(), EncodeError> {
        let frame_len_max = self.limits.frame_len_max as usize;
        if HEADER_LEN + 2 + size > frame_len_max {
            return Err(EncodeError::FrameTooLong {
                len: HEADER_LEN + 2 + size,
                max: frame_len_max,
            });
        }
        if self.limits.frame_ops_max == 0 {
            return Err(EncodeError::TooManyOps { max: 0 });
        }
        self.seal();
        set_frame_flags(self.out, self.start, FLAG_MORE);
        self.open_frame();
        Ok(())
    }

    /// Ends this part of a response that continues: the last frame is sealed with flag MORE.
    pub fn finish_more(mut self) {
        self.seal();
        set_frame_flags(self.out, self.start, FLAG_MORE);
        // Drop seals again: the same count and length, and the flag stays.
    }

    /// Ends the response; returns the bytes of all its frames. (Dropping the encoder ends it
    /// too: `out` cannot be seen while the encoder borrows it, and the last frame's header is
    /// written when the encoder goes.)
    pub fn finish(self) -> usize {
        self.out.len() - self.first
    }
}

impl Drop for ResponseEncoder<'_> {
    fn drop(&mut self) {
        self.seal();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::native::codes::status;

    const L: NativeLimits = NativeLimits::DEFAULT;

    fn parts<'a>(mut buf: &'a [u8], limits: &NativeLimits) -> Vec<(bool, Vec<ResponseOp<'a>>)> {
        let mut v = Vec::new();
        while !buf.is_empty() {
            let len = u32::from_le_bytes([buf[4], buf[5], buf[6], buf[7]]) as usize;
            let more = buf[3] & FLAG_MORE != 0;
            let b = parse_response_batch(&buf[HEADER_LEN..len], more, limits).unwrap();
            v.push((b.more, b.iter().collect()));
            buf = &buf[len..];
        }
        v
    }

    #[test]
    fn no_return_results_cost_one_byte() {
        let mut out = Vec::new();
        let mut enc = ResponseEncoder::begin(&mut out, 3, &L);
        enc.push(ResponseOp {
            status: status::OK,
            data: &[],
        })
        .unwrap();
        enc.push(ResponseOp {
            status: status::OK,
            data: b"v",
        })
        .unwrap();
        enc.push(ResponseOp {
            status: status::error(9),
            data: &[],
        })
        .unwrap();
        assert_eq!(enc.finish(), 12 + 2 + 1 + 3 + 1);
        assert_eq!(&out[12..], &[3, 0, 0x00, 0x40, 1, b'v', 0x89]);
        let p = parts(&out, &L);
        assert_eq!(p.len(), 1);
        assert_eq!(
            p[0].1[2],
            ResponseOp {
                status: 0x89,
                data: &[]
            }
        );
    }

    #[test]
    fn large_responses_are_split_with_more() {
        let limits = NativeLimits {
            frame_len_max: 30,
            frame_ops_max: 3,
            ..L
        };
        let value = [7u8; 10];
        let mut out = Vec::new();
        let mut enc = ResponseEncoder::begin(&mut out, 1, &limits);
        for _ in 0..3 {
            // 12 bytes each: at most one per 30-byte frame besides the 14-byte header.
            enc.push(ResponseOp {
                status: 0,
                data: &value,
            })
            .unwrap();
        }
        for _ in 0..4 {
            enc.push(ResponseOp {
                status: 1,
                data: &[],
            })
            .unwrap();
        }
        enc.finish();
        let p = parts(&out, &limits);
        let shape: Vec<_> = p.iter().map(|(more, ops)| (*more, ops.len())).collect();
        assert_eq!(shape, [(true, 1), (true, 1), (true, 3), (false, 2)]);
        let all: Vec<_> = p.into_iter().flat_map(|(_, ops)| ops).collect();
        assert_eq!(all.len(), 7);
        assert!(all[..3].iter().all(|o| o.data == value));
    }

    #[test]
    fn a_response_in_steps_flags_every_frame_but_the_last_more() {
        let value = [7u8; 10];
        let op = ResponseOp {
            status: 0,
            data: &value,
        };
        let mut out = Vec::new();
        let mut enc = ResponseEncoder::begin(&mut out, 9, &L);
        enc.push(op).unwrap();
        enc.push(op).unwrap();
        enc.finish_more();
        let mut enc = ResponseEncoder::begin(&mut out, 9, &L);
        enc.push(op).unwrap();
        enc.finish();
        let p = parts(&out, &L);
        let shape: Vec<_> = p.iter().map(|(more, ops)| (*more, ops.len())).collect();
        assert_eq!(shape, [(true, 2), (false, 1)]);
        assert!(p.iter().flat_map(|(_, ops)| ops).all(|o| o.data == value));
    }

    #[test]
    fn refused_results_leave_out_unchanged() {
        let limits = NativeLimits {
            frame_len_max: 20,
            value_len_max: 8,
            ..L
        };
        let mut out = Vec::new();
        let mut enc = ResponseEncoder::begin(&mut out, 1, &limits);
        assert_eq!(
            enc.push(ResponseOp {
                status: 0x40,
                data: &[]
            }),
            Err(EncodeError::BadStatus(0x40))
        );
        assert_eq!(
            enc.push(ResponseOp {
                status: 0,
                data: &[0; 9]
            }),
            Err(EncodeError::ValueTooLarge { len: 9, max: 8 })
        );
        // 12 + 2 + 1 + 1 + 5 = 21 > 20, even alone.
        assert_eq!(
            enc.push(ResponseOp {
                status: 0,
                data: &[0; 5]
            }),
            Err(EncodeError::FrameTooLong { len: 21, max: 20 })
        );
        assert_eq!(enc.finish(), 14);
    }

    #[test]
    fn malformed_results_are_rejected() {
        let err = |b: &[u8]| parse_response_batch(b, false, &L).unwrap_err();
        assert_eq!(err(&[1, 0, 0x40, 0]), (ErrorCode::BadStatus, Some(0)));
        assert_eq!(err(&[1, 0, 0x40, 2, 1]), (ErrorCode::Truncated, Some(0)));
        assert_eq!(err(&[1, 0, 0x00, 0x00]), (ErrorCode::TrailingBytes, None));
        assert_eq!(err(&[2, 0, 0x00]), (ErrorCode::Truncated, None));
        assert_eq!(
            err(&[1, 0, 0x40, 0x81, 0x80, 0x40]).0,
            ErrorCode::ValueTooLarge
        );
    }

    #[test]
    fn part_encoder_keeps_more_and_rejects_overflow() {
        let ops = [ResponseOp {
            status: 0,
            data: b"abc",
        }];
        let mut out = Vec::new();
        encode_response_part(&mut out, 5, true, ops.into_iter(), &L).unwrap();
        assert_eq!(out[3], FLAG_MORE);
        let small = NativeLimits {
            frame_len_max: 15,
            ..L
        };
        let mut out2 = vec![1, 2];
        let e = encode_response_part(&mut out2, 5, false, ops.into_iter(), &small);
        assert_eq!(e, Err(EncodeError::FrameTooLong { len: 19, max: 15 }));
        assert_eq!(out2, [1, 2]);
    }
}
