//! Helpers shared by the modules: a directory per test, and logs built from known payloads.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use directkv_persist::fs::RealFs;
use directkv_persist::log::{
    LogHeader, LogLimits, LogWriter, LOG_HEADER_BYTES, RECORD_HEADER_BYTES,
};

/// A directory of the test's own, removed when dropped.
pub struct TestDir(pub PathBuf);

impl TestDir {
    /// A new directory for `name`; a counter keeps two at once (tests side by side, or one
    /// test's helper inside another's) apart.
    pub fn new(name: &str) -> TestDir {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let d = std::env::temp_dir().join(format!("dkv-persist-{name}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        TestDir(d)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    pub fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The payload of record `i`: distinct bytes of a length that varies with `i`.
pub fn payload(i: u64) -> Vec<u8> {
    (0..(3 + i * 7 % 29)).map(|j| (i * 31 + j) as u8).collect()
}

/// A new empty log of shard 0 from lsn 1 at `path`, with the default limits.
pub fn new_log(path: &Path) -> LogWriter {
    LogWriter::create(
        &RealFs,
        path,
        LogHeader {
            shard: 0,
            first_lsn: 1,
        },
        LogLimits::default(),
    )
    .unwrap()
}

/// Writes a log of `n` records (`payload(0..n)`, lsns from 1) at `path`; returns the offset
/// where each record starts, and the file's end as the last element.
pub fn write_log(path: &Path, n: u64) -> Vec<u64> {
    let mut w = LogWriter::create(
        &RealFs,
        path,
        LogHeader {
            shard: 3,
            first_lsn: 1,
        },
        LogLimits::default(),
    )
    .unwrap();
    let mut offsets = vec![LOG_HEADER_BYTES as u64];
    for i in 0..n {
        w.append(&payload(i)).unwrap();
        let last = *offsets.last().unwrap();
        offsets.push(last + (RECORD_HEADER_BYTES + payload(i).len()) as u64);
    }
    w.sync().unwrap();
    assert_eq!(w.file_bytes(), *offsets.last().unwrap());
    offsets
}

/// Replaces `path`'s content with `bytes` by removing and recreating it: ext4 flushes a file
/// truncated and rewritten when it is closed (its `auto_da_alloc` guard), which made each of the
/// thousands of damaged copies these tests write cost milliseconds.
pub fn rewrite(path: &Path, bytes: &[u8]) {
    let _ = std::fs::remove_file(path);
    std::fs::write(path, bytes).unwrap();
}
