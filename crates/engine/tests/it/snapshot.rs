//! Snapshots without fork (issue 22 item 2, `src/snapshot.rs`): the image a snapshot emits,
//! a few main buckets per step while batches keep changing the store, is the store at
//! `snapshot_begin`: compared with the timed HashMap model and with the engine's own contents
//! read at the point, under random writes, deletes, updates, deadlines passing with an
//! injected clock, active expiry, memcache items (flags, CAS) and evictions in a small arena
//! under allkeys-lru. Loading the image into a new engine gives back the same store. Also the
//! empty engine, 200 k keys, abort, a second begin, and the side buffer's peak under heavy
//! writes.

use directkv_engine::mc::{StoreArgs, STORE_ARGS_BYTES};
use directkv_engine::ops::FN_ADD;
use directkv_engine::{
    cond, expire_args, ElemType, Engine, EngineConfig, EvictionPolicy, Op, OpError, OpKind,
    Results, SnapEntry, KEEP_DEADLINE, NO_DEADLINE,
};
use directkv_testkit::model::{apply_timed, Limits, OwnedOp, TimedStore};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const LIMITS: Limits = Limits {
    key_len_max: 250,
    value_len_max: 4096,
};
const T0: u64 = 1_700_000_000_000;

/// (key, value, deadline, flags, cas), sorted: a store or an image, comparable.
type Image = Vec<(Vec<u8>, Vec<u8>, u64, u32, u64)>;

fn engine(memory: usize, policy: EvictionPolicy) -> Engine {
    let mut cfg = EngineConfig::with_memory(memory);
    cfg.value_len_max = LIMITS.value_len_max;
    cfg.eviction_policy = policy;
    let mut e = Engine::new(cfg).unwrap();
    e.set_now(T0);
    e
}

/// The engine's live store now, read with `scan_items` (not the snapshot's code).
fn contents(e: &Engine) -> Image {
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

fn push(img: &mut Image, s: SnapEntry<'_>) {
    img.push((s.key.to_vec(), s.value.to_vec(), s.deadline, s.flags, s.cas));
}

/// Steps the snapshot to its end with nothing run in between.
fn finish(e: &mut Engine, budget: u64, img: &mut Image) {
    while !e.snapshot_step(budget, &mut |s| push(img, s)) {}
    img.sort();
}

fn without_meta(img: &Image) -> Vec<(Vec<u8>, Vec<u8>, u64)> {
    img.iter()
        .map(|(k, v, d, _, _)| (k.clone(), v.clone(), *d))
        .collect()
}

fn live_model(m: &TimedStore, now: u64) -> Vec<(Vec<u8>, Vec<u8>, u64)> {
    let mut v: Vec<_> = m
        .iter()
        .filter(|(_, (_, d))| *d == NO_DEADLINE || *d > now)
        .map(|(k, (val, d))| (k.clone(), val.clone(), *d))
        .collect();
    v.sort();
    v
}

/// A random model op on one of `keys` keys, values up to `vmax` bytes, deadlines near `now`.
fn random_op(r: &mut SmallRng, now: u64, keys: u32, vmax: usize) -> OwnedOp {
    let key = format!("key{}", r.gen_range(0..keys)).into_bytes();
    let value = |r: &mut SmallRng| -> Vec<u8> {
        let n = r.gen_range(0..vmax);
        (0..n).map(|_| r.gen_range(b'a'..=b'z')).collect()
    };
    let deadline = |r: &mut SmallRng| -> u64 {
        match r.gen_range(0..10) {
            0 => now - r.gen_range(0..5u64),
            1 => KEEP_DEADLINE,
            _ => now + r.gen_range(1..200u64),
        }
    };
    let mut op = match r.gen_range(0..14) {
        0 | 1 => OwnedOp::new(OpKind::Put, key).with(0, ElemType::U8, value(r)),
        // Counters: an 8-byte value, then adds to it in place (the lone-update fast path).
        2 => OwnedOp::new(OpKind::Put, key).with(0, ElemType::U8, vec![r.gen(); 8]),
        12 | 13 => {
            let d: u64 = r.gen_range(0..1000);
            let op = OwnedOp::new(OpKind::UpdateS2S, key).with(
                FN_ADD,
                ElemType::U64,
                d.to_le_bytes().to_vec(),
            );
            return op;
        }
        3 => OwnedOp::new(OpKind::PutNx, key).with(0, ElemType::U8, value(r)),
        4 => OwnedOp::new(OpKind::Delete, key),
        5 => OwnedOp::new(OpKind::Append, key).with(0, ElemType::U8, value(r)),
        6 => {
            let d: i64 = r.gen_range(-5..50);
            OwnedOp::new(OpKind::IncrBy, key).with(0, ElemType::U8, d.to_le_bytes().to_vec())
        }
        7 | 8 => {
            let c = [cond::ANY, cond::NX, cond::XX][r.gen_range(0..3)];
            let mut op = OwnedOp::new(OpKind::PutExpire, key).with(0, ElemType::U8, value(r));
            op.arg2 = expire_args(deadline(r), c).to_vec();
            op
        }
        9 => {
            let d = match deadline(r) {
                KEEP_DEADLINE => now + 500,
                d => d,
            };
            let mut op = OwnedOp::new(OpKind::Expire, key);
            op.arg = expire_args(d, cond::ANY).to_vec();
            op
        }
        10 => OwnedOp::new(OpKind::Persist, key),
        _ => OwnedOp::new(OpKind::Get, key),
    };
    op.elem = ElemType::U8;
    op
}

/// One run: batches of random ops (and, with `mc`, memcache sets carrying flags and CAS)
/// with a clock moving on; a snapshot begun at a random batch and stepped between the later
/// ones with random budgets, active expiry and eviction steps in between. The image must be
/// the engine's store at the point and, without eviction, the model's; a new engine loaded
/// from it must hold the same.
fn run(seed: u64, memory: usize, policy: EvictionPolicy, keys: u32, vmax: usize, mc: bool) {
    let mut r = SmallRng::seed_from_u64(seed);
    let mut e = engine(memory, policy);
    let mut model = TimedStore::new();
    let mut out = Results::default();
    let mut now = T0;
    let begin_at = r.gen_range(0..60);
    let mut at_point: Option<(Image, u64, u64)> = None;
    let mut img = Image::new();
    let mut done = false;
    let mut expire_cursor = 0;
    for b in 0..200 {
        now += r.gen_range(0..15u64);
        e.set_now(now);
        if b == begin_at {
            let p = e.snapshot_begin().unwrap();
            assert_eq!((p.now, p.cas_next), (now, e.cas_next()));
            at_point = Some((contents(&e), now, p.cas_next));
            assert!(e.snapshot_begin().is_err(), "a second snapshot is refused");
        }
        let ops: Vec<OwnedOp> = (0..r.gen_range(1..40))
            .map(|_| random_op(&mut r, now, keys, vmax))
            .collect();
        let mc_args: Vec<(Vec<u8>, Vec<u8>, [u8; STORE_ARGS_BYTES])> =
            (0..if mc { r.gen_range(0..4) } else { 0 })
                .map(|_| {
                    let k = format!("key{}", r.gen_range(0..keys)).into_bytes();
                    let v = vec![b'm'; r.gen_range(1..vmax)];
                    let d = if r.gen_bool(0.5) {
                        NO_DEADLINE
                    } else {
                        now + r.gen_range(1..100u64)
                    };
                    (k, v, StoreArgs::set(r.gen(), d).encode())
                })
                .collect();
        let mut batch: Vec<Op> = ops.iter().map(OwnedOp::as_op).collect();
        for (k, v, a) in &mc_args {
            batch.push(Op::mc_store(k, v, a));
        }
        e.execute(&batch, &mut out);
        for op in &ops {
            apply_timed(&mut model, op, now, LIMITS);
        }
        for (k, v, a) in &mc_args {
            let d = StoreArgs::decode(a).unwrap().deadline;
            model.insert(k.clone(), (v.clone(), d));
        }
        match r.gen_range(0..6) {
            0 => expire_cursor = e.expire_step(expire_cursor, r.gen_range(1..64)).0,
            1 if policy != EvictionPolicy::NoEviction => {
                e.evict_step();
            }
            _ => {}
        }
        if at_point.is_some() && !done {
            done = e.snapshot_step(r.gen_range(0..300), &mut |s| push(&mut img, s));
            if let Some(p) = e.snapshot_progress() {
                assert!(p.extra_bytes < memory as u64 / 20, "{p:?}");
            }
        }
        e.check_invariants();
    }
    let (expect, point_now, cas_next) = at_point.expect("the snapshot began");
    if !done {
        finish(&mut e, 1000, &mut img);
    }
    img.sort();
    assert!(e.snapshot_progress().is_none(), "done frees the snapshot");
    assert_eq!(img, expect, "seed {seed}: image and the store at the point");
    if policy == EvictionPolicy::NoEviction {
        // The oracle above is the engine's own store, read at the point; without evictions
        // the model agrees with it (values and deadlines; it keeps no item meta).
        assert_eq!(
            without_meta(&contents(&e)),
            live_model(&model, now),
            "seed {seed}: engine and model"
        );
    }
    // Loaded back at the point's time, a new engine holds the same store.
    let mut f = engine(memory.max(8 << 20), EvictionPolicy::NoEviction);
    f.set_now(point_now);
    let entries: Vec<SnapEntry> = img
        .iter()
        .map(|(k, v, d, fl, c)| SnapEntry {
            key: k,
            value: v,
            deadline: *d,
            flags: *fl,
            cas: *c,
        })
        .collect();
    let c = f.load_entries(&entries).unwrap();
    assert_eq!((c.loaded, c.expired), (img.len() as u64, 0));
    f.set_cas_next(cas_next);
    assert_eq!(contents(&f), img, "seed {seed}: loaded image");
    f.check_invariants();
}

/// The model's store at the point equals the image (no eviction, no memcache items).
#[test]
fn the_image_is_the_models_store_at_the_point() {
    for seed in 0..24u64 {
        let mut r = SmallRng::seed_from_u64(seed ^ 0x5eed);
        let mut e = engine(8 << 20, EvictionPolicy::NoEviction);
        let mut model = TimedStore::new();
        let mut out = Results::default();
        let mut now = T0;
        let begin_at = r.gen_range(0..80);
        let mut expect = None;
        let mut img = Image::new();
        let mut done = false;
        for b in 0..160 {
            now += r.gen_range(0..15u64);
            e.set_now(now);
            if b == begin_at {
                e.snapshot_begin().unwrap();
                expect = Some(live_model(&model, now));
            }
            let ops: Vec<OwnedOp> = (0..r.gen_range(1..30))
                .map(|_| random_op(&mut r, now, 300, 40))
                .collect();
            let batch: Vec<Op> = ops.iter().map(OwnedOp::as_op).collect();
            e.execute(&batch, &mut out);
            for op in &ops {
                apply_timed(&mut model, op, now, LIMITS);
            }
            if expect.is_some() && !done {
                done = e.snapshot_step(r.gen_range(0..200), &mut |s| push(&mut img, s));
            }
        }
        if !done {
            finish(&mut e, 64, &mut img);
        }
        img.sort();
        assert_eq!(without_meta(&img), expect.unwrap(), "seed {seed}");
        assert_eq!(live_model(&model, now), without_meta(&contents(&e)));
    }
}

#[test]
fn random_writes_expiry_and_memcache_items_during_a_snapshot() {
    for seed in 0..16 {
        run(seed, 8 << 20, EvictionPolicy::NoEviction, 400, 40, true);
    }
}

#[test]
fn random_writes_with_evictions_in_a_small_arena_under_allkeys_lru() {
    for seed in 0..16 {
        // 4 MiB, values up to 1 KiB on 3000 keys: eviction runs throughout.
        run(
            seed,
            4 << 20,
            EvictionPolicy::AllKeysLru,
            3000,
            1024,
            seed % 2 == 0,
        );
    }
}

#[test]
fn a_snapshot_of_an_empty_engine_is_empty() {
    let mut e = engine(8 << 20, EvictionPolicy::NoEviction);
    e.snapshot_begin().unwrap();
    e.put(b"after", b"the point").unwrap();
    let mut img = Image::new();
    finish(&mut e, 1 << 40, &mut img);
    assert!(img.is_empty(), "{img:?}");
    assert!(e.snapshot_progress().is_none());
    // With no snapshot, a step is done at once and emits nothing.
    assert!(e.snapshot_step(10, &mut |_| panic!("no snapshot")));
    assert!(!e.snapshot_abort());
}

/// 200 k keys: stepped in small budgets while every key is overwritten, half deleted, new keys
/// added and deadlines passed, the image is the 200 k keys at the point. Prints the side
/// buffer's peak and the snapshot's memory next to the arena.
#[test]
fn a_snapshot_of_200k_keys_while_every_key_changes() {
    let memory = 64 << 20;
    let mut e = engine(memory, EvictionPolicy::NoEviction);
    let n = 200_000u32;
    let mut out = Results::default();
    let keys: Vec<Vec<u8>> = (0..n).map(|i| format!("k{i:07}").into_bytes()).collect();
    for chunk in keys.chunks(64) {
        let vals: Vec<Vec<u8>> = chunk.iter().map(|k| [&k[..], b"-v0"].concat()).collect();
        let args: Vec<[u8; 9]> = chunk
            .iter()
            .enumerate()
            .map(|(j, _)| expire_args(if j % 8 == 0 { T0 + 50 } else { NO_DEADLINE }, 0))
            .collect();
        let ops: Vec<Op> = chunk
            .iter()
            .zip(&vals)
            .zip(&args)
            .map(|((k, v), a)| {
                if a[..8] == [0; 8] {
                    Op::put(k, v)
                } else {
                    Op::put_expire(k, v, a)
                }
            })
            .collect();
        e.execute(&ops, &mut out);
    }
    let expect = contents(&e);
    assert_eq!(expect.len(), n as usize);
    e.snapshot_begin().unwrap();
    let mut img = Image::new();
    let mut r = SmallRng::seed_from_u64(7);
    let mut peak = 0u64;
    let mut extra = 0u64;
    let mut steps = 0;
    let mut now = T0;
    loop {
        // A batch of 64 writes of random keys: overwrite (longer value), delete, or a new key.
        now += 1;
        e.set_now(now);
        let owned: Vec<(usize, Vec<u8>)> = (0..64)
            .map(|_| {
                let i = r.gen_range(0..n as usize * 2);
                (i, format!("k{i:07}-new-value").into_bytes())
            })
            .collect();
        let ops: Vec<Op> = owned
            .iter()
            .map(|(i, v)| match i % 3 {
                0 if *i < n as usize => Op::delete(&keys[*i]),
                _ if *i < n as usize => Op::put(&keys[*i], v),
                _ => Op::put(&v[..8], v),
            })
            .collect();
        e.execute(&ops, &mut out);
        steps += 1;
        let done = e.snapshot_step(256, &mut |s| push(&mut img, s));
        if let Some(p) = e.snapshot_progress() {
            peak = peak.max(p.side_bytes_peak);
            extra = extra.max(p.extra_bytes);
        }
        if done {
            break;
        }
    }
    img.sort();
    assert_eq!(img.len(), expect.len());
    assert!(img == expect, "the image is the store at the point");
    // Each batch of 64 writes copies at most 64 chains before the step drains them.
    println!(
        "200k keys, {steps} steps of 256 buckets, a batch of 64 writes between steps: side \
         buffer peak {peak} B, snapshot memory peak {extra} B, arena {memory} B ({:.3}%)",
        extra as f64 * 100.0 / memory as f64
    );
    assert!(peak <= 64 * 8 * 64, "side peak {peak}");
    assert!(extra * 20 <= memory as u64, "extra {extra}");
}

#[test]
fn abort_frees_the_snapshot_and_a_new_one_can_begin() {
    let mut e = engine(8 << 20, EvictionPolicy::NoEviction);
    for i in 0..1000u32 {
        e.put(&i.to_le_bytes(), b"v").unwrap();
    }
    e.snapshot_begin().unwrap();
    let mut img = Image::new();
    assert!(!e.snapshot_step(10, &mut |s| push(&mut img, s)));
    e.put(&5u32.to_le_bytes(), b"changed").unwrap();
    assert!(e.snapshot_progress().is_some());
    assert!(e.snapshot_abort());
    assert!(e.snapshot_progress().is_none());
    e.put(&6u32.to_le_bytes(), b"changed too").unwrap();
    let expect = contents(&e);
    e.snapshot_begin().unwrap();
    let mut img = Image::new();
    finish(&mut e, 100, &mut img);
    assert_eq!(img, expect);
}

#[test]
fn load_checks_limits_skips_expired_entries_and_replaces_present_keys() {
    let mut e = engine(8 << 20, EvictionPolicy::NoEviction);
    e.put(b"present", b"old").unwrap();
    let long = vec![b'k'; 251];
    let big = vec![0u8; LIMITS.value_len_max + 1];
    let entry = |key: &'static [u8], deadline| SnapEntry {
        key,
        value: b"v",
        deadline,
        flags: 0,
        cas: 0,
    };
    let c = e
        .load_entries(&[
            entry(b"present", NO_DEADLINE),
            entry(b"gone", T0),
            entry(b"later", T0 + 1),
            SnapEntry {
                flags: 7,
                cas: 99,
                ..entry(b"item", NO_DEADLINE)
            },
        ])
        .unwrap();
    assert_eq!((c.loaded, c.expired), (3, 1));
    assert_eq!(e.get(b"present").unwrap().as_deref(), Some(&b"v"[..]));
    assert_eq!(e.get(b"gone").unwrap(), None);
    let got = contents(&e);
    assert!(got.contains(&(b"item".to_vec(), b"v".to_vec(), NO_DEADLINE, 7, 99)));
    assert!(got.contains(&(b"later".to_vec(), b"v".to_vec(), T0 + 1, 0, 0)));
    let bad = [
        entry(b"ok", NO_DEADLINE),
        SnapEntry {
            key: &long,
            ..entry(b"", 0)
        },
    ];
    assert!(matches!(
        e.load_entries(&bad),
        Err((1, OpError::KeyTooLong { len: 251, .. }))
    ));
    assert!(matches!(
        e.load_entries(&[entry(b"", 0)]),
        Err((0, OpError::KeyEmpty))
    ));
    assert!(matches!(
        e.load_entries(&[SnapEntry {
            value: &big,
            ..entry(b"big", 0)
        }]),
        Err((0, OpError::ValueTooLarge { .. }))
    ));
    e.check_invariants();
    // An arena too small: out of memory, the entries before it stored.
    let mut small = engine(4 << 20, EvictionPolicy::NoEviction);
    let vals: Vec<Vec<u8>> = (0..4000u32).map(|i| vec![i as u8; 2048]).collect();
    let keys: Vec<[u8; 4]> = (0..4000u32).map(|i| i.to_le_bytes()).collect();
    let many: Vec<SnapEntry> = keys
        .iter()
        .zip(&vals)
        .map(|(k, v)| SnapEntry {
            value: v,
            key: k,
            ..entry(b"", 0)
        })
        .collect();
    match small.load_entries(&many) {
        Err((i, OpError::OutOfMemory)) => assert_eq!(small.counts().keys, i as u64),
        other => panic!("{other:?}"),
    }
    small.check_invariants();
}
