//! Hostile bytes: whatever a file holds, the readers return an error or a value, never panic,
//! and never allocate from a length they have not checked against what is there (a record of
//! 4 GiB claimed by a 100-byte file is refused, not read).

use directkv_persist::batch;
use directkv_persist::fs::RealFs;
use directkv_persist::log::{self, frame_record, LogEnd, LogLimits};
use directkv_persist::manifest::Manifest;
use directkv_persist::snapshot::{self, SnapshotLimits};
use proptest::prelude::*;

use crate::common::{rewrite, TestDir};

/// A valid log header of shard 0 from lsn 1 (as `LogWriter::create` writes it).
fn log_header() -> Vec<u8> {
    let dir = TestDir::new("hostile-header");
    let path = dir.join("l.dkvl");
    crate::common::write_log(&path, 0);
    std::fs::read(&path).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn batch_decode_never_panics(mut bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        let _ = batch::decode(&bytes);
        // With a good version and flags, the decoder reads on into the counts and ops.
        if bytes.len() >= 2 {
            bytes[0] = batch::RECORD_VERSION;
            bytes[1] &= batch::FLAG_FLUSH;
        }
        let _ = batch::decode(&bytes);
    }

    #[test]
    fn manifest_decode_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        let _ = Manifest::decode(&bytes);
    }

    #[test]
    fn a_log_of_random_records_never_panics_and_ends_somewhere(
        tail in prop::collection::vec(any::<u8>(), 0..400),
        framed in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 0..4),
    ) {
        let dir = TestDir::new("hostile-log");
        let path = dir.join("l.dkvl");
        let mut bytes = log_header();
        for (i, p) in framed.iter().enumerate() {
            frame_record(&mut bytes, i as u64 + 1, p);
        }
        bytes.extend_from_slice(&tail);
        rewrite(&path, &bytes);
        let mut n = 0;
        let s = log::scan(&RealFs, &path, LogLimits::default(), |_, p| {
            // Random payloads are decoded as batches too: an error, never a panic.
            let _ = batch::decode(p);
            n += 1;
            Ok(())
        }).unwrap();
        prop_assert!(s.records >= framed.len() as u64 || s.end != LogEnd::Clean);
        prop_assert_eq!(s.records, n);
        prop_assert!(s.good_bytes <= s.file_bytes);
    }

    #[test]
    fn a_snapshot_of_random_bytes_is_refused(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        let dir = TestDir::new("hostile-snap");
        let path = dir.join("s.dkvs");
        let mut b = b"DKVSNAP\n".to_vec();
        b.extend_from_slice(&bytes);
        rewrite(&path, &b);
        prop_assert!(snapshot::read(&RealFs, &path, SnapshotLimits::default(), |_| Ok(())).is_err());
    }
}

#[test]
fn a_record_claiming_4_gib_in_a_small_file_is_not_read() {
    let dir = TestDir::new("hostile-4g");
    let path = dir.join("l.dkvl");
    let mut bytes = log_header();
    let mut rec = vec![];
    frame_record(&mut rec, 1, b"x");
    // Claim u32::MAX bytes with a valid header checksum: the length is over record_bytes_max.
    rec[..4].copy_from_slice(&u32::MAX.to_le_bytes());
    let crc = crc_of(&rec[..16]);
    rec[16..20].copy_from_slice(&crc.to_le_bytes());
    bytes.extend_from_slice(&rec);
    rewrite(&path, &bytes);
    let s = log::scan(&RealFs, &path, LogLimits::default(), |_, _| Ok(())).unwrap();
    assert_eq!(s.records, 0);
    assert!(
        matches!(s.end, LogEnd::TornTail { offset: 32, .. }),
        "{:?}",
        s.end
    );
}

/// crc32c, bit by bit (the reference the log's checksums must agree with).
fn crc_of(data: &[u8]) -> u32 {
    let mut crc = 0xffff_ffffu32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = (crc >> 1) ^ if crc & 1 != 0 { 0x82F6_3B78 } else { 0 };
        }
    }
    !crc
}
