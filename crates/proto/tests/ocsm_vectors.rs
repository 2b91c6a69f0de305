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

const VECTORS: &str = include_str!("vectors/ocsm.txt");

struct Vector {
    name: String,
    request: Vec<u8>,
    response: Vec<u8>,
    expect: String,
}

fn unhex(s: &str) -> Vec<u8> {
    let d: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    d.chunks(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap(), 16).unwrap())
        .collect()
}

fn vectors() -> Vec<Vector> {
    let mut out = Vec::new();
    for rec in VECTORS.split("\n\n") {
        let mut v = Vector {
            name: String::new(),
            request: Vec::new(),
            response: Vec::new(),
            expect: String::new(),
        };
        for line in rec.lines().filter(|l| !l.starts_with('#')) {
            let Some((k, val)) = line.split_once(':') else {
                continue;
            };
            match k {
                "name" => v.name = val.trim().to_string(),
                "request" => v.request = unhex(val),
                "response" => v.response = unhex(val),
                "expect" => v.expect = val.trim().to_string(),
                _ => {}
            }
        }
        if !v.name.is_empty() {
            out.push(v);
        }
    }
    out
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
