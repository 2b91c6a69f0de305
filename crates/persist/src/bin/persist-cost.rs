//! `persist-cost [DIR]`: what the persistence files cost on this machine (issue 22 item 9).
//!
//! - the log: batches of 64 PUTs of 8-byte keys and 8-byte values encoded as batch records
//!   and appended, with one `write_out` per batch (and per 8 batches: group commit): batches/s,
//!   ops/s and MB/s into the page cache, by wall and by CPU time; then its replay (checksums
//!   and decoding) per CPU second;
//! - `sync` latency: one small batch appended, written out and fdatasynced, 500 times;
//! - snapshots: 1 M entries of 8+8 and of 16+100 bytes, values random or text, written and
//!   read back without and with lz4: bytes on disk and CPU time (medians of 3).
//!
//! DIR (default: a directory under the system's temporary one) should be on the disk the
//! store would use; its files are removed at the end. Figures from a shared machine are only
//! comparable within one run.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use directkv_engine::Op;
use directkv_persist::batch;
use directkv_persist::fs::RealFs;
use directkv_persist::log::{LogHeader, LogLimits, LogWriter};
use directkv_persist::snapshot::{
    self, Compression, Entry, SnapshotHeader, SnapshotLimits, SnapshotOptions, SnapshotWriter,
};

const BATCH_OPS: usize = 64;

/// This thread's CPU time in seconds (the first field of /proc/thread-self/schedstat, in ns):
/// on a machine shared with other work, wall time says more about the neighbours than about
/// the code, so rates are given per CPU second as well.
fn cpu_s() -> f64 {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    s.split_whitespace()
        .next()
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(0.0)
        / 1e9
}
const RUN: Duration = Duration::from_secs(2);

/// A small xorshift, so the figures do not depend on a generator crate's version.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn bytes(&mut self, out: &mut [u8]) {
        for c in out.chunks_mut(8) {
            let v = self.next().to_le_bytes();
            c.copy_from_slice(&v[..c.len()]);
        }
    }
}

fn log_throughput(dir: &Path, batches_per_write: usize) {
    let path = dir.join(format!("cost-{batches_per_write}.dkvl"));
    let _ = std::fs::remove_file(&path);
    let header = LogHeader {
        shard: 0,
        first_lsn: 1,
    };
    let mut w = LogWriter::create(&RealFs, &path, header, LogLimits::default()).unwrap();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut kv = vec![[0u8; 16]; BATCH_OPS];
    let start = Instant::now();
    let cpu0 = cpu_s();
    let mut batches = 0u64;
    while start.elapsed() < RUN {
        for _ in 0..batches_per_write {
            for e in kv.iter_mut() {
                rng.bytes(e);
            }
            let ops: Vec<Op> = kv.iter().map(|e| Op::put(&e[..8], &e[8..])).collect();
            w.append_with(|out| {
                let head = batch::RecordHead {
                    now: 1_700_000_000_000 + batches,
                    ..Default::default()
                };
                batch::encode_record(out, &head, [], &ops, []);
            })
            .unwrap();
            batches += 1;
        }
        w.write_out().unwrap();
    }
    let secs = start.elapsed().as_secs_f64();
    let cpu = cpu_s() - cpu0;
    let bytes = w.file_bytes();
    let ops = (batches * BATCH_OPS as u64) as f64;
    println!(
        "log, {BATCH_OPS} x 8+8 PUT per batch, write_out every {batches_per_write} batch(es): \
         {:.0} batches/s, {:.2} M ops/s, {:.0} MB/s wall; per CPU second {:.0} batches, \
         {:.2} M ops, {:.0} MB; {:.1} bytes per op ({} MB in {:.2} s, {:.2} s CPU)",
        batches as f64 / secs,
        ops / secs / 1e6,
        bytes as f64 / secs / 1e6,
        batches as f64 / cpu,
        ops / cpu / 1e6,
        bytes as f64 / cpu / 1e6,
        bytes as f64 / ops,
        bytes / 1_000_000,
        secs,
        cpu
    );
    drop(w);
    // Replay: every record's checksums checked and its batch decoded (not applied).
    let c0 = cpu_s();
    let mut decoded = 0u64;
    let scan = directkv_persist::log::replay(&RealFs, &path, LogLimits::default(), |_, p| {
        decoded += batch::decode(p).map_err(|e| e.to_string())?.ops.len() as u64;
        Ok(())
    })
    .unwrap();
    let cpu = cpu_s() - c0;
    assert_eq!(
        (scan.records, decoded),
        (batches, batches * BATCH_OPS as u64)
    );
    println!(
        "  replay of that log (checksums + decode, not applied): {:.1} M ops per CPU second \
         ({:.0} MB per CPU second)",
        decoded as f64 / cpu / 1e6,
        bytes as f64 / cpu / 1e6
    );
    std::fs::remove_file(&path).unwrap();
}

fn sync_latency(dir: &Path) {
    let path = dir.join("cost-sync.dkvl");
    let _ = std::fs::remove_file(&path);
    let header = LogHeader {
        shard: 0,
        first_lsn: 1,
    };
    let mut w = LogWriter::create(&RealFs, &path, header, LogLimits::default()).unwrap();
    let kv = [7u8; 16];
    let ops: Vec<Op> = (0..BATCH_OPS)
        .map(|_| Op::put(&kv[..8], &kv[8..]))
        .collect();
    let mut us = Vec::new();
    for i in 0..500u64 {
        w.append_with(|out| {
            let head = batch::RecordHead {
                now: i,
                ..Default::default()
            };
            batch::encode_record(out, &head, [], &ops, []);
        })
        .unwrap();
        let t = Instant::now();
        w.sync().unwrap();
        us.push(t.elapsed().as_secs_f64() * 1e6);
    }
    us.sort_by(f64::total_cmp);
    let mean = us.iter().sum::<f64>() / us.len() as f64;
    println!(
        "sync (write(2) + fdatasync of one 1.5 KB batch), 500 times: mean {mean:.0} us, \
         p50 {:.0} us, p99 {:.0} us, max {:.0} us",
        us[us.len() / 2],
        us[us.len() * 99 / 100],
        us[us.len() - 1]
    );
    drop(w);
    std::fs::remove_file(&path).unwrap();
}

/// 1 M entries of `klen`+`vlen` bytes as one flat buffer: keys as a load generator makes them
/// (a zero-padded number), values random bytes or text.
fn entries(klen: usize, vlen: usize, text: bool) -> Vec<u8> {
    let mut rng = Rng(12345);
    let mut all = Vec::with_capacity(SNAP_ENTRIES as usize * (klen + vlen));
    let mut value = vec![0u8; vlen];
    for i in 0..SNAP_ENTRIES {
        all.extend_from_slice(format!("{:0w$}", i, w = klen).as_bytes());
        if text {
            let n = rng.next();
            for (j, b) in value.iter_mut().enumerate() {
                *b = b"abcdefghij0123456789 ,.:"[((n >> (j % 40)) as usize + j) % 24];
            }
        } else {
            rng.bytes(&mut value);
        }
        all.extend_from_slice(&value);
    }
    all
}

const SNAP_ENTRIES: u64 = 1_000_000;

/// Writes (and fsyncs) then reads a snapshot of `all`: (file bytes, write CPU s, read CPU s).
fn snapshot_round(
    dir: &Path,
    all: &[u8],
    klen: usize,
    vlen: usize,
    c: Compression,
) -> (u64, f64, f64) {
    let path = dir.join("cost.dkvs");
    let _ = std::fs::remove_file(&path);
    let opts = SnapshotOptions {
        compression: c,
        ..SnapshotOptions::default()
    };
    let header = SnapshotHeader {
        shard: 0,
        created_ms: 0,
        lsn: 0,
        cas_next: 0,
    };
    let c0 = cpu_s();
    let mut w = SnapshotWriter::create(&RealFs, &path, header, opts).unwrap();
    for e in all.chunks_exact(klen + vlen) {
        w.add(&Entry {
            key: &e[..klen],
            value: &e[klen..],
            deadline: 0,
            meta: None,
        })
        .unwrap();
    }
    let sum = w.finish(&RealFs).unwrap();
    let write_s = cpu_s() - c0;
    let c0 = cpu_s();
    let mut n = 0u64;
    snapshot::read(&RealFs, &path, SnapshotLimits::default(), |_| {
        n += 1;
        Ok(())
    })
    .unwrap();
    assert_eq!(n, SNAP_ENTRIES);
    let read_s = cpu_s() - c0;
    std::fs::remove_file(&path).unwrap();
    (sum.file_bytes, write_s, read_s)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn snapshot_cost(dir: &Path, klen: usize, vlen: usize, text: bool) {
    let all = entries(klen, vlen, text);
    let mut rounds: [Vec<(u64, f64, f64)>; 2] = [vec![], vec![]];
    // Alternate the two, three rounds each, so a change in the machine's load hits both.
    for _ in 0..3 {
        for (i, c) in [Compression::None, Compression::Lz4]
            .into_iter()
            .enumerate()
        {
            rounds[i].push(snapshot_round(dir, &all, klen, vlen, c));
        }
    }
    let mut bytes = [0u64; 2];
    for (i, c) in [Compression::None, Compression::Lz4]
        .into_iter()
        .enumerate()
    {
        bytes[i] = rounds[i][0].0;
        let w = median(rounds[i].iter().map(|r| r.1).collect());
        let r = median(rounds[i].iter().map(|r| r.2).collect());
        let n = SNAP_ENTRIES as f64;
        println!(
            "snapshot 1 M x {klen}+{vlen} ({}), {c:?}: {:.1} MB ({:.1} B/entry), CPU time, medians \
             of 3: write {:.3} s ({:.1} M entries/s), read {:.3} s ({:.1} M entries/s)",
            if text { "text values" } else { "random values" },
            bytes[i] as f64 / 1e6,
            bytes[i] as f64 / n,
            w,
            n / w / 1e6,
            r,
            n / r / 1e6
        );
    }
    println!(
        "  lz4 keeps {:.0}% of the bytes",
        bytes[1] as f64 * 100.0 / bytes[0] as f64
    );
}

fn main() {
    let dir: PathBuf = match std::env::args().nth(1) {
        Some(d) => PathBuf::from(d),
        None => std::env::temp_dir().join(format!("persist-cost-{}", std::process::id())),
    };
    std::fs::create_dir_all(&dir).unwrap();
    log_throughput(&dir, 1);
    log_throughput(&dir, 8);
    sync_latency(&dir);
    for (k, v) in [(8, 8), (16, 100)] {
        snapshot_cost(&dir, k, v, false);
        snapshot_cost(&dir, k, v, true);
    }
    let _ = std::fs::remove_dir(&dir);
}
