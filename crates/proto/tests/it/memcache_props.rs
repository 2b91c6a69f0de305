//! Properties of the memcached codec on generated input:
//! - valid requests, written canonically, parse back whole and `encode_request` writes the
//!   same bytes (so encode -> parse round trips), every proper prefix being Incomplete;
//! - arbitrary bytes never panic, never allocate (a counting allocator watches every parse),
//!   and get a verdict that more bytes cannot change.

use directkv_testkit::alloc::count;
use proptest::prelude::*;

use directkv_proto::memcache::{
    encode_request, parse_request, MemcacheLimits, Parse, KEY_BYTES_MAX,
};

/// Small limits, so that short random inputs reach every limit check.
const LIMITS: MemcacheLimits = MemcacheLimits {
    value_bytes_max: 64,
    line_bytes_max: 96,
    get_line_bytes_max: 160,
    get_keys_max: 6,
};

fn key() -> impl Strategy<Value = String> {
    prop_oneof!["[a-z0-9_:!.-]{1,12}", Just("k".repeat(KEY_BYTES_MAX)),]
}

fn short_key() -> impl Strategy<Value = String> {
    "[a-z0-9_:!.-]{1,12}"
}

fn noreply() -> impl Strategy<Value = &'static str> {
    prop_oneof![Just(""), Just(" noreply")]
}

fn value() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..40)
}

/// Meta flag words with distinct letters, numbers in range, modes valid for `command`.
fn meta_flags(command: &'static str) -> impl Strategy<Value = String> {
    let mode = match command {
        "ms" => prop_oneof![Just("ME"), Just("MA"), Just("MP"), Just("MR"), Just("MS")].boxed(),
        "ma" => prop_oneof![Just("MI"), Just("M+"), Just("MD"), Just("M-")].boxed(),
        _ => Just("").boxed(),
    };
    (
        prop::sample::subsequence(
            vec![
                "c", "f", "h", "k", "l", "q", "s", "t", "u", "v", "I", "P", "L",
            ],
            0..5,
        ),
        any::<i32>(),
        any::<u32>(),
        any::<u64>(),
        "[0-9a-z]{0,31}",
        mode,
        0..6u8,
    )
        .prop_map(move |(letters, ttl, flags, cas, opaque, mode, pick)| {
            let mut words: Vec<String> = letters.iter().map(|l| l.to_string()).collect();
            match pick {
                0 => words.push(format!("T{ttl}")),
                1 => words.push(format!("N{ttl} J{cas}")),
                2 => words.push(format!("F{flags} C{cas}")),
                3 => words.push(format!("O{opaque} D{cas}")),
                4 => words.push(format!("E{cas} R{ttl}")),
                _ => {}
            }
            if command == "ms" || command == "ma" {
                words.push(mode.to_string());
            }
            words.join(" ")
        })
}

/// A valid request in canonical form: single spaces, `\r\n`, numbers without sign or zeros.
fn request() -> impl Strategy<Value = Vec<u8>> {
    let store = (
        prop::sample::select(vec!["set", "add", "replace", "append", "prepend", "cas"]),
        key(),
        any::<u32>(),
        any::<i32>(),
        value(),
        any::<u64>(),
        noreply(),
    )
        .prop_map(|(command, key, flags, exptime, value, unique, noreply)| {
            let cas = if command == "cas" {
                format!(" {unique}")
            } else {
                String::new()
            };
            let mut text = format!(
                "{command} {key} {flags} {exptime} {}{cas}{noreply}\r\n",
                value.len()
            )
            .into_bytes();
            text.extend_from_slice(&value);
            text.extend_from_slice(b"\r\n");
            text
        });
    let text = prop_oneof![
        (
            prop::sample::select(vec!["get", "gets"]),
            prop::collection::vec(short_key(), 1..6)
        )
            .prop_map(|(c, keys)| format!("{c} {}\r\n", keys.join(" "))),
        (
            prop::sample::select(vec!["gat", "gats"]),
            any::<i32>(),
            prop::collection::vec(short_key(), 0..6)
        )
            .prop_map(|(c, t, keys)| {
                let keys: String = keys.iter().map(|k| format!(" {k}")).collect();
                format!("{c} {t}{keys}\r\n")
            }),
        (
            prop::sample::select(vec!["incr", "decr"]),
            key(),
            any::<u64>(),
            noreply()
        )
            .prop_map(|(c, k, d, n)| format!("{c} {k} {d}{n}\r\n")),
        (key(), noreply()).prop_map(|(k, n)| format!("delete {k}{n}\r\n")),
        (key(), any::<i32>(), noreply()).prop_map(|(k, t, n)| format!("touch {k} {t}{n}\r\n")),
        (prop::option::of(any::<i32>()), noreply()).prop_map(|(d, n)| match d {
            Some(d) => format!("flush_all {d}{n}\r\n"),
            None => format!("flush_all{n}\r\n"),
        }),
        (any::<u32>(), noreply()).prop_map(|(l, n)| format!("verbosity {l}{n}\r\n")),
        Just("version\r\n".to_string()),
        Just("quit\r\n".to_string()),
        Just("mn\r\n".to_string()),
        prop::sample::select(vec![
            "stats\r\n",
            "stats settings\r\n",
            "stats detail dump\r\n"
        ])
        .prop_map(str::to_string),
        (key(), meta_flags("mg"))
            .prop_map(|(k, f)| format!("mg {k} {f}").trim_end().to_string() + "\r\n"),
        (key(), meta_flags("md"))
            .prop_map(|(k, f)| format!("md {k} {f}").trim_end().to_string() + "\r\n"),
        (key(), meta_flags("ma"))
            .prop_map(|(k, f)| format!("ma {k} {f}").trim_end().to_string() + "\r\n"),
        key().prop_map(|k| format!("me {k}\r\n")),
    ]
    .prop_map(String::into_bytes);
    let meta_set = (key(), meta_flags("ms"), value()).prop_map(|(k, f, v)| {
        let mut text = format!("ms {k} {} {f}", v.len())
            .trim_end()
            .to_string()
            .into_bytes();
        text.extend_from_slice(b"\r\n");
        text.extend_from_slice(&v);
        text.extend_from_slice(b"\r\n");
        text
    });
    prop_oneof![text, store, meta_set]
}

fn default_limits() -> MemcacheLimits {
    MemcacheLimits::default()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn valid_requests_parse_whole_and_encode_to_the_same_bytes(
        text in request(),
        trailing in prop::collection::vec(any::<u8>(), 0..16),
    ) {
        let limits = default_limits();
        for len in 0..text.len() {
            prop_assert_eq!(parse_request(&text[..len], &limits), Parse::Incomplete);
        }
        let mut input = text.clone();
        input.extend_from_slice(&trailing);
        let Parse::Complete { request, consumed } = parse_request(&input, &limits) else {
            return Err(TestCaseError::fail(format!(
                "{:?}: {:?}", String::from_utf8_lossy(&text), parse_request(&input, &limits)
            )));
        };
        prop_assert_eq!(consumed, text.len());
        let mut encoded = Vec::new();
        encode_request(&request, &mut encoded);
        prop_assert_eq!(String::from_utf8_lossy(&encoded), String::from_utf8_lossy(&text));
        let Parse::Complete { request: again, .. } = parse_request(&encoded, &limits) else {
            return Err(TestCaseError::fail("the encoding did not parse"));
        };
        prop_assert_eq!(again, request);
    }

    #[test]
    fn arbitrary_bytes_never_panic_allocate_or_change_their_verdict(
        input in prop_oneof![
            prop::collection::vec(
                prop_oneof![
                    4 => any::<u8>(),
                    2 => prop::sample::select(b" \r\n0123456789-+".to_vec()),
                    1 => prop::sample::select(b"gsetcamdinrvqTFCMNJDOkbxE".to_vec()),
                ],
                0..300,
            ),
            // Valid requests with a few bytes changed reach deeper into each command.
            (request(), prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4))
                .prop_map(|(mut text, edits)| {
                    for (at, byte) in edits {
                        let at = at.index(text.len());
                        text[at] = byte;
                    }
                    text
                }),
        ],
        more in prop::collection::vec(any::<u8>(), 0..300),
    ) {
        let (verdict, counts) = count(|| parse_request(&input, &LIMITS));
        prop_assert_eq!(counts.calls(), 0, "parse_request allocated");
        let mut longer = input.clone();
        longer.extend_from_slice(&more);
        let again = parse_request(&longer, &LIMITS);
        match verdict {
            Parse::Incomplete => {}
            Parse::Close => {
                prop_assert!(input.len() > LIMITS.line_bytes_max);
                prop_assert_eq!(again, Parse::Close);
            }
            Parse::Refused(refusal) => {
                prop_assert!(refusal.consumed > 0 && refusal.consumed <= input.len());
                prop_assert!(refusal.swallow <= LIMITS.value_bytes_max.max(i32::MAX as usize));
                prop_assert_eq!(again, Parse::Refused(refusal));
            }
            Parse::Complete { request, consumed } => {
                prop_assert!(consumed > 0 && consumed <= input.len());
                prop_assert_eq!(again, Parse::Complete { request, consumed });
                // What was read re-encodes into a request that parses back the same.
                let mut encoded = Vec::new();
                encode_request(&request, &mut encoded);
                let reparsed = parse_request(&encoded, &default_limits());
                prop_assert_eq!(reparsed, Parse::Complete { request, consumed: encoded.len() });
            }
        }
    }

    /// A declared length far over the limit is refused from the line alone: its bytes are
    /// never awaited, never allocated.
    #[test]
    fn huge_lengths_are_refused_from_the_line(len in 65usize..(i32::MAX as usize - 2)) {
        for line in [format!("set k 0 0 {len}\r\n"), format!("ms k {len} T1\r\n")] {
            let (verdict, counts) = count(|| parse_request(line.as_bytes(), &LIMITS));
            prop_assert_eq!(counts.calls(), 0);
            let Parse::Refused(refusal) = verdict else {
                return Err(TestCaseError::fail(format!("{line:?}: {verdict:?}")));
            };
            prop_assert_eq!(refusal.consumed, line.len());
            prop_assert_eq!(refusal.swallow, len + 2);
        }
    }
}
