//! Write and fsync errors (the fault-injection seam): the writer reports each one, refuses
//! every write after it, and never reports as written or durable a record that is not; what a
//! reader finds afterwards is every record acknowledged before the fault, and possibly a torn
//! tail that recovery drops.

use directkv_persist::fs::{Fault, FaultFs, RealFs};
use directkv_persist::log::{self, LogEnd, LogError, LogHeader, LogLimits, LogWriter};

use crate::common::{payload, TestDir};

fn create(fs: &FaultFs, path: &std::path::Path) -> LogWriter {
    LogWriter::create(
        fs,
        path,
        LogHeader {
            shard: 0,
            first_lsn: 1,
        },
        LogLimits::default(),
    )
    .unwrap()
}

/// Runs groups of 3 appends, each group written out and synced, until the writer fails; returns
/// the highest lsn the writer called durable and the lsns it called written.
fn run_until_failure(w: &mut LogWriter) -> (u64, u64, LogError) {
    let mut i = 0;
    loop {
        for _ in 0..3 {
            let lsn = w.append(&payload(i)).unwrap();
            assert_eq!(lsn, i + 1);
            i += 1;
        }
        if let Err(e) = w.write_out() {
            return (w.durable_lsn(), w.written_lsn(), e);
        }
        assert_eq!(w.written_lsn(), i);
        if let Err(e) = w.sync() {
            return (w.durable_lsn(), w.written_lsn(), e);
        }
        assert_eq!(w.durable_lsn(), i);
    }
}

#[test]
fn each_fault_is_reported_and_nothing_unwritten_is_acknowledged() {
    // Writes: the header is write 0, then one per group; syncs: the header's, the directory's,
    // then one per group.
    let faults = [
        Fault::FailWrite(1),
        Fault::FailWrite(4),
        Fault::ShortWrite(1),
        Fault::ShortWrite(3),
        Fault::FailSync(2),
        Fault::FailSync(5),
        Fault::Crash(9),
        Fault::Crash(10),
    ];
    for fault in faults {
        let dir = TestDir::new(&format!("faults-{fault:?}"));
        let path = dir.join("l.dkvl");
        let fs = FaultFs::new(Some(fault));
        let mut w = create(&fs, &path);
        let (durable, written, err) = run_until_failure(&mut w);
        assert!(matches!(err, LogError::Io { .. }), "{fault:?}: {err}");
        assert!(w.failure().is_some(), "{fault:?}");
        // Everything after the failure is refused, nothing more is acknowledged.
        assert!(
            matches!(w.append(b"x"), Err(LogError::Failed { .. })),
            "{fault:?}"
        );
        assert!(
            matches!(w.sync(), Err(LogError::Failed { .. })),
            "{fault:?}"
        );
        assert_eq!((w.durable_lsn(), w.written_lsn()), (durable, written));
        drop(w);
        // What is in the file: every record called written, in order, and at most a torn tail.
        let mut got = vec![];
        let s = log::replay(&RealFs, &path, LogLimits::default(), |lsn, p| {
            assert_eq!(p, payload(lsn - 1));
            got.push(lsn);
            Ok(())
        })
        .unwrap();
        assert!(s.records >= written, "{fault:?}: {} < {written}", s.records);
        assert!(durable <= written);
        if matches!(fault, Fault::ShortWrite(_)) {
            assert!(
                matches!(s.end, LogEnd::TornTail { .. }),
                "{fault:?}: {:?}",
                s.end
            );
        }
        // Reopened (the disk has room again), the log continues after its last good record.
        let (mut w, scan) = LogWriter::open(&RealFs, &path, LogLimits::default()).unwrap();
        assert_eq!(w.append(b"again").unwrap(), scan.next_lsn);
        w.sync().unwrap();
    }
}

#[test]
fn group_commit_one_write_and_one_sync_for_many_appends() {
    let dir = TestDir::new("group");
    let path = dir.join("l.dkvl");
    let fs = FaultFs::new(None);
    let mut w = create(&fs, &path);
    let before = fs.ops_done();
    for i in 0..64 {
        w.append(&payload(i)).unwrap();
    }
    assert_eq!(w.written_lsn(), 0);
    assert_eq!(w.write_out().unwrap(), 64);
    assert_eq!(fs.ops_done() - before, 1, "one write(2) for the group");
    assert_eq!(w.durable_lsn(), 0);
    assert_eq!(w.sync().unwrap(), 64);
    assert_eq!(fs.ops_done() - before, 2, "one fdatasync for the group");
    assert_eq!(w.sync().unwrap(), 64);
    assert_eq!(fs.ops_done() - before, 2, "nothing new: no fdatasync");
}

#[test]
fn limits_refuse_a_record_too_large_and_a_full_buffer_without_harm() {
    let dir = TestDir::new("limits");
    let path = dir.join("l.dkvl");
    let limits = LogLimits {
        record_bytes_max: 100,
        pending_bytes_max: 250,
    };
    let mut w = LogWriter::create(
        &RealFs,
        &path,
        LogHeader {
            shard: 0,
            first_lsn: 5,
        },
        limits,
    )
    .unwrap();
    assert!(matches!(
        w.append(&[0u8; 101]),
        Err(LogError::RecordTooLarge { len: 101, max: 100 })
    ));
    assert_eq!(w.append(&[1u8; 100]).unwrap(), 5);
    assert_eq!(w.append(&[2u8; 100]).unwrap(), 6);
    assert!(matches!(
        w.append(&[3u8; 100]),
        Err(LogError::PendingFull { .. })
    ));
    w.write_out().unwrap();
    assert_eq!(w.append(&[3u8; 100]).unwrap(), 7);
    w.sync().unwrap();
    let s = log::replay(&RealFs, &path, limits, |_, _| Ok(())).unwrap();
    assert_eq!((s.records, s.next_lsn), (3, 8));
    // A reader whose limit is below a record's length does not read it as data.
    let small = LogLimits {
        record_bytes_max: 50,
        pending_bytes_max: 100,
    };
    let s = log::scan(&RealFs, &path, small, |_, _| Ok(())).unwrap();
    assert_eq!(s.records, 0);
    assert!(s.end != LogEnd::Clean);
}
