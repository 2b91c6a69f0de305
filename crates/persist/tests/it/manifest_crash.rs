//! A crash at every step of a manifest update leaves the directory with the old manifest or the
//! new one, whole; write and fsync errors are reported and leave the old one; a damaged
//! manifest is refused with a clear error.

use directkv_persist::fs::{Fault, FaultFs, RealFs};
use directkv_persist::manifest::{
    self, log_file_name, snapshot_file_name, Manifest, ShardFiles, MANIFEST_FILE,
};

use crate::common::TestDir;

fn manifest(generation: u64, shards: usize) -> Manifest {
    Manifest {
        generation,
        shards: (0..shards)
            .map(|s| ShardFiles {
                snapshot: (generation > 1).then(|| snapshot_file_name(s, generation)),
                logs: vec![log_file_name(s, generation)],
            })
            .collect(),
    }
}

#[test]
fn a_crash_at_every_step_leaves_the_old_or_the_new_manifest() {
    let dir = TestDir::new("manifest-crash");
    let old = manifest(1, 4);
    let new = manifest(2, 4);
    // Count the steps of an update.
    let counting = FaultFs::new(None);
    manifest::store(&counting, dir.path(), &old).unwrap();
    let steps = counting.ops_done();
    assert_eq!(
        steps, 5,
        "create, write, fdatasync, rename, fsync directory"
    );
    for crash in 0..=steps {
        manifest::store(&RealFs, dir.path(), &old).unwrap();
        let fs = FaultFs::new(Some(Fault::Crash(crash)));
        let r = manifest::store(&fs, dir.path(), &new);
        assert_eq!(r.is_ok(), crash == steps, "crash at step {crash}");
        let got = manifest::load(&RealFs, dir.path()).unwrap().unwrap();
        // Before the rename (step 3) the old one stands, from it on the new one.
        let want = if crash > 3 { &new } else { &old };
        assert_eq!(&got, want, "crash at step {crash}");
        // The next update works over whatever the crash left (a MANIFEST.tmp, say).
        manifest::store(&RealFs, dir.path(), &new).unwrap();
        assert_eq!(manifest::load(&RealFs, dir.path()).unwrap().unwrap(), new);
    }
}

#[test]
fn write_and_sync_errors_are_reported_and_leave_the_old_manifest() {
    let dir = TestDir::new("manifest-faults");
    let old = manifest(1, 2);
    for fault in [
        Fault::FailWrite(0),
        Fault::ShortWrite(0),
        Fault::FailSync(0),
        Fault::FailSync(1),
    ] {
        manifest::store(&RealFs, dir.path(), &old).unwrap();
        let err = manifest::store(&FaultFs::new(Some(fault)), dir.path(), &manifest(2, 2));
        assert!(err.is_err(), "{fault:?}");
        let got = manifest::load(&RealFs, dir.path()).unwrap().unwrap();
        // A failed directory fsync comes after the rename: the new manifest may stand, whole.
        if fault != Fault::FailSync(1) {
            assert_eq!(got, old, "{fault:?}");
        }
    }
}

#[test]
fn a_damaged_or_missing_manifest_is_reported_clearly() {
    let dir = TestDir::new("manifest-damaged");
    assert!(manifest::load(&RealFs, dir.path()).unwrap().is_none());
    manifest::store(&RealFs, dir.path(), &manifest(3, 2)).unwrap();
    let path = dir.join(MANIFEST_FILE);
    let mut text = std::fs::read(&path).unwrap();
    let at = text.iter().position(|&b| b == b'3').unwrap();
    text[at] = b'4';
    std::fs::write(&path, &text).unwrap();
    let err = manifest::load(&RealFs, dir.path()).unwrap_err().to_string();
    assert!(
        err.contains("MANIFEST") && err.contains("damaged manifest, refused: checksum mismatch"),
        "{err}"
    );
    std::fs::write(&path, vec![b'x'; 2 << 20]).unwrap();
    let err = manifest::load(&RealFs, dir.path()).unwrap_err().to_string();
    assert!(err.contains("over MANIFEST_BYTES_MAX"), "{err}");
}
