//! Fuzz target: the OCSM datagram decoders on arbitrary bytes (`directkv_proto::ocsm`).
//!
//! ```text
//!   input bytes ──► decode_request, decode_response (the whole input is one datagram)
//!     Ok(datagram)   exactly `count` messages iterate; re-encoding every field gives the
//!                    input back byte-for-byte (the layout has no slack); a request's messages
//!                    all have known opcodes of the header's kind
//!     Err(e)         never a panic; `e.sequence` is the header's when a header was there
//! ```
//!
//! The first input byte picks the datagram limit (default 1472, the 38-byte minimum, or the
//! UDP maximum) so the size checks are hit at their edges. Good seeds are the requests and
//! responses of `crates/proto/tests/vectors/ocsm.txt`.

#![no_main]

use directkv_proto::ocsm::{
    decode_request, decode_response, encode_header, encode_message, Datagram, MessageOut,
    OcsmLimits, Response, DATAGRAM_BYTES_MAX_DEFAULT, DATAGRAM_BYTES_MAX_UDP,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&choice, d)) = data.split_first() else {
        return;
    };
    let limits = OcsmLimits {
        datagram_bytes_max: match choice % 3 {
            0 => DATAGRAM_BYTES_MAX_DEFAULT,
            1 => 38,
            _ => DATAGRAM_BYTES_MAX_UDP,
        },
    };
    match decode_request(d, &limits) {
        Ok(dg) => {
            assert!(!dg.header.response);
            for m in dg.messages() {
                let op = m.op().expect("accepted requests have known opcodes");
                assert_eq!(op.kind(), dg.header.kind, "mixed datagram accepted");
            }
            check_round_trip(&dg, d);
        }
        Err(e) => {
            if d.len() >= 6 {
                assert_eq!(e.sequence, u32::from_le_bytes([d[0], d[1], d[2], 0]));
            }
        }
    }
    if let Ok(Response::Messages(dg)) = decode_response(d, &limits) {
        assert!(dg.header.response);
        assert!(dg.messages().all(|m| m.status().is_some()));
        check_round_trip(&dg, d);
    }
});

fn check_round_trip(dg: &Datagram<'_>, input: &[u8]) {
    assert!(input.len() <= 65_507);
    let mut out = Vec::new();
    encode_header(&dg.header, &mut out);
    let mut n = 0;
    for m in dg.messages() {
        n += 1;
        let mut value = Vec::new();
        m.value_into(&mut value);
        encode_message(
            dg.header.size,
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
        .expect("a decoded message re-encodes");
    }
    assert_eq!(n, dg.header.count as usize);
    assert_eq!(out, input, "re-encoding changed the datagram");
}
