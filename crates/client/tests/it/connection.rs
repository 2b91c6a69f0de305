//! Connection behaviour against real sockets: connect and request time-outs, reconnect after
//! the server went away (read-only work retried, writes reported), authentication.

use crate::common;

use std::io::Read;
use std::net::TcpListener;
use std::time::{Duration, Instant};

use directkv_client::{Client, ClientConfig, ClientError, TimeoutKind};
use directkv_server::{Server, ServerConfig};

#[tokio::test]
async fn connect_times_out_when_the_handshake_is_never_answered() {
    // A real listening socket whose connections are accepted by the kernel and never answered.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let config = ClientConfig {
        connect_timeout: Duration::from_millis(200),
        ..ClientConfig::default()
    };
    let started = Instant::now();
    let e = Client::connect(silent.local_addr().unwrap(), config)
        .await
        .err()
        .expect("no HELLO reply");
    assert!(
        matches!(e, ClientError::Timeout { kind: TimeoutKind::Connect, after } if after == Duration::from_millis(200)),
        "{e}"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(e.is_transient());
    // The client did connect and send its HELLO (kind 0x02), which was never answered.
    let (mut s, _) = silent.accept().unwrap();
    let mut hello = Vec::new();
    s.read_to_end(&mut hello).unwrap();
    assert_eq!(&hello[..3], &[0xD7, 0x01, 0x02], "{hello:02x?}");
}

#[tokio::test]
async fn connect_refused_is_a_connect_error() {
    // Bind then drop: nothing listens on this port any more.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let e = Client::connect(port, ClientConfig::default())
        .await
        .err()
        .expect("refused");
    assert!(
        matches!(e, ClientError::Connect { addr, .. } if addr == port),
        "{e}"
    );
}

#[tokio::test]
async fn request_times_out_and_the_next_call_reconnects() {
    let srv = common::start(1);
    let relay = common::Relay::start(srv.addr());
    let config = ClientConfig {
        request_timeout: Some(Duration::from_millis(300)),
        ..ClientConfig::default()
    };
    let mut c = Client::connect(relay.addr, config).await.unwrap();
    c.put(b"k", b"v").await.unwrap();
    relay.pause();
    let e = c.get(b"k").await.unwrap_err();
    assert!(
        matches!(
            e,
            ClientError::Timeout {
                kind: TimeoutKind::Request,
                ..
            }
        ),
        "{e}"
    );
    assert_eq!(
        c.connected_shards(),
        0,
        "the timed-out connection is dropped"
    );
    relay.resume();
    assert_eq!(c.get(b"k").await.unwrap().unwrap(), b"v");
    assert_eq!(c.connected_shards(), 1);
    srv.stop();
}

#[tokio::test]
async fn a_cancelled_call_does_not_leave_its_reply_for_the_next_one() {
    let srv = common::start(1);
    let relay = common::Relay::start(srv.addr());
    let mut c = Client::connect(relay.addr, ClientConfig::default())
        .await
        .unwrap();
    c.put(b"a", b"1").await.unwrap();
    c.put(b"b", b"2").await.unwrap();
    relay.pause();
    // The caller gives up on its own (the client's time-out is not involved)...
    let cancelled = tokio::time::timeout(Duration::from_millis(100), c.get(b"a")).await;
    assert!(cancelled.is_err());
    // ...and the held request reaches the server now, its reply the old connection.
    relay.resume();
    for _ in 0..20 {
        assert_eq!(c.get(b"b").await.unwrap().unwrap(), b"2");
    }
    srv.stop();
}

/// Two keys on different shards of a 2-shard server.
fn keys_on_both_shards(c: &Client) -> (Vec<u8>, Vec<u8>) {
    let mut on = [None, None];
    for i in 0u32.. {
        let k = format!("key{i}").into_bytes();
        let s = usize::from(c.shard_of(&k));
        on[s].get_or_insert(k);
        if on.iter().all(Option::is_some) {
            break;
        }
    }
    let [a, b] = on;
    (a.unwrap(), b.unwrap())
}

#[tokio::test]
async fn reconnects_after_the_server_restarts() {
    let srv = common::start(2);
    let addr = srv.addr();
    let mut c = Client::connect(addr, ClientConfig::default())
        .await
        .unwrap();
    let (a, b) = keys_on_both_shards(&c);
    c.put(&a, b"1").await.unwrap();
    c.put(&b, b"1").await.unwrap();
    // Stop closes every connection; a new server takes the same port (with empty shards).
    srv.stop();
    let srv = Server::start(ServerConfig {
        port: addr.port(),
        ..common::config(2)
    })
    .expect("restart on the same port");

    // A read on a broken connection is resent once on a new connection: it just works.
    assert_eq!(c.get(&a).await.unwrap(), None);
    assert_eq!(c.connected_shards(), 2);
    // A write on the other shard's broken connection may or may not have been applied, so it
    // fails with a clear error instead of being resent...
    let e = c.put(&b, b"2").await.unwrap_err();
    assert!(
        matches!(e, ClientError::ConnectionLost { shard: 1, .. }),
        "{e}"
    );
    assert!(e.to_string().contains("may or may not"), "{e}");
    assert_eq!(c.connected_shards(), 1);
    // ...and the next call opens a new connection (HELLO and ATTACH again).
    c.put(&b, b"2").await.unwrap();
    assert_eq!(c.get(&b).await.unwrap().unwrap(), b"2");
    assert_eq!(c.connected_shards(), 2);

    // With retries off, a read fails the same way.
    srv.stop();
    let srv = Server::start(ServerConfig {
        port: addr.port(),
        ..common::config(2)
    })
    .unwrap();
    let mut strict = Client::connect(
        addr,
        ClientConfig {
            retry_read_only: false,
            ..ClientConfig::default()
        },
    )
    .await
    .unwrap();
    srv.stop();
    let srv = Server::start(ServerConfig {
        port: addr.port(),
        ..common::config(2)
    })
    .unwrap();
    let e = strict.get(&a).await.unwrap_err();
    assert!(matches!(e, ClientError::ConnectionLost { .. }), "{e}");
    assert_eq!(strict.get(&a).await.unwrap(), None);
    srv.stop();
}

#[tokio::test]
async fn requirepass_needs_the_right_password_on_every_shard() {
    let srv = Server::start(ServerConfig {
        requirepass: Some("s3cret".into()),
        ..common::config(3)
    })
    .unwrap();
    let mut c = Client::connect(srv.addr(), ClientConfig::with_password("s3cret"))
        .await
        .unwrap();
    assert_eq!(c.connected_shards(), 3);
    let mut b = c.batch();
    for i in 0..100u32 {
        b.put(&i.to_le_bytes(), b"v");
    }
    assert!(b.execute().await.unwrap().iter().all(|r| r.is_ok()));
    assert_eq!(c.get(&7u32.to_le_bytes()).await.unwrap().unwrap(), b"v");

    let e = Client::connect(srv.addr(), ClientConfig::with_password("wrong"))
        .await
        .err()
        .expect("wrong password");
    assert!(
        matches!(&e, ClientError::Auth(m) if m == "wrong password"),
        "{e}"
    );
    let e = Client::connect(srv.addr(), ClientConfig::default())
        .await
        .err()
        .expect("no password");
    assert!(matches!(e, ClientError::Auth(_)), "{e}");
    srv.stop();
}
