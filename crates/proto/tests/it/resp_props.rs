//! Property tests for the RESP codec: encode and parse are inverses, every proper prefix of a
//! command needs more bytes, and no input, however hostile, makes a parser panic or break the
//! contracts of `Parse` (a verdict of `Invalid` or `Complete` never changes when bytes are added).

use directkv_proto::resp::{
    encode_command, parse_command, parse_reply, Args, Parse, Reply, RespLimits, RespWriter, Version,
};
use proptest::prelude::*;

/// Bytes that RESP gives meaning to, for inputs that look like RESP more often than noise does.
const RESP_BYTES: &[u8] = b"*$\r\n0123456789-'\"\\x ab";

/// Small limits, so that random inputs reach them.
const LIMITS: RespLimits = RespLimits {
    args_max: 16,
    bulk_len_max: 256,
    inline_len_max: 128,
};

fn words_of(args: &Args, input: &[u8]) -> Vec<Vec<u8>> {
    args.command(input).iter().map(<[u8]>::to_vec).collect()
}

fn encode(words: &[Vec<u8>]) -> Vec<u8> {
    let refs: Vec<&[u8]> = words.iter().map(Vec::as_slice).collect();
    let mut out = Vec::new();
    encode_command(&refs, &mut out);
    out
}

/// A line that Redis' inline splitting turns back into `words`: each word double-quoted, with
/// the bytes that need it escaped (alternating the escape spellings to cover them all).
fn inline_line(words: &[Vec<u8>]) -> Vec<u8> {
    let mut line = Vec::new();
    for (index, word) in words.iter().enumerate() {
        let separator: &[u8] = match index {
            0 => b"",
            _ if index % 2 == 0 => b" ",
            _ => b" \t ",
        };
        line.extend_from_slice(separator);
        line.push(b'"');
        for &byte in word {
            match byte {
                b'"' => line.extend_from_slice(b"\\\""),
                b'\\' => line.extend_from_slice(b"\\\\"),
                b'\n' => line.extend_from_slice(b"\\n"),
                b'\r' => line.extend_from_slice(b"\\r"),
                b' '..=b'~' => line.push(byte),
                _ => line.extend_from_slice(format!("\\x{byte:02X}").as_bytes()),
            }
        }
        line.push(b'"');
    }
    line.extend_from_slice(b"\r\n");
    line
}

fn bytes(len_max: usize) -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..len_max)
}

fn words() -> impl Strategy<Value = Vec<Vec<u8>>> {
    prop::collection::vec(bytes(40), 0..8)
}

fn complete(consumed: usize) -> Parse {
    Parse::Complete { consumed }
}

/// Mostly RESP-looking bytes: valid commands mutated by a few edits, plus plain noise.
fn hostile_input() -> impl Strategy<Value = Vec<u8>> {
    let mutated = (
        words(),
        prop::collection::vec((any::<usize>(), any::<u8>(), 0..3u8), 0..4),
    )
        .prop_map(|(words, edits)| {
            let mut input = encode(&words);
            for (at, byte, kind) in edits {
                let at = at % (input.len() + 1);
                match kind {
                    0 => input.insert(at, byte),
                    1 if at < input.len() => input[at] = byte,
                    _ if at < input.len() => {
                        input.remove(at);
                    }
                    _ => input.push(byte),
                }
            }
            input
        });
    let inline = words().prop_map(|words| inline_line(&words));
    prop_oneof![
        4 => mutated,
        1 => inline,
        2 => bytes(300),
        2 => prop::collection::vec(prop::sample::select(RESP_BYTES.to_vec()), 0..80),
    ]
}

proptest! {
    #[test]
    fn encode_then_parse_round_trips(words in words(), trailing in bytes(8)) {
        let encoded = encode(&words);
        let mut args = Args::new();
        for len in 0..encoded.len() {
            prop_assert_eq!(parse_command(&encoded[..len], &LIMITS, &mut args), Parse::Incomplete);
        }
        let mut input = encoded.clone();
        input.extend_from_slice(&trailing);
        prop_assert_eq!(parse_command(&input, &LIMITS, &mut args), complete(encoded.len()));
        prop_assert_eq!(words_of(&args, &input), words);
    }

    #[test]
    fn pipelines_parse_in_order(commands in prop::collection::vec(words(), 1..6)) {
        let mut input = Vec::new();
        for words in &commands {
            input.extend_from_slice(&encode(words));
        }
        let mut args = Args::new();
        let mut pos = 0;
        for words in &commands {
            let parse = parse_command(&input[pos..], &LIMITS, &mut args);
            let Parse::Complete { consumed } = parse else {
                return Err(TestCaseError::fail(format!("no command at {pos}")));
            };
            prop_assert_eq!(&words_of(&args, &input[pos..]), words);
            pos += consumed;
        }
        prop_assert_eq!(pos, input.len());
    }

    #[test]
    fn inline_quoting_round_trips(words in prop::collection::vec(bytes(12), 0..6)) {
        let line = inline_line(&words);
        let limits = RespLimits::default();
        let mut args = Args::new();
        // A line starting with '*' would be multibulk; the quoting never starts with it.
        prop_assert_eq!(parse_command(&line, &limits, &mut args), complete(line.len()));
        prop_assert!(args.is_inline());
        prop_assert_eq!(words_of(&args, &line), words);
    }

    #[test]
    fn parse_command_never_panics_and_keeps_its_contracts(
        input in hostile_input(),
        more in bytes(16),
    ) {
        let mut args = Args::new();
        let parse = parse_command(&input, &LIMITS, &mut args);
        let mut longer = input.clone();
        longer.extend_from_slice(&more);
        let mut again = Args::new();
        match parse {
            Parse::Complete { consumed } => {
                prop_assert!(consumed > 0 && consumed <= input.len());
                let words = words_of(&args, &input);
                prop_assert!(words.len() <= LIMITS.args_max);
                // More bytes after a command do not change it.
                prop_assert_eq!(parse_command(&longer, &LIMITS, &mut again), complete(consumed));
                prop_assert_eq!(&words_of(&again, &longer), &words);
                // Its arguments, re-encoded, parse to the same arguments.
                let encoded = encode(&words);
                let reparsed = parse_command(&encoded, &LIMITS, &mut again);
                prop_assert_eq!(reparsed, complete(encoded.len()));
                prop_assert_eq!(&words_of(&again, &encoded), &words);
            }
            Parse::Invalid(error) => {
                prop_assert!(args.is_empty());
                // Nothing appended can rescue invalid input.
                let extended = parse_command(&longer, &LIMITS, &mut again);
                prop_assert_eq!(extended, Parse::Invalid(error));
            }
            Parse::Incomplete => prop_assert!(args.is_empty()),
        }
    }

    #[test]
    fn parse_reply_never_panics(input in hostile_input()) {
        if let Ok(Some((_, consumed))) = parse_reply(&input) {
            prop_assert!(consumed > 0 && consumed <= input.len());
        }
    }

    #[test]
    fn written_scalars_parse_back(
        integer in any::<i64>(),
        double in any::<f64>(),
        text in "[ -~]{0,20}",
        bulk in bytes(40),
    ) {
        for version in [Version::Resp2, Version::Resp3] {
            let mut out = Vec::new();
            let mut writer = RespWriter::new(&mut out, version);
            writer.array_len(4);
            writer.integer(integer);
            writer.double(double);
            writer.simple(&text);
            writer.bulk(&bulk);
            let (reply, consumed) = parse_reply(&out).unwrap().unwrap();
            prop_assert_eq!(consumed, out.len());
            let Reply::Array(Some(items)) = reply else {
                return Err(TestCaseError::fail("not an array"));
            };
            prop_assert_eq!(&items[0], &Reply::Integer(integer));
            let read_double = match (&items[1], version) {
                (Reply::Double(value), Version::Resp3) => *value,
                (Reply::Bulk(Some(text)), Version::Resp2) => {
                    std::str::from_utf8(text).unwrap().parse().unwrap()
                }
                (other, _) => {
                    return Err(TestCaseError::fail(format!("double read as {other:?}")));
                }
            };
            prop_assert!(read_double == double || (read_double.is_nan() && double.is_nan()));
            prop_assert_eq!(&items[2], &Reply::Simple(text.clone()));
            prop_assert_eq!(&items[3], &Reply::Bulk(Some(bulk.clone())));
        }
    }
}
