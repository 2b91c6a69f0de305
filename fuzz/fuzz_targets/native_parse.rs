//! Fuzz target: the native protocol decoder on arbitrary bytes (`directkv_proto::native`).
//!
//! ```text
//!   input bytes ──► decode_request / decode_response, both at the front and as a stream
//!     Ok(Some(frame, n))  n within the input; re-encode: never longer, decodes to the same
//!                         frame (ops compared without copy flags), and encoding that again
//!                         gives the same bytes (the encoders' output is a fixed point);
//!                         responses re-encode byte-for-byte
//!     Ok(None)            only when the input is shorter than a whole frame
//!     Err(e)              resynchronisable errors skip exactly the frame's length
//! ```
//!
//! The first input byte picks the limits (default, small frames, or UDP) so that the limit checks
//! are hit at their edges; the rest is the byte stream. Good seeds are the frames of
//! `crates/proto/tests/vectors/native.txt`.

#![no_main]

use directkv_proto::native::{
    decode_request, decode_response, encode_request_frame, encode_response_frame, frame_len,
    NativeLimits, NativeOp, Request, RequestFrame,
};
use libfuzzer_sys::fuzz_target;

/// Most frames decoded from one input, so a stream of tiny frames stays fast.
const FRAMES_PER_INPUT_MAX: usize = 256;

fuzz_target!(|data: &[u8]| {
    let Some((&choice, stream)) = data.split_first() else {
        return;
    };
    let limits = match choice % 4 {
        0 => NativeLimits::DEFAULT,
        1 => NativeLimits::DEFAULT.for_udp(),
        2 => NativeLimits {
            frame_len_max: 64,
            frame_ops_max: 4,
            key_len_max: 8,
            value_len_max: 16,
        },
        _ => NativeLimits {
            frame_len_max: 4096,
            frame_ops_max: 64,
            ..NativeLimits::DEFAULT
        },
    };
    walk(stream, &limits, check_request);
    walk(stream, &limits, check_response);
});

/// Decodes frames one after another, skipping resynchronisable errors, until the stream ends,
/// is lost, or `FRAMES_PER_INPUT_MAX` frames were seen.
fn walk(mut buf: &[u8], limits: &NativeLimits, check: fn(&[u8], &NativeLimits) -> Option<usize>) {
    for _ in 0..FRAMES_PER_INPUT_MAX {
        match check(buf, limits) {
            Some(n) if n > 0 && n <= buf.len() => buf = &buf[n..],
            Some(n) => panic!("frame of {n} bytes in a buffer of {}", buf.len()),
            None => return,
        }
    }
}

/// Checks the client frame at the front of `buf`; returns how far to advance, if anywhere.
fn check_request(buf: &[u8], limits: &NativeLimits) -> Option<usize> {
    match decode_request(buf, limits) {
        Ok(Some((frame, n))) => {
            let mut again = Vec::new();
            encode_request_frame(&frame, limits, &mut again).expect("a decoded frame re-encodes");
            assert!(again.len() <= n, "re-encoding grew {n} -> {}", again.len());
            let (second, m) = decode_request(&again, limits)
                .expect("a re-encoded frame decodes")
                .expect("a re-encoded frame is whole");
            assert_eq!(m, again.len());
            assert_eq!(canonical(&frame), canonical(&second));
            let mut third = Vec::new();
            encode_request_frame(&second, limits, &mut third).unwrap();
            assert_eq!(third, again, "the encoders' output is a fixed point");
            Some(n)
        }
        Ok(None) => {
            assert_incomplete(buf, limits);
            None
        }
        Err(e) => e.skip,
    }
}

/// Checks the server frame at the front of `buf`; returns how far to advance, if anywhere.
fn check_response(buf: &[u8], limits: &NativeLimits) -> Option<usize> {
    match decode_response(buf, limits) {
        Ok(Some((frame, n))) => {
            let mut again = Vec::new();
            encode_response_frame(&frame, limits, &mut again).expect("a decoded frame re-encodes");
            assert_eq!(again, &buf[..n], "responses re-encode byte-for-byte");
            Some(n)
        }
        Ok(None) => {
            assert_incomplete(buf, limits);
            None
        }
        Err(e) => e.skip,
    }
}

/// `Ok(None)` must mean the frame's bytes have not all arrived.
fn assert_incomplete(buf: &[u8], limits: &NativeLimits) {
    match frame_len(buf, limits) {
        Ok(Some(n)) => assert!(buf.len() < n),
        Ok(None) => {}
        Err(e) => panic!("frame_len fails ({e}) where decoding wants more bytes"),
    }
}

/// A client frame in a form that ignores how its ops were compressed.
fn canonical(frame: &RequestFrame<'_>) -> String {
    match &frame.body {
        Request::Ops(batch) => {
            let ops: Vec<NativeOp<'_>> = batch.iter().map(NativeOp::without_copy_flags).collect();
            format!("{} {ops:?}", frame.request_id)
        }
        other => format!("{} {other:?}", frame.request_id),
    }
}
