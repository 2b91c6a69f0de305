//! Property tests of the native codec against a simple model.
//!
//! - Random batches round-trip through `encode_request` / `decode_request`, and the copy flags
//!   on the wire are exactly the ones the model predicts (keys and arguments come from small
//!   pools, so every flag is exercised).
//! - A naive encoder that never copies produces frames the decoder accepts as the same ops; the
//!   canonical re-encoding is never longer.
//! - Random results round-trip through `encode_response`, split into frames no longer than the
//!   limits, all but the last flagged MORE.
//! - Random bytes, and random bodies behind a valid header, never panic; whatever decodes
//!   re-encodes to a frame that decodes to the same thing.

use directkv_proto::native::{
    decode_request, decode_response, encode_request, encode_request_frame, encode_response,
    NativeLimits, NativeOp, OpCode, OpFlags, Request, Response, ResponseOp, HEADER_LEN, MAGIC,
    VERSION,
};
use proptest::prelude::*;

const L: NativeLimits = NativeLimits::DEFAULT;

/// Owned form of an op, so proptest can generate it.
#[derive(Debug, Clone)]
struct OwnedOp {
    kind: OpCode,
    no_return: bool,
    func: u16,
    elem: u8,
    key: Vec<u8>,
    arg: Vec<u8>,
    arg2: Vec<u8>,
}

impl OwnedOp {
    fn as_op(&self) -> NativeOp<'_> {
        NativeOp {
            kind: self.kind,
            flags: if self.no_return {
                OpFlags::NO_RETURN
            } else {
                OpFlags::NONE
            },
            func: self.func,
            elem: self.elem,
            key: &self.key,
            arg: &self.arg,
            arg2: &self.arg2,
        }
    }
}

/// Keys from a small pool of lengths, so that equal lengths are common.
fn key() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..=3),
        prop::collection::vec(any::<u8>(), 8),
        prop::collection::vec(any::<u8>(), 250),
    ]
}

/// Arguments from a small pool, so that equal values and equal lengths are common; one
/// length needs a 3-byte varint.
fn arg() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => prop::sample::select(vec![vec![], vec![1], vec![1, 0, 0, 0, 0, 0, 0, 0]]),
        2 => prop::collection::vec(any::<u8>(), 8),
        1 => prop::collection::vec(any::<u8>(), 0..300),
        1 => Just(vec![7u8; 20_000]),
    ]
}

fn owned_op() -> impl Strategy<Value = OwnedOp> {
    (
        prop::sample::select(OpCode::ALL.to_vec()),
        any::<bool>(),
        any::<u16>(),
        any::<u8>(),
        key(),
        arg(),
        arg(),
    )
        .prop_map(|(kind, no_return, func, elem, key, arg, arg2)| OwnedOp {
            kind,
            no_return,
            func: if kind.has_func() { func } else { 0 },
            elem: if kind.has_func() { elem } else { 0 },
            key,
            arg: if kind.has_arg() { arg } else { vec![] },
            arg2: if kind.has_arg2() { arg2 } else { vec![] },
        })
}

/// The copy flags the model expects on each op.
fn expected_copy_flags(ops: &[OwnedOp]) -> Vec<OpFlags> {
    let mut prev_key_len = None;
    let mut prev_arg: Option<&[u8]> = None;
    ops.iter()
        .map(|op| {
            let mut f = OpFlags::NONE;
            if prev_key_len == Some(op.key.len()) {
                f = f | OpFlags::COPY_KEY_LEN;
            }
            prev_key_len = Some(op.key.len());
            if op.kind.has_arg() {
                match prev_arg {
                    Some(p) if p == op.arg.as_slice() => f = f | OpFlags::COPY_VALUE,
                    Some(p) if p.len() == op.arg.len() => f = f | OpFlags::COPY_VALUE_LEN,
                    _ => {}
                }
                prev_arg = Some(&op.arg);
            }
            f
        })
        .collect()
}

fn put_varint(out: &mut Vec<u8>, mut v: usize) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A REQUEST frame written without any copy flag: valid, but not what the encoder writes.
fn naive_frame(id: u32, ops: &[OwnedOp]) -> Vec<u8> {
    let mut body = (ops.len() as u16).to_le_bytes().to_vec();
    for op in ops {
        let no_return = if op.no_return { 0x10 } else { 0 };
        if op.kind.is_extended() {
            body.extend_from_slice(&[0x0F | no_return, op.kind.code()]);
        } else {
            body.push(op.kind.code() | no_return);
        }
        if op.kind.has_func() {
            body.extend_from_slice(&op.func.to_le_bytes());
            body.push(op.elem);
        }
        body.push(op.key.len() as u8);
        body.extend_from_slice(&op.key);
        if op.kind.has_arg() {
            put_varint(&mut body, op.arg.len());
            body.extend_from_slice(&op.arg);
        }
        if op.kind.has_arg2() {
            put_varint(&mut body, op.arg2.len());
            body.extend_from_slice(&op.arg2);
        }
    }
    let mut f = vec![MAGIC, VERSION, 0x01, 0];
    f.extend_from_slice(&((HEADER_LEN + body.len()) as u32).to_le_bytes());
    f.extend_from_slice(&id.to_le_bytes());
    f.extend_from_slice(&body);
    f
}

fn decoded_ops(frame: &[u8]) -> Vec<NativeOp<'_>> {
    let (f, n) = decode_request(frame, &L).unwrap().unwrap();
    assert_eq!(n, frame.len());
    match f.body {
        Request::Ops(batch) => batch.iter().collect(),
        other => panic!("not ops: {other:?}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn batches_round_trip_with_the_predicted_copy_flags(
        id in any::<u32>(),
        ops in prop::collection::vec(owned_op(), 0..40),
    ) {
        let input: Vec<NativeOp<'_>> = ops.iter().map(OwnedOp::as_op).collect();
        let mut frame = Vec::new();
        encode_request(id, &input, &L, &mut frame).unwrap();
        let got = decoded_ops(&frame);
        prop_assert_eq!(got.len(), input.len());
        let expected = expected_copy_flags(&ops);
        for (i, (g, want)) in got.iter().zip(&input).enumerate() {
            prop_assert_eq!(g.without_copy_flags(), *want, "op {}", i);
            let copy = g.flags.without(OpFlags::NO_RETURN);
            prop_assert_eq!(copy, expected[i], "copy flags of op {}", i);
        }
        // Canonical: what was decoded re-encodes to the same bytes.
        let (f, _) = decode_request(&frame, &L).unwrap().unwrap();
        let mut again = Vec::new();
        encode_request_frame(&f, &L, &mut again).unwrap();
        prop_assert_eq!(again, frame);
    }

    #[test]
    fn frames_without_copy_flags_decode_to_the_same_ops(
        ops in prop::collection::vec(owned_op(), 0..30),
    ) {
        let naive = naive_frame(5, &ops);
        let got = decoded_ops(&naive);
        for (g, want) in got.iter().zip(&ops) {
            prop_assert_eq!(*g, want.as_op());
        }
        let (f, _) = decode_request(&naive, &L).unwrap().unwrap();
        let mut canonical = Vec::new();
        encode_request_frame(&f, &L, &mut canonical).unwrap();
        prop_assert!(canonical.len() <= naive.len());
        let again: Vec<_> = decoded_ops(&canonical).into_iter().map(NativeOp::without_copy_flags).collect();
        let want: Vec<_> = ops.iter().map(OwnedOp::as_op).collect();
        prop_assert_eq!(again, want);
    }

    #[test]
    fn responses_split_within_limits_and_round_trip(
        id in any::<u32>(),
        results in prop::collection::vec(
            (prop::sample::select(vec![0u8, 1, 2, 3, 0x81, 0x89, 0xBF]),
             prop::collection::vec(any::<u8>(), 0..150)),
            0..60),
        frame_len_max in 170u32..2000,
        frame_ops_max in 1u16..8,
    ) {
        let limits = NativeLimits { frame_len_max, frame_ops_max, ..L };
        let ops: Vec<ResponseOp<'_>> =
            results.iter().map(|(s, d)| ResponseOp { status: *s, data: d }).collect();
        let mut out = Vec::new();
        encode_response(id, &ops, &limits, &mut out).unwrap();
        let mut buf = &out[..];
        let mut got = Vec::new();
        let mut frames = 0;
        while !buf.is_empty() {
            let (f, n) = decode_response(buf, &limits).unwrap().unwrap();
            prop_assert!(n <= frame_len_max as usize);
            prop_assert_eq!(f.request_id, id);
            let Response::Ops(batch) = f.body else { panic!("not a response") };
            prop_assert!(batch.len() <= usize::from(frame_ops_max));
            buf = &buf[n..];
            prop_assert_eq!(batch.more, !buf.is_empty());
            got.extend(batch.iter());
            frames += 1;
        }
        prop_assert!(frames >= 1);
        prop_assert_eq!(got, ops);
    }

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..600)) {
        let _ = decode_request(&bytes, &L);
        let _ = decode_response(&bytes, &L);
    }

    #[test]
    fn random_bodies_behind_a_valid_header_never_panic(
        kind in prop::sample::select(vec![0x01u8, 0x02, 0x03, 0x04, 0x81, 0x82, 0x83, 0x84, 0xFF, 0x07]),
        flags in prop::sample::select(vec![0u8, 0, 0, 1, 0x80]),
        body in prop::collection::vec(any::<u8>(), 0..400),
    ) {
        let mut frame = vec![MAGIC, VERSION, kind, flags];
        frame.extend_from_slice(&((HEADER_LEN + body.len()) as u32).to_le_bytes());
        frame.extend_from_slice(&77u32.to_le_bytes());
        frame.extend_from_slice(&body);
        check_decoded_frame(&frame)?;
    }

    #[test]
    fn mutated_frames_never_panic(
        ops in prop::collection::vec(owned_op(), 1..8),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
    ) {
        let input: Vec<NativeOp<'_>> = ops.iter().map(OwnedOp::as_op).collect();
        let mut frame = Vec::new();
        encode_request(1, &input, &L, &mut frame).unwrap();
        for (at, byte) in flips {
            // Keep the framing so the body parser is what gets exercised.
            let i = HEADER_LEN + at.index(frame.len() - HEADER_LEN);
            frame[i] = byte;
        }
        check_decoded_frame(&frame)?;
    }
}

/// Decodes `frame` both ways; whatever decodes must re-encode to something that decodes to the
/// same thing, and any error must skip exactly this frame.
fn check_decoded_frame(frame: &[u8]) -> Result<(), TestCaseError> {
    match decode_request(frame, &L) {
        Ok(Some((f, n))) => {
            prop_assert_eq!(n, frame.len());
            let mut again = Vec::new();
            encode_request_frame(&f, &L, &mut again).unwrap();
            prop_assert!(again.len() <= frame.len());
            let (g, _) = decode_request(&again, &L).unwrap().unwrap();
            prop_assert_eq!(
                format!("{:?}", strip(&f.body)),
                format!("{:?}", strip(&g.body))
            );
        }
        Ok(None) => prop_assert!(false, "a whole frame is never incomplete"),
        Err(e) => prop_assert_eq!(e.skip, Some(frame.len())),
    }
    match decode_response(frame, &L) {
        Ok(Some((f, _))) => {
            let mut again = Vec::new();
            directkv_proto::native::encode_response_frame(&f, &L, &mut again).unwrap();
            prop_assert_eq!(again, frame.to_vec());
        }
        Ok(None) => prop_assert!(false, "a whole frame is never incomplete"),
        Err(e) => prop_assert_eq!(e.skip, Some(frame.len())),
    }
    Ok(())
}

/// A request body with copy flags dropped, for comparing two encodings of it.
fn strip<'a>(body: &Request<'a>) -> Vec<String> {
    match body {
        Request::Ops(b) => b
            .iter()
            .map(|o| format!("{:?}", o.without_copy_flags()))
            .collect(),
        other => vec![format!("{other:?}")],
    }
}
