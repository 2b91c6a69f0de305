//! Fixed byte vectors for the memcached codec: every command, every refusal with memcached's
//! exact line and fate of the connection, the limits, and the exact bytes of every reply.
//! (memcache_peer.rs checks the same texts against a live memcached.)

use directkv_proto::memcache::{
    encode_base64, encode_request, parse_request, write_client_error, write_error, write_meta_end,
    write_meta_flag, write_meta_flag_number, write_meta_status, write_meta_value_header,
    write_number, write_server_error, write_stat, write_status, write_value, write_version,
    MemcacheError, MemcacheLimits, MetaStatus, Parse, Refusal, Request, Status, StoreMode,
    KEY_BYTES_MAX, LINE_BYTES_MAX_DEFAULT, VALUE_BYTES_MAX_DEFAULT,
};
use MemcacheError::*;

fn parse(input: &[u8]) -> Parse<'_> {
    parse_request(input, &MemcacheLimits::default())
}

/// `input` is exactly one request: every proper prefix is Incomplete, the whole is Complete.
fn complete(input: &[u8]) -> Request<'_> {
    for len in 0..input.len() {
        assert_eq!(
            parse(&input[..len]),
            Parse::Incomplete,
            "prefix {len} of {input:?}"
        );
    }
    match parse(input) {
        Parse::Complete { request, consumed } => {
            assert_eq!(consumed, input.len(), "{input:?}");
            request
        }
        other => panic!("{input:?}: {other:?}"),
    }
}

/// `input` is refused as a whole with `error`, nothing swallowed.
fn refused(input: &[u8], error: MemcacheError, quiet: bool) {
    refused_swallowing(input, error, quiet, 0);
}

fn refused_swallowing(input: &[u8], error: MemcacheError, quiet: bool, swallow: usize) {
    assert_eq!(
        parse(input),
        Parse::Refused(Refusal {
            error,
            consumed: input.len(),
            swallow,
            quiet
        }),
        "{:?}",
        String::from_utf8_lossy(input)
    );
}

fn keys(request: &Request<'_>) -> Vec<Vec<u8>> {
    match request {
        Request::Get { keys, .. } | Request::GetAndTouch { keys, .. } => {
            keys.iter().map(<[u8]>::to_vec).collect()
        }
        other => panic!("not a retrieval: {other:?}"),
    }
}

#[test]
fn retrieval_commands() {
    let get = complete(b"get a bb  ccc\r\n");
    assert!(matches!(get, Request::Get { cas: false, .. }));
    assert_eq!(keys(&get), [b"a".to_vec(), b"bb".to_vec(), b"ccc".to_vec()]);
    assert!(matches!(
        complete(b"gets a\n"),
        Request::Get { cas: true, .. }
    ));
    let gat = complete(b"gat 30 k\r\n");
    assert!(matches!(
        gat,
        Request::GetAndTouch {
            exptime: 30,
            cas: false,
            ..
        }
    ));
    assert_eq!(keys(&gat), [b"k".to_vec()]);
    let gats = complete(b"gats -1 k j\r\n");
    assert!(matches!(
        gats,
        Request::GetAndTouch {
            exptime: -1,
            cas: true,
            ..
        }
    ));
    // memcached answers `gat 10` with END: no keys at all.
    assert_eq!(keys(&complete(b"gat 10\r\n")).len(), 0);
    let long = vec![b'k'; KEY_BYTES_MAX];
    let line = [b"get ".as_slice(), &long, b"\r\n"].concat();
    assert_eq!(keys(&complete(&line)), std::slice::from_ref(&long));

    refused(b"get\r\n", UnknownCommand, false);
    refused(b"get  \r\n", UnknownCommand, false);
    refused(b"gat\r\n", UnknownCommand, false);
    refused(b"gat x k\r\n", BadExptime, false);
    let line = [b"get a ".as_slice(), &long, b"k\r\n"].concat();
    refused(&line, BadCommandLine, false);
}

#[test]
fn storage_commands() {
    let set = complete(b"set k 5 0 3\r\nabc\r\n");
    assert_eq!(
        set,
        Request::Store {
            mode: StoreMode::Set,
            key: b"k",
            flags: 5,
            exptime: 0,
            value: b"abc",
            noreply: false
        }
    );
    for (command, mode) in [
        ("add", StoreMode::Add),
        ("replace", StoreMode::Replace),
        ("append", StoreMode::Append),
        ("prepend", StoreMode::Prepend),
    ] {
        let line = format!("{command} k 0 100 1 noreply\r\nx\r\n");
        assert!(matches!(
            complete(line.as_bytes()),
            Request::Store { mode: m, exptime: 100, noreply: true, .. } if m == mode
        ));
    }
    assert!(matches!(
        complete(b"cas k 1 2 0 77\r\n\r\n"),
        Request::Store {
            mode: StoreMode::Cas { unique: 77 },
            value: b"",
            ..
        }
    ));
    // Numbers as memcached reads them: truncated to 32 bits, a sign, trailing white space.
    assert!(matches!(
        complete(b"set k 4294967297 4294967296 +1 bogus\r\na\r\n"),
        Request::Store {
            flags: 1,
            exptime: 0,
            noreply: false,
            ..
        }
    ));
    assert!(matches!(
        complete(b"set k 0 -1 1\r\na\r\n"),
        Request::Store { exptime: -1, .. }
    ));
    // A value may hold anything, line ends included.
    assert!(matches!(
        complete(b"set k 0 0 4\r\n\r\n\r\n\r\n"),
        Request::Store {
            value: b"\r\n\r\n",
            ..
        }
    ));

    refused(b"set k 0 0\r\n", UnknownCommand, false);
    refused(b"set k 0 0 1 2 3\r\n", UnknownCommand, false);
    refused(b"cas k 0 0 1\r\n", UnknownCommand, false);
    refused(b"cas k noreply\r\n", UnknownCommand, false);
    refused(b"set k 0 0 1 2 noreply\r\n", UnknownCommand, false);
    refused(b"set k 0 0 -1\r\n", BadCommandLine, false);
    refused(b"set k 0 0 x\r\n", BadCommandLine, false);
    refused(b"set k x 0 1\r\n", BadCommandLine, false);
    refused(b"set k -1 0 1\r\n", BadCommandLine, false);
    refused(b"set k 0 x 1 noreply\r\n", BadCommandLine, true);
    refused(b"set k 0 0 2147483646\r\n", BadCommandLine, false);
    refused(b"set k 0 0 99999999999999999999\r\n", BadCommandLine, false);
    refused(b"cas k 0 0 1 -1\r\n", BadCommandLine, false);
    let long = vec![b'k'; KEY_BYTES_MAX + 1];
    refused(
        &[b"set ".as_slice(), &long, b" 0 0 1\r\n"].concat(),
        BadCommandLine,
        false,
    );
    // The data block must end in \r\n; the bytes are used either way.
    refused(b"set k 0 0 1\r\nab\r", BadDataChunk, false);
    refused(b"set k 0 0 1 noreply\r\nabc", BadDataChunk, true);
}

#[test]
fn too_large_values_are_swallowed_without_being_buffered() {
    let line = format!("set k 0 0 {}\r\n", VALUE_BYTES_MAX_DEFAULT + 1);
    refused_swallowing(
        line.as_bytes(),
        TooLarge,
        false,
        VALUE_BYTES_MAX_DEFAULT + 3,
    );
    let line = b"set k 0 0 2147483645 noreply\r\n";
    refused_swallowing(line, TooLarge, true, 2147483647);
    let line = b"ms k 2000000 T1\r\n";
    refused_swallowing(line, TooLarge, false, 2000002);
    // Exactly the limit waits for its data.
    let line = format!("set k 0 0 {VALUE_BYTES_MAX_DEFAULT}\r\n");
    assert_eq!(parse(line.as_bytes()), Parse::Incomplete);
}

#[test]
fn other_text_commands() {
    assert_eq!(
        complete(b"incr n 5\r\n"),
        Request::Arithmetic {
            key: b"n",
            delta: 5,
            increment: true,
            noreply: false
        }
    );
    assert_eq!(
        complete(b"decr n 18446744073709551615 noreply\r\n"),
        Request::Arithmetic {
            key: b"n",
            delta: u64::MAX,
            increment: false,
            noreply: true
        }
    );
    // The fourth word is ignored unless it is noreply, as memcached does.
    assert!(matches!(
        complete(b"incr n 1 2\r\n"),
        Request::Arithmetic { noreply: false, .. }
    ));
    refused(b"incr n\r\n", UnknownCommand, false);
    refused(b"incr n 1 noreply x\r\n", UnknownCommand, false);
    refused(b"incr n -1\r\n", BadDelta, false);
    refused(b"decr n 18446744073709551616 noreply\r\n", BadDelta, true);

    assert_eq!(
        complete(b"delete k\r\n"),
        Request::Delete {
            key: b"k",
            noreply: false
        }
    );
    assert_eq!(
        complete(b"delete k 0\r\n"),
        Request::Delete {
            key: b"k",
            noreply: false
        }
    );
    assert_eq!(
        complete(b"delete k noreply\r\n"),
        Request::Delete {
            key: b"k",
            noreply: true
        }
    );
    assert_eq!(
        complete(b"delete k 0 noreply\r\n"),
        Request::Delete {
            key: b"k",
            noreply: true
        }
    );
    refused(b"delete\r\n", UnknownCommand, false);
    refused(b"delete k 5\r\n", DeleteUsage, false);
    refused(b"delete k 5 noreply\r\n", DeleteUsage, true);
    refused(b"delete k 0 0 0\r\n", UnknownCommand, false);

    assert_eq!(
        complete(b"touch k 10 noreply\r\n"),
        Request::Touch {
            key: b"k",
            exptime: 10,
            noreply: true
        }
    );
    refused(b"touch k\r\n", UnknownCommand, false);
    refused(b"touch k x\r\n", BadExptime, false);

    assert_eq!(
        complete(b"flush_all\r\n"),
        Request::FlushAll {
            delay: None,
            noreply: false
        }
    );
    assert_eq!(
        complete(b"flush_all -1\r\n"),
        Request::FlushAll {
            delay: Some(-1),
            noreply: false
        }
    );
    assert_eq!(
        complete(b"flush_all noreply\r\n"),
        Request::FlushAll {
            delay: None,
            noreply: true
        }
    );
    assert_eq!(
        complete(b"flush_all 1 2\r\n"),
        Request::FlushAll {
            delay: Some(1),
            noreply: false
        }
    );
    assert_eq!(
        complete(b"flush_all 0 noreply\r\n"),
        Request::FlushAll {
            delay: Some(0),
            noreply: true
        }
    );
    refused(b"flush_all x\r\n", BadExptime, false);
    refused(b"flush_all 1 2 3\r\n", UnknownCommand, false);

    assert_eq!(
        complete(b"verbosity 1\r\n"),
        Request::Verbosity {
            level: 1,
            noreply: false
        }
    );
    assert_eq!(
        complete(b"verbosity 1 2\r\n"),
        Request::Verbosity {
            level: 1,
            noreply: false
        }
    );
    refused(b"verbosity\r\n", UnknownCommand, false);
    refused(b"verbosity x\r\n", BadCommandLine, false);
    refused(b"verbosity noreply\r\n", BadCommandLine, true);

    assert_eq!(complete(b"version\r\n"), Request::Version);
    assert_eq!(complete(b"version x\r\n"), Request::Version);
    assert_eq!(complete(b"quit\r\n"), Request::Quit);
    match complete(b"stats settings x\r\n") {
        Request::Stats { args } => {
            assert_eq!(args.iter().collect::<Vec<_>>(), [&b"settings"[..], b"x"])
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(complete(b"stats\r\n"), Request::Stats { args } if args.is_empty()));
}

#[test]
fn unknown_and_empty_lines_are_error() {
    for line in [
        &b"foo\r\n"[..],
        b"GET k\r\n",
        b"\r\n",
        b"\n",
        b"   \r\n",
        b"get\tk\r\n",
        b"mz k\r\n",
    ] {
        refused(line, UnknownCommand, false);
    }
}

#[test]
fn meta_commands() {
    match complete(b"mg mk v f t s c k O123 q\r\n") {
        Request::MetaGet { key, flags } => {
            assert_eq!(key.raw(), b"mk");
            assert!(flags.quiet() && flags.has(b'v') && flags.has(b'k'));
            assert_eq!(flags.opaque, Some(&b"123"[..]));
            let letters: Vec<u8> = flags.iter().map(|(letter, _)| letter).collect();
            assert_eq!(letters, b"vftsckOq");
        }
        other => panic!("{other:?}"),
    }
    match complete(b"ms mk 2 T-1 F5 MA I\r\nhi\r\n") {
        Request::MetaSet { key, flags, value } => {
            assert_eq!((key.raw(), value), (&b"mk"[..], &b"hi"[..]));
            assert_eq!(
                (flags.ttl, flags.client_flags, flags.mode),
                (Some(-1), Some(5), Some(b'A'))
            );
            assert!(flags.has(b'I'));
        }
        other => panic!("{other:?}"),
    }
    match complete(b"ma mk N0 J13 D5 MD v\r\n") {
        Request::MetaArithmetic { flags, .. } => {
            assert_eq!(
                (flags.vivify_ttl, flags.initial, flags.delta),
                (Some(0), Some(13), Some(5))
            );
            assert_eq!(flags.mode, Some(b'D'));
        }
        other => panic!("{other:?}"),
    }
    match complete(b"md bWs= b q C7 E9\r\n") {
        Request::MetaDelete { key, flags } => {
            let mut buf = [0u8; KEY_BYTES_MAX];
            assert_eq!(key.decode(&mut buf), b"mk");
            assert_eq!((flags.compare_cas, flags.explicit_cas), (Some(7), Some(9)));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(complete(b"mn\r\n"), Request::MetaNoop);
    assert_eq!(complete(b"mn x\r\n"), Request::MetaNoop);
    assert!(matches!(complete(b"me mk\r\n"), Request::MetaDebug { key } if !key.is_base64()));
    assert!(matches!(complete(b"me bWs= b\r\n"), Request::MetaDebug { key } if key.is_base64()));
    // The value of ms may be empty; a key may hold a tab (memcached splits on spaces only).
    assert!(matches!(
        complete(b"ms mk 0\r\n\r\n"),
        Request::MetaSet { value: b"", .. }
    ));
    assert!(
        matches!(complete(b"mg mk\tv\r\n"), Request::MetaGet { key, .. } if key.raw() == b"mk\tv")
    );
}

#[test]
fn meta_refusals() {
    refused(b"mg\r\n", UnknownCommand, false);
    refused(b"md\r\n", UnknownCommand, false);
    refused(b"ma\r\n", UnknownCommand, false);
    refused(b"ms\r\n", UnknownCommand, false);
    refused(b"ms k\r\n", BadCommandLine, false);
    refused(b"ms mk x\r\n", BadCommandLine, false);
    refused(b"ms mk -1\r\n", BadCommandLine, false);
    refused(b"me\r\n", BadCommandLine, false);
    refused(b"me !! b\r\n", BadCommandLine, false);
    refused(b"mg mk v Z\r\n", MetaInvalidFlag, false);
    refused(b"mg mk k k\r\n", MetaDuplicateFlag, false);
    refused(b"mg mk Tx\r\n", MetaBadToken, false);
    refused(b"mg mk Jx\r\n", MetaBadInitial, false);
    refused(b"mg mk Dx\r\n", MetaBadDelta, false);
    refused(b"mg mk MSS\r\n", MetaModeLength, false);
    refused(b"mg b!! b v\r\n", MetaKeyDecoding, false);
    refused(
        b"mg mk O11111111111111111111111111111111\r\n",
        MetaOpaqueTooLong,
        false,
    );
    refused(
        b"mg mk a b c d e f g h i j k l m n o p q r\r\n",
        MetaGetTooManyFlags,
        false,
    );
    refused(
        b"md mk a b c d e f g h i j k l m n o p q r\r\n",
        MetaTooManyFlags,
        false,
    );
    refused(
        b"ma mk a b c d e f g h i j k l m n o p q r\r\n",
        MetaTooManyFlags,
        false,
    );
    refused(b"md mk x\r\n", MetaInvalidOrDuplicateFlag, false);
    refused(b"ma mk Dx\r\n", MetaInvalidOrDuplicateFlag, false);
    refused(b"ma mk Mx\r\n", MetaArithmeticMode, false);
    refused(b"ma mk Mi\r\n", MetaArithmeticMode, false);
    let long = vec![b'k'; KEY_BYTES_MAX + 1];
    refused(
        &[b"mg ".as_slice(), &long, b" v\r\n"].concat(),
        BadCommandLine,
        false,
    );
    refused(
        &[b"ms ".as_slice(), &long, b" 1\r\n"].concat(),
        BadCommandLine,
        false,
    );
    // ms: refusals after the length swallow the data block; before it, they do not.
    refused(
        b"ms mk 1 a b c d e f g h i j k l m n o p q\r\n",
        MetaTooManyFlags,
        false,
    );
    refused_swallowing(b"ms mk 1 Z\r\n", MetaInvalidFlag, false, 3);
    refused_swallowing(b"ms mk 1 noreply\r\n", MetaInvalidFlag, false, 3);
    refused_swallowing(b"ms mk 1 T1 T2\r\n", MetaDuplicateFlag, false, 3);
    refused_swallowing(b"ms mk 2 MX\r\n", MetaSetMode, false, 4);
    refused_swallowing(b"ms mk 2 Mr\r\n", MetaSetMode, false, 4);
    refused_swallowing(b"ms mk 1 Mxx\r\n", MetaModeLength, false, 3);
    refused_swallowing(b"ms mk 2 Fx\r\n", BadCommandLine, false, 4);
    refused_swallowing(b"ms mk 2 Tx\r\n", MetaBadToken, false, 4);
    refused_swallowing(b"ms b!! 2 b\r\n", MetaKeyDecoding, false, 4);
    // q does not quiet errors.
    refused(b"ms mk 2 q\r\nhix\r", BadDataChunk, false);
}

#[test]
fn over_long_lines_close_the_connection() {
    let max = LINE_BYTES_MAX_DEFAULT;
    assert_eq!(parse(&vec![b'x'; max]), Parse::Incomplete);
    assert_eq!(parse(&vec![b'x'; max + 1]), Parse::Close);
    let mut line = vec![b'x'; max + 10];
    line.extend_from_slice(b"\r\n");
    assert_eq!(parse(&line), Parse::Close);
    // A line of exactly the limit (its \r included) is read.
    let mut line = vec![b'x'; max - 1];
    line.extend_from_slice(b"\r\n");
    refused(&line, UnknownCommand, false);
    // get and gets may be longer (memcached's exemption); gat may not.
    let mut get = b"get ".to_vec();
    get.extend(std::iter::repeat_n(b"k ".as_slice(), 3000).flatten());
    assert_eq!(parse(&get), Parse::Incomplete);
    get.extend_from_slice(b"\r\n");
    assert_eq!(keys(&complete(&get)).len(), 3000);
    let mut gat = b"gat 1 ".to_vec();
    gat.extend(std::iter::repeat_n(b'x', max));
    assert_eq!(parse(&gat), Parse::Close);
    // More keys than the limit are refused with directkv's own error.
    let limits = MemcacheLimits {
        get_keys_max: 2,
        ..MemcacheLimits::default()
    };
    assert_eq!(
        parse_request(b"get a b c\r\n", &limits),
        Parse::Refused(Refusal {
            error: TooManyKeys,
            consumed: 11,
            swallow: 0,
            quiet: false
        })
    );
}

#[test]
fn pipelined_requests_are_read_one_at_a_time() {
    let input = b"set k 0 0 1\r\na\r\nget k\r\nmn\r\n";
    let Parse::Complete { consumed, .. } = parse(input) else {
        panic!()
    };
    assert_eq!(consumed, 16);
    let Parse::Complete { consumed: next, .. } = parse(&input[consumed..]) else {
        panic!()
    };
    assert_eq!(&input[consumed..consumed + next], b"get k\r\n");
}

#[test]
fn error_lines_are_memcacheds() {
    let mut out = Vec::new();
    for error in MemcacheError::ALL {
        write_error(&mut out, error);
    }
    let text = String::from_utf8(out).unwrap();
    assert!(text.starts_with("ERROR\r\nCLIENT_ERROR bad command line format\r\n"));
    assert!(
        text.contains("CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]\r\n")
    );
    assert!(text.contains("SERVER_ERROR object too large for cache\r\n"));
    assert_eq!(text.lines().count(), MemcacheError::ALL.len());
}

#[test]
fn replies_are_written_byte_exact() {
    let mut out = Vec::new();
    write_value(&mut out, b"k", 4294967295, b"ab", None);
    write_value(&mut out, b"j", 0, b"", Some(28));
    write_status(&mut out, Status::End);
    assert_eq!(
        out,
        b"VALUE k 4294967295 2\r\nab\r\nVALUE j 0 0 28\r\n\r\nEND\r\n"
    );

    let mut out = Vec::new();
    for status in [
        Status::Stored,
        Status::NotStored,
        Status::Exists,
        Status::NotFound,
        Status::Deleted,
        Status::Touched,
        Status::Ok,
        Status::Reset,
    ] {
        write_status(&mut out, status);
    }
    assert_eq!(
        out,
        b"STORED\r\nNOT_STORED\r\nEXISTS\r\nNOT_FOUND\r\nDELETED\r\nTOUCHED\r\nOK\r\nRESET\r\n"
    );

    let mut out = Vec::new();
    write_number(&mut out, u64::MAX);
    write_number(&mut out, 0);
    write_client_error(&mut out, "cannot increment or decrement non-numeric value");
    write_server_error(&mut out, "out of memory storing object");
    write_stat(&mut out, "pid", "42");
    write_version(&mut out, "1.6.18");
    assert_eq!(
        out,
        b"18446744073709551615\r\n0\r\n\
          CLIENT_ERROR cannot increment or decrement non-numeric value\r\n\
          SERVER_ERROR out of memory storing object\r\nSTAT pid 42\r\nVERSION 1.6.18\r\n"
    );

    let mut out = Vec::new();
    write_meta_value_header(&mut out, 2);
    write_meta_flag_number(&mut out, b'f', 0);
    write_meta_flag_number(&mut out, b't', -1);
    write_meta_flag(&mut out, b'k', b"mk");
    write_meta_flag(&mut out, b'O', b"123");
    write_meta_end(&mut out, Some(b"hi"));
    for status in [
        MetaStatus::Header,
        MetaStatus::Miss,
        MetaStatus::NotFound,
        MetaStatus::NotStored,
        MetaStatus::Exists,
        MetaStatus::Noop,
    ] {
        write_meta_status(&mut out, status);
        write_meta_end(&mut out, None);
    }
    write_meta_status(&mut out, MetaStatus::Header);
    write_meta_flag(&mut out, b'W', b"");
    write_meta_end(&mut out, None);
    assert_eq!(
        out,
        b"VA 2 f0 t-1 kmk O123\r\nhi\r\nHD\r\nEN\r\nNF\r\nNS\r\nEX\r\nMN\r\nHD W\r\n"
    );

    let mut out = Vec::new();
    encode_base64(b"mk", &mut out);
    assert_eq!(out, b"bWs=");
}

#[test]
fn requests_are_encoded_as_clients_send_them() {
    let mut out = Vec::new();
    for input in [
        &b"get a b\r\n"[..],
        b"gats 5 a\r\n",
        b"set k 1 -1 2 noreply\r\nab\r\n",
        b"cas k 0 0 1 9\r\nx\r\n",
        b"incr n 3\r\n",
        b"delete k noreply\r\n",
        b"touch k 7\r\n",
        b"flush_all 3 noreply\r\n",
        b"verbosity 1\r\n",
        b"stats slabs\r\n",
        b"version\r\n",
        b"quit\r\n",
        b"mg k v t O1\r\n",
        b"ms k 2 T5 MS\r\nab\r\n",
        b"md k q\r\n",
        b"ma k D2\r\n",
        b"mn\r\n",
        b"me bWs= b\r\n",
    ] {
        out.clear();
        encode_request(&complete(input), &mut out);
        assert_eq!(
            String::from_utf8_lossy(&out),
            String::from_utf8_lossy(input)
        );
    }
}
