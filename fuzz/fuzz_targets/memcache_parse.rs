//! Fuzz target: the memcached request parser on arbitrary bytes (`directkv_proto::memcache`).
//!
//! ```text
//!   input ──parse_request──► Complete: encode_request, parse again: the same request, all of
//!     │                                the encoding used; every proper prefix of a short
//!     │                                request is Incomplete; the rest parsed the same way
//!     │                      Refused:  consumed within the input; the same refusal with
//!     │                                bytes appended; parsing goes on after the swallow
//!     │                      Close:    only past the line limit; the same with bytes appended
//!     │                      Incomplete: stop
//! ```
//!
//! The limits are small so that inputs of a few hundred bytes reach every limit check.

#![no_main]

use directkv_proto::memcache::{encode_request, parse_request, MemcacheLimits, Parse};
use libfuzzer_sys::fuzz_target;

const LIMITS: MemcacheLimits = MemcacheLimits {
    value_bytes_max: 64,
    line_bytes_max: 128,
    get_line_bytes_max: 256,
    get_keys_max: 8,
};

/// Requests parsed per input at most; every request uses at least one byte anyway.
const REQUESTS_MAX: usize = 256;

/// Prefixes are checked only for requests this short, to keep executions fast.
const PREFIX_CHECK_LEN_MAX: usize = 256;

/// What appending is checked with: a line end and a valid request.
const APPENDED: &[u8] = b"\r\nmn\r\n";

fuzz_target!(|data: &[u8]| {
    let mut encoded = Vec::new();
    let mut longer = Vec::new();
    let mut pos = 0;
    for _ in 0..REQUESTS_MAX {
        if pos >= data.len() {
            break;
        }
        let rest = &data[pos..];
        let verdict = parse_request(rest, &LIMITS);
        if verdict != Parse::Incomplete {
            longer.clear();
            longer.extend_from_slice(rest);
            longer.extend_from_slice(APPENDED);
            assert_eq!(parse_request(&longer, &LIMITS), verdict);
        }
        match verdict {
            Parse::Complete { request, consumed } => {
                assert!(consumed > 0 && consumed <= rest.len());
                encoded.clear();
                encode_request(&request, &mut encoded);
                assert_eq!(
                    parse_request(&encoded, &MemcacheLimits::default()),
                    Parse::Complete {
                        request,
                        consumed: encoded.len()
                    }
                );
                if consumed <= PREFIX_CHECK_LEN_MAX {
                    for len in 0..consumed {
                        assert_eq!(parse_request(&rest[..len], &LIMITS), Parse::Incomplete);
                    }
                }
                pos += consumed;
            }
            Parse::Refused(refusal) => {
                assert!(refusal.consumed > 0 && refusal.consumed <= rest.len());
                pos += refusal.consumed.saturating_add(refusal.swallow);
            }
            Parse::Close => {
                assert!(rest.len() > LIMITS.line_bytes_max);
                break;
            }
            Parse::Incomplete => break,
        }
    }
});
