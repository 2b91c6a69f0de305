//! An engine's image in a snapshot file and back (`src/image.rs`): written a step at a time
//! between batches that keep changing the store, the file holds the store at the point; loaded
//! into a new engine it gives back every key, value, deadline, flags and CAS, and `cas_next`;
//! entries expired by the loading engine's `now` are left out and counted; a damaged file or an
//! engine too small is an error naming the file; a second writer on a busy engine is refused.

use directkv_engine::mc::StoreArgs;
use directkv_engine::{Engine, EngineConfig, Op, Results, NO_DEADLINE};
use directkv_persist::fs::RealFs;
use directkv_persist::image::{
    load_image, write_image, ImageError, ImageWriter, IMAGE_STEP_BUCKETS_DEFAULT,
};
use directkv_persist::snapshot::{SnapshotError, SnapshotHeader, SnapshotLimits, SnapshotOptions};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::common::TestDir;

const T0: u64 = 1_700_000_000_000;

type Store = Vec<(Vec<u8>, Vec<u8>, u64, u32, u64)>;
/// A random write's key, value, kind and its PutExpire and McStore arguments.
type Write = (Vec<u8>, Vec<u8>, u8, [u8; 9], [u8; 29]);

fn engine(memory: usize) -> Engine {
    let mut cfg = EngineConfig::with_memory(memory);
    cfg.value_len_max = 4096;
    let mut e = Engine::new(cfg).unwrap();
    e.set_now(T0);
    e
}

fn contents(e: &Engine) -> Store {
    let mut v = vec![];
    let mut cursor = 0;
    loop {
        cursor = e.scan_items(cursor, 1 << 20, |k, val, m| {
            v.push((k.to_vec(), val.to_vec(), m.deadline, m.flags, m.cas))
        });
        if cursor == 0 {
            break;
        }
    }
    v.sort();
    v
}

fn header(shard: u32) -> SnapshotHeader {
    SnapshotHeader {
        shard,
        created_ms: T0,
        lsn: 41,
        cas_next: 0,
    }
}

/// Random puts (some with deadlines), deletes and memcache sets (flags, CAS) on `keys` keys.
fn random_batch(r: &mut SmallRng, now: u64, keys: u32, out: &mut Results, e: &mut Engine) {
    let owned: Vec<Write> = (0..r.gen_range(1..64))
        .map(|_| {
            let k = format!("key{}", r.gen_range(0..keys)).into_bytes();
            let v: Vec<u8> = (0..r.gen_range(1..200)).map(|_| r.gen()).collect();
            let d = if r.gen_bool(0.3) {
                now + r.gen_range(1..100u64)
            } else {
                NO_DEADLINE
            };
            let ex = directkv_engine::expire_args(d, 0);
            let mc = StoreArgs::set(r.gen(), d).encode();
            (k, v, r.gen_range(0..4), ex, mc)
        })
        .collect();
    let ops: Vec<Op> = owned
        .iter()
        .map(|(k, v, kind, ex, mc)| match kind {
            0 => Op::delete(k),
            1 => Op::mc_store(k, v, mc),
            2 if ex[..8] != [0; 8] => Op::put_expire(k, v, ex),
            _ => Op::put(k, v),
        })
        .collect();
    e.set_now(now);
    e.execute(&ops, out);
}

#[test]
fn an_image_written_between_batches_is_the_store_at_the_point_and_loads_back() {
    for seed in 0..8u64 {
        let dir = TestDir::new(&format!("image-{seed}"));
        let path = dir.join("snap-0000-0000000001.dkvs");
        let mut r = SmallRng::seed_from_u64(seed);
        let mut e = engine(16 << 20);
        let mut out = Results::default();
        let mut now = T0;
        for _ in 0..100 {
            now += r.gen_range(0..10u64);
            random_batch(&mut r, now, 5000, &mut out, &mut e);
        }
        let expect = contents(&e);
        let cas_next = e.cas_next();
        let mut w = ImageWriter::begin(
            &RealFs,
            &path,
            &mut e,
            header(3),
            SnapshotOptions::default(),
        )
        .unwrap();
        assert_eq!(w.point().cas_next, cas_next);
        let point_now = w.point().now;
        // Another image of the same engine is refused while this one runs.
        assert!(matches!(
            write_image(
                &RealFs,
                &dir.join("other.dkvs"),
                &mut e,
                header(3),
                SnapshotOptions::default(),
                64
            ),
            Err(ImageError::Busy)
        ));
        loop {
            now += r.gen_range(0..10u64);
            random_batch(&mut r, now, 5000, &mut out, &mut e);
            if w.step(&mut e, r.gen_range(1..400)).unwrap() {
                break;
            }
        }
        let sum = w.finish(&RealFs).unwrap();
        assert_eq!(sum.entries, expect.len() as u64);
        // Loaded at the point's time: the same store, cas_next included.
        let mut f = engine(16 << 20);
        f.set_now(point_now);
        let s = load_image(&RealFs, &path, &mut f, SnapshotLimits::default()).unwrap();
        assert_eq!((s.header.shard, s.header.lsn), (3, 41));
        assert_eq!(
            (s.loaded, s.expired, s.cas_next),
            (expect.len() as u64, 0, cas_next)
        );
        assert_eq!(f.cas_next(), cas_next);
        assert_eq!(contents(&f), expect, "seed {seed}");
        f.check_invariants();
        // Loaded later, keys whose deadline passed are left out and counted.
        let later = point_now + 50;
        let mut g = engine(16 << 20);
        g.set_now(later);
        let s = load_image(&RealFs, &path, &mut g, SnapshotLimits::default()).unwrap();
        let live: Store = expect
            .iter()
            .filter(|x| x.2 == NO_DEADLINE || x.2 > later)
            .cloned()
            .collect();
        assert!(live.len() < expect.len(), "some deadlines pass");
        assert_eq!(s.loaded, live.len() as u64);
        assert_eq!(s.expired, (expect.len() - live.len()) as u64);
        assert_eq!(contents(&g), live);
    }
}

#[test]
fn an_empty_engine_and_a_full_one_round_trip() {
    let dir = TestDir::new("image-sizes");
    let mut e = engine(8 << 20);
    let empty = dir.join("empty.dkvs");
    let sum = write_image(
        &RealFs,
        &empty,
        &mut e,
        header(0),
        SnapshotOptions::default(),
        IMAGE_STEP_BUCKETS_DEFAULT,
    )
    .unwrap();
    assert_eq!(sum.entries, 0);
    let mut f = engine(8 << 20);
    let s = load_image(&RealFs, &empty, &mut f, SnapshotLimits::default()).unwrap();
    assert_eq!((s.loaded, s.expired), (0, 0));
    assert_eq!(f.counts().keys, 0);
    let mut e = engine(64 << 20);
    let mut out = Results::default();
    let keys: Vec<[u8; 8]> = (0..200_000u64).map(|i| i.to_be_bytes()).collect();
    for c in keys.chunks(64) {
        let ops: Vec<Op> = c.iter().map(|k| Op::put(k, k)).collect();
        e.execute(&ops, &mut out);
    }
    let full = dir.join("full.dkvs");
    write_image(
        &RealFs,
        &full,
        &mut e,
        header(0),
        SnapshotOptions::default(),
        IMAGE_STEP_BUCKETS_DEFAULT,
    )
    .unwrap();
    let mut f = engine(64 << 20);
    let s = load_image(&RealFs, &full, &mut f, SnapshotLimits::default()).unwrap();
    assert_eq!(s.loaded, 200_000);
    assert_eq!(contents(&f), contents(&e));
    // Too small an engine: out of memory, an error naming the file.
    let mut small = engine(4 << 20);
    let err = load_image(&RealFs, &full, &mut small, SnapshotLimits::default()).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, SnapshotError::Load { .. }), "{text}");
    assert!(
        text.contains("full.dkvs") && text.contains("out of memory"),
        "{text}"
    );
    // A flipped byte in a block: refused, nothing claimed loaded.
    let mut bytes = std::fs::read(&full).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x20;
    let bad = dir.join("bad.dkvs");
    std::fs::write(&bad, &bytes).unwrap();
    let mut g = engine(64 << 20);
    let err = load_image(&RealFs, &bad, &mut g, SnapshotLimits::default()).unwrap_err();
    assert!(err.to_string().contains("block checksum mismatch"), "{err}");
}

#[test]
fn an_entry_over_the_loading_engines_limits_is_refused_with_its_block() {
    let dir = TestDir::new("image-limits");
    let mut e = engine(8 << 20);
    e.put(b"a-key-of-twenty-byte", b"v").unwrap();
    let path = dir.join("s.dkvs");
    write_image(
        &RealFs,
        &path,
        &mut e,
        header(0),
        SnapshotOptions::default(),
        64,
    )
    .unwrap();
    let mut cfg = EngineConfig::with_memory(8 << 20);
    cfg.key_len_max = 10;
    let mut f = Engine::new(cfg).unwrap();
    let err = load_image(&RealFs, &path, &mut f, SnapshotLimits::default()).unwrap_err();
    assert!(
        err.to_string().contains("key of 20 bytes not in 1..=10"),
        "{err}"
    );
}
