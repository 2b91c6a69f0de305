//! The OCSM test vectors (`tests/vectors/ocsm.txt`, explained in `docs/protocol.md`): every
//! accepted request and every response decodes and re-encodes byte-for-byte from its decoded
//! fields; every refused request fails with the stated code and gets the stated error datagram.
//!
//! The vectors were written by an independent implementation of the layout (a short script
//! following the document), so this checks the codec against the document, not against itself.

use directkv_proto::ocsm::{
    decode_request, decode_response, encode_error, encode_header, encode_message, Datagram,
    ErrorCode, MessageOut, OcsmLimits, Response,
};

use directkv_testkit::vectors::{records, unhex};

const VECTORS: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/vectors/ocsm.txt"
));

struct Vector {
    name: String,
    request: Vec<u8>,
    response: Vec<u8>,
    expect: String,
}

fn vectors() -> Vec<Vector> {
    records(VECTORS)
        .into_iter()
        .filter(|r| r.get("name").is_some_and(|n| !n.is_empty()))
        .map(|r| Vector {
            name: r.get("name").unwrap_or_default().to_string(),
            request: unhex(r.get("request").unwrap_or_default()),
            response: unhex(r.get("response").unwrap_or_default()),
            expect: r.get("expect").unwrap_or_default().to_string(),
        })
        .collect()
}

/// Re-encodes a decoded datagram from its fields alone.
fn reencode(d: &Datagram<'_>) -> Vec<u8> {
    let mut out = Vec::new();
    encode_header(&d.header, &mut out);
    for m in d.messages() {
        let mut value = Vec::new();
        m.value_into(&mut value);
        encode_message(
            d.header.size,
            &MessageOut {
                key: *m.key,
                value: &value,
                sequence: m.sequence,
                length: m.length,
                source: m.source,
                destination: m.destination,
                opcode: m.opcode,
            },
            &mut out,
        )
        .unwrap();
    }
    out
}

#[test]
fn every_vector_decodes_and_reencodes() {
    let lim = OcsmLimits::DEFAULT;
    let all = vectors();
    assert!(all.len() >= 20, "{} vectors", all.len());
    for v in &all {
        if v.expect == "ok" {
            let d = decode_request(&v.request, &lim).unwrap_or_else(|e| panic!("{}: {e}", v.name));
            assert_eq!(reencode(&d), v.request, "{}: request", v.name);
            let Response::Messages(r) = decode_response(&v.response, &lim).unwrap() else {
                panic!("{}: error response", v.name)
            };
            assert_eq!(r.header.sequence, d.header.sequence, "{}", v.name);
            assert_eq!(r.header.count, d.header.count, "{}", v.name);
            assert_eq!(reencode(&r), v.response, "{}: response", v.name);
            assert!(v.response.len() <= v.request.len(), "{}: amplifies", v.name);
        } else {
            let code: u16 = v.expect.strip_prefix("error ").unwrap().parse().unwrap();
            let code = ErrorCode::from_code(code).unwrap();
            let e = decode_request(&v.request, &lim).unwrap_err();
            assert_eq!(e.code, code, "{}: {e}", v.name);
            let mut out = Vec::new();
            if code != ErrorCode::ShortHeader {
                encode_error(e.sequence, e.code, &mut out);
                match decode_response(&out, &lim).unwrap() {
                    Response::Error { sequence, code: c } => {
                        assert_eq!((sequence, c), (e.sequence, code))
                    }
                    Response::Messages(_) => panic!("{}", v.name),
                }
            }
            assert_eq!(out, v.response, "{}: error datagram", v.name);
        }
    }
}
