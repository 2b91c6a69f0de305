//! The OCSM client against a real in-process server over UDP: the four operations on 96-bit
//! keys, long keys and long values (round trip, shrink, delete of every chunk, collisions), and
//! retransmission through a proxy that loses datagrams.

use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use directkv_client::ocsm::{chunk_id, key_id, OcsmClient, OcsmClientError, Request};
use directkv_proto::ocsm::{MessageSize, Opcode, Status};
use directkv_server::ocsm::OcsmPath;
use directkv_server::{Server, ServerConfig};

fn start(path: OcsmPath) -> Server {
    Server::start(ServerConfig {
        port: 0,
        metrics_port: None,
        ocsm_port: Some(0),
        ocsm_path: path,
        shards: 2,
        memory_bytes: 32 << 20,
        appendonly: false,
        ..ServerConfig::default()
    })
    .expect("server starts")
}

fn client(srv: &Server) -> OcsmClient {
    OcsmClient::connect(srv.ocsm_addr().unwrap()).unwrap()
}

#[test]
fn the_four_operations_on_96_bit_keys() {
    for path in [OcsmPath::Plain, OcsmPath::Batched, OcsmPath::BatchedShard] {
        let srv = start(path);
        let mut c = client(&srv);
        let k = *b"order-000001";
        assert_eq!(c.insert(&k, b"bid 101.25").unwrap(), Status::Ok);
        assert_eq!(c.insert(&k, b"other").unwrap(), Status::Exists);
        assert_eq!(&c.search(&k).unwrap().unwrap()[..10], b"bid 101.25");
        assert_eq!(c.modify(&k, b"ask 99").unwrap(), Status::Ok);
        assert_eq!(&c.search(&k).unwrap().unwrap()[..6], b"ask 99");
        assert_eq!(c.delete(&k).unwrap(), Status::Ok);
        assert_eq!(c.search(&k).unwrap(), None);
        assert_eq!(c.modify(&k, b"x").unwrap(), Status::NotFound);
        assert!(matches!(
            c.insert(&k, &[0u8; 13]),
            Err(OcsmClientError::ValueTooLong { len: 13, max: 12 })
        ));
        // 100 mixed requests: searches and updates go in separate datagrams, order is kept.
        let keys: Vec<[u8; 12]> = (0..50u32).map(|i| key_id(&i.to_le_bytes())).collect();
        let mut reqs = Vec::new();
        for k in &keys {
            reqs.push(Request {
                op: Opcode::Insert,
                key: *k,
                value: &k[..4],
            });
            reqs.push(Request {
                op: Opcode::Search,
                key: *k,
                value: &[],
            });
        }
        let replies = c.pipeline(&reqs).unwrap();
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(replies[2 * i].status, Status::Ok);
            assert_eq!(&replies[2 * i + 1].value[..4], &k[..4]);
        }
        srv.stop();
    }
}

#[test]
fn long_keys_and_long_values_round_trip_and_delete_every_chunk() {
    for size in [MessageSize::B32, MessageSize::B64] {
        let srv = start(OcsmPath::Batched);
        let mut c = client(&srv).with_size(size);
        let key = b"customer/eu-west/4711/profile-picture-thumbnail".as_slice();
        let value: Vec<u8> = (0..5000u32).map(|i| (i * 7 + 3) as u8).collect();
        c.put(key, &value).unwrap();
        assert_eq!(c.get(key).unwrap().as_deref(), Some(&value[..]));
        // Short and empty values under other keys.
        c.put(b"k", b"v").unwrap();
        assert_eq!(c.get(b"k").unwrap().unwrap(), b"v");
        c.put(b"empty", b"").unwrap();
        assert_eq!(c.get(b"empty").unwrap().unwrap(), b"");
        // Shrinking removes the chunks past the new length.
        let id = key_id(key);
        let n_old = value.len().div_ceil(c.value_bytes()) as u32;
        c.put(key, &value[..100]).unwrap();
        assert_eq!(c.get(key).unwrap().unwrap(), &value[..100]);
        let n_new = 100usize.div_ceil(c.value_bytes()) as u32;
        assert!(c.search(&chunk_id(&id, n_new - 1)).unwrap().is_some());
        for i in n_new..n_old {
            assert_eq!(
                c.search(&chunk_id(&id, i)).unwrap(),
                None,
                "stale chunk {i}"
            );
        }
        // Delete removes the header and every chunk.
        assert!(c.remove(key).unwrap());
        assert_eq!(c.get(key).unwrap(), None);
        for i in 0..n_old {
            assert_eq!(c.search(&chunk_id(&id, i)).unwrap(), None, "chunk {i} left");
        }
        assert!(!c.remove(key).unwrap());
        srv.stop();
    }
}

#[test]
fn a_colliding_identifier_is_reported_not_misread() {
    let srv = start(OcsmPath::Plain);
    let mut c = client(&srv);
    c.put(b"the real owner of this identifier", b"secret")
        .unwrap();
    // Pretend "intruder" hashed to the same identifier: its header sits under the owner's id.
    let owner = key_id(b"the real owner of this identifier");
    let header = c.search(&owner).unwrap().unwrap();
    c.insert(&key_id(b"intruder-key-that-is-long"), &header)
        .unwrap();
    assert!(matches!(
        c.get(b"intruder-key-that-is-long"),
        Err(OcsmClientError::KeyCollision)
    ));
    srv.stop();
}

/// Forwards datagrams between one client and the server, dropping every `drop_every`-th
/// datagram in each direction.
struct LossyProxy {
    addr: std::net::SocketAddr,
    stop: Arc<AtomicBool>,
    dropped: Arc<AtomicUsize>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl LossyProxy {
    fn start(server: std::net::SocketAddr, drop_every: usize) -> LossyProxy {
        let front = UdpSocket::bind("127.0.0.1:0").unwrap();
        let back = UdpSocket::bind("127.0.0.1:0").unwrap();
        back.connect(server).unwrap();
        for s in [&front, &back] {
            s.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
        }
        let addr = front.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let dropped = Arc::new(AtomicUsize::new(0));
        let client_addr = Arc::new(std::sync::Mutex::new(None));
        let (f2, b2) = (front.try_clone().unwrap(), back.try_clone().unwrap());
        let mut threads = Vec::new();
        for up in [true, false] {
            let (front, back) = (f2.try_clone().unwrap(), b2.try_clone().unwrap());
            let (stop, dropped, client_addr) = (stop.clone(), dropped.clone(), client_addr.clone());
            threads.push(std::thread::spawn(move || {
                let mut buf = vec![0u8; 65536];
                let mut n_seen = 0usize;
                while !stop.load(Ordering::Relaxed) {
                    let got = if up {
                        front.recv_from(&mut buf).map(|(n, from)| {
                            *client_addr.lock().unwrap() = Some(from);
                            n
                        })
                    } else {
                        back.recv(&mut buf)
                    };
                    let Ok(n) = got else { continue };
                    n_seen += 1;
                    if n_seen % drop_every == 1 {
                        dropped.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    if up {
                        let _ = back.send(&buf[..n]);
                    } else if let Some(to) = *client_addr.lock().unwrap() {
                        let _ = front.send_to(&buf[..n], to);
                    }
                }
            }));
        }
        LossyProxy {
            addr,
            stop,
            dropped,
            threads,
        }
    }

    fn stop(self) -> usize {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            t.join().unwrap();
        }
        self.dropped.load(Ordering::Relaxed)
    }
}

#[test]
fn lost_datagrams_are_retransmitted() {
    let srv = start(OcsmPath::Batched);
    let proxy = LossyProxy::start(srv.ocsm_addr().unwrap(), 3);
    let mut c = OcsmClient::connect(proxy.addr)
        .unwrap()
        .with_timeout(Duration::from_millis(50), 10);
    let value: Vec<u8> = (0..2000u32).map(|i| i as u8).collect();
    c.put(b"a value sent through a lossy link", &value).unwrap();
    assert_eq!(
        c.get(b"a value sent through a lossy link")
            .unwrap()
            .unwrap(),
        value
    );
    assert!(c.remove(b"a value sent through a lossy link").unwrap());
    assert!(proxy.stop() > 0, "the proxy dropped datagrams");
    // With no server at all, a call ends with a timeout error.
    let dead = UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut c = OcsmClient::connect(dead.local_addr().unwrap())
        .unwrap()
        .with_timeout(Duration::from_millis(20), 2);
    assert!(matches!(
        c.search(b"nobody-there"),
        Err(OcsmClientError::Timeout { tries: 2 })
    ));
    srv.stop();
}
