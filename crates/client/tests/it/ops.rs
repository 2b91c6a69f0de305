//! Every operation of SPEC section 1 through the async client against a real server, with
//! the single-operation methods and the typed per-operation results of batches.

use crate::common;

use directkv_client::{func, status, Client, ClientConfig, ClientError, ElemCode, OpError, Reply};

fn assert_send<T: Send>(_: &T) {}

fn u32s(v: &[u32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn u16s(v: &[u16]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn f64s(v: &[f64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

#[tokio::test]
async fn key_value_operations() {
    let srv = common::start(2);
    let mut c = Client::connect(srv.addr(), ClientConfig::default())
        .await
        .unwrap();
    assert_eq!(c.shard_map().shard_count(), 2);
    assert!(c.server_name().starts_with("directkv"));
    assert_eq!(c.limits().key_len_max, 250);

    // Client calls can run on a multi-threaded runtime: the futures are Send.
    let fut = c.get(b"user:1");
    assert_send(&fut);
    assert_eq!(fut.await.unwrap(), None);
    let mut b = c.batch();
    b.get(b"user:1");
    let fut = b.execute();
    assert_send(&fut);
    assert_eq!(fut.await.unwrap().get(0), Reply::NotFound);
    assert!(!c.exists(b"user:1").await.unwrap());
    c.put(b"user:1", b"alice").await.unwrap();
    assert_eq!(
        c.get(b"user:1").await.unwrap().as_deref(),
        Some(&b"alice"[..])
    );
    assert!(c.exists(b"user:1").await.unwrap());

    assert!(
        !c.put_nx(b"user:1", b"bob").await.unwrap(),
        "NX on an existing key"
    );
    assert!(c.put_nx(b"user:2", b"bob").await.unwrap());
    assert!(
        !c.put_xx(b"user:3", b"carol").await.unwrap(),
        "XX on a missing key"
    );
    assert!(c.put_xx(b"user:2", b"bobby").await.unwrap());
    assert_eq!(c.get(b"user:2").await.unwrap().unwrap(), b"bobby");

    assert!(c.delete(b"user:2").await.unwrap());
    assert!(!c.delete(b"user:2").await.unwrap());
    assert_eq!(c.get(b"user:2").await.unwrap(), None);

    // An empty value is a value, not a missing key.
    c.put(b"empty", b"").await.unwrap();
    assert_eq!(c.get(b"empty").await.unwrap(), Some(Vec::new()));
    srv.stop();
}

#[tokio::test]
async fn cas_match_mismatch_and_no_return() {
    let srv = common::start(2);
    let mut c = Client::connect(srv.addr(), ClientConfig::default())
        .await
        .unwrap();
    let zero = 0u64.to_le_bytes();
    let seven = 7u64.to_le_bytes();
    let nine = 9u64.to_le_bytes();
    c.put(b"lock", &zero).await.unwrap();
    let ok = c.cas(b"lock", &zero, &seven).await.unwrap();
    assert!(ok.swapped);
    assert_eq!(ok.previous, zero);
    let miss = c.cas(b"lock", &zero, &nine).await.unwrap();
    assert!(!miss.swapped);
    assert_eq!(miss.previous, seven, "a mismatch reports the current value");
    assert_eq!(c.get(b"lock").await.unwrap().unwrap(), seven);

    assert!(!c.cas_no_return(b"lock", &zero, &nine).await.unwrap());
    assert!(c.cas_no_return(b"lock", &seven, &nine).await.unwrap());
    assert_eq!(c.get(b"lock").await.unwrap().unwrap(), nine);
    // A missing key matches an empty expected value: cas can create a key.
    let created = c.cas(b"fresh", b"", b"v").await.unwrap();
    assert!(created.swapped);
    assert_eq!(c.get(b"fresh").await.unwrap().unwrap(), b"v");
    srv.stop();
}

#[tokio::test]
async fn scalar_updates_return_the_original_value() {
    let srv = common::start(2);
    let mut c = Client::connect(srv.addr(), ClientConfig::default())
        .await
        .unwrap();
    // A missing key starts at zero of the delta's width.
    assert_eq!(c.add_u64(b"ctr", 5).await.unwrap(), 0);
    assert_eq!(c.add_u64(b"ctr", 1).await.unwrap(), 5);
    c.add_u64_no_return(b"ctr", 10).await.unwrap();
    assert_eq!(c.get(b"ctr").await.unwrap().unwrap(), 16u64.to_le_bytes());

    let d = 3u64.to_le_bytes();
    let before = c
        .update_s2s(b"ctr", func::MUL, ElemCode::U64, &d)
        .await
        .unwrap();
    assert_eq!(before, 16u64.to_le_bytes());
    c.update_s2s_no_return(b"ctr", func::SUB, ElemCode::U64, &8u64.to_le_bytes())
        .await
        .unwrap();
    assert_eq!(c.get(b"ctr").await.unwrap().unwrap(), 40u64.to_le_bytes());

    // Signed and floating-point element types.
    c.update_s2s(b"neg", func::SUB, ElemCode::I32, &5i32.to_le_bytes())
        .await
        .unwrap();
    assert_eq!(c.get(b"neg").await.unwrap().unwrap(), (-5i32).to_le_bytes());
    c.update_s2s(b"f", func::ADD, ElemCode::F64, &1.5f64.to_le_bytes())
        .await
        .unwrap();
    c.update_s2s(b"f", func::MAX, ElemCode::F64, &0.5f64.to_le_bytes())
        .await
        .unwrap();
    assert_eq!(c.get(b"f").await.unwrap().unwrap(), 1.5f64.to_le_bytes());
    // Saturating arithmetic stops at the bounds; swap sets.
    c.put(b"u8", &[250]).await.unwrap();
    c.update_s2s(b"u8", func::SAT_ADD, ElemCode::U8, &[10])
        .await
        .unwrap();
    assert_eq!(c.get(b"u8").await.unwrap().unwrap(), [255]);
    let old = c
        .update_s2s(b"u8", func::SWAP, ElemCode::U8, &[7])
        .await
        .unwrap();
    assert_eq!(
        (old, c.get(b"u8").await.unwrap().unwrap()),
        (vec![255], vec![7])
    );
    srv.stop();
}

#[tokio::test]
async fn vector_operations_on_several_element_types() {
    let srv = common::start(2);
    let mut c = Client::connect(srv.addr(), ClientConfig::default())
        .await
        .unwrap();
    c.put(b"vec", &u32s(&[1, 2, 3, 4])).await.unwrap();
    let orig = c
        .update_s2v(b"vec", func::ADD, ElemCode::U32, &5u32.to_le_bytes())
        .await
        .unwrap();
    assert_eq!(orig, Some(u32s(&[1, 2, 3, 4])));
    assert_eq!(c.get(b"vec").await.unwrap().unwrap(), u32s(&[6, 7, 8, 9]));
    assert!(c
        .update_s2v_no_return(b"vec", func::SUB, ElemCode::U32, &5u32.to_le_bytes())
        .await
        .unwrap());
    assert_eq!(c.get(b"vec").await.unwrap().unwrap(), u32s(&[1, 2, 3, 4]));
    assert!(!c
        .update_s2v_no_return(b"novec", func::ADD, ElemCode::U32, &1u32.to_le_bytes())
        .await
        .unwrap());
    assert_eq!(
        c.update_s2v(b"novec", func::ADD, ElemCode::U32, &1u32.to_le_bytes())
            .await
            .unwrap(),
        None
    );

    c.put(b"vec16", &u16s(&[1, 2, 3])).await.unwrap();
    let orig = c
        .update_v2v(b"vec16", func::ADD, ElemCode::U16, &u16s(&[10, 20, 30]))
        .await
        .unwrap();
    assert_eq!(orig, Some(u16s(&[1, 2, 3])));
    assert!(c
        .update_v2v_no_return(b"vec16", func::MUL, ElemCode::U16, &u16s(&[2, 2, 2]))
        .await
        .unwrap());
    assert_eq!(c.get(b"vec16").await.unwrap().unwrap(), u16s(&[22, 44, 66]));

    let sum = c
        .reduce(b"vec", func::SUM, ElemCode::U32, &0u32.to_le_bytes())
        .await
        .unwrap();
    assert_eq!(sum, Some(10u32.to_le_bytes().to_vec()));
    let max = c
        .reduce(b"vec16", func::RMAX, ElemCode::U16, &0u16.to_le_bytes())
        .await
        .unwrap();
    assert_eq!(max, Some(66u16.to_le_bytes().to_vec()));
    // count's sigma and result are u64 whatever the element type.
    let count = c
        .reduce(b"vec16", func::COUNT, ElemCode::U16, &0u64.to_le_bytes())
        .await
        .unwrap();
    assert_eq!(count, Some(3u64.to_le_bytes().to_vec()));

    let gt2 = c
        .filter(b"vec", func::GT, ElemCode::U32, &2u32.to_le_bytes())
        .await
        .unwrap();
    assert_eq!(gt2, Some(u32s(&[3, 4])));
    c.put(b"fv", &f64s(&[0.0, -1.5, 2.0, 0.0])).await.unwrap();
    let nz = c
        .filter(b"fv", func::NONZERO, ElemCode::F64, &[])
        .await
        .unwrap();
    assert_eq!(nz, Some(f64s(&[-1.5, 2.0])));
    let le = c
        .filter(b"fv", func::LE, ElemCode::F64, &0.0f64.to_le_bytes())
        .await
        .unwrap();
    assert_eq!(le, Some(f64s(&[0.0, -1.5, 0.0])));
    assert_eq!(
        c.reduce(b"missing", func::SUM, ElemCode::U32, &0u32.to_le_bytes())
            .await
            .unwrap(),
        None
    );
    srv.stop();
}

#[tokio::test]
async fn operation_errors_are_typed_and_fail_only_their_operation() {
    let srv = common::start(2);
    let mut c = Client::connect(srv.addr(), ClientConfig::default())
        .await
        .unwrap();
    c.put(b"vec", &u32s(&[1, 2, 3])).await.unwrap();
    // Single-operation methods: ClientError::Op with the engine's code.
    let e = c
        .update_s2s(b"ctr", 999, ElemCode::U64, &1u64.to_le_bytes())
        .await
        .unwrap_err();
    assert!(
        matches!(
            e,
            ClientError::Op(OpError {
                code: status::ERR_UNKNOWN_FUNCTION
            })
        ),
        "{e}"
    );
    assert!(e.to_string().contains("unknown function id"), "{e}");
    // Five bytes are not a whole number of u32 elements.
    c.put(b"odd", &[1, 2, 3, 4, 5]).await.unwrap();
    let e = c
        .reduce(b"odd", func::SUM, ElemCode::U32, &0u32.to_le_bytes())
        .await
        .unwrap_err();
    assert!(
        matches!(
            e,
            ClientError::Op(OpError {
                code: status::ERR_WRONG_WIDTH
            })
        ),
        "{e}"
    );

    // In a batch, each failed operation has its own error and the others run.
    c.put(b"d", &10u32.to_le_bytes()).await.unwrap();
    let mut b = c.batch();
    let div = b.update_s2s(b"d", func::DIV, ElemCode::U32, &0u32.to_le_bytes());
    let kind = b.reduce(b"vec", func::ADD, ElemCode::U32, &0u32.to_le_bytes());
    let bad_len = b.update_v2v(b"vec", func::ADD, ElemCode::U32, &u32s(&[1, 1]));
    let sigma = 0u32.to_le_bytes();
    let bad_elem = b.push(directkv_client::NativeOp {
        elem: 42,
        ..directkv_client::NativeOp::reduce(b"vec", func::SUM, ElemCode::U32, &sigma)
    });
    let fine = b.get(b"vec");
    let r = b.execute().await.unwrap();
    let code = |i| match r.get(i) {
        Reply::Error(e) => e.code,
        other => panic!("op {i}: {other:?}"),
    };
    assert_eq!(code(div), status::ERR_DIVISION_BY_ZERO);
    assert_eq!(code(kind), status::ERR_WRONG_FUNCTION_KIND);
    assert_eq!(code(bad_len), status::ERR_LENGTH_MISMATCH);
    assert_eq!(code(bad_elem), status::ERR_UNKNOWN_ELEM_TYPE);
    assert_eq!(r.get(fine), Reply::Ok(&u32s(&[1, 2, 3])));
    srv.stop();
}

#[tokio::test]
async fn limits_are_checked_before_sending() {
    let srv = common::start(1);
    let config = ClientConfig {
        batch_ops_max: 10,
        ..ClientConfig::default()
    };
    let mut c = Client::connect(srv.addr(), config).await.unwrap();
    let long_key = [b'k'; 251];
    let e = c.get(&long_key).await.unwrap_err();
    assert!(
        matches!(e, ClientError::KeyTooLong { len: 251, max: 250 }),
        "{e}"
    );
    let big = vec![0u8; (1 << 20) + 1];
    let e = c.put(b"k", &big).await.unwrap_err();
    assert!(
        matches!(e, ClientError::ValueTooLarge { len, max } if len == big.len() && max == 1 << 20),
        "{e}"
    );
    let mut b = c.batch();
    for i in 0..11u8 {
        b.put(&[i], b"v");
    }
    let e = b.execute().await.unwrap_err();
    assert!(
        matches!(e, ClientError::BatchTooLarge { ops: 11, max: 10 }),
        "{e}"
    );
    // Nothing was sent, and the connection is still good.
    assert_eq!(c.get(&[0]).await.unwrap(), None);
    assert_eq!(c.connected_shards(), 1);
    // A full-size value is fine.
    let max = vec![7u8; 1 << 20];
    c.put(b"big", &max).await.unwrap();
    assert_eq!(c.get(b"big").await.unwrap().unwrap(), max);
    srv.stop();
}

#[tokio::test]
async fn redis_style_string_operations() {
    let srv = common::start(2);
    let mut c = Client::connect(srv.addr(), ClientConfig::default())
        .await
        .unwrap();
    assert_eq!(
        c.append(b"s", b"xy").await.unwrap(),
        2,
        "a missing key starts empty"
    );
    assert_eq!(c.append(b"s", b"abc").await.unwrap(), 5);
    assert_eq!(c.get(b"s").await.unwrap().unwrap(), b"xyabc");

    assert_eq!(c.incr_by(b"n", 41).await.unwrap(), 41);
    assert_eq!(c.incr_by(b"n", -50).await.unwrap(), -9);
    assert_eq!(
        c.get(b"n").await.unwrap().unwrap(),
        b"-9",
        "stored as Redis does: text"
    );
    assert_eq!(c.incr_by_float(b"f", 1.25).await.unwrap(), 1.25);
    assert_eq!(c.incr_by_float(b"f", 0.5).await.unwrap(), 1.75);

    let e = c.incr_by(b"s", 1).await.unwrap_err();
    assert!(
        matches!(
            e,
            ClientError::Op(OpError {
                code: status::ERR_NOT_AN_INTEGER
            })
        ),
        "{e}"
    );
    c.put(b"max", i64::MAX.to_string().as_bytes())
        .await
        .unwrap();
    let e = c.incr_by(b"max", 1).await.unwrap_err();
    assert!(
        matches!(
            e,
            ClientError::Op(OpError {
                code: status::ERR_OVERFLOW
            })
        ),
        "{e}"
    );
    let e = c.incr_by_float(b"s", 1.0).await.unwrap_err();
    assert!(
        matches!(
            e,
            ClientError::Op(OpError {
                code: status::ERR_NOT_A_FLOAT
            })
        ),
        "{e}"
    );

    // In a batch, with the other operations, on several shards.
    let mut b = c.batch();
    let a = b.append(b"s", b"!");
    let i = b.incr_by(b"n", 10);
    let f = b.incr_by_float(b"f", -0.75);
    let nr = b.push(directkv_client::NativeOp::incr_by(b"n", &1i64.to_le_bytes()).no_return());
    let g = b.get(b"n");
    let r = b.execute().await.unwrap();
    assert_eq!(r.get(a), Reply::Ok(&6u64.to_le_bytes()));
    assert_eq!(r.get(i), Reply::Ok(b"1"));
    assert_eq!(r.get(f), Reply::Ok(b"1"));
    assert_eq!(r.get(nr), Reply::Ok(b""));
    assert_eq!(r.get(g), Reply::Ok(b"2"));
    srv.stop();
}
