//! `directkv check DIR [--repair]` through the real binary: it reports each persistence file's
//! state (records, last good offset, torn tail, corruption with file and offset, leftovers),
//! exits 0 when a server would start on the directory and 2 when it would refuse, and `--repair`
//! truncates a damaged log to its last good record, refusing while another process holds the
//! directory.

use std::path::{Path, PathBuf};
use std::process::Command;

use directkv_persist::fs::RealFs;
use directkv_persist::lock::DirLock;
use directkv_persist::log::{LogHeader, LogLimits, LogWriter};
use directkv_persist::manifest::{self, log_file_name, snapshot_file_name, Manifest, ShardFiles};
use directkv_persist::snapshot::{Entry, SnapshotHeader, SnapshotOptions, SnapshotWriter};

struct Dir(PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `directkv check args`: (exit code, stdout, stderr).
fn check(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_directkv"))
        .arg("check")
        .args(args)
        .output()
        .expect("directkv runs");
    (
        out.status.code().expect("exited"),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Writes a log of `n` 10-byte records; returns each record's offset and the file's end.
fn log(path: &Path, shard: u32, n: u64) -> Vec<u64> {
    let mut w = LogWriter::create(
        &RealFs,
        path,
        LogHeader {
            shard,
            first_lsn: 1,
        },
        LogLimits::default(),
    )
    .unwrap();
    let mut offsets = vec![w.file_bytes()];
    for i in 0..n {
        w.append(format!("record {i:03}").as_bytes()).unwrap();
        w.write_out().unwrap();
        offsets.push(w.file_bytes());
    }
    w.sync().unwrap();
    offsets
}

#[test]
fn check_reports_torn_tails_and_corruption_and_repair_truncates() {
    let d = Dir(std::env::temp_dir().join(format!("dkv-cli-check-{}", std::process::id())));
    let _ = std::fs::remove_dir_all(&d.0);
    std::fs::create_dir_all(&d.0).unwrap();
    let dir = d.0.to_str().unwrap();
    let (l0, l1, s0) = (
        log_file_name(0, 1),
        log_file_name(1, 1),
        snapshot_file_name(0, 1),
    );
    let off0 = log(&d.0.join(&l0), 0, 6);
    let off1 = log(&d.0.join(&l1), 1, 4);
    let mut w = SnapshotWriter::create(
        &RealFs,
        &d.0.join(&s0),
        SnapshotHeader {
            shard: 0,
            created_ms: 1,
            lsn: 0,
            cas_next: 0,
        },
        SnapshotOptions::default(),
    )
    .unwrap();
    w.add(&Entry {
        key: b"k",
        value: b"v",
        deadline: 0,
        meta: None,
    })
    .unwrap();
    w.finish(&RealFs).unwrap();
    manifest::store(
        &RealFs,
        &d.0,
        &Manifest {
            generation: 1,
            shards: vec![
                ShardFiles {
                    snapshot: Some(s0.clone()),
                    logs: vec![l0.clone()],
                },
                ShardFiles {
                    snapshot: None,
                    logs: vec![l1.clone()],
                },
            ],
        },
    )
    .unwrap();
    log(&d.0.join(log_file_name(0, 2)), 0, 1);

    let (code, out, err) = check(&[dir]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("MANIFEST: generation 1, 2 shards"), "{out}");
    assert!(
        out.contains(&format!(
            "{l0}: log of shard 0, 6 records (lsn 1..6), last good offset {}, clean",
            off0[6]
        )),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "{s0}: snapshot of shard 0, lsn 0, 1 entries in 1 blocks"
        )),
        "{out}"
    );
    assert!(
        out.contains("log-0000-0000000002.dkvl: log of shard 0, 1 records")
            && out.contains("[not in the manifest"),
        "{out}"
    );
    assert!(out.ends_with("state: ok\n"), "{out}");

    // A torn tail: recovery would truncate it, so the directory is still usable (exit 0).
    let p1 = d.0.join(&l1);
    let b1 = std::fs::read(&p1).unwrap();
    std::fs::write(&p1, &b1[..b1.len() - 3]).unwrap();
    let (code, out, _) = check(&[dir]);
    assert_eq!(code, 0, "{out}");
    let torn = format!(
        "torn tail at offset {}: {} bytes that recovery drops",
        off1[3],
        off1[4] - off1[3] - 3
    );
    assert!(out.contains(&torn), "{out}");

    // Corruption in the middle of shard 0's log: exit 2, with the file and offset.
    let p0 = d.0.join(&l0);
    let mut b0 = std::fs::read(&p0).unwrap();
    b0[off0[2] as usize + 25] ^= 0x10;
    std::fs::write(&p0, &b0).unwrap();
    let (code, out, _) = check(&[dir]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains(&format!("{l0}: log of shard 0, 2 records (lsn 1..2), last good offset {o}, CORRUPT at offset {o} (payload checksum mismatch", o = off0[2])), "{out}");
    assert!(
        out.contains(&format!("a good record follows at {}", off0[3])),
        "{out}"
    );
    assert!(out.contains("state: DAMAGED"), "{out}");

    // --repair is refused while another process (here: this one) holds the directory.
    let lock = DirLock::acquire(&d.0).unwrap();
    let (code, _, err) = check(&[dir, "--repair"]);
    assert_eq!(code, 1);
    assert!(err.contains("in use by another directkv process"), "{err}");
    drop(lock);

    let (code, out, _) = check(&[dir, "--repair"]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(&format!(
            "repaired: truncated to offset {} (2 records kept, {} bytes dropped)",
            off0[2],
            off0[6] - off0[2]
        )),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "repaired: truncated to offset {} (3 records kept",
            off1[3]
        )),
        "{out}"
    );
    let (code, out, _) = check(&[dir]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(&format!(
            "{l0}: log of shard 0, 2 records (lsn 1..2), last good offset {}, clean",
            off0[2]
        )),
        "{out}"
    );
    assert!(!out.contains("torn") && !out.contains("CORRUPT"), "{out}");

    // A damaged manifest is refused (exit 2) and named.
    let mp = d.0.join("MANIFEST");
    let mut m = std::fs::read(&mp).unwrap();
    m[0] ^= 1;
    std::fs::write(&mp, &m).unwrap();
    let (code, out, _) = check(&[dir]);
    assert_eq!(code, 2, "{out}");
    assert!(
        out.contains("MANIFEST: DAMAGED") && out.contains("checksum mismatch"),
        "{out}"
    );

    let (code, _, err) = check(&["/nonexistent-directkv-dir"]);
    assert_eq!((code, err.contains("not a directory")), (1, true), "{err}");
}
