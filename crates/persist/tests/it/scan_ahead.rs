//! `log::scan_ahead` (the reading and checking on a thread of its own, recovery's reader) gives
//! `log::scan`'s answers exactly: the same records applied in the same order, the same end
//! (clean, torn tail, corruption with its offset), the same refusals, and an `apply` error
//! named with the record's Lsn and offset; over logs of one chunk and of many.

use directkv_persist::fs::RealFs;
use directkv_persist::log::{self, LogHeader, LogLimits, LogScan, LogWriter};

use crate::common::{payload, write_log, TestDir};

type Seen = Vec<(u64, Vec<u8>)>;

/// Both readers over `path`, `apply` failing at Lsn `fail_at` (0: never): what each applied
/// and answered (the scan, or the error's text).
fn both(path: &std::path::Path, fail_at: u64) -> [(Seen, Result<LogScan, String>); 2] {
    let run = |ahead: bool| {
        let mut seen = vec![];
        let apply = |lsn: u64, p: &[u8]| {
            if lsn == fail_at {
                return Err(format!("refused {lsn}"));
            }
            seen.push((lsn, p.to_vec()));
            Ok(())
        };
        let r = if ahead {
            log::scan_ahead(&RealFs, path, LogLimits::default(), apply)
        } else {
            log::scan(&RealFs, path, LogLimits::default(), apply)
        };
        (seen, r.map_err(|e| e.to_string()))
    };
    [run(false), run(true)]
}

#[test]
fn cuts_and_flips_of_a_small_log_read_the_same() {
    let dir = TestDir::new("ahead-small");
    let full = dir.join("full.dkvl");
    let n = 10;
    let offsets = write_log(&full, n);
    let bytes = std::fs::read(&full).unwrap();
    let path = dir.join("cut.dkvl");
    for cut in offsets[(n - 3) as usize]..=bytes.len() as u64 {
        crate::common::rewrite(&path, &bytes[..cut as usize]);
        let [a, b] = both(&path, 0);
        assert_eq!(a, b, "cut at {cut}");
    }
    for at in (0..bytes.len()).step_by(3) {
        let mut b = bytes.clone();
        b[at] ^= 0x21;
        crate::common::rewrite(&path, &b);
        let [x, y] = both(&path, 0);
        assert_eq!(x, y, "flip at {at}");
    }
    crate::common::rewrite(&path, &bytes);
    for fail_at in 1..=n {
        let [a, b] = both(&path, fail_at);
        assert!(a.1.is_err(), "{:?}", a.1);
        assert_eq!(a, b, "apply fails at lsn {fail_at}");
    }
    let _ = std::fs::remove_file(&path);
    let [a, b] = both(&path, 0);
    assert!(a.1.is_err());
    assert_eq!(a, b, "a missing file");
}

/// Records of up to 100 KiB, many chunks' worth: a torn tail, corruption in the middle and an
/// apply error far in.
#[test]
fn a_log_of_many_chunks_reads_the_same() {
    let dir = TestDir::new("ahead-large");
    let path = dir.join("large.dkvl");
    let header = LogHeader {
        shard: 0,
        first_lsn: 1,
    };
    let mut w = LogWriter::create(&RealFs, &path, header, LogLimits::default()).unwrap();
    let mut offsets = vec![w.file_bytes()];
    for i in 0..400u64 {
        let mut p = payload(i);
        p.resize(((i * 7919) % 100_000) as usize + 1, i as u8);
        w.append(&p).unwrap();
        w.write_out().unwrap();
        offsets.push(w.file_bytes());
    }
    w.sync().unwrap();
    drop(w);
    let bytes = std::fs::read(&path).unwrap();
    let [a, b] = both(&path, 0);
    assert_eq!(a.0.len(), 400);
    assert_eq!(a, b, "whole");
    for fail_at in [1, 2, 57, 200, 399, 400] {
        let [a, b] = both(&path, fail_at);
        assert_eq!(a, b, "apply fails at lsn {fail_at}");
    }
    let cut = offsets[300] + 100;
    crate::common::rewrite(&path, &bytes[..cut as usize]);
    let [a, b] = both(&path, 0);
    assert_eq!(a.0.len(), 300);
    assert_eq!(a, b, "torn");
    let mut flipped = bytes.clone();
    flipped[offsets[250] as usize + 30] ^= 1;
    crate::common::rewrite(&path, &flipped);
    let [a, b] = both(&path, 0);
    assert_eq!(a.0.len(), 250);
    assert!(matches!(a.1, Ok(ref s) if matches!(s.end, log::LogEnd::Corrupt { .. })));
    assert_eq!(a, b, "corrupt");
}
