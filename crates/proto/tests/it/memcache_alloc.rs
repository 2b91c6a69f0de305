//! The memcached reply path does not allocate once warm (STYLE habit 4): parsing a pipeline of
//! text and meta requests allocates nothing at all, and writing every kind of reply into a
//! buffer that has reached its working size makes no call to the system allocator.

use directkv_testkit::alloc::count;

use directkv_proto::memcache::{
    encode_request, parse_request, write_client_error, write_error, write_meta_end,
    write_meta_flag, write_meta_flag_number, write_meta_status, write_meta_value_header,
    write_number, write_stat, write_status, write_value, write_version, MemcacheError,
    MemcacheLimits, MetaStatus, Parse, Status,
};

const PIPELINE: &[u8] = b"set k 5 0 3\r\nabc\r\nget k j l\r\ngats 10 k\r\nincr n 1 noreply\r\n\
    delete k\r\nms k 2 T10 F3 MA\r\nhi\r\nmg k v f t s c k O9 q\r\nma k D5 N0 J1\r\nmn\r\n\
    set k 0 0 1\r\nab\r\nset big 0 0 99999999\r\n";

/// Parses the pipeline, touching every key; the bytes of keys seen.
fn parse_pipeline(out: &mut Vec<u8>) -> usize {
    let limits = MemcacheLimits::default();
    let mut pos = 0;
    let mut total = 0;
    while pos < PIPELINE.len() {
        match parse_request(&PIPELINE[pos..], &limits) {
            Parse::Complete { request, consumed } => {
                out.clear();
                encode_request(&request, out);
                total += out.len();
                pos += consumed;
            }
            Parse::Refused(refusal) => {
                total += refusal.error.text().len();
                // The too-large set at the end: its data would be swallowed as it arrives.
                if refusal.swallow > 0 {
                    break;
                }
                pos += refusal.consumed;
            }
            other => panic!("the pipeline is whole: {other:?}"),
        }
    }
    total
}

fn write_replies(out: &mut Vec<u8>) {
    out.clear();
    write_value(out, b"key", u32::MAX, b"value", Some(u64::MAX));
    write_status(out, Status::End);
    write_status(out, Status::Stored);
    write_number(out, 18_446_744_073_709_551_615);
    write_error(out, MemcacheError::BadDataChunk);
    write_client_error(out, "cannot increment or decrement non-numeric value");
    write_stat(out, "curr_items", "12345");
    write_version(out, "1.6.18");
    write_meta_value_header(out, 5);
    write_meta_flag_number(out, b't', -1);
    write_meta_flag(out, b'k', b"key");
    write_meta_end(out, Some(b"value"));
    write_meta_status(out, MetaStatus::Header);
    write_meta_end(out, None);
}

#[test]
fn parsing_and_writing_do_not_allocate_once_warm() {
    let mut out = Vec::with_capacity(4096);
    let mut encoded = Vec::with_capacity(4096);
    assert!(parse_pipeline(&mut encoded) > 0);
    write_replies(&mut out);
    let (_, counts) = count(|| {
        for _ in 0..100 {
            parse_pipeline(&mut encoded);
            write_replies(&mut out);
        }
    });
    assert_eq!(counts.calls(), 0, "the warm codec allocated");
}
