//! A log cut at every byte offset of its last records (a crash in the middle of a write):
//! every record before the cut is replayed, the cut is reported as a torn tail with its offset
//! and the bytes dropped, and a writer reopened on it truncates the tail and continues.

use directkv_persist::fs::RealFs;
use directkv_persist::log::{self, LogEnd, LogLimits, LogWriter};

use crate::common::{payload, write_log, TestDir};

#[test]
fn a_cut_at_every_byte_of_the_last_records_keeps_every_record_before_it() {
    let dir = TestDir::new("torn");
    let full = dir.join("full.dkvl");
    let n = 12;
    let offsets = write_log(&full, n);
    let bytes = std::fs::read(&full).unwrap();
    let cut_from = offsets[(n - 4) as usize];
    let path = dir.join("cut.dkvl");
    for cut in cut_from..=bytes.len() as u64 {
        crate::common::rewrite(&path, &bytes[..cut as usize]);
        // Records entirely before the cut.
        let whole = offsets.iter().filter(|&&o| o <= cut).count() as u64 - 1;
        let mut seen = vec![];
        let s = log::scan(&RealFs, &path, LogLimits::default(), |lsn, p| {
            seen.push((lsn, p.to_vec()));
            Ok(())
        })
        .unwrap();
        let want: Vec<(u64, Vec<u8>)> = (0..whole).map(|i| (i + 1, payload(i))).collect();
        assert_eq!(seen, want, "cut at {cut}");
        assert_eq!(s.records, whole);
        assert_eq!(s.good_bytes, offsets[whole as usize], "cut at {cut}");
        if cut == offsets[whole as usize] {
            assert_eq!(s.end, LogEnd::Clean, "cut at a record boundary {cut}");
        } else {
            assert_eq!(
                s.end,
                LogEnd::TornTail {
                    offset: offsets[whole as usize],
                    bytes_dropped: cut - offsets[whole as usize],
                },
                "cut at {cut}"
            );
        }
        // Recovery: the writer truncates the tail and the next record follows the last good one.
        let (mut w, _) = LogWriter::open(&RealFs, &path, LogLimits::default()).unwrap();
        assert_eq!(w.append(b"after").unwrap(), whole + 1);
        w.sync().unwrap();
        drop(w);
        let mut last = vec![];
        let s = log::replay(&RealFs, &path, LogLimits::default(), |lsn, p| {
            last = (lsn, p.to_vec()).1;
            Ok(())
        })
        .unwrap();
        assert_eq!(
            (s.records, s.end.clone(), last),
            (whole + 1, LogEnd::Clean, b"after".to_vec())
        );
    }
}

#[test]
fn a_log_cut_inside_its_header_is_refused_not_taken_for_empty() {
    let dir = TestDir::new("torn-header");
    let path = dir.join("l.dkvl");
    write_log(&path, 1);
    let bytes = std::fs::read(&path).unwrap();
    for cut in 0..32 {
        crate::common::rewrite(&path, &bytes[..cut]);
        let err = log::scan(&RealFs, &path, LogLimits::default(), |_, _| Ok(())).unwrap_err();
        assert!(err.to_string().contains("offset 0"), "{err}");
    }
}

#[test]
fn zeros_after_the_last_record_end_the_log_and_are_cut_by_the_next_writer() {
    // A mapped log's allocated tail that a crash left, or a file system that shows a file
    // extended by a crash with zeros where data never landed: no record starts with zeros.
    let dir = TestDir::new("zeros");
    let path = dir.join("l.dkvl");
    let offsets = write_log(&path, 5);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(&[0u8; 4096]);
    std::fs::write(&path, &bytes).unwrap();
    let s = log::scan(&RealFs, &path, LogLimits::default(), |_, _| Ok(())).unwrap();
    assert_eq!(s.records, 5);
    assert_eq!(s.end, LogEnd::Clean);
    assert_eq!(s.good_bytes, offsets[5]);
    assert_eq!(s.file_bytes, offsets[5] + 4096);
    let (w, _) = LogWriter::open(&RealFs, &path, LogLimits::default()).unwrap();
    drop(w);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), offsets[5]);
    // A torn record before the zeros is still a torn tail.
    bytes[offsets[5] as usize] = 7;
    std::fs::write(&path, &bytes).unwrap();
    let s = log::scan(&RealFs, &path, LogLimits::default(), |_, _| Ok(())).unwrap();
    assert_eq!(
        s.end,
        LogEnd::TornTail {
            offset: offsets[5],
            bytes_dropped: 4096
        }
    );
}

/// A log on a real file stores its records through a mapping of the file allocated ahead
/// (`LOG_ALLOCATE_BYTES`): a writer that dies without its drop (a kill -9) leaves the records
/// and zeros after them, which read as the log's end; a writer dropped in order leaves the
/// records alone. Records cross a mapping window's end (`LOG_WINDOW_BYTES`) intact.
#[test]
fn a_mapped_log_reads_back_after_a_crash_and_after_a_clean_close() {
    let dir = TestDir::new("mapped");
    let path = dir.join("l.dkvl");
    let mut w = crate::common::new_log(&path);
    // Records of 1 MiB less a little, so that some straddle the 64 MiB window's end.
    let record = |i: u64| vec![(i % 251) as u8 + 1; (1 << 20) - 100 + i as usize];
    let n = (log::LOG_WINDOW_BYTES >> 20) as u64 + 3;
    for i in 0..n {
        w.append(&record(i)).unwrap();
        w.write_out().unwrap();
    }
    let written = w.file_bytes();
    let on_disk = std::fs::metadata(&path).unwrap().len();
    assert!(on_disk > written, "allocated ahead: {on_disk} <= {written}");
    assert_eq!(on_disk % log::LOG_ALLOCATE_BYTES, 0);
    // The process dies: no drop.
    std::mem::forget(w);
    let (seen, end, good) = read_back(&path, record);
    assert_eq!((seen, end, good), (n, LogEnd::Clean, written));
    // The next writer continues after the last record, and its drop cuts the tail.
    let (mut w, _) = LogWriter::open(&RealFs, &path, LogLimits::default()).unwrap();
    w.append(b"after").unwrap();
    w.write_out().unwrap();
    let end = w.file_bytes();
    drop(w);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), end);
    let s = log::scan(&RealFs, &path, LogLimits::default(), |_, _| Ok(())).unwrap();
    assert_eq!((s.records, s.end), (n + 1, LogEnd::Clean));
}

/// The pages ahead of a mapped log's records are put in the page cache either by writing zeros
/// over them (`Ahead::Zeros`, through a second descriptor: the log's own appends, and Linux's
/// pwrite on it would append whatever the offset) or by faulting them in (`Ahead::Faults`).
/// Small records written while the writer switches between the two, across many
/// `LOG_POPULATE_BYTES` steps, all read back; the zeros never land on a record nor past the
/// allocated end, so the file stays a whole number of allocation steps until its drop.
#[test]
fn zeros_written_ahead_never_touch_a_record_nor_grow_the_file() {
    use directkv_persist::log::Ahead;
    let dir = TestDir::new("ahead");
    let path = dir.join("l.dkvl");
    let mut w = crate::common::new_log(&path);
    let record = |i: u64| vec![(i % 253) as u8 + 1; 90 + (i % 97) as usize];
    let n = 3 * log::LOG_POPULATE_BYTES / 100 + 7;
    for i in 0..n {
        // Switch every few hundred records, so steps begin under both.
        w.set_ahead(if (i / 300) % 2 == 0 {
            Ahead::Zeros
        } else {
            Ahead::Faults
        });
        w.append(&record(i)).unwrap();
        w.write_out().unwrap();
    }
    let written = w.file_bytes();
    assert!(written > 3 * log::LOG_POPULATE_BYTES, "{written}");
    let on_disk = std::fs::metadata(&path).unwrap().len();
    assert_eq!(on_disk % log::LOG_ALLOCATE_BYTES, 0, "{on_disk}");
    // A crash: every record reads back, then the zeros end the log.
    std::mem::forget(w);
    let (seen, end, good) = read_back(&path, record);
    assert_eq!((seen, end, good), (n, LogEnd::Clean, written));
}

/// Scans the log at `path`, checking that the record of Lsn `l` is `record(l - 1)`: how many
/// records it read, how the log ended, and its good bytes.
fn read_back(path: &std::path::Path, record: impl Fn(u64) -> Vec<u8>) -> (u64, LogEnd, u64) {
    let mut seen = 0u64;
    let s = log::scan(&RealFs, path, LogLimits::default(), |lsn, p| {
        assert_eq!(p, &record(lsn - 1)[..], "record {lsn}");
        seen += 1;
        Ok(())
    })
    .unwrap();
    (seen, s.end, s.good_bytes)
}
