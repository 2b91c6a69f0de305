//! The native codec's data path does not allocate (STYLE habits 2 and 4): decoding a request
//! and iterating its ops, encoding a request or a response into a buffer reserved up front, and
//! decoding a response allocate nothing; nor does rejecting a frame that claims 4 GiB.
//!
//! A global allocator wraps `System` and counts the calls made by this thread while counting is
//! on. Everything runs in the one test of this file so no other test thread is involved.

use directkv_testkit::alloc::count;

use directkv_proto::native::{
    decode_request, decode_response, func, ElemCode, NativeLimits, NativeOp, Request,
    RequestEncoder, Response, ResponseEncoder, ResponseOp,
};

/// Allocator calls made by `f` on this thread.
fn calls_during(f: impl FnOnce()) -> usize {
    count(f).1.calls() as usize
}

#[test]
fn the_data_path_does_not_allocate() {
    // The counter itself works: an allocation is seen.
    assert!(calls_during(|| drop(std::hint::black_box(Box::new(1u64)))) > 0);

    let limits = NativeLimits::DEFAULT;
    let keys: Vec<[u8; 8]> = (0..1000u64).map(|i| i.to_le_bytes()).collect();
    let delta = 1u64.to_le_bytes();
    let value = [5u8; 100];
    let mut request = Vec::with_capacity(64 * 1024);
    let mut response = Vec::with_capacity(256 * 1024);

    let n = calls_during(|| {
        let mut enc = RequestEncoder::begin(&mut request, 1, &limits);
        for (i, key) in keys.iter().enumerate() {
            let op = match i % 3 {
                0 => NativeOp::get(key),
                1 => NativeOp::put(key, &value),
                _ => NativeOp::update_s2s(key, func::ADD, ElemCode::U64, &delta).no_return(),
            };
            enc.push(&op).unwrap();
        }
    });
    assert_eq!(n, 0, "encoding a request allocated");

    let mut key_bytes = 0;
    let n = calls_during(|| {
        let (frame, _) = decode_request(&request, &limits).unwrap().unwrap();
        let Request::Ops(batch) = frame.body else {
            panic!("not ops")
        };
        for op in batch.iter() {
            key_bytes += op.key.len() + op.arg.len();
        }
    });
    assert_eq!(n, 0, "decoding a request allocated");
    assert_eq!(key_bytes, 8000 + 333 * 100 + 333 * 8);

    let n = calls_during(|| {
        let mut enc = ResponseEncoder::begin(&mut response, 1, &limits);
        for i in 0..1000 {
            let data: &[u8] = if i % 3 == 0 { &value } else { &[] };
            enc.push(ResponseOp { status: 0, data }).unwrap();
        }
    });
    assert_eq!(n, 0, "encoding a response allocated");

    let mut results = 0;
    let n = calls_during(|| {
        let (frame, _) = decode_response(&response, &limits).unwrap().unwrap();
        let Response::Ops(batch) = frame.body else {
            panic!("not a response")
        };
        results = batch.iter().count();
    });
    assert_eq!(n, 0, "decoding a response allocated");
    assert_eq!(results, 1000);

    let claim = [0xD7, 1, 1, 0, 0xff, 0xff, 0xff, 0xff];
    let n = calls_during(|| {
        assert!(decode_request(&claim, &limits).is_err());
    });
    assert_eq!(n, 0, "rejecting a 4 GiB claim allocated");
}
