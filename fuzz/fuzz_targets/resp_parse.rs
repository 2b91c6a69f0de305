//! Fuzz target: the RESP request parser (and the reply parser) on arbitrary bytes.
//!
//! ```text
//!   input ──parse_command──► Complete: re-encode the args as multibulk, parse again, same args;
//!     │                                every proper prefix of the command is Incomplete;
//!     │                                the rest of the input is parsed the same way (pipelining)
//!     │                      Invalid:  the same error with bytes appended
//!     │                      Incomplete: stop
//!     └──parse_reply──► must not panic; a whole reply consumed within the input
//! ```
//!
//! The limits are small so that inputs of a few hundred bytes reach every limit check.

#![no_main]

use directkv_proto::resp::{encode_command, parse_command, parse_reply, Args, Parse, RespLimits};
use libfuzzer_sys::fuzz_target;

const LIMITS: RespLimits = RespLimits {
    args_max: 64,
    bulk_len_max: 1024,
    inline_len_max: 512,
};

/// Commands parsed per input at most; every command uses at least one byte anyway.
const COMMANDS_MAX: usize = 256;

/// Prefixes are checked only for commands this short, to keep executions fast.
const PREFIX_CHECK_LEN_MAX: usize = 256;

fuzz_target!(|data: &[u8]| {
    let mut args = Args::new();
    let mut again = Args::new();
    let mut encoded = Vec::new();
    let mut pos = 0;
    for _ in 0..COMMANDS_MAX {
        let rest = &data[pos..];
        match parse_command(rest, &LIMITS, &mut args) {
            Parse::Complete { consumed } => {
                assert!(consumed > 0 && consumed <= rest.len());
                let words: Vec<&[u8]> = args.command(rest).iter().collect();
                assert!(words.len() <= LIMITS.args_max);

                encoded.clear();
                encode_command(&words, &mut encoded);
                let reparsed = parse_command(&encoded, &LIMITS, &mut again);
                assert_eq!(
                    reparsed,
                    Parse::Complete {
                        consumed: encoded.len()
                    }
                );
                assert!(again.command(&encoded).iter().eq(words.iter().copied()));

                if consumed <= PREFIX_CHECK_LEN_MAX {
                    for len in 0..consumed {
                        assert_eq!(
                            parse_command(&rest[..len], &LIMITS, &mut again),
                            Parse::Incomplete
                        );
                    }
                }
                pos += consumed;
            }
            Parse::Invalid(error) => {
                assert!(args.is_empty());
                // Nothing appended rescues it or changes the error: neither a line end and a
                // valid command, nor a run of bytes longer than any inline line.
                let mut longer = rest.to_vec();
                longer.extend_from_slice(b"\r\n*1\r\n$1\r\nx\r\n");
                assert_eq!(
                    parse_command(&longer, &LIMITS, &mut again),
                    Parse::Invalid(error)
                );
                longer.truncate(rest.len());
                longer.resize(rest.len() + LIMITS.inline_len_max + 2, b'x');
                assert_eq!(
                    parse_command(&longer, &LIMITS, &mut again),
                    Parse::Invalid(error)
                );
                break;
            }
            Parse::Incomplete => break,
        }
    }

    if let Ok(Some((_, consumed))) = parse_reply(data) {
        assert!(consumed > 0 && consumed <= data.len());
    }
});
