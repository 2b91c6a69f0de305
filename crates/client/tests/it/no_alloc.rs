//! The hot path allocates nothing: once a client's buffers and a `Replies` have grown, running
//! a batch (staging, encoding, sending to several shards, decoding, placing results) makes no
//! heap allocation on the calling thread. Counted with a global allocator that counts only
//! while this thread asks it to (the in-process server's threads allocate as they like).

use crate::common;

use directkv_client::{func, Client, ClientConfig, ElemCode, Replies};
use directkv_testkit::alloc::Counting;

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
    let counting = Counting::start();
    for round in 3..23 {
        mixed_batch(&mut c, &mut replies, round).await;
    }
    assert_eq!(counting.stop().allocations, 0);
    // The counter does count: a single get hands the caller an owned value.
    let counting = Counting::start();
    let v = c.get(&0u64.to_le_bytes()).await.unwrap();
    let counted = counting.stop();
    assert!(v.is_some());
    assert!(counted.allocations > 0);
    srv.stop();
}
