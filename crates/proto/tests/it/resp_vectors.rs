//! Fixed byte vectors for the RESP codec: what the server must accept, what it must refuse (with
//! Redis' exact words), and the exact bytes of every reply it writes, in RESP2 and RESP3.

use directkv_proto::resp::{
    encode_command, err_protocol, parse_command, parse_reply, Args, Parse, ProtocolError, Reply,
    RespLimits, RespWriter, Version, BULK_LEN_MAX_DEFAULT, INLINE_LEN_MAX_DEFAULT,
};

/// Parses one command with the default limits: the outcome and the arguments.
fn parse(input: &[u8]) -> (Parse, Vec<Vec<u8>>) {
    parse_with(input, &RespLimits::default())
}

fn parse_with(input: &[u8], limits: &RespLimits) -> (Parse, Vec<Vec<u8>>) {
    let mut args = Args::new();
    let parse = parse_command(input, limits, &mut args);
    let words = args.command(input).iter().map(<[u8]>::to_vec).collect();
    (parse, words)
}

fn owned(words: &[&[u8]]) -> Vec<Vec<u8>> {
    words.iter().map(|word| word.to_vec()).collect()
}

/// `input` is exactly one command with `words`: every shorter prefix needs more bytes.
fn assert_whole_command(input: &[u8], words: &[&[u8]]) {
    for len in 0..input.len() {
        assert_eq!(
            parse(&input[..len]),
            (Parse::Incomplete, vec![]),
            "prefix of {len} bytes of {:?}",
            String::from_utf8_lossy(input)
        );
    }
    assert_eq!(
        parse(input),
        (
            Parse::Complete {
                consumed: input.len()
            },
            owned(words)
        )
    );
}

fn invalid_text(input: &[u8]) -> String {
    match parse(input).0 {
        Parse::Invalid(error) => error.to_string(),
        other => panic!("{:?} gave {other:?}", String::from_utf8_lossy(input)),
    }
}

#[test]
fn multibulk_split_at_every_byte() {
    assert_whole_command(b"*1\r\n$4\r\nPING\r\n", &[b"PING"]);
    assert_whole_command(
        b"*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n",
        &[b"SET", b"key", b"value"],
    );
    assert_whole_command(b"*2\r\n$4\r\nECHO\r\n$0\r\n\r\n", &[b"ECHO", b""]);
    assert_whole_command(
        b"*3\r\n$3\r\nSET\r\n$2\r\n\r\n\r\n$11\r\n\x00\xff*1\r\n$1\r\nx\r\n",
        &[b"SET", b"\r\n", b"\x00\xff*1\r\n$1\r\nx"],
    );
    let long = vec![b'v'; 1000];
    let mut input = b"*2\r\n$3\r\nGET\r\n$1000\r\n".to_vec();
    input.extend_from_slice(&long);
    input.extend_from_slice(b"\r\n");
    assert_whole_command(&input, &[b"GET", &long]);
}

#[test]
fn empty_commands_are_complete_with_no_args() {
    assert_whole_command(b"*0\r\n", &[]);
    assert_whole_command(b"*-1\r\n", &[]);
    assert_whole_command(b"\r\n", &[]);
    assert_whole_command(b"\n", &[]);
    assert_whole_command(b" \t \r\n", &[]);
}

#[test]
fn pipelined_commands_back_to_back() {
    let input = b"*1\r\n$4\r\nPING\r\n\
                  *3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n\
                  GET k\r\n\
                  \r\n\
                  *0\r\n\
                  INCR \"n\"\n\
                  *2\r\n$3\r\nDEL\r\n$1\r\nk\r\n\
                  *2\r\n$3\r\nGE";
    let expected: [&[&[u8]]; 7] = [
        &[b"PING"],
        &[b"SET", b"k", b"v"],
        &[b"GET", b"k"],
        &[],
        &[],
        &[b"INCR", b"n"],
        &[b"DEL", b"k"],
    ];
    let mut args = Args::new();
    let limits = RespLimits::default();
    let mut pos = 0;
    for words in expected {
        let rest = &input[pos..];
        let Parse::Complete { consumed } = parse_command(rest, &limits, &mut args) else {
            panic!("at {pos}: {:?}", parse_command(rest, &limits, &mut args));
        };
        let got: Vec<Vec<u8>> = args.command(rest).iter().map(<[u8]>::to_vec).collect();
        assert_eq!(got, owned(words), "at {pos}");
        pos += consumed;
    }
    assert_eq!(
        parse_command(&input[pos..], &limits, &mut args),
        Parse::Incomplete
    );
}

#[test]
fn inline_quotes_and_escapes() {
    let cases: [(&[u8], &[&[u8]]); 10] = [
        (b"PING\r\n", &[b"PING"]),
        (b"set  k\tv\n", &[b"set", b"k", b"v"]),
        (
            b"SET \"hello world\" x\r\n",
            &[b"SET", b"hello world", b"x"],
        ),
        (
            b"ECHO \"\\n\\r\\t\\b\\a\\\\\\\"\"\n",
            &[b"ECHO", b"\n\r\t\x08\x07\\\""],
        ),
        (b"ECHO \"\\x00\\xfF\\x41\"\n", &[b"ECHO", b"\x00\xffA"]),
        (b"ECHO \"\\x4g\"\n", &[b"ECHO", b"x4g"]),
        (b"ECHO 'it\\'s' '\\n'\n", &[b"ECHO", b"it's", b"\\n"]),
        (b"ECHO \"\"\n", &[b"ECHO", b""]),
        (b"ECHO a\"b c\"\n", &[b"ECHO", b"ab c"]),
        (b"ECHO a\rb\r\n", &[b"ECHO", b"a", b"b"]),
    ];
    for (input, words) in cases {
        assert_whole_command(input, words);
    }
}

#[test]
fn inline_arguments_live_in_the_scratch_buffer() {
    let input = b"SET k \"v w\"\n";
    let mut args = Args::new();
    assert_eq!(
        parse_command(input, &RespLimits::default(), &mut args),
        Parse::Complete {
            consumed: input.len()
        }
    );
    assert!(args.is_inline());
    // The input is not read again: the unescaped words were copied.
    let command = args.command(&[]);
    assert_eq!(command.get(2), Some(&b"v w"[..]));
}

#[test]
fn invalid_input_gets_redis_words() {
    let cases: [(&[u8], &str); 17] = [
        (b"*x\r\n", "Protocol error: invalid multibulk length"),
        (b"*\r\n", "Protocol error: invalid multibulk length"),
        (b"*01\r\n", "Protocol error: invalid multibulk length"),
        (b"*1 \r\n", "Protocol error: invalid multibulk length"),
        (b"*1\rX", "Protocol error: invalid multibulk length"),
        (b"*1048577\r\n", "Protocol error: invalid multibulk length"),
        (
            b"*99999999999999999999\r\n",
            "Protocol error: invalid multibulk length",
        ),
        (b"*1\r\n$x\r\n", "Protocol error: invalid bulk length"),
        (b"*1\r\n$-1\r\n", "Protocol error: invalid bulk length"),
        (b"*1\r\n$\r\n", "Protocol error: invalid bulk length"),
        (
            b"*1\r\n$3\r\nabcd\r\n",
            "Protocol error: invalid bulk length",
        ),
        (
            b"*1\r\n$536870913\r\n",
            "Protocol error: invalid bulk length",
        ),
        (b"*1\r\nPING\r\n", "Protocol error: expected '$', got 'P'"),
        (
            b"*2\r\n$1\r\na\r\n:1\r\n",
            "Protocol error: expected '$', got ':'",
        ),
        (b"*1\r\n\r\n", "Protocol error: expected '$', got ' '"),
        (
            b"GET \"k\r\n",
            "Protocol error: unbalanced quotes in request",
        ),
        (
            b"SET 'a'b c\n",
            "Protocol error: unbalanced quotes in request",
        ),
    ];
    for (input, text) in cases {
        assert_eq!(
            invalid_text(input),
            text,
            "{:?}",
            String::from_utf8_lossy(input)
        );
    }
    assert_eq!(
        err_protocol(&ProtocolError::ExpectedDollar(b'P')),
        "ERR Protocol error: expected '$', got 'P'"
    );
}

#[test]
fn invalid_is_decided_before_the_line_ends() {
    // None of these can become valid, so none may wait for more bytes.
    let cases: [(&[u8], ProtocolError); 8] = [
        (b"*x", ProtocolError::InvalidMultibulkLength),
        (b"*00", ProtocolError::InvalidMultibulkLength),
        (b"*-0", ProtocolError::InvalidMultibulkLength),
        (b"*1048577", ProtocolError::InvalidMultibulkLength),
        (b"*1\r\n$-", ProtocolError::InvalidBulkLength),
        (b"*1\r\n$536870913", ProtocolError::InvalidBulkLength),
        (b"*1\r\nx", ProtocolError::ExpectedDollar(b'x')),
        (b"SET \"a\"b", ProtocolError::UnbalancedQuotes),
    ];
    for (input, error) in cases {
        assert_eq!(
            parse(input).0,
            Parse::Invalid(error),
            "{:?}",
            String::from_utf8_lossy(input)
        );
    }
    // One byte of the payload's terminator is enough to tell.
    assert_eq!(
        parse(b"*1\r\n$1\r\nab").0,
        Parse::Invalid(ProtocolError::InvalidBulkLength)
    );
}

#[test]
fn limits_are_enforced_before_the_bytes_arrive() {
    let over = format!("*1\r\n${}", BULK_LEN_MAX_DEFAULT + 1);
    assert_eq!(
        parse(over.as_bytes()).0,
        Parse::Invalid(ProtocolError::InvalidBulkLength)
    );
    let at = format!("*1\r\n${}\r\n", BULK_LEN_MAX_DEFAULT);
    assert_eq!(parse(at.as_bytes()).0, Parse::Incomplete);

    let limits = RespLimits {
        args_max: 3,
        bulk_len_max: 10,
        inline_len_max: 8,
    };
    assert_eq!(
        parse_with(b"*4", &limits).0,
        Parse::Invalid(ProtocolError::InvalidMultibulkLength)
    );
    assert_eq!(parse_with(b"*3", &limits).0, Parse::Incomplete);
    assert_eq!(
        parse_with(b"*1\r\n$11", &limits).0,
        Parse::Invalid(ProtocolError::InvalidBulkLength)
    );
    assert_eq!(parse_with(b"*1\r\n$10\r\n", &limits).0, Parse::Incomplete);
    assert_eq!(
        parse_with(b"a b c d\n", &limits).0,
        Parse::Invalid(ProtocolError::InvalidMultibulkLength)
    );
}

#[test]
fn inline_length_limit() {
    let max = INLINE_LEN_MAX_DEFAULT;
    let mut line = vec![b'a'; max];
    assert_eq!(parse(&line).0, Parse::Incomplete);
    line.push(b'\r');
    assert_eq!(parse(&line).0, Parse::Incomplete);
    line.push(b'\n');
    assert_eq!(parse(&line).0, Parse::Complete { consumed: max + 2 });

    let mut too_long = vec![b'a'; max + 1];
    assert_eq!(
        parse(&too_long).0,
        Parse::Invalid(ProtocolError::InlineTooBig)
    );
    too_long.push(b'\n');
    assert_eq!(
        parse(&too_long).0,
        Parse::Invalid(ProtocolError::InlineTooBig)
    );
    assert_eq!(
        invalid_text(&too_long),
        "Protocol error: too big inline request"
    );
    // Redis decides the same way once the buffer holds more than the limit without a newline.
    assert_eq!(
        parse(&vec![b'a'; 1 << 20]).0,
        Parse::Invalid(ProtocolError::InlineTooBig)
    );
}

#[test]
fn encode_then_parse_round_trips() {
    let commands: [&[&[u8]]; 5] = [
        &[b"PING"],
        &[b"SET", b"key", b"value"],
        &[b"SET", b"", b"\r\n*1\r\n$3\r\n"],
        &[b"MSET", b"a", b"1", b"b", b"2", b"c", b"3"],
        &[],
    ];
    for words in commands {
        let mut encoded = Vec::new();
        encode_command(words, &mut encoded);
        assert_whole_command(&encoded, words);
    }
    let mut encoded = Vec::new();
    encode_command(&[b"GET", b"k"], &mut encoded);
    assert_eq!(encoded, b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n");
}

/// The bytes of one reply written in each version.
fn both(write: impl Fn(&mut RespWriter<'_>)) -> (Vec<u8>, Vec<u8>) {
    let mut two = Vec::new();
    write(&mut RespWriter::new(&mut two, Version::Resp2));
    let mut three = Vec::new();
    write(&mut RespWriter::new(&mut three, Version::Resp3));
    (two, three)
}

fn bytes(two: &[u8], three: &[u8]) -> (Vec<u8>, Vec<u8>) {
    (two.to_vec(), three.to_vec())
}

#[test]
fn writer_bytes_in_both_versions() {
    assert_eq!(both(|w| w.simple("OK")), bytes(b"+OK\r\n", b"+OK\r\n"));
    assert_eq!(
        both(|w| w.error("ERR syntax error")),
        bytes(b"-ERR syntax error\r\n", b"-ERR syntax error\r\n")
    );
    assert_eq!(both(|w| w.integer(-7)), bytes(b":-7\r\n", b":-7\r\n"));
    assert_eq!(
        both(|w| w.bulk(b"a\r\nb")),
        bytes(b"$4\r\na\r\nb\r\n", b"$4\r\na\r\nb\r\n")
    );
    assert_eq!(both(|w| w.bulk(b"")), bytes(b"$0\r\n\r\n", b"$0\r\n\r\n"));
    assert_eq!(both(|w| w.null()), bytes(b"$-1\r\n", b"_\r\n"));
    assert_eq!(both(|w| w.null_array()), bytes(b"*-1\r\n", b"_\r\n"));
    assert_eq!(both(|w| w.array_len(3)), bytes(b"*3\r\n", b"*3\r\n"));
    assert_eq!(both(|w| w.map_len(2)), bytes(b"*4\r\n", b"%2\r\n"));
    assert_eq!(
        both(|w| w.double(1.5)),
        bytes(b"$3\r\n1.5\r\n", b",1.5\r\n")
    );
    assert_eq!(both(|w| w.double(3.0)), bytes(b"$1\r\n3\r\n", b",3\r\n"));
    assert_eq!(
        both(|w| w.double(f64::INFINITY)),
        bytes(b"$3\r\ninf\r\n", b",inf\r\n")
    );
    assert_eq!(
        both(|w| w.double(f64::NEG_INFINITY)),
        bytes(b"$4\r\n-inf\r\n", b",-inf\r\n")
    );
    assert_eq!(
        both(|w| w.double(f64::NAN)),
        bytes(b"$3\r\nnan\r\n", b",nan\r\n")
    );
    assert_eq!(both(|w| w.boolean(true)), bytes(b":1\r\n", b"#t\r\n"));
    assert_eq!(both(|w| w.boolean(false)), bytes(b":0\r\n", b"#f\r\n"));
}

#[test]
fn writer_output_parses_back() {
    let (two, three) = both(|w| {
        w.map_len(2);
        w.bulk(b"server");
        w.bulk(b"directkv");
        w.bulk(b"proto");
        w.integer(3);
        w.array_len(4);
        w.null();
        w.double(0.25);
        w.boolean(true);
        w.error("WRONGTYPE x");
    });
    let bulk = |text: &[u8]| Reply::Bulk(Some(text.to_vec()));
    let tail = |null: Reply, double: Reply, boolean: Reply| {
        Reply::Array(Some(vec![
            null,
            double,
            boolean,
            Reply::Error("WRONGTYPE x".into()),
        ]))
    };
    let expected_two = vec![
        Reply::Array(Some(vec![
            bulk(b"server"),
            bulk(b"directkv"),
            bulk(b"proto"),
            Reply::Integer(3),
        ])),
        tail(Reply::Bulk(None), bulk(b"0.25"), Reply::Integer(1)),
    ];
    let expected_three = vec![
        Reply::Map(vec![
            (bulk(b"server"), bulk(b"directkv")),
            (bulk(b"proto"), Reply::Integer(3)),
        ]),
        tail(Reply::Null, Reply::Double(0.25), Reply::Boolean(true)),
    ];
    for (input, expected) in [(two, expected_two), (three, expected_three)] {
        let mut pos = 0;
        for reply in expected {
            let (got, consumed) = parse_reply(&input[pos..]).unwrap().unwrap();
            assert_eq!(got, reply);
            pos += consumed;
        }
        assert_eq!(pos, input.len());
    }
}
