//! The native codec's data path does not allocate (STYLE habits 2 and 4): decoding a request
//! and iterating its ops, encoding a request or a response into a buffer reserved up front, and
//! decoding a response allocate nothing; nor does rejecting a frame that claims 4 GiB.
//!
//! A global allocator wraps `System` and counts the calls made by this thread while counting is
//! on. Everything runs in the one test of this file so no other test thread is involved.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use directkv_proto::native::{
    decode_request, decode_response, func, ElemCode, NativeLimits, NativeOp, Request,
    RequestEncoder, Response, ResponseEncoder, ResponseOp,
};

thread_local! {
    static ON: Cell<bool> = const { Cell::new(false) };
    static CALLS: Cell<usize> = const { Cell::new(0) };
}

struct Counting;

fn count() {
    // `try_with`: the allocator also runs while thread-locals are torn down.
    if ON.try_with(Cell::get).unwrap_or(false) {
        let _ = CALLS.try_with(|c| c.set(c.get() + 1));
    }
}

// SAFETY: each method forwards its arguments unchanged to `System`, so `System`'s guarantees
// carry over; counting only touches thread-local cells, never the allocated memory.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: forwarded unchanged; the caller upholds `alloc`'s contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count();
        // SAFETY: `ptr` was allocated by `System` through this allocator with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: `ptr` was allocated by `System` with `layout`; the caller upholds the rest.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocator calls made by `f` on this thread.
fn calls_during(f: impl FnOnce()) -> usize {
    CALLS.with(|c| c.set(0));
    ON.with(|on| on.set(true));
    f();
    ON.with(|on| on.set(false));
    CALLS.with(Cell::get)
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
