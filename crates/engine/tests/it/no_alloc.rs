//! The hot path does not allocate (SPEC section 2, STYLE habit 4).
//!
//! A counting global allocator wraps `System`; it counts allocations, reallocations and frees
//! made by the current thread while that thread's `COUNTING` flag is set, so the test harness's
//! other threads cannot disturb the count. The test builds engines, preloads them, warms a mixed
//! batch up until every pool and buffer has reached its working size, then runs the batch 100
//! more times with counting on and asserts that the system allocator was never called. When it
//! was, the failure message names the operation kinds that allocate, found by re-running the
//! batch one kind at a time.
//!
//! Everything runs in the single test of this file: a second test would run on another thread
//! and be invisible to the count, but would make this one harder to read.

use directkv_engine::ops::{FN_ADD, FN_COUNT, FN_GT, FN_MAX, FN_SUM, FN_XOR};
use directkv_engine::{ElemType, Engine, EngineConfig, ExecMode, Op, OpKind, Results, Status};
use directkv_testkit::alloc::count;

/// System allocator calls made by this thread while `f` runs.
fn count_calls(f: impl FnOnce()) -> usize {
    count(f).1.calls() as usize
}

const WARMUP_RUNS: usize = 5;
const COUNTED_RUNS: usize = 100;

fn le_u32s(v: &[u32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The key-values the batch expects to find.
struct Data {
    keys: Vec<Vec<u8>>,
    small: Vec<u8>,
    small2: Vec<u8>,
    inline_max: Vec<u8>,
    record: Vec<u8>,
    record2: Vec<u8>,
    record_big: Vec<u8>,
    bytes_vec: Vec<u8>,
    u32_vec: Vec<u8>,
    u32_deltas: Vec<u8>,
    one: [u8; 8],
    zero32: [u8; 4],
    zero64: [u8; 8],
}

fn data() -> Data {
    Data {
        keys: (0..64u32)
            .map(|i| format!("key:{i:03}").into_bytes())
            .collect(),
        small: b"v1".to_vec(),
        small2: b"value-two".to_vec(),
        // key:NNN is 7 bytes; 7 + 43 = 50 bytes, the largest inline key-value under threshold 51.
        inline_max: vec![b'i'; 43],
        record: vec![b'r'; 300],
        record2: vec![b's'; 310],
        record_big: vec![b'b'; 5000],
        bytes_vec: (0..=255u8).cycle().take(300).collect(),
        u32_vec: le_u32s(&(0..64).collect::<Vec<u32>>()),
        u32_deltas: le_u32s(&[3; 64]),
        one: 1u64.to_le_bytes(),
        zero32: 0u32.to_le_bytes(),
        zero64: 0u64.to_le_bytes(),
    }
}

/// Key-values every run starts from (the batch restores them, so every run does the same work).
fn preload(e: &mut Engine, d: &Data) {
    let k = &d.keys;
    for (i, key) in k.iter().enumerate() {
        let v: &[u8] = match i % 4 {
            0 => &d.small,
            1 => &d.record,
            2 => &d.bytes_vec,
            _ => &d.u32_vec,
        };
        e.put(key, v).unwrap();
    }
    e.put(b"counter", &d.zero64).unwrap();
    e.put(b"cas", &d.small).unwrap();
}

/// A mixed batch over the preloaded keys. Keys by `i % 4`: 0 small inline, 1 300-byte record,
/// 2 300-byte u8 vector, 3 64-element u32 vector.
fn batch(d: &Data) -> Vec<Op<'_>> {
    let k = |i: usize| &d.keys[i][..];
    let mut ops = Vec::new();
    for i in (0..64).step_by(4) {
        // Gets: inline, record, miss.
        ops.push(Op::get(k(i)));
        ops.push(Op::get(k(i + 1)));
        ops.push(Op::get(b"missing"));
        // Inline: same slot count, other slot count, up to the threshold, across it to a record
        // and back.
        ops.push(Op::put(k(i), b"v2"));
        ops.push(Op::put(k(i), &d.small2));
        ops.push(Op::put(k(i), &d.inline_max));
        ops.push(Op::put(k(i), &d.record));
        ops.push(Op::put(k(i), &d.small));
        // Records: same class, other class, back.
        ops.push(Op::put(k(i + 1), &d.record2));
        ops.push(Op::put(k(i + 1), &d.record_big));
        ops.push(Op::put(k(i + 1), &d.record));
        // Vectors.
        ops.push(Op::update_s2v(k(i + 2), FN_ADD, ElemType::U8, &[1]));
        ops.push(Op::update_s2v(k(i + 2), FN_XOR, ElemType::U8, &[0x5a]).no_return());
        ops.push(Op::reduce(k(i + 2), FN_SUM, ElemType::U8, &[0]));
        ops.push(Op::filter(k(i + 2), FN_GT, ElemType::U8, &[200]));
        ops.push(Op::update_v2v(
            k(i + 3),
            FN_ADD,
            ElemType::U32,
            &d.u32_deltas,
        ));
        ops.push(Op::reduce(k(i + 3), FN_COUNT, ElemType::U32, &d.zero64));
        ops.push(Op::reduce(k(i + 3), FN_SUM, ElemType::U32, &d.zero32));
        ops.push(Op::update_s2v(k(i + 3), FN_MAX, ElemType::U32, &d.zero32));
        // Delete and re-insert, in the same batch.
        ops.push(Op::delete(k(i + 1)));
        ops.push(Op::get(k(i + 1)));
        ops.push(Op::put_nx(k(i + 1), &d.record));
        ops.push(Op::delete(k(i)));
        ops.push(Op::put_xx(k(i), &d.small));
        ops.push(Op::put_nx(k(i), &d.small));
        // Scalar updates: existing counter, a missing key (creates it), then delete it.
        ops.push(Op::update_s2s(b"counter", FN_ADD, ElemType::U64, &d.one));
        ops.push(Op::update_s2s(b"fresh", FN_ADD, ElemType::U64, &d.one));
        ops.push(Op::delete(b"fresh"));
        // Cas: match, mismatch, and restore.
        ops.push(Op::cas(b"cas", &d.small, &d.small2));
        ops.push(Op::cas(b"cas", &d.small, &d.record));
        ops.push(Op::cas(b"cas", &d.small2, &d.small));
        // Errors: wrong width, unknown function, length mismatch.
        ops.push(Op::update_s2s(k(i + 1), FN_ADD, ElemType::U64, &d.one));
        ops.push(Op::update_s2s(b"counter", 999, ElemType::U64, &d.one));
        ops.push(Op::update_v2v(k(i + 2), FN_ADD, ElemType::U8, &d.small));
    }
    // A hot key: a run longer than the 256-operation window.
    for _ in 0..300 {
        ops.push(Op::update_s2s(b"counter", FN_ADD, ElemType::U64, &d.one));
    }
    // A mixed same-key run on a key that alternates between inline and record.
    for _ in 0..20 {
        ops.push(Op::put(b"run", &d.small));
        ops.push(Op::get(b"run"));
        ops.push(Op::put(b"run", &d.record));
        ops.push(Op::update_s2v(b"run", FN_ADD, ElemType::U8, &[1]));
        ops.push(Op::delete(b"run"));
        ops.push(Op::update_s2s(b"run", FN_ADD, ElemType::U64, &d.one).no_return());
    }
    ops.push(Op::delete(b"run"));
    ops
}

fn engine(mode: ExecMode, hash_index_ratio: f64) -> Engine {
    let mut cfg = EngineConfig::with_memory(64 << 20);
    cfg.hash_index_ratio = Some(hash_index_ratio);
    cfg.inline_threshold = Some(51);
    cfg.value_len_max = 64 << 10;
    cfg.mode = mode;
    Engine::new(cfg).unwrap()
}

/// Allocator calls of `COUNTED_RUNS` runs of `ops` after warming up.
fn calls_of(e: &mut Engine, ops: &[Op], out: &mut Results) -> usize {
    for _ in 0..WARMUP_RUNS {
        e.execute(ops, out);
    }
    count_calls(|| {
        for _ in 0..COUNTED_RUNS {
            e.execute(ops, out);
        }
    })
}

/// The operation kinds of `ops` that allocate when run alone (on a fresh engine each).
fn allocating_kinds(
    mode: ExecMode,
    ratio: f64,
    fill: &[Vec<u8>],
    d: &Data,
    ops: &[Op],
) -> Vec<(&'static str, usize)> {
    let mut found = Vec::new();
    for kind in OpKind::ALL {
        let only: Vec<Op> = ops.iter().copied().filter(|op| op.kind == kind).collect();
        if only.is_empty() {
            continue;
        }
        let mut e = engine(mode, ratio);
        preload(&mut e, d);
        for key in fill {
            e.put(key, b"fill").unwrap();
        }
        let mut out = Results::with_capacity(only.len(), 4 << 20);
        let calls = calls_of(&mut e, &only, &mut out);
        if calls > 0 {
            found.push((kind.name(), calls));
        }
    }
    found
}

#[test]
fn hot_path_does_not_allocate() {
    let d = data();
    let ops = batch(&d);
    // Filler keys for the tiny-index engine: 150k inline key-values of 2 slots in 32768 buckets
    // of 10 slots chain often, so the batch's inserts and deletes also link and free chained
    // buckets.
    let fill: Vec<Vec<u8>> = (0..150_000u32).map(|i| i.to_le_bytes().to_vec()).collect();
    // (hash index ratio, filler keys): a roomy index, and one that forces chains.
    let setups: [(f64, &[Vec<u8>]); 2] = [(0.5, &[]), (0.01, &fill)];
    for mode in [ExecMode::Forward, ExecMode::Stall] {
        for (ratio, fill) in setups {
            let mut e = engine(mode, ratio);
            preload(&mut e, &d);
            for key in fill {
                e.put(key, b"fill").unwrap();
            }
            if !fill.is_empty() {
                assert!(e.counts().chained_buckets > 1000, "{:?}", e.counts());
            }
            let mut out = Results::with_capacity(ops.len(), 4 << 20);
            let calls = calls_of(&mut e, &ops, &mut out);
            // The batch did what it says (so the count is about real work).
            assert_eq!(out.len(), ops.len());
            let errors = out
                .iter()
                .filter(|(s, _)| matches!(s, Status::Error(_)))
                .count();
            assert_eq!(errors, 3 * 16, "{mode:?} ratio {ratio}");
            e.check_invariants();
            if calls != 0 {
                let kinds = allocating_kinds(mode, ratio, fill, &d, &ops);
                panic!(
                    "{mode:?} ratio {ratio}: {calls} system allocator calls in {COUNTED_RUNS} runs of a \
                     {}-operation batch; allocating kinds when run alone: {kinds:?}",
                    ops.len()
                );
            }
        }
    }
}
