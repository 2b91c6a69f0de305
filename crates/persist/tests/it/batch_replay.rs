//! Batches executed by an engine, logged as batch records in a real log file and replayed into a
//! fresh engine, give the same store: every key, value and deadline, with the batches' `now`s
//! expiring keys along the way; and both agree with the timed HashMap model.

use directkv_engine::{
    cond, expire_args, mc, ElemType, Engine, EngineConfig, EvictionPolicy, Op, OpKind, Results,
    KEEP_DEADLINE, NO_DEADLINE,
};
use directkv_persist::batch;
use directkv_persist::fs::RealFs;
use directkv_persist::log::{self, LogEnd, LogLimits};
use directkv_testkit::model::{apply_timed, Limits, OwnedOp, TimedStore};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::common::TestDir;

const LIMITS: Limits = Limits {
    key_len_max: 250,
    value_len_max: 4096,
};

fn engine() -> Engine {
    let mut cfg = EngineConfig::with_memory(8 << 20);
    cfg.value_len_max = LIMITS.value_len_max;
    Engine::new(cfg).unwrap()
}

/// A random op on one of 24 keys, with deadlines around `now`.
fn random_op(r: &mut SmallRng, now: u64) -> OwnedOp {
    let key = format!("key{}", r.gen_range(0..24u32)).into_bytes();
    let value = |r: &mut SmallRng| -> Vec<u8> {
        let n = r.gen_range(0..12usize);
        (0..n).map(|_| r.gen_range(b'a'..=b'z')).collect()
    };
    let deadline = |r: &mut SmallRng| -> u64 {
        match r.gen_range(0..10) {
            0 => now - r.gen_range(0..5u64),
            1 => KEEP_DEADLINE,
            _ => now + r.gen_range(1..200u64),
        }
    };
    let conds = [
        cond::ANY,
        cond::NX,
        cond::XX,
        cond::GT,
        cond::LT,
        cond::XX | cond::GT,
    ];
    let mut op = match r.gen_range(0..13) {
        0 | 1 => OwnedOp::new(OpKind::Put, key).with(0, ElemType::U8, value(r)),
        2 => OwnedOp::new(OpKind::PutNx, key).with(0, ElemType::U8, value(r)),
        3 => OwnedOp::new(OpKind::PutXx, key).with(0, ElemType::U8, value(r)),
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
            let c = conds[r.gen_range(0..conds.len())];
            let mut op = OwnedOp::new(OpKind::Expire, key);
            op.arg = expire_args(d, c).to_vec();
            op
        }
        10 => OwnedOp::new(OpKind::Persist, key),
        11 => OwnedOp::new(OpKind::Get, key),
        _ => OwnedOp::new(OpKind::Ttl, key),
    };
    op.elem = ElemType::U8;
    op
}

/// The record of the batch `e` just executed at `now` from CAS counter `cas_before`, as the
/// server logs it: its evictions before, its writes, its evictions after.
fn record(e: &Engine, now: u64, cas_before: u64, ops: &[Op], out: &mut Vec<u8>) -> bool {
    let head = batch::RecordHead {
        now,
        flush: false,
        cas_before,
        cas_after: e.cas_next(),
    };
    batch::encode_record(
        out,
        &head,
        e.evicted_before_batch(),
        ops,
        e.evicted_after_batch(),
    )
}

fn model_apply(model: &mut TimedStore, op: &OwnedOp, now: u64) {
    apply_timed(model, op, now, LIMITS);
}

/// Every live key-value (deadline not passed at `now`) with its deadline, sorted.
fn live(e: &Engine, now: u64) -> Vec<(Vec<u8>, Vec<u8>, u64)> {
    let mut v = vec![];
    e.for_each_with_deadline(|k, val, d| {
        if d == NO_DEADLINE || d > now {
            v.push((k.to_vec(), val.to_vec(), d));
        }
    });
    v.sort();
    v
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

#[test]
fn a_replayed_log_rebuilds_the_same_store_deadlines_and_expiry_included() {
    for seed in 0..16u64 {
        let dir = TestDir::new(&format!("replay-{seed}"));
        let path = dir.join("log-0000-0000000001.dkvl");
        let mut r = SmallRng::seed_from_u64(seed);
        let mut a = engine();
        let mut model = TimedStore::new();
        let mut out = Results::default();
        let mut w = crate::common::new_log(&path);
        let mut now = 1_700_000_000_000u64;
        let mut scratch = vec![];
        let mut logged = 0;
        for b in 0..300 {
            now += r.gen_range(0..15u64);
            let ops: Vec<OwnedOp> = (0..r.gen_range(1..16))
                .map(|_| random_op(&mut r, now))
                .collect();
            let engine_ops: Vec<_> = ops.iter().map(OwnedOp::as_op).collect();
            a.set_now(now);
            let cas_before = a.cas_next();
            a.execute(&engine_ops, &mut out);
            for op in &ops {
                model_apply(&mut model, op, now);
            }
            scratch.clear();
            if record(&a, now, cas_before, &engine_ops, &mut scratch) {
                w.append(&scratch).unwrap();
                logged += 1;
            }
            // Group commit: several batches per write.
            if b % 5 == 4 {
                w.write_out().unwrap();
            }
        }
        w.sync().unwrap();
        drop(w);
        // The store has keys with deadlines that a later `now` expired, and some still live.
        let all = {
            let mut n = 0;
            a.for_each_with_deadline(|_, _, _| n += 1);
            n
        };
        let state = live(&a, now);
        assert!(
            state.iter().any(|(_, _, d)| *d != NO_DEADLINE),
            "seed {seed}: no deadline"
        );
        assert_eq!(
            state,
            live_model(&model, now),
            "seed {seed}: engine and model"
        );
        let mut b_engine = engine();
        let s = log::replay(&RealFs, &path, LogLimits::default(), |_, payload| {
            let batch = batch::decode(payload).map_err(|e| e.to_string())?;
            batch.replay(&mut b_engine, &mut out);
            Ok(())
        })
        .unwrap();
        assert_eq!((s.records, s.end), (logged, LogEnd::Clean));
        assert_eq!(
            live(&b_engine, now),
            state,
            "seed {seed}: replayed store ({all} stored)"
        );
        // Owned batches replay the same way.
        let mut c_engine = engine();
        log::replay(&RealFs, &path, LogLimits::default(), |_, payload| {
            let owned = batch::decode(payload)
                .map_err(|e| e.to_string())?
                .to_owned();
            owned.replay(&mut c_engine, &mut out);
            Ok(())
        })
        .unwrap();
        assert_eq!(live(&c_engine, now), state, "seed {seed}: owned replay");
    }
}

#[test]
fn a_batch_with_an_unknown_op_kind_is_refused_by_the_replay_with_its_lsn() {
    let dir = TestDir::new("unknown-kind");
    let path = dir.join("l.dkvl");
    let mut w = crate::common::new_log(&path);
    let mut p = vec![];
    let e0 = engine();
    record(&e0, 5, 1, &[directkv_engine::Op::put(b"k", b"v")], &mut p);
    w.append(&p).unwrap();
    // The op's kind byte: after the header, the deletes' count and the ops' count (a put of
    // a small key takes the short form, its kind code with the top bit set: 250 is code 122).
    p[batch::RECORD_HEADER_BYTES + 8] = 250;
    w.append(&p).unwrap();
    w.sync().unwrap();
    let mut e = engine();
    let mut out = Results::default();
    let err = log::replay(&RealFs, &path, LogLimits::default(), |_, payload| {
        batch::decode(payload)
            .map_err(|e| e.to_string())?
            .replay(&mut e, &mut out);
        Ok(())
    })
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("lsn 2") && err.contains("unknown op kind code 122"),
        "{err}"
    );
}

/// Every key's memcache view (value, flags, CAS) and deadline, sorted: what a replay must give
/// back exactly, CAS values included.
fn items(e: &mut Engine) -> Vec<(Vec<u8>, u64, Vec<u8>)> {
    let mut keys = vec![];
    e.for_each_with_deadline(|k, _, d| keys.push((k.to_vec(), d)));
    keys.sort();
    let mut out = Results::default();
    let mut v = vec![];
    for (k, d) in keys {
        let want = mc::WANT_CAS;
        e.execute(&[Op::mc_get(&k, b"", &want)], &mut out);
        v.push((k, d, out.data(0).to_vec()));
    }
    v
}

#[test]
fn evictions_and_memcache_cas_values_replay_exactly() {
    for (seed, policy) in [
        (1u64, EvictionPolicy::AllKeysLru),
        (2, EvictionPolicy::AllKeysRandom),
        (3, EvictionPolicy::VolatileTtl),
    ] {
        let dir = TestDir::new(&format!("evict-{seed}"));
        let path = dir.join("log-0000-0000000001.dkvl");
        let small = || {
            let mut cfg = EngineConfig::with_memory(directkv_engine::engine::MEMORY_BYTES_MIN);
            cfg.value_len_max = LIMITS.value_len_max;
            cfg.eviction_watermark = 0.2;
            Engine::new(cfg).unwrap()
        };
        let mut a = small();
        a.set_eviction_policy(policy);
        let mut w = crate::common::new_log(&path);
        let mut r = SmallRng::seed_from_u64(seed);
        let mut out = Results::default();
        let mut scratch = vec![];
        let mut now = 1_700_000_000_000u64;
        let mut evicted = 0usize;
        let mut after = 0usize;
        let value = vec![b'v'; 200];
        for _ in 0..3_000 {
            now += 1;
            let keys: Vec<Vec<u8>> = (0..r.gen_range(1..20))
                .map(|_| format!("k{}", r.gen_range(0..40_000u32)).into_bytes())
                .collect();
            let args: Vec<[u8; mc::STORE_ARGS_BYTES]> = keys
                .iter()
                .map(|_| mc::StoreArgs::set(r.gen(), now + r.gen_range(1..1_000_000)).encode())
                .collect();
            let ops: Vec<Op> = keys
                .iter()
                .zip(&args)
                .enumerate()
                .map(|(i, (k, a))| match i % 3 {
                    0 => Op::mc_store(k, &value, a),
                    1 => Op::get(k),
                    _ => Op::put(k, &value[..100]),
                })
                .collect();
            a.set_now(now);
            let cas_before = a.cas_next();
            // Every third batch runs with eviction off and the policy turned on after it (as
            // CONFIG SET does), so eviction ahead of need, after the batch, has work to do;
            // make_room before a batch otherwise frees the watermark too.
            let late = r.gen_range(0..3) == 0;
            a.set_eviction_policy(if late {
                EvictionPolicy::NoEviction
            } else {
                policy
            });
            a.execute(&ops, &mut out);
            a.set_eviction_policy(policy);
            a.evict_ahead(directkv_engine::evict::EVICT_AHEAD_KEYS_MAX);
            evicted += a.evicted_before_batch().count() + a.evicted_after_batch().count();
            after += a.evicted_after_batch().count();
            scratch.clear();
            if record(&a, now, cas_before, &ops, &mut scratch) {
                w.append(&scratch).unwrap();
            }
            w.write_out().unwrap();
        }
        drop(w);
        assert!(evicted > 1_000, "{policy:?}: only {evicted} evictions");
        assert!(
            after > 100,
            "{policy:?}: only {after} evictions ahead of need"
        );
        let mut b = small();
        log::replay(&RealFs, &path, LogLimits::default(), |_, payload| {
            batch::decode(payload)
                .map_err(|e| e.to_string())?
                .replay(&mut b, &mut out);
            Ok(())
        })
        .unwrap();
        assert_eq!(b.cas_next(), a.cas_next(), "{policy:?}");
        a.set_eviction_policy(EvictionPolicy::NoEviction);
        let (ia, ib) = (items(&mut a), items(&mut b));
        assert!(ia.len() > 100, "{policy:?}: {} keys", ia.len());
        assert!(ia == ib, "{policy:?}: replayed store differs");
    }
}

/// Records of plain puts only (Redis's SET, the bulk of a write-heavy log) replay through
/// `Engine::load_entries` instead of the pipeline (`batch::replay_parts`): the same store as
/// the batches left, with overwrites of every length, keys that expired before a put reached
/// them, the empty key (left to the pipeline), puts the limits refuse, and records of other
/// operations in between; and, in an engine too small for them, the same puts out of memory.
#[test]
fn records_of_plain_puts_replay_as_the_pipeline_stored_them() {
    for (seed, memory, value_max, keys_max) in [
        (1u64, 8 << 20, 300usize, 150u32),
        (2, 8 << 20, 40, 150),
        (3, 4 << 20, 4000, 100_000),
    ] {
        let mut r = SmallRng::seed_from_u64(seed);
        let mk = || {
            let mut cfg = EngineConfig::with_memory(memory);
            cfg.value_len_max = LIMITS.value_len_max;
            Engine::new(cfg).unwrap()
        };
        let (mut a, mut b) = (mk(), mk());
        let mut out = Results::default();
        let mut now = 1_700_000_000_000u64;
        let (mut oom_original, mut oom_replayed, mut payload) = (0u64, 0u64, vec![]);
        let mut empty_seen = false;
        let long_key = vec![b'k'; 300];
        let big_value = vec![b'v'; LIMITS.value_len_max + 1];
        for i in 0..400 {
            now += r.gen_range(0..20u64);
            let keys: Vec<Vec<u8>> = (0..r.gen_range(1..80))
                .map(|_| match r.gen_range(0..200) {
                    0 => vec![],
                    1 => long_key.clone(),
                    _ => format!("key{}", r.gen_range(0..keys_max)).into_bytes(),
                })
                .collect();
            let values: Vec<Vec<u8>> = keys
                .iter()
                .map(|_| match r.gen_range(0..100) {
                    0 => big_value.clone(),
                    _ => vec![b'a' + r.gen_range(0..26u8); r.gen_range(0..value_max)],
                })
                .collect();
            let args = expire_args(now + r.gen_range(1..60u64), cond::ANY);
            let ops: Vec<Op> = if i % 7 == 3 {
                // Other operations: keys with deadlines that later puts find expired.
                keys.iter()
                    .map(|k| Op::put_expire(k, b"ttl", &args))
                    .collect()
            } else {
                keys.iter()
                    .zip(&values)
                    .map(|(k, v)| Op::put(k, v))
                    .collect()
            };
            a.set_now(now);
            let cas_before = a.cas_next();
            a.execute(&ops, &mut out);
            oom_original += (0..out.len())
                .filter(|&j| {
                    out.status(j)
                        == directkv_engine::Status::Error(directkv_engine::OpError::OutOfMemory)
                })
                .count() as u64;
            payload.clear();
            assert!(record(&a, now, cas_before, &ops, &mut payload));
            oom_replayed += batch::decode(&payload).unwrap().replay(&mut b, &mut out);
            assert_eq!(b.cas_next(), a.cas_next(), "seed {seed} batch {i}");
            let state = live(&a, now);
            empty_seen |= state.iter().any(|(k, _, _)| k.is_empty());
            assert_eq!(live(&b, now), state, "seed {seed} batch {i}");
        }
        assert!(empty_seen, "seed {seed}: the empty key");
        assert_eq!(oom_replayed, oom_original, "seed {seed}");
        if keys_max > 150 {
            assert!(oom_original > 0, "seed {seed}: some puts ran out of memory");
        } else {
            assert_eq!(b.counts().keys, a.counts().keys, "seed {seed}");
            assert_eq!(items(&mut b), items(&mut a), "seed {seed}");
        }
    }
}
