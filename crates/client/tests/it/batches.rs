//! Batches across shards: order preserved, frames split at the server's limits, large results
//! split by the server (MORE) and reassembled, and routing with no cross-shard hop on the
//! server (checked with its forwarded-batch counter, which a plain connection does move).

use crate::common;

use std::io::{Read, Write};
use std::net::TcpStream;

use directkv_client::{func, Client, ClientConfig, ElemCode, OwnedReply, Replies, Reply};
use directkv_proto::native::{decode_response, encode_request, NativeLimits, NativeOp, Response};

#[tokio::test]
async fn mixed_batch_keeps_the_order_added() {
    let srv = common::start(3);
    let mut c = Client::connect(srv.addr(), ClientConfig::default())
        .await
        .unwrap();
    let keys: Vec<Vec<u8>> = (0..300u32).map(|i| format!("k{i}").into_bytes()).collect();
    let shards: std::collections::HashSet<u16> = keys.iter().map(|k| c.shard_of(k)).collect();
    assert_eq!(shards.len(), 3, "the keys cover every shard");

    let mut b = c.batch();
    let mut expect = Vec::new();
    for (i, k) in keys.iter().enumerate() {
        let value = format!("v{i}").into_bytes();
        expect.push((b.put(k, &value), OwnedReply::Ok(Vec::new())));
        expect.push((b.get(k), OwnedReply::Ok(value.clone())));
        expect.push((
            b.add_u64(k, 1),
            OwnedReply::Error(directkv_client::OpError { code: 4 }),
        ));
        expect.push((b.delete(k), OwnedReply::Ok(Vec::new())));
        expect.push((b.get(k), OwnedReply::NotFound));
        expect.push((b.add_u64(k, 3), OwnedReply::Ok(vec![0; 8])));
        expect.push((b.add_u64_no_return(k, 1), OwnedReply::Ok(Vec::new())));
        expect.push((b.exists(k), OwnedReply::Ok(Vec::new())));
        expect.push((b.put_nx(k, b"x"), OwnedReply::NotStored));
    }
    assert_eq!(b.len(), keys.len() * 9);
    let replies = b.execute().await.unwrap();
    assert_eq!(replies.len(), expect.len());
    for (i, want) in expect {
        // "v0" etc. are 2..4 bytes: add u64 on them is a width error (code 4).
        assert_eq!(replies.get(i).to_owned(), want, "op {i}");
    }
    for k in &keys {
        assert_eq!(c.get(k).await.unwrap().unwrap(), 4u64.to_le_bytes());
    }
    srv.stop();
}

#[tokio::test]
async fn large_batches_span_several_frames_and_large_results_several_responses() {
    let srv = directkv_server::Server::start(directkv_server::ServerConfig {
        memory_bytes: 256 << 20,
        ..common::config(2)
    })
    .unwrap();
    let mut c = Client::connect(srv.addr(), ClientConfig::default())
        .await
        .unwrap();
    let ops_max = usize::from(c.limits().frame_ops_max);
    // More operations than one frame may hold, on each shard.
    let n = 3 * ops_max + 17;
    let mut b = c.batch();
    for i in 0..n as u64 {
        b.add_u64_no_return(&i.to_le_bytes(), i);
    }
    let r = b.execute().await.unwrap();
    assert!(r.iter().all(|x| x == Reply::Ok(&[])));
    let mut b = c.batch();
    for i in 0..n as u64 {
        b.get(&i.to_le_bytes());
    }
    let mut replies = Replies::new();
    b.execute_into(&mut replies).await.unwrap();
    for i in 0..n {
        assert_eq!(
            replies.get(i),
            Reply::Ok(&(i as u64).to_le_bytes()),
            "op {i}"
        );
    }

    // Six 1 MiB values: about 6 MiB of results, more than frame_len_max (4 MiB + 64 KiB), so
    // the server splits the response and the client joins it. The values go to one shard.
    let big: Vec<Vec<u8>> = (0..6u8).map(|i| vec![i; 1 << 20]).collect();
    let mut keys = Vec::new();
    let mut i = 0u32;
    while keys.len() < 6 {
        let k = format!("big{i}").into_bytes();
        if c.shard_of(&k) == 0 {
            keys.push(k);
        }
        i += 1;
    }
    // One batch of 6 MiB of puts: more than one frame may carry, so it goes as several.
    let mut b = c.batch();
    for (k, v) in keys.iter().zip(&big) {
        b.put(k, v);
    }
    let r = b.execute().await.unwrap();
    assert!(r.iter().all(|x| x == Reply::Ok(&[])));
    let mut b = c.batch();
    for k in &keys {
        b.get(k);
    }
    b.get(b"not-there");
    b.execute_into(&mut replies).await.unwrap();
    for (i, v) in big.iter().enumerate() {
        assert_eq!(replies.get(i), Reply::Ok(v), "value {i}");
    }
    assert_eq!(replies.get(6), Reply::NotFound);

    // An empty batch is valid and sends nothing.
    let r = c.batch().execute().await.unwrap();
    assert!(r.is_empty());
    srv.stop();
}

#[tokio::test]
async fn routing_needs_no_cross_shard_hop() {
    let srv = common::start(4);
    let mut c = Client::connect(srv.addr(), ClientConfig::default())
        .await
        .unwrap();
    assert_eq!(c.connected_shards(), 4);
    let delta = 1u32.to_le_bytes();
    for round in 0..5u32 {
        let mut b = c.batch();
        for i in 0..1000u32 {
            let k = format!("r{i}");
            match round {
                0 => b.put(k.as_bytes(), &[0; 16]),
                _ => b.update_s2v_no_return(k.as_bytes(), func::ADD, ElemCode::U32, &delta),
            };
        }
        let r = b.execute().await.unwrap();
        assert!(r.iter().all(|x| x.is_ok()));
    }
    let sum = c
        .reduce(b"r7", func::SUM, ElemCode::U32, &0u32.to_le_bytes())
        .await
        .unwrap();
    assert_eq!(
        sum,
        Some(16u32.to_le_bytes().to_vec()),
        "4 rounds x 4 elements"
    );
    let page = common::metrics(&srv);
    assert_eq!(
        common::metric(&page, "directkv_forwarded_batches_total", ""),
        0,
        "a shard-aware client never makes a shard forward:\n{page}"
    );
    // Every shard executed its own keys' operations.
    for shard in 0..4 {
        let puts = common::metric(
            &page,
            "directkv_engine_ops_total",
            &format!("shard=\"{shard}\",kind=\"put\""),
        );
        assert!(puts > 100, "shard {shard} did {puts} puts");
    }

    // The counter is real: a plain native connection (no ATTACH) with keys of every shard
    // makes the shard that accepted it forward to the others.
    let mut s = TcpStream::connect(srv.addr()).unwrap();
    let keys: Vec<Vec<u8>> = (0..100u32).map(|i| format!("p{i}").into_bytes()).collect();
    let ops: Vec<NativeOp> = keys.iter().map(|k| NativeOp::put(k, b"v")).collect();
    let mut out = Vec::new();
    encode_request(9, &ops, &NativeLimits::DEFAULT, &mut out).unwrap();
    s.write_all(&out).unwrap();
    let mut buf = Vec::new();
    loop {
        let mut chunk = [0u8; 4096];
        let n = s.read(&mut chunk).unwrap();
        assert!(n > 0, "closed");
        buf.extend_from_slice(&chunk[..n]);
        if let Some((f, _)) = decode_response(&buf, &NativeLimits::DEFAULT).unwrap() {
            assert!(matches!(f.body, Response::Ops(b) if b.len() == 100));
            break;
        }
    }
    let page = common::metrics(&srv);
    assert!(common::metric(&page, "directkv_forwarded_batches_total", "") >= 3);
    srv.stop();
}
