//! Deadlines and the keyspace through the Rust client against a real server (issue 20 item 5):
//! put with a deadline, expire with its conditions, persist, ttl, exists, type and scan, with
//! Redis's semantics; a scan across shards returns every key once per pass and never an
//! expired one; malformed scans fail alone and the connection goes on.

use crate::common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use directkv_client::{
    cond, deadline_after, status, BlockingClient, Client, ClientConfig, ClientError, OpError,
    Reply, ScanReply, Ttl,
};

/// An hour from now: a deadline no test run reaches.
fn later() -> u64 {
    deadline_after(Duration::from_secs(3600))
}

#[tokio::test]
async fn deadlines_follow_redis_semantics() {
    let srv = common::start(2);
    let mut c = Client::connect(srv.addr(), ClientConfig::default())
        .await
        .unwrap();
    let d = later();

    assert_eq!(c.ttl(b"k").await.unwrap(), Ttl::Missing);
    assert_eq!(c.ttl(b"k").await.unwrap().as_redis_ms(), -2);
    c.put(b"k", b"v").await.unwrap();
    assert_eq!(c.ttl(b"k").await.unwrap(), Ttl::Persistent);
    assert_eq!(c.ttl(b"k").await.unwrap().as_redis_ms(), -1);

    c.put_with_deadline(b"k", b"v1", d).await.unwrap();
    let Ttl::Expires {
        deadline_ms,
        left_ms,
    } = c.ttl(b"k").await.unwrap()
    else {
        panic!("no deadline after put_with_deadline")
    };
    assert_eq!(deadline_ms, d);
    assert!(left_ms > 3_500_000 && left_ms <= 3_600_000, "{left_ms}");
    assert_eq!(c.get(b"k").await.unwrap().as_deref(), Some(&b"v1"[..]));

    // KEEPTTL keeps it; a plain put clears it (Redis SET without KEEPTTL).
    c.put_keep_deadline(b"k", b"v2").await.unwrap();
    assert!(
        matches!(c.ttl(b"k").await.unwrap(), Ttl::Expires { deadline_ms, .. } if deadline_ms == d)
    );
    assert_eq!(c.get(b"k").await.unwrap().as_deref(), Some(&b"v2"[..]));
    c.put(b"k", b"v3").await.unwrap();
    assert_eq!(c.ttl(b"k").await.unwrap(), Ttl::Persistent);

    // NX / XX on put_with_deadline.
    assert!(!c
        .put_with_deadline_if(b"k", b"x", d, cond::NX)
        .await
        .unwrap());
    assert!(!c
        .put_with_deadline_if(b"new", b"x", d, cond::XX)
        .await
        .unwrap());
    assert!(c
        .put_with_deadline_if(b"new", b"x", d, cond::NX)
        .await
        .unwrap());
    assert!(c.exists(b"new").await.unwrap());

    // EXPIRE conditions: NX only without a deadline, XX only with one, GT later, LT earlier.
    assert!(!c.expire(b"k", d, cond::XX).await.unwrap());
    assert!(c.expire(b"k", d, cond::NX).await.unwrap());
    assert!(!c.expire(b"k", d + 1000, cond::NX).await.unwrap());
    assert!(!c.expire(b"k", d - 1000, cond::GT).await.unwrap());
    assert!(c.expire(b"k", d + 1000, cond::GT).await.unwrap());
    assert!(c.expire(b"k", d - 1000, cond::LT | cond::XX).await.unwrap());
    assert!(
        matches!(c.ttl(b"k").await.unwrap(), Ttl::Expires { deadline_ms, .. } if deadline_ms == d - 1000)
    );
    assert!(!c.expire(b"missing", d, cond::ANY).await.unwrap());

    // PERSIST: true once, then false; missing is false.
    assert!(c.persist(b"k").await.unwrap());
    assert!(!c.persist(b"k").await.unwrap());
    assert!(!c.persist(b"missing").await.unwrap());
    assert_eq!(c.ttl(b"k").await.unwrap(), Ttl::Persistent);

    // A deadline already passed deletes the key, for put and for expire.
    c.put_with_deadline(b"gone", b"v", 1).await.unwrap();
    assert!(!c.exists(b"gone").await.unwrap());
    assert!(c.expire(b"new", 1, cond::ANY).await.unwrap());
    assert_eq!(c.get(b"new").await.unwrap(), None);

    // TYPE and EXISTS.
    assert_eq!(c.type_of(b"k").await.unwrap().as_deref(), Some("string"));
    assert_eq!(c.type_of(b"missing").await.unwrap(), None);
    assert!(c.exists(b"k").await.unwrap());
    assert!(!c.exists(b"missing").await.unwrap());

    // A malformed deadline fails its operation only.
    let mut b = c.batch();
    b.push(directkv_client::NativeOp::expire(b"k", &[0; 9]).no_return());
    let bad = directkv_client::NativeOp {
        arg: b"short",
        ..directkv_client::NativeOp::expire(b"k", &[0; 9])
    };
    b.push(bad);
    b.get(b"k");
    let r = b.execute().await.unwrap();
    assert_eq!(
        r.get(1),
        Reply::Error(OpError {
            code: status::ERR_BAD_DEADLINE
        })
    );
    assert_eq!(r.get(2), Reply::Ok(b"v3"));
    srv.stop();
}

#[tokio::test]
async fn a_key_whose_deadline_passes_is_gone_everywhere() {
    let srv = common::start(2);
    let mut c = Client::connect(srv.addr(), ClientConfig::default())
        .await
        .unwrap();
    c.put_with_ttl(b"short", b"v", Duration::from_millis(150))
        .await
        .unwrap();
    c.put(b"stays", b"v").await.unwrap();
    assert!(c.exists(b"short").await.unwrap());
    // Poll, with a deadline, until the key's time is up.
    let until = Instant::now() + Duration::from_secs(10);
    while c.exists(b"short").await.unwrap() {
        assert!(Instant::now() < until, "the key never expired");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(c.get(b"short").await.unwrap(), None);
    assert_eq!(c.ttl(b"short").await.unwrap(), Ttl::Missing);
    assert_eq!(c.type_of(b"short").await.unwrap(), None);
    let mut scan = c.scan(b"", 100);
    let mut keys = Vec::new();
    while let Some(page) = scan.next_page(&mut c).await.unwrap() {
        keys.extend(page);
    }
    assert_eq!(keys, [b"stays".to_vec()]);
    srv.stop();
}

#[tokio::test]
async fn scan_returns_every_key_once_across_shards() {
    let srv = common::start(3);
    let mut c = Client::connect(srv.addr(), ClientConfig::default())
        .await
        .unwrap();
    let mut want = BTreeSet::new();
    let mut b = c.batch();
    for i in 0..2000u32 {
        let key = format!("user:{i:05}");
        if i % 10 == 0 {
            // Keys with a deadline an hour away are returned like the others.
            b.put_with_deadline(key.as_bytes(), b"v", later(), cond::ANY);
        } else {
            b.put(key.as_bytes(), b"v");
        }
        want.insert(key.into_bytes());
    }
    for i in 0..300u32 {
        b.put(format!("other:{i}").as_bytes(), b"v");
    }
    b.execute().await.unwrap();

    // Small pages: many steps, shard after shard.
    let mut scan = c.scan(b"user:", 7);
    let mut got = Vec::new();
    let mut pages = 0;
    let mut shards_seen = BTreeSet::new();
    while let Some(page) = scan.next_page(&mut c).await.unwrap() {
        shards_seen.insert(scan.cursor() >> 48);
        assert!(
            page.len() <= 7 + 64,
            "a page far past its count: {}",
            page.len()
        );
        got.extend(page);
        pages += 1;
        assert!(pages < 1_000_000, "the scan does not end");
    }
    assert!(scan.is_done());
    let n = got.len();
    let set: BTreeSet<Vec<u8>> = got.into_iter().collect();
    assert_eq!(n, set.len(), "a key came twice in one pass");
    assert_eq!(set, want);
    assert!(shards_seen.len() >= 2, "{shards_seen:?}");

    // One big page per shard: the same keys.
    let mut all = BTreeSet::new();
    let mut cursor = 0;
    loop {
        let (next, keys) = c.scan_step(cursor, b"", 4096).await.unwrap();
        all.extend(keys);
        cursor = next;
        if cursor == 0 {
            break;
        }
    }
    assert_eq!(all.len(), 2300);

    // A batch can carry a scan next to other operations: it sees their writes.
    let mut b = c.batch();
    b.put(b"zz:1", b"v");
    let i = b.scan(0, b"zz:", 4096);
    let r = b.execute().await.unwrap();
    let Reply::Ok(data) = r.get(i) else {
        panic!("{:?}", r.get(i))
    };
    let page = ScanReply::parse(data).unwrap();
    let keys: Vec<&[u8]> = page.keys().collect();
    // The first shard may not hold "zz:1"; a full pass would find it.
    assert!(keys.is_empty() || keys == [&b"zz:1"[..]]);
    srv.stop();
}

#[tokio::test]
async fn malformed_scans_fail_alone() {
    let srv = common::start(2);
    let mut c = Client::connect(srv.addr(), ClientConfig::default())
        .await
        .unwrap();
    c.put(b"a", b"1").await.unwrap();
    // A cursor naming shard 4095 of a 2-shard server.
    let bad_cursor = 4095u64 << 52;
    match c.scan_step(bad_cursor, b"", 10).await {
        Err(ClientError::Op(OpError { code })) => assert_eq!(code, status::ERR_BAD_ARGUMENT),
        other => panic!("{other:?}"),
    }
    // An argument that is not 12 bytes, next to a get that works.
    let mut b = c.batch();
    b.push(directkv_client::NativeOp {
        arg: b"short",
        ..directkv_client::NativeOp::scan(b"", &[0; 12])
    });
    b.get(b"a");
    let r = b.execute().await.unwrap();
    assert_eq!(
        r.get(0),
        Reply::Error(OpError {
            code: status::ERR_BAD_ARGUMENT
        })
    );
    assert_eq!(r.get(1), Reply::Ok(b"1"));
    // A huge count is capped, and a count of 0 still makes progress.
    let (_, keys) = c.scan_step(0, b"", u32::MAX).await.unwrap();
    assert!(keys.len() <= 1);
    let (next, _) = c.scan_step(0, b"", 0).await.unwrap();
    assert_ne!(next, 0, "a step of count 0 moved on");
    srv.stop();
}

#[test]
fn the_blocking_client_scans_as_an_iterator() {
    let srv = common::start(2);
    let mut c = BlockingClient::connect(&srv.addr().to_string(), ClientConfig::default()).unwrap();
    for i in 0..500u32 {
        c.put(format!("k{i}").as_bytes(), b"v").unwrap();
    }
    c.put_with_deadline(b"k0", b"v", later()).unwrap();
    let keys: BTreeSet<Vec<u8>> = c.scan(b"k", 50).map(|k| k.unwrap()).collect();
    assert_eq!(keys.len(), 500);
    assert!(matches!(c.ttl(b"k0").unwrap(), Ttl::Expires { .. }));
    assert!(c.persist(b"k0").unwrap());
    assert_eq!(c.type_of(b"k1").unwrap().as_deref(), Some("string"));
    srv.stop();
}
