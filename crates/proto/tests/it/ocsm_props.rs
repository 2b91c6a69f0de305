//! Property tests for the OCSM codec: any datagram built by the encoders decodes to the same
//! fields, and any byte string either decodes or fails with a code, never a panic.

use directkv_proto::ocsm::{
    decode_message, decode_request, decode_response, encode_header, encode_message, Header, Kind,
    MessageOut, MessageSize, OcsmLimits, Opcode, Status,
};
use proptest::prelude::*;

#[derive(Debug, Clone)]
struct Msg {
    key: [u8; 12],
    value: Vec<u8>,
    sequence: u32,
    length: u8,
    op: u8,
}

fn msg(update: bool) -> impl Strategy<Value = Msg> {
    let ops: Vec<u8> = if update {
        vec![
            Opcode::Insert as u8,
            Opcode::Modify as u8,
            Opcode::Delete as u8,
        ]
    } else {
        vec![Opcode::Search as u8]
    };
    (
        any::<[u8; 12]>(),
        proptest::collection::vec(any::<u8>(), 0..100),
        any::<u32>(),
        0u8..4,
        proptest::sample::select(ops),
    )
        .prop_map(|(key, value, sequence, length, op)| Msg {
            key,
            value,
            sequence,
            length,
            op,
        })
}

proptest! {
    #[test]
    fn encode_then_decode_gives_the_fields(
        big in any::<bool>(),
        update in any::<bool>(),
        seq in 0u32..(1 << 24),
        msgs in proptest::collection::vec(msg(true), 1..8),
        searches in proptest::collection::vec(msg(false), 1..8),
    ) {
        let size = if big { MessageSize::B64 } else { MessageSize::B32 };
        let msgs = if update { msgs } else { searches };
        let header = Header {
            sequence: seq,
            response: false,
            size,
            kind: if update { Kind::Update } else { Kind::Search },
            count: msgs.len() as u16,
        };
        let mut d = Vec::new();
        encode_header(&header, &mut d);
        for m in &msgs {
            encode_message(size, &MessageOut {
                key: m.key, value: &m.value, sequence: m.sequence, length: m.length,
                source: 3, destination: 4, opcode: m.op,
            }, &mut d).unwrap();
        }
        let lim = OcsmLimits { datagram_bytes_max: 65_507 };
        let got = decode_request(&d, &lim).unwrap();
        prop_assert_eq!(got.header, header);
        let mut n = 0;
        for (m, want) in got.messages().zip(&msgs) {
            n += 1;
            prop_assert_eq!(m.key, &want.key);
            prop_assert_eq!(m.sequence, want.sequence);
            prop_assert_eq!(m.opcode, want.op);
            prop_assert_eq!(m.length, size.units_for(want.value.len()).unwrap().max(want.length));
            let mut v = Vec::new();
            m.value_into(&mut v);
            prop_assert_eq!(&v[..want.value.len()], &want.value[..]);
            prop_assert!(v[want.value.len()..].iter().all(|&b| b == 0));
        }
        prop_assert_eq!(n, msgs.len());
    }

    /// The server's reply encoder (which patches a copy of the request's unit when the reply
    /// fits one unit) writes the same bytes as `encode_message` given the reply's fields.
    #[test]
    fn encode_reply_matches_encode_message(
        big in any::<bool>(),
        req in msg(false),
        reply_value in proptest::collection::vec(any::<u8>(), 0..100),
        length in 0u8..4,
        status in proptest::sample::select(vec![
            Status::Ok, Status::NotFound, Status::Exists, Status::Truncated, Status::Failed,
        ]),
    ) {
        let size = if big { MessageSize::B64 } else { MessageSize::B32 };
        let mut wire = Vec::new();
        encode_message(size, &MessageOut {
            key: req.key, value: &req.value, sequence: req.sequence, length: req.length,
            source: 3, destination: 4, opcode: req.op,
        }, &mut wire).unwrap();
        let (m, _) = decode_message(&wire, size).unwrap().unwrap();
        let mut got = vec![0xEE];
        let n = m.encode_reply(size, status, &reply_value, length, &mut got);
        let mut want = vec![0xEE];
        let w = encode_message(size, &MessageOut {
            key: req.key, value: &reply_value, sequence: req.sequence, length,
            source: 4, destination: 3, opcode: status as u8,
        }, &mut want);
        prop_assert_eq!(n, w);
        prop_assert_eq!(got, want);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let lim = OcsmLimits::DEFAULT;
        if let Ok(d) = decode_request(&bytes, &lim) {
            prop_assert_eq!(d.messages().count(), d.header.count as usize);
        }
        let _ = decode_response(&bytes, &lim);
    }
}
