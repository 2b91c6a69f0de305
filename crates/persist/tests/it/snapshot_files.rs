//! Snapshot files: any set of entries (keys, values, deadlines, item meta) round-trips, with and
//! without compression and at any block size; a cut or a flipped bit anywhere is refused with
//! the file and an offset; a crash while writing leaves a file that is refused, not half loaded.

use directkv_persist::fs::{Fault, FaultFs, RealFs};
use directkv_persist::snapshot::{
    self, Compression, Entry, ItemMeta, SnapshotHeader, SnapshotLimits, SnapshotOptions,
    SnapshotSummary,
};
use proptest::prelude::*;

use crate::common::TestDir;

type Owned = (Vec<u8>, Vec<u8>, u64, Option<(u32, u64)>);

fn header() -> SnapshotHeader {
    SnapshotHeader {
        shard: 2,
        created_ms: 1_700_000_000_000,
        lsn: 77,
        cas_next: 0,
    }
}

fn write(
    fs: &dyn directkv_persist::fs::Fs,
    path: &std::path::Path,
    entries: &[Owned],
    opts: SnapshotOptions,
) -> Result<SnapshotSummary, snapshot::SnapshotError> {
    let mut w = snapshot::SnapshotWriter::create(fs, path, header(), opts)?;
    for (k, v, d, m) in entries {
        w.add(&Entry {
            key: k,
            value: v,
            deadline: *d,
            meta: m.map(|(flags, cas)| ItemMeta { flags, cas }),
        })?;
    }
    w.finish(fs)
}

fn read_back(path: &std::path::Path) -> Result<Vec<Owned>, String> {
    let mut got = vec![];
    let (h, _) = snapshot::read(&RealFs, path, SnapshotLimits::default(), |e| {
        got.push((
            e.key.to_vec(),
            e.value.to_vec(),
            e.deadline,
            e.meta.map(|m| (m.flags, m.cas)),
        ));
        Ok(())
    })
    .map_err(|e| e.to_string())?;
    assert_eq!(h, header());
    Ok(got)
}

fn entry() -> impl Strategy<Value = Owned> {
    (
        prop::collection::vec(any::<u8>(), 1..40),
        prop::collection::vec(any::<u8>(), 0..300),
        prop_oneof![Just(0u64), any::<u64>()],
        prop::option::of((any::<u32>(), any::<u64>())),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn any_entries_round_trip(
        entries in prop::collection::vec(entry(), 0..200),
        block_bytes in 1usize..4096,
        lz4 in any::<bool>(),
    ) {
        let dir = TestDir::new("snap-prop");
        let path = dir.join("s.dkvs");
        let opts = SnapshotOptions {
            block_bytes,
            compression: if lz4 { Compression::Lz4 } else { Compression::None },
        };
        let sum = write(&RealFs, &path, &entries, opts).unwrap();
        prop_assert_eq!(sum.entries, entries.len() as u64);
        prop_assert_eq!(sum.file_bytes, std::fs::metadata(&path).unwrap().len());
        prop_assert_eq!(read_back(&path).unwrap(), entries);
    }
}

fn sample() -> Vec<Owned> {
    (0..40u64)
        .map(|i| {
            (
                format!("key:{i:04}").into_bytes(),
                vec![b'a' + (i % 3) as u8; (i % 9) as usize * 4],
                if i % 4 == 0 { 1_700_000_100_000 + i } else { 0 },
                (i % 5 == 0).then_some((i as u32, i * 1000)),
            )
        })
        .collect()
}

#[test]
fn every_cut_and_every_bit_flip_is_refused_with_an_offset() {
    let dir = TestDir::new("snap-damage");
    for compression in [Compression::None, Compression::Lz4] {
        let clean = dir.join("clean.dkvs");
        let _ = std::fs::remove_file(&clean);
        let opts = SnapshotOptions {
            block_bytes: 200,
            compression,
        };
        let sum = write(&RealFs, &clean, &sample(), opts).unwrap();
        assert!(sum.blocks > 3, "{sum:?}");
        let bytes = std::fs::read(&clean).unwrap();
        assert_eq!(read_back(&clean).unwrap(), sample());
        let path = dir.join("bad.dkvs");
        for cut in 0..bytes.len() {
            crate::common::rewrite(&path, &bytes[..cut]);
            let e = read_back(&path).expect_err(&format!("cut at {cut}"));
            assert!(e.contains("bad.dkvs") && e.contains("offset"), "{e}");
        }
        for at in 0..bytes.len() {
            for bit in [0, 3, 7] {
                let mut b = bytes.clone();
                b[at] ^= 1 << bit;
                crate::common::rewrite(&path, &b);
                let e =
                    read_back(&path).expect_err(&format!("{compression:?} byte {at} bit {bit}"));
                assert!(e.contains("damaged snapshot at offset"), "{e}");
            }
        }
        let mut extra = bytes.clone();
        extra.push(0);
        std::fs::write(&path, &extra).unwrap();
        assert!(read_back(&path)
            .unwrap_err()
            .contains("1 bytes after the trailer"));
    }
}

#[test]
fn a_crash_or_a_write_error_while_writing_is_reported_and_the_file_refused() {
    let dir = TestDir::new("snap-crash");
    let opts = SnapshotOptions {
        block_bytes: 100,
        compression: Compression::None,
    };
    let counting = FaultFs::new(None);
    write(&counting, &dir.join("count.dkvs"), &sample(), opts).unwrap();
    let steps = counting.ops_done();
    for crash in 1..steps {
        for fault in [Fault::Crash(crash), Fault::ShortWrite(crash - 1)] {
            let path = dir.join(&format!(
                "s-{crash}-{}.dkvs",
                matches!(fault, Fault::Crash(_))
            ));
            let fs = FaultFs::new(Some(fault));
            if write(&fs, &path, &sample(), opts).is_ok() {
                // Only a fault past the last write and sync can let the writer finish.
                assert!(matches!(fault, Fault::ShortWrite(_)), "{fault:?}");
                continue;
            }
            // The last steps are the syncs: the bytes may all be there; otherwise refused.
            match read_back(&path) {
                Ok(got) => assert_eq!(got, sample(), "{fault:?}"),
                Err(e) => assert!(e.contains("damaged snapshot at offset"), "{fault:?}: {e}"),
            }
        }
    }
}

#[test]
fn an_entry_larger_than_a_block_gets_a_block_of_its_own() {
    let dir = TestDir::new("snap-large");
    let path = dir.join("s.dkvs");
    let entries: Vec<Owned> = vec![
        (b"small".to_vec(), b"1".to_vec(), 0, None),
        (b"large".to_vec(), vec![7; 100_000], 5, None),
        (b"after".to_vec(), b"2".to_vec(), 0, None),
    ];
    let sum = write(&RealFs, &path, &entries, SnapshotOptions::default()).unwrap();
    assert_eq!((sum.blocks, sum.entries), (3, 3));
    let opts = SnapshotOptions {
        block_bytes: 64,
        compression: Compression::Lz4,
    };
    let p2 = dir.join("s2.dkvs");
    let sum = write(&RealFs, &p2, &entries, opts).unwrap();
    assert_eq!(sum.blocks, 3);
    assert!(sum.file_bytes < 2000, "the run of 7s compresses: {sum:?}");
    assert_eq!(read_back(&p2).unwrap(), entries);
    // A reader whose block limit is below the large block refuses it.
    let err = snapshot::read(
        &RealFs,
        &p2,
        SnapshotLimits {
            block_bytes_max: 50_000,
        },
        |_| Ok(()),
    )
    .unwrap_err();
    assert!(err.to_string().contains("over block_bytes_max"), "{err}");
}
