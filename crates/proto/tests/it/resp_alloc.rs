//! The RESP request path does not allocate once warm (STYLE habit 4): parsing a pipeline of
//! multibulk and inline commands into a reused `Args`, and writing replies of every kind into a
//! buffer that has reached its working size, make no call to the system allocator.
//!
//! A counting global allocator wraps `System` and counts the calls made by the current thread
//! while that thread's `COUNTING` flag is set, so the test harness's other threads cannot disturb
//! the count. Everything runs in the single test of this file for the same reason.

use directkv_testkit::alloc::count;

use directkv_proto::resp::{parse_command, Args, Parse, RespLimits, RespWriter, Version};

/// System allocator calls made by this thread while `f` runs.
fn count_calls(f: impl FnOnce()) -> usize {
    count(f).1.calls() as usize
}

const WARMUP_RUNS: usize = 2;
const COUNTED_RUNS: usize = 100;

const PIPELINE: &[u8] = b"*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n\
    *2\r\n$3\r\nGET\r\n$3\r\nkey\r\n\
    *0\r\n\
    SET k \"a \\x41 \\n quoted value\" 'single'\r\n\
    *7\r\n$4\r\nMSET\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\nc\r\n$1\r\n3\r\n\
    PING\n\
    \r\n";

/// Parses every command of `PIPELINE`, touching every argument; returns the argument bytes.
fn parse_pipeline(args: &mut Args, limits: &RespLimits) -> usize {
    let mut pos = 0;
    let mut total = 0;
    while pos < PIPELINE.len() {
        let rest = &PIPELINE[pos..];
        let Parse::Complete { consumed } = parse_command(rest, limits, args) else {
            panic!("the pipeline is whole");
        };
        total += args.command(rest).iter().map(<[u8]>::len).sum::<usize>();
        pos += consumed;
    }
    total
}

/// One reply of every kind.
fn write_replies(out: &mut Vec<u8>, version: Version) {
    let mut writer = RespWriter::new(out, version);
    writer.simple("OK");
    writer.error("ERR syntax error");
    writer.integer(i64::MIN);
    writer.bulk(b"value");
    writer.null();
    writer.null_array();
    writer.array_len(2);
    writer.map_len(2);
    writer.double(-2.5e-300);
    writer.double(f64::MAX);
    writer.boolean(true);
}

#[test]
fn warm_parse_and_write_do_not_allocate() {
    let one = count_calls(|| drop(std::hint::black_box(vec![0u8; 1])));
    assert!(one > 0, "the counting allocator sees allocations");

    let limits = RespLimits::default();
    let mut args = Args::new();
    let mut out = Vec::new();
    let mut expected_len = 0;
    for _ in 0..WARMUP_RUNS {
        expected_len = parse_pipeline(&mut args, &limits);
        for version in [Version::Resp2, Version::Resp3] {
            out.clear();
            write_replies(&mut out, version);
        }
    }
    let calls = count_calls(|| {
        for _ in 0..COUNTED_RUNS {
            assert_eq!(parse_pipeline(&mut args, &limits), expected_len);
        }
    });
    assert_eq!(calls, 0, "parsing a warm pipeline called the allocator");
    let calls = count_calls(|| {
        for _ in 0..COUNTED_RUNS {
            for version in [Version::Resp2, Version::Resp3] {
                out.clear();
                write_replies(&mut out, version);
            }
        }
    });
    assert_eq!(
        calls, 0,
        "writing replies into a warm buffer called the allocator"
    );
}
