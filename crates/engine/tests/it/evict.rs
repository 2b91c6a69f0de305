//! Eviction in the engine (issue 20 item 2): under `allkeys-*` a full arena keeps taking
//! writes with no out-of-memory; the CLOCK keeps keys in use through a scan of cold ones;
//! `volatile-*` evict only keys with a deadline and answer out-of-memory when none is left;
//! `noeviction` is unchanged; the same operations and `now` leave the same keys.

use std::collections::BTreeSet;

use directkv_engine::{
    cond, expire_args, Engine, EngineConfig, EvictionPolicy, Op, OpError, Results, Status,
};

const VALUE_LEN_MAX: usize = 4096;
const NOW: u64 = 1_000_000;

/// A 4 MiB engine, half of it hash index; `threshold` 0 stores every key-value as a record.
fn engine(policy: EvictionPolicy, threshold: usize) -> Engine {
    let mut cfg = EngineConfig::with_memory(4 << 20);
    cfg.hash_index_ratio = Some(0.5);
    cfg.inline_threshold = Some(threshold);
    cfg.value_len_max = VALUE_LEN_MAX;
    cfg.eviction_policy = policy;
    let mut e = Engine::new(cfg).unwrap();
    e.set_now(NOW);
    e
}

fn key(prefix: &str, i: u64) -> Vec<u8> {
    format!("{prefix}:{i:08}").into_bytes()
}

/// Runs `ops`, returning the statuses.
fn run(e: &mut Engine, ops: &[Op]) -> Vec<Status> {
    let mut out = Results::default();
    e.execute(ops, &mut out);
    (0..ops.len()).map(|i| out.status(i)).collect()
}

fn oom(statuses: &[Status]) -> usize {
    statuses
        .iter()
        .filter(|s| **s == Status::Error(OpError::OutOfMemory))
        .count()
}

/// Puts `n` keys `prefix:i` with `vlen`-byte values (deadline `deadline` when Some), in
/// batches of 32; returns how many were refused for want of memory.
fn fill(e: &mut Engine, prefix: &str, n: u64, vlen: usize, deadline: Option<u64>) -> usize {
    let value = vec![7u8; vlen];
    let args = deadline.map(|d| expire_args(d, cond::ANY));
    let keys: Vec<Vec<u8>> = (0..n).map(|i| key(prefix, i)).collect();
    let mut refused = 0;
    for chunk in keys.chunks(32) {
        let ops: Vec<Op> = chunk
            .iter()
            .map(|k| match &args {
                Some(a) => Op::put_expire(k, &value, a),
                None => Op::put(k, &value),
            })
            .collect();
        refused += oom(&run(e, &ops));
    }
    refused
}

fn present(e: &mut Engine, prefix: &str, n: u64) -> u64 {
    (0..n)
        .filter(|&i| e.get(&key(prefix, i)).unwrap().is_some())
        .count() as u64
}

fn stored_keys(e: &Engine) -> BTreeSet<Vec<u8>> {
    let mut s = BTreeSet::new();
    e.for_each(|k, _| {
        s.insert(k.to_vec());
    });
    s
}

#[test]
fn noeviction_answers_out_of_memory() {
    let mut e = engine(EvictionPolicy::NoEviction, 0);
    let refused = fill(&mut e, "k", 40_000, 100, None);
    assert!(refused > 0, "4 MiB cannot hold 40000 records of 100 bytes");
    assert_eq!(e.stats().evicted_keys, 0);
    e.check_invariants();
}

#[test]
fn a_full_arena_under_allkeys_keeps_taking_writes() {
    for policy in [EvictionPolicy::AllKeysLru, EvictionPolicy::AllKeysRandom] {
        // Records (threshold 0) and inline key-values with chained buckets (threshold 51).
        for threshold in [0, 51] {
            let mut e = engine(policy, threshold);
            let vlen = if threshold == 0 { 100 } else { 16 };
            let n = 200_000;
            assert_eq!(
                fill(&mut e, "k", n, vlen, None),
                0,
                "{policy:?} {threshold}"
            );
            let evicted = e.stats().evicted_keys;
            assert!(evicted > 0, "{policy:?} {threshold}: nothing evicted");
            assert_eq!(e.counts().keys + evicted, n, "{policy:?} {threshold}");
            // The last keys written are there.
            assert_eq!(e.get(&key("k", n - 1)).unwrap(), Some(vec![7u8; vlen]));
            e.check_invariants();
        }
    }
}

#[test]
fn a_full_arena_under_allkeys_lru_takes_atomic_batches() {
    let mut e = engine(EvictionPolicy::AllKeysLru, 0);
    assert_eq!(fill(&mut e, "k", 40_000, 100, None), 0);
    let value = [1u8; 100];
    let keys: Vec<Vec<u8>> = (0..64).map(|i| key("mset", i)).collect();
    let ops: Vec<Op> = keys.iter().map(|k| Op::put(k, &value)).collect();
    let mut out = Results::default();
    assert_eq!(e.execute_atomic(&ops, &mut out), Ok(()));
    assert_eq!(present(&mut e, "mset", 64), 64);
    e.check_invariants();
}

/// A check alone (a shard's part of a cross-shard write, which may then be aborted) reports
/// what it evicted at once: nothing later has to run on this engine for WATCH to learn it.
#[test]
fn a_check_reports_the_keys_it_evicted_at_once() {
    let mut e = engine(EvictionPolicy::AllKeysLru, 0);
    assert_eq!(fill(&mut e, "k", 40_000, 100, None), 0);
    let before = e.counts().keys;
    let value = [1u8; 100];
    let keys: Vec<Vec<u8>> = (0..64).map(|i| key("mset", i)).collect();
    let ops: Vec<Op> = keys.iter().map(|k| Op::put(k, &value)).collect();
    assert_eq!(e.check_atomic(&ops), Ok(()));
    let evicted = before - e.counts().keys;
    assert!(evicted > 0, "the check evicted nothing");
    let reported: Vec<Vec<u8>> = e.reclaimed_keys().map(<[u8]>::to_vec).collect();
    assert_eq!(reported.len() as u64, evicted);
    assert!(reported.iter().all(|k| k.starts_with(b"k")));
    // The execute that follows reports only its own.
    run(&mut e, &[Op::get(b"none")]);
    assert_eq!(e.reclaimed_keys().count(), 0);
    e.check_invariants();
}

#[test]
fn keys_in_use_survive_a_scan_of_cold_ones() {
    for threshold in [0, 51] {
        let mut e = engine(EvictionPolicy::AllKeysLru, threshold);
        let vlen = if threshold == 0 { 100 } else { 16 };
        let hot = 200;
        fill(&mut e, "hot", hot, vlen, None);
        let hot_keys: Vec<Vec<u8>> = (0..hot).map(|i| key("hot", i)).collect();
        let value = vec![3u8; vlen];
        let cold_keys: Vec<Vec<u8>> = (0..100_000).map(|i| key("cold", i)).collect();
        // Each batch reads every hot key and writes 64 cold ones, which pass through the
        // store many times over.
        for chunk in cold_keys.chunks(64) {
            let mut ops: Vec<Op> = hot_keys.iter().map(|k| Op::get(k)).collect();
            ops.extend(chunk.iter().map(|k| Op::put(k, &value)));
            let statuses = run(&mut e, &ops);
            assert_eq!(oom(&statuses), 0);
            assert!(
                statuses[..hot as usize].iter().all(|s| *s == Status::Ok),
                "threshold {threshold}: a hot key was evicted"
            );
        }
        // The cold keys passed through: most were evicted again.
        assert!(
            e.stats().evicted_keys > 10_000,
            "{}",
            e.stats().evicted_keys
        );
        assert_eq!(present(&mut e, "hot", hot), hot);
        e.check_invariants();
    }
}

#[test]
fn volatile_policies_evict_only_keys_with_a_deadline() {
    for policy in [
        EvictionPolicy::VolatileLru,
        EvictionPolicy::VolatileTtl,
        EvictionPolicy::VolatileRandom,
    ] {
        let mut e = engine(policy, 0);
        // Keys without a deadline take about a third of the slab region.
        let keep = 4_000;
        assert_eq!(fill(&mut e, "keep", keep, 100, None), 0);
        // Keys with a deadline, far more than fit: the older ones are evicted.
        let timed = 30_000;
        assert_eq!(
            fill(&mut e, "timed", timed, 100, Some(NOW + 3_600_000)),
            0,
            "{policy:?}"
        );
        assert!(e.stats().evicted_keys > 0, "{policy:?}");
        assert_eq!(present(&mut e, "keep", keep), keep, "{policy:?}");
        assert_eq!(
            e.counts().expiring_keys + e.stats().evicted_keys,
            timed,
            "{policy:?}"
        );
        // Keys without a deadline take the room of those with one, then out-of-memory.
        let refused = fill(&mut e, "more", 40_000, 100, None);
        assert!(refused > 0, "{policy:?}: no out-of-memory");
        assert_eq!(e.counts().expiring_keys, 0, "{policy:?}");
        assert_eq!(present(&mut e, "keep", keep), keep, "{policy:?}");
        e.check_invariants();
    }
}

#[test]
fn volatile_ttl_evicts_the_nearest_deadlines_first() {
    let mut e = engine(EvictionPolicy::VolatileTtl, 0);
    // Deadlines in an order unrelated to the hand's: key i expires at NOW + 1 h + (i * 7919
    // mod n) s.
    let n = 30_000u64;
    let value = [5u8; 100];
    let mut evicted_sum = 0u128;
    let deadline = |i: u64| NOW + 3_600_000 + (i * 7919 % n) * 1000;
    for i in 0..n {
        let k = key("t", i);
        let a = expire_args(deadline(i), cond::ANY);
        assert_eq!(run(&mut e, &[Op::put_expire(&k, &value, &a)]), [Status::Ok]);
    }
    let mut kept_sum = 0u128;
    let mut kept = 0u128;
    for i in 0..n {
        if e.get(&key("t", i)).unwrap().is_some() {
            kept_sum += u128::from(deadline(i) - NOW);
            kept += 1;
        } else {
            evicted_sum += u128::from(deadline(i) - NOW);
        }
    }
    let evicted = u128::from(n) - kept;
    assert!(evicted > 0 && kept > 0);
    // Sampling 16 keys, the evicted ones have much nearer deadlines on average.
    assert!(
        evicted_sum / evicted < kept_sum / kept,
        "evicted mean {} kept mean {}",
        evicted_sum / evicted,
        kept_sum / kept
    );
    e.check_invariants();
}

#[test]
fn eviction_is_deterministic() {
    for policy in EvictionPolicy::ALL {
        let survivors: Vec<BTreeSet<Vec<u8>>> = (0..2)
            .map(|_| {
                let mut e = engine(policy, 51);
                fill(&mut e, "a", 20_000, 16, None);
                fill(&mut e, "b", 20_000, 40, Some(NOW + 60_000));
                // Reads set reference bits: the same reads, the same bits.
                for i in (0..20_000).step_by(7) {
                    e.get(&key("a", i)).unwrap();
                }
                fill(&mut e, "c", 30_000, 16, None);
                stored_keys(&e)
            })
            .collect();
        assert_eq!(survivors[0], survivors[1], "{policy:?}");
    }
}

#[test]
fn the_policy_changes_live() {
    let mut e = engine(EvictionPolicy::NoEviction, 0);
    assert!(fill(&mut e, "k", 40_000, 100, None) > 0);
    e.set_eviction_policy(EvictionPolicy::AllKeysLru);
    assert_eq!(e.eviction_policy(), EvictionPolicy::AllKeysLru);
    assert_eq!(fill(&mut e, "j", 40_000, 100, None), 0);
    assert!(e.stats().evicted_keys > 0);
    e.check_invariants();
}

#[test]
fn eviction_ahead_restores_the_watermark() {
    // Full under noeviction (less than the watermark free), then allkeys-lru.
    let mut e = engine(EvictionPolicy::NoEviction, 0);
    assert!(fill(&mut e, "k", 40_000, 100, None) > 0);
    let watermark = e.eviction_watermark_bytes();
    assert!(watermark > 0 && e.report().slab_free_bytes < watermark);
    e.set_eviction_policy(EvictionPolicy::AllKeysLru);
    // Each call evicts at most its budget, and stops at twice the watermark.
    let mut calls = 0;
    while e.report().slab_free_bytes < watermark {
        let n = e.evict_ahead(16);
        // The budget, passed by at most one unit (a bucket's chain).
        assert!(n > 0 && n < 16 + 64, "{n}");
        calls += 1;
        assert!(calls < 10_000);
    }
    assert!(calls > 1);
    assert!(e.stats().evicted_keys > 0);
    // Above the watermark, nothing goes.
    let before = e.stats().evicted_keys;
    assert_eq!(e.evict_ahead(16), 0);
    assert_eq!(e.stats().evicted_keys, before);
    e.check_invariants();
}

#[test]
fn arenas_past_the_chain_pointers_reach_are_refused() {
    let cfg = EngineConfig::with_memory(directkv_engine::MEMORY_BYTES_MAX + (2 << 20));
    assert!(Engine::new(cfg).is_err());
    let mut cfg = EngineConfig::with_memory(4 << 20);
    cfg.eviction_watermark = 0.9;
    assert!(Engine::new(cfg).is_err());
}

/// Batches of nothing but GETs take their own loop (`pipeline/direct.rs`), which skips the
/// reference bit when no policy reads it (`Table::plain_hits`): under `allkeys-lru` it must
/// still set it, so hot inline keys read only by such batches outlive the cold keys written
/// by the batches in between, also after a live change from `noeviction`.
#[test]
fn keys_read_by_get_only_batches_survive_a_scan_of_cold_ones() {
    for wide in [false, true] {
        for start in [EvictionPolicy::AllKeysLru, EvictionPolicy::NoEviction] {
            let mut e = engine(start, 51);
            e.set_wide_code(wide);
            let hot = 200;
            fill(&mut e, "hot", hot, 16, None);
            let gets: Vec<Vec<u8>> = (0..hot).map(|i| key("hot", i)).collect();
            let gets: Vec<Op> = gets.iter().map(|k| Op::get(k)).collect();
            // Under noeviction first, a GET-only batch takes the loop without the bit.
            assert!(run(&mut e, &gets).iter().all(|s| *s == Status::Ok));
            e.set_eviction_policy(EvictionPolicy::AllKeysLru);
            let value = [3u8; 16];
            let cold_keys: Vec<Vec<u8>> = (0..100_000).map(|i| key("cold", i)).collect();
            for chunk in cold_keys.chunks(64) {
                let statuses = run(&mut e, &gets);
                assert!(
                    statuses.iter().all(|s| *s == Status::Ok),
                    "{start:?} wide {wide}: a hot key was evicted"
                );
                let puts: Vec<Op> = chunk.iter().map(|k| Op::put(k, &value)).collect();
                assert_eq!(oom(&run(&mut e, &puts)), 0);
            }
            assert!(e.stats().evicted_keys > 10_000, "{start:?} wide {wide}");
            assert_eq!(present(&mut e, "hot", hot), hot);
            e.check_invariants();
        }
    }
}
