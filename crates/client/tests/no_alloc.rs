//! The hot path allocates nothing: once a client's buffers and a `Replies` have grown, running
//! a batch (staging, encoding, sending to several shards, decoding, placing results) makes no
//! heap allocation on the calling thread. Counted with a global allocator that counts only
//! while this thread asks it to (the in-process server's threads allocate as they like).

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

use directkv_client::{func, Client, ClientConfig, ElemCode, Replies};

struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static COUNT_HERE: Cell<bool> = const { Cell::new(false) };
}

fn counted() {
    if COUNT_HERE.try_with(Cell::get).unwrap_or(false) {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
    }
}

// SAFETY: every call is forwarded unchanged to the system allocator; counting has no effect
// on the memory handed out.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        counted();
        // SAFETY: the caller upholds `alloc`'s contract, which we pass on.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        counted();
        // SAFETY: as for `dealloc`, and `new_size` is the caller's valid size.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

async fn mixed_batch(c: &mut Client, replies: &mut Replies, round: u64) {
    let mut b = c.batch();
    let delta = 1u32.to_le_bytes();
    let sigma = 0u32.to_le_bytes();
    for i in 0..512u64 {
        let k = (i / 5).to_le_bytes();
        match i % 5 {
            0 => b.put(&k, &[1, 0, 0, 0, 2, 0, 0, 0]),
            1 => b.get(&k),
            2 => b.update_s2v(&k, func::ADD, ElemCode::U32, &delta),
            3 => b.reduce(&k, func::SUM, ElemCode::U32, &sigma),
            _ => b.add_u64_no_return(&(round + 1000).to_le_bytes(), 1),
        };
    }
    b.execute_into(replies).await.unwrap();
    assert_eq!(replies.len(), 512);
    assert!(replies.iter().all(|r| r.is_ok()));
}

#[tokio::test]
async fn batches_allocate_nothing_once_warm() {
    let srv = common::start(3);
    let mut c = Client::connect(srv.addr(), ClientConfig::default())
        .await
        .unwrap();
    let mut replies = Replies::new();
    for round in 0..3 {
        mixed_batch(&mut c, &mut replies, round).await;
    }
    COUNT_HERE.with(|f| f.set(true));
    for round in 3..23 {
        mixed_batch(&mut c, &mut replies, round).await;
    }
    COUNT_HERE.with(|f| f.set(false));
    assert_eq!(ALLOCATIONS.load(Ordering::Relaxed), 0);
    // The counter does count: a single get hands the caller an owned value.
    COUNT_HERE.with(|f| f.set(true));
    let v = c.get(&0u64.to_le_bytes()).await.unwrap();
    COUNT_HERE.with(|f| f.set(false));
    assert!(v.is_some());
    assert!(ALLOCATIONS.load(Ordering::Relaxed) > 0);
    srv.stop();
}
