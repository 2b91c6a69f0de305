//! Resumable multibulk parsing (issue 19 item 7): a multibulk command delivered a few bytes at a
//! time costs work in proportion to its bytes, not to their square. The work is measured
//! deterministically as the bytes each call reads, from where it resumes
//! (`Args::resume_offset`) to the end of the input it is given.

use directkv_proto::resp::{encode_command, parse_command, parse_command_resume, Args, Parse};
use directkv_proto::resp::{ProtocolError, RespLimits};

/// Arguments of the trickled command (the command name included).
const ARGS: usize = 10_000;

fn big_command() -> Vec<u8> {
    let mut words: Vec<&[u8]> = vec![b"MSET"];
    words.extend(std::iter::repeat_n(&b"x"[..], ARGS - 1));
    let mut out = Vec::new();
    encode_command(&words, &mut out);
    out
}

/// Feeds `input` to `parse_command_resume` `step` bytes at a time; returns the last verdict,
/// the bytes examined in all, and the argument count.
fn trickle(input: &[u8], step: usize) -> (Parse, usize, usize) {
    let limits = RespLimits::default();
    let mut args = Args::new();
    let mut examined = 0;
    let mut end = 0;
    loop {
        end = (end + step).min(input.len());
        examined += end - args.resume_offset();
        let parse = parse_command_resume(&input[..end], &limits, &mut args);
        if parse != Parse::Incomplete || end == input.len() {
            return (parse, examined, args.len());
        }
        assert!(args.is_empty(), "no arguments are shown before Complete");
    }
}

#[test]
fn one_byte_at_a_time_is_linear() {
    let input = big_command();
    let (parse, examined, args) = trickle(&input, 1);
    assert_eq!(
        parse,
        Parse::Complete {
            consumed: input.len()
        }
    );
    assert_eq!(args, ARGS);
    // Each call rereads at most the unfinished argument (`$1\r\nx\r\n`, 7 bytes).
    assert!(
        examined <= input.len() * 8,
        "{examined} bytes examined for {} bytes of input",
        input.len()
    );
}

#[test]
fn resumed_parses_agree_with_a_whole_parse() {
    let limits = RespLimits::default();
    let inputs: [&[u8]; 6] = [
        b"*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\nrest",
        b"*2\r\n$0\r\n\r\n$12\r\nhello\r\nworld\r\n",
        b"*2\r\n$3\r\nGET\r\n$1\r\nab\r\n",
        b"*2\r\n$3\r\nGET\r\nx1\r\n",
        b"*-1\r\n",
        b"PING\r\n",
    ];
    for input in inputs {
        let mut whole = Args::new();
        let want = parse_command(input, &limits, &mut whole);
        let want_words: Vec<Vec<u8>> = whole.command(input).iter().map(<[u8]>::to_vec).collect();
        for step in 1..=input.len() {
            let mut args = Args::new();
            let mut end = 0;
            let got = loop {
                end = (end + step).min(input.len());
                let parse = parse_command_resume(&input[..end], &limits, &mut args);
                if parse != Parse::Incomplete || end == input.len() {
                    break parse;
                }
            };
            assert_eq!(got, want, "{input:?} by {step}");
            let words: Vec<Vec<u8>> = args.command(input).iter().map(<[u8]>::to_vec).collect();
            assert_eq!(words, want_words, "{input:?} by {step}");
        }
    }
    // A stateless parse after an unfinished one starts afresh.
    let mut args = Args::new();
    assert_eq!(
        parse_command_resume(b"*2\r\n$3\r\nGET\r\n", &limits, &mut args),
        Parse::Incomplete
    );
    assert_eq!(
        parse_command(b"*1\r\nx", &limits, &mut args),
        Parse::Invalid(ProtocolError::ExpectedDollar(b'x'))
    );
    assert_eq!(args.resume_offset(), 0);
}
