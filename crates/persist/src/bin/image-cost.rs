//! `image-cost [DIR] [KEYS] [load]`: what an engine's image costs on this machine (issue 22's targets
//! "Restart >= 10 M keys/s per shard" and "Snapshot while serving >= 0.8x, extra memory <= 5%
//! of the arena"), `docs/persistence.md` "How a snapshot is taken".
//!
//! - write: KEYS (default 1 M) 8-byte keys with 8-byte values, written to a snapshot file by
//!   `image::write_image`;
//! - load: `image::load_image` (the file read and checked with `snapshot::read`, every entry
//!   stored) into a new engine, 5 times: median keys/s, by wall and by CPU time, into an arena
//!   prefaulted before the clock starts and into one faulted during the load; and the read
//!   alone (no engine) for the split;
//! - serving: batches of 64 operations (half GETs, half PUTs of random keys: YCSB-A) on the
//!   loaded engine for 2 s without a snapshot, then 2 s with one taken all the time (an image
//!   written a step of 16, 64 or 256 buckets after every batch; a new one begun when one
//!   ends), alternating 3 times: ops/s of each and their ratio, how long an image took, and
//!   the snapshot's memory (bitmap and side buffer) at its peak next to the arena.
//!
//! With `load`, stops after the load figures. One thread does everything (as a shard would), so the serving figure charges the snapshot's
//! file writes to the shard. DIR (default: the system's temporary directory) should be on the
//! disk the store would use; the files are removed at the end. Figures from a shared machine
//! are only comparable within one run.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use directkv_engine::{Engine, EngineConfig, Op, Results};
use directkv_persist::fs::RealFs;
use directkv_persist::image::{load_image, write_image, ImageWriter, IMAGE_STEP_BUCKETS_DEFAULT};
use directkv_persist::snapshot::{self, SnapshotHeader, SnapshotLimits, SnapshotOptions};

const BATCH_OPS: usize = 64;
const RUNS: usize = 5;
/// Step budgets (main buckets after each batch of 64 operations) the serving figure is
/// measured with.
const SERVING_BUDGETS: [u64; 3] = [16, 64, 256];

/// This thread's CPU time in seconds (/proc/thread-self/schedstat): on a shared machine wall
/// time says as much about the neighbours as about the code.
fn cpu_s() -> f64 {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    s.split_whitespace()
        .next()
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(0.0)
        / 1e9
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// A small xorshift, so the figures do not depend on a generator crate's version.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn engine(keys: u64, prefault: bool) -> Engine {
    // About 3x the bytes the keys need, as a server sized for them would be.
    let memory = ((keys as usize * 100).next_power_of_two()).max(64 << 20);
    let mut cfg = EngineConfig::with_memory(memory);
    cfg.expected_kv_bytes = 16;
    cfg.prefault = prefault;
    Engine::new(cfg).expect("engine")
}

fn header() -> SnapshotHeader {
    SnapshotHeader {
        shard: 0,
        created_ms: 0,
        lsn: 0,
        cas_next: 0,
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = args.next().map_or_else(std::env::temp_dir, PathBuf::from);
    let keys: u64 = args.next().map_or(1_000_000, |k| k.parse().expect("KEYS"));
    let dir = dir.join(format!("image-cost-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("DIR");
    let path = dir.join("image.dkvs");

    let mut e = engine(keys, true);
    let mut out = Results::default();
    let key_bytes: Vec<[u8; 8]> = (0..keys).map(|i| i.to_le_bytes()).collect();
    for c in key_bytes.chunks(BATCH_OPS) {
        let ops: Vec<Op> = c.iter().map(|k| Op::put(k, k)).collect();
        e.execute(&ops, &mut out);
    }
    let (t, c) = (Instant::now(), cpu_s());
    let sum = write_image(
        &RealFs,
        &path,
        &mut e,
        header(),
        SnapshotOptions::default(),
        IMAGE_STEP_BUCKETS_DEFAULT,
    )
    .expect("write");
    println!(
        "write: {} keys, {} bytes, {:.3} s wall, {:.3} s CPU ({:.1} M keys/s wall)",
        sum.entries,
        sum.file_bytes,
        t.elapsed().as_secs_f64(),
        cpu_s() - c,
        sum.entries as f64 / t.elapsed().as_secs_f64() / 1e6
    );

    let mut read_only = vec![];
    for _ in 0..RUNS {
        let (t, c) = (Instant::now(), cpu_s());
        let mut n = 0u64;
        snapshot::read(&RealFs, &path, SnapshotLimits::default(), |_| {
            n += 1;
            Ok(())
        })
        .expect("read");
        read_only.push((
            n as f64 / t.elapsed().as_secs_f64(),
            n as f64 / (cpu_s() - c),
        ));
    }
    println!(
        "read alone (no engine): median {:.1} M entries/s wall, {:.1} M per CPU second",
        median(read_only.iter().map(|x| x.0).collect()) / 1e6,
        median(read_only.iter().map(|x| x.1).collect()) / 1e6
    );
    for prefault in [true, false] {
        let mut wall = vec![];
        let mut cpu = vec![];
        for _ in 0..RUNS {
            let mut f = engine(keys, prefault);
            let (t, c) = (Instant::now(), cpu_s());
            let s = load_image(&RealFs, &path, &mut f, SnapshotLimits::default()).expect("load");
            let (w, cs) = (t.elapsed().as_secs_f64(), cpu_s() - c);
            assert_eq!(s.loaded, keys);
            wall.push(s.loaded as f64 / w);
            cpu.push(s.loaded as f64 / cs);
        }
        println!(
            "load (read + store), arena {}: median {:.1} M keys/s wall ({:.1} .. {:.1}), {:.1} M keys per CPU second",
            if prefault { "prefaulted" } else { "faulted during the load" },
            median(wall.clone()) / 1e6,
            wall.iter().cloned().fold(f64::MAX, f64::min) / 1e6,
            wall.iter().cloned().fold(0.0, f64::max) / 1e6,
            median(cpu) / 1e6
        );
    }

    if args.next().as_deref() == Some("load") {
        let _ = std::fs::remove_dir_all(&dir);
        return;
    }
    // Serving with and without a snapshot running.
    let arena = e.report().arena_bytes as u64;
    let mut r = Rng(0x9e37_79b9_7f4a_7c15);
    let vals: Vec<[u8; 8]> = (0..BATCH_OPS as u64)
        .map(|i| (i * 7).to_le_bytes())
        .collect();
    let mut idx = vec![0usize; BATCH_OPS];
    for budget in SERVING_BUDGETS {
        let mut extra_peak = 0u64;
        let mut side_peak = 0u64;
        let mut images = 0u64;
        let mut image_s = vec![];
        let mut rates = [vec![], vec![]];
        for _round in 0..3 {
            for (mode, rate) in rates.iter_mut().enumerate() {
                let snapshotting = mode == 1;
                let mut w: Option<(ImageWriter, Instant)> = None;
                let (t, mut ops_done) = (Instant::now(), 0u64);
                while t.elapsed() < Duration::from_secs(2) {
                    for i in idx.iter_mut() {
                        *i = (r.next() % keys) as usize;
                    }
                    let ops: [Op; BATCH_OPS] = std::array::from_fn(|j| {
                        if j % 2 == 0 {
                            Op::get(&key_bytes[idx[j]])
                        } else {
                            Op::put(&key_bytes[idx[j]], &vals[j])
                        }
                    });
                    e.execute(&ops, &mut out);
                    ops_done += BATCH_OPS as u64;
                    if !snapshotting {
                        continue;
                    }
                    if w.is_none() {
                        let _ = std::fs::remove_file(&path);
                        let iw = ImageWriter::begin(
                            &RealFs,
                            &path,
                            &mut e,
                            header(),
                            SnapshotOptions::default(),
                        )
                        .expect("begin");
                        w = Some((iw, Instant::now()));
                    }
                    let (writer, began) = w.as_mut().expect("writer");
                    let began = *began;
                    let done = writer.step(&mut e, budget).expect("step");
                    if let Some(p) = e.snapshot_progress() {
                        extra_peak = extra_peak.max(p.extra_bytes);
                        side_peak = side_peak.max(p.side_bytes_peak);
                    }
                    if done {
                        w.take().expect("writer").0.finish(&RealFs).expect("finish");
                        images += 1;
                        image_s.push(began.elapsed().as_secs_f64());
                    }
                }
                if let Some((w, _)) = w {
                    w.abort(&mut e);
                }
                rate.push(ops_done as f64 / t.elapsed().as_secs_f64());
            }
        }
        let (plain, snap) = (median(rates[0].clone()), median(rates[1].clone()));
        println!(
            "serving YCSB-A batches of {BATCH_OPS} on {keys} keys, a step of {budget} buckets after each batch: {:.2} M ops/s without a snapshot, {:.2} M ops/s while one is taken: {:.2}x; {images} images finished, median {:.2} s each",
            plain / 1e6,
            snap / 1e6,
            snap / plain,
            if image_s.is_empty() { f64::NAN } else { median(image_s) }
        );
        println!(
            "  snapshot memory peak {extra_peak} bytes ({:.3}% of the {arena}-byte arena), side buffer peak {side_peak} bytes",
            extra_peak as f64 * 100.0 / arena as f64
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
