//! The blocking client: the same operations and batches without an async runtime.

use crate::common;

use std::time::Duration;

use directkv_client::{
    func, BlockingClient, ClientConfig, ClientError, ElemCode, Reply, TimeoutKind,
};

#[test]
fn blocking_operations_and_batches() {
    let srv = common::start(2);
    let addr = srv.addr().to_string();
    let mut c = BlockingClient::connect(&addr, ClientConfig::default()).unwrap();
    assert_eq!(c.shard_map().shard_count(), 2);
    c.put(b"a", b"1").unwrap();
    assert_eq!(c.get(b"a").unwrap().unwrap(), b"1");
    assert!(c.put_nx(b"b", b"2").unwrap());
    assert!(!c.put_xx(b"c", b"3").unwrap());
    assert!(c.delete(b"b").unwrap());
    assert_eq!(c.add_u64(b"n", 2).unwrap(), 0);
    c.add_u64_no_return(b"n", 3).unwrap();
    assert_eq!(c.get(b"n").unwrap().unwrap(), 5u64.to_le_bytes());
    let cas = c.cas(b"a", b"1", b"9").unwrap();
    assert!(cas.swapped);
    c.put(b"v", &[1, 0, 2, 0]).unwrap();
    assert_eq!(
        c.reduce(b"v", func::SUM, ElemCode::U16, &[0, 0]).unwrap(),
        Some(vec![3, 0])
    );
    assert_eq!(
        c.filter(b"v", func::EQ, ElemCode::U16, &[2, 0]).unwrap(),
        Some(vec![2, 0])
    );

    let mut b = c.batch();
    let get = b.get(b"a");
    let add = b.add_u64(b"n", 1);
    let missing = b.get(b"missing");
    let replies = b.execute().unwrap();
    assert_eq!(replies.get(get), Reply::Ok(b"9"));
    assert_eq!(replies.get(add), Reply::Ok(&5u64.to_le_bytes()));
    assert_eq!(replies.get(missing), Reply::NotFound);
    srv.stop();
}

#[test]
fn blocking_connect_times_out() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let config = ClientConfig {
        connect_timeout: Duration::from_millis(100),
        ..ClientConfig::default()
    };
    let addr = silent.local_addr().unwrap().to_string();
    let e = BlockingClient::connect(&addr, config).err().unwrap();
    assert!(
        matches!(
            e,
            ClientError::Timeout {
                kind: TimeoutKind::Connect,
                ..
            }
        ),
        "{e}"
    );
}
