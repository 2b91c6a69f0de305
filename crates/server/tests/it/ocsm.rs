//! OCSM over UDP against a real server, on every path (plain, batched, batched-shard) with one
//! suite: the
//! shared test vectors replayed as a session, full datagrams of every opcode, hostile datagrams
//! (after which the server still answers), and replies never larger than their requests.

use std::net::UdpSocket;
use std::sync::atomic::Ordering;
use std::time::Duration;

use directkv_proto::ocsm::{
    decode_response, encode_header, encode_message, ErrorCode, Header, Kind, MessageOut,
    MessageSize, OcsmLimits, Opcode, Response, Status,
};
use directkv_server::ocsm::OcsmPath;
use directkv_server::{Server, ServerConfig};

use directkv_testkit::vectors::{records, unhex};

const VECTORS: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../proto/tests/vectors/ocsm.txt"
));
const PATHS: [OcsmPath; 3] = [OcsmPath::Plain, OcsmPath::Batched, OcsmPath::BatchedShard];

fn start(path: OcsmPath, shards: usize) -> Server {
    Server::start(ServerConfig {
        port: 0,
        metrics_port: None,
        ocsm_port: Some(0),
        ocsm_path: path,
        shards,
        memory_bytes: 32 << 20,
        appendonly: false,
        ..ServerConfig::default()
    })
    .expect("server starts")
}

fn socket(srv: &Server) -> UdpSocket {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.connect(srv.ocsm_addr().expect("OCSM on")).unwrap();
    s
}

fn exchange(s: &UdpSocket, req: &[u8]) -> Vec<u8> {
    s.send(req).unwrap();
    let mut buf = vec![0u8; 65536];
    let n = s.recv(&mut buf).expect("a reply datagram");
    buf.truncate(n);
    assert!(
        n <= req.len(),
        "reply of {n} bytes to a request of {}",
        req.len()
    );
    buf
}

/// (name, request, response) of every vector, in file order.
fn vectors() -> Vec<(String, Vec<u8>, Vec<u8>)> {
    records(VECTORS)
        .into_iter()
        .filter_map(|r| {
            let (n, q, resp) = (r.get("name")?, r.get("request")?, r.get("response")?);
            Some((n.to_string(), unhex(q), unhex(resp)))
        })
        .collect()
}

/// A request datagram of `msgs` (key, value, opcode) in `size` messages.
fn datagram(
    seq: u32,
    size: MessageSize,
    kind: Kind,
    msgs: &[([u8; 12], &[u8], Opcode)],
) -> Vec<u8> {
    let mut d = Vec::new();
    encode_header(
        &Header {
            sequence: seq,
            response: false,
            size,
            kind,
            count: msgs.len() as u16,
        },
        &mut d,
    );
    for (i, (key, value, op)) in msgs.iter().enumerate() {
        encode_message(
            size,
            &MessageOut {
                key: *key,
                value,
                sequence: i as u32,
                length: 1,
                source: 9,
                destination: 1,
                opcode: *op as u8,
            },
            &mut d,
        )
        .unwrap();
    }
    d
}

fn key(i: u32) -> [u8; 12] {
    let mut k = *b"key-00000000";
    k[4..].copy_from_slice(format!("{i:08}").as_bytes());
    k
}

fn statuses(reply: &[u8]) -> Vec<(Status, Vec<u8>)> {
    match decode_response(reply, &OcsmLimits::DEFAULT).expect("valid reply") {
        Response::Messages(d) => d
            .messages()
            .map(|m| {
                let mut v = Vec::new();
                m.value_into(&mut v);
                (m.status().unwrap(), v)
            })
            .collect(),
        Response::Error { code, .. } => panic!("error reply {code:?}"),
    }
}

#[test]
fn vectors_replay_byte_for_byte_on_both_paths() {
    for path in PATHS {
        let srv = start(path, 2);
        let s = socket(&srv);
        for (name, req, want) in vectors() {
            if want.is_empty() {
                s.send(&req).unwrap();
                continue;
            }
            assert_eq!(exchange(&s, &req), want, "{path:?} vector {name}");
        }
        assert!(srv.ocsm_stats().errors.load(Ordering::Relaxed) >= 10);
        srv.stop();
    }
}

#[test]
fn full_datagrams_of_every_opcode_on_both_paths() {
    for path in PATHS {
        for size in [MessageSize::B32, MessageSize::B64] {
            let srv = start(path, 3);
            let s = socket(&srv);
            let n = OcsmLimits::DEFAULT.messages_per_datagram_max(size) as u32;
            let v = |i: u32| i.to_le_bytes().repeat(3);
            let values: Vec<Vec<u8>> = (0..n).map(v).collect();
            let msgs = |op| -> Vec<([u8; 12], &[u8], Opcode)> {
                (0..n)
                    .map(|i| (key(i), &values[i as usize][..], op))
                    .collect()
            };
            let ins = datagram(1, size, Kind::Update, &msgs(Opcode::Insert));
            assert!(ins.len() <= 1472);
            let r = statuses(&exchange(&s, &ins));
            assert!(r.iter().all(|(st, _)| *st == Status::Ok), "{path:?} {r:?}");
            let search = datagram(2, size, Kind::Search, &msgs(Opcode::Search));
            let r = statuses(&exchange(&s, &search));
            for (i, (st, val)) in r.iter().enumerate() {
                assert_eq!(*st, Status::Ok);
                assert_eq!(&val[..12], &values[i][..], "{path:?} {size:?} message {i}");
            }
            let r = statuses(&exchange(
                &s,
                &datagram(3, size, Kind::Update, &msgs(Opcode::Modify)),
            ));
            assert!(r.iter().all(|(st, _)| *st == Status::Ok));
            let r = statuses(&exchange(
                &s,
                &datagram(4, size, Kind::Update, &msgs(Opcode::Delete)),
            ));
            assert!(r.iter().all(|(st, _)| *st == Status::Ok));
            let r = statuses(&exchange(&s, &search));
            assert!(
                r.iter().all(|(st, _)| *st == Status::NotFound),
                "{path:?} {r:?}"
            );
            srv.stop();
        }
    }
}

fn error_code(reply: &[u8]) -> ErrorCode {
    match decode_response(reply, &OcsmLimits::DEFAULT).unwrap() {
        Response::Error { code, .. } => code,
        Response::Messages(_) => panic!("expected an error reply"),
    }
}

#[test]
fn hostile_datagrams_get_errors_and_the_server_stays_usable() {
    for path in PATHS {
        let srv = start(path, 1);
        let s = socket(&srv);
        let one = datagram(
            5,
            MessageSize::B32,
            Kind::Search,
            &[(key(1), b"", Opcode::Search)],
        );
        // Header claims 45 messages, datagram holds one.
        let mut lie = one.clone();
        lie[4] = 45;
        assert_eq!(error_code(&exchange(&s, &lie)), ErrorCode::Truncated);
        // A count no datagram may hold.
        lie[4] = 0xff;
        lie[5] = 0xff;
        assert_eq!(error_code(&exchange(&s, &lie)), ErrorCode::BadCount);
        // Larger than a 1514-byte frame's payload.
        let mut big = one.clone();
        big.resize(1473, 0);
        assert_eq!(error_code(&exchange(&s, &big)), ErrorCode::TooLarge);
        // Mixed, and nothing of it executed.
        let mixed = datagram(
            6,
            MessageSize::B32,
            Kind::Update,
            &[
                (key(1), b"v", Opcode::Insert),
                (key(1), b"", Opcode::Search),
            ],
        );
        assert_eq!(error_code(&exchange(&s, &mixed)), ErrorCode::Mixed);
        // Garbage headers: too short (no reply), and random type bytes.
        s.send(&[1, 2, 3]).unwrap();
        for t in [0u8, 3, 0x40, 0x83] {
            let mut d = one.clone();
            d[3] = t;
            assert_eq!(
                error_code(&exchange(&s, &d)),
                ErrorCode::BadType,
                "type {t:#x}"
            );
        }
        // Still serving, and the mixed insert did not happen.
        assert_eq!(
            statuses(&exchange(&s, &one))[0].0,
            Status::NotFound,
            "{path:?}"
        );
        srv.stop();
    }
}

#[test]
fn a_burst_of_datagrams_from_many_senders_is_answered() {
    for path in PATHS {
        let srv = start(path, 2);
        let socks: Vec<UdpSocket> = (0..4).map(|_| socket(&srv)).collect();
        let load: Vec<([u8; 12], &[u8], Opcode)> = (0..45)
            .map(|i| (key(i), &b"value-of-key"[..], Opcode::Insert))
            .collect();
        assert!(statuses(&exchange(
            &socks[0],
            &datagram(1, MessageSize::B32, Kind::Update, &load)
        ))
        .iter()
        .all(|r| r.0 == Status::Ok));
        let search: Vec<([u8; 12], &[u8], Opcode)> = (0..45)
            .map(|i| (key(i), &b""[..], Opcode::Search))
            .collect();
        // 8 datagrams per sender in flight at once: the batched path sees bursts.
        for (j, s) in socks.iter().enumerate() {
            for k in 0..8 {
                s.send(&datagram(
                    (j * 8 + k) as u32,
                    MessageSize::B32,
                    Kind::Search,
                    &search,
                ))
                .unwrap();
            }
        }
        let mut seen = Vec::new();
        for s in &socks {
            for _ in 0..8 {
                let mut buf = [0u8; 2048];
                let n = s.recv(&mut buf).expect("every datagram answered");
                let Response::Messages(d) =
                    decode_response(&buf[..n], &OcsmLimits::DEFAULT).unwrap()
                else {
                    panic!("error reply")
                };
                assert!(d
                    .messages()
                    .all(|m| m.status() == Some(Status::Ok) && m.value_head == b"value-of-key"));
                seen.push(d.header.sequence);
            }
        }
        seen.sort();
        assert_eq!(seen, (0..32).collect::<Vec<u32>>(), "{path:?}");
        let st = srv.ocsm_stats();
        assert_eq!(st.datagrams.load(Ordering::Relaxed), 33);
        assert_eq!(st.messages.load(Ordering::Relaxed), 33 * 45);
        if path != OcsmPath::Plain {
            assert!(st.bursts.load(Ordering::Relaxed) <= 33);
        }
        srv.stop();
    }
}

#[test]
fn ocsm_can_be_turned_off_and_defaults_follow_an_ephemeral_port() {
    let off = Server::start(ServerConfig {
        port: 0,
        metrics_port: None,
        ocsm_port: None,
        shards: 1,
        memory_bytes: 8 << 20,
        appendonly: false,
        ..ServerConfig::default()
    })
    .unwrap();
    assert!(off.ocsm_addr().is_none());
    off.stop();
    let cfg = ServerConfig {
        port: 0,
        appendonly: false,
        ..ServerConfig::default()
    };
    assert_eq!(cfg.ocsm_port_effective(), Some(0));
    assert_eq!(ServerConfig::default().ocsm_port_effective(), Some(7071));
    let c = ServerConfig::from_toml("ocsm_path = \"batched\"\nocsm_port = 9999\n").unwrap();
    assert_eq!((c.ocsm_path, c.ocsm_port), (OcsmPath::Batched, Some(9999)));
}

/// Sends `datagrams` (all but the last of one length) as one segmented send (UDP GSO): the
/// kernel cuts it into separate datagrams, or hands it whole to a receiver with UDP_GRO on.
fn send_segmented(s: &UdpSocket, datagrams: &[Vec<u8>]) {
    use std::os::fd::AsRawFd;
    let ok = directkv_sys::socket::set_udp_segment(s.as_raw_fd(), datagrams[0].len());
    assert!(ok, "UDP_SEGMENT: {}", std::io::Error::last_os_error());
    s.send(&datagrams.concat()).expect("a segmented send");
}

#[test]
fn segmented_bursts_are_answered_datagram_by_datagram_no_larger_than_each_request() {
    for path in PATHS {
        let srv = start(path, 2);
        let s = socket(&srv);
        let load: Vec<([u8; 12], &[u8], Opcode)> = (0..45)
            .map(|i| (key(i), &b"value-of-key"[..], Opcode::Insert))
            .collect();
        exchange(&s, &datagram(0, MessageSize::B32, Kind::Update, &load));
        let search: Vec<([u8; 12], &[u8], Opcode)> = (0..45)
            .map(|i| (key(i), &b""[..], Opcode::Search))
            .collect();
        // 20 full datagrams and a shorter last one (10 messages), in one send.
        let mut reqs: Vec<Vec<u8>> = (1..=20)
            .map(|q| datagram(q, MessageSize::B32, Kind::Search, &search))
            .collect();
        reqs.push(datagram(21, MessageSize::B32, Kind::Search, &search[..10]));
        send_segmented(&s, &reqs);
        let mut seen = Vec::new();
        for _ in 0..reqs.len() {
            let mut buf = [0u8; 65536];
            let n = s.recv(&mut buf).expect("every datagram answered");
            let Response::Messages(d) = decode_response(&buf[..n], &OcsmLimits::DEFAULT).unwrap()
            else {
                panic!("error reply")
            };
            let q = d.header.sequence as usize;
            assert!(
                n <= reqs[q - 1].len(),
                "{path:?}: reply {n} B to a {} B request",
                reqs[q - 1].len()
            );
            let want = if q == 21 { 10 } else { 45 };
            assert_eq!(d.messages().count(), want);
            assert!(d
                .messages()
                .all(|m| m.status() == Some(Status::Ok) && m.value_head == b"value-of-key"));
            seen.push(q);
        }
        seen.sort();
        assert_eq!(seen, (1..=21).collect::<Vec<_>>(), "{path:?}");
        let st = srv.ocsm_stats();
        assert_eq!(st.datagrams.load(Ordering::Relaxed), 22, "{path:?}");
        let segmented = st.segmented_sends.load(Ordering::Relaxed);
        if path == OcsmPath::Plain {
            assert_eq!(segmented, 0);
        } else {
            assert!(segmented >= 1, "{path:?}: replies were not sent segmented");
        }
        srv.stop();
    }
}
