//! `Engine::clear` (FLUSHALL in place, issue 20): every key is gone, whatever road stored it
//! (inline, record, chained bucket, deadline, memcache item); the memory report is a new
//! engine's; the same keys go in again; the CAS counter goes on; and a cleared engine then
//! behaves exactly as a new one given the same operations, eviction included, so two engines
//! given the same operations and clears end identical.

use directkv_engine::mc::StoreArgs;
use directkv_engine::{
    cond, expire_args, Engine, EngineConfig, EvictionPolicy, Op, Report, Results, Status,
    NO_DEADLINE,
};

const NOW: u64 = 1_000_000;

/// A 4 MiB engine, half of it hash index, so a few thousand keys chain and fill the slab.
fn engine(policy: EvictionPolicy) -> Engine {
    let mut cfg = EngineConfig::with_memory(4 << 20);
    cfg.hash_index_ratio = Some(0.5);
    cfg.inline_threshold = Some(32);
    cfg.value_len_max = 4096;
    cfg.eviction_policy = policy;
    let mut e = Engine::new(cfg).unwrap();
    e.set_now(NOW);
    e
}

fn run(e: &mut Engine, ops: &[Op]) -> Vec<(Status, Vec<u8>)> {
    let mut out = Results::default();
    e.execute(ops, &mut out);
    out.iter().map(|(s, d)| (s, d.to_vec())).collect()
}

fn key(round: u64, i: u64) -> Vec<u8> {
    format!("k{round}:{i}").into_bytes()
}

/// Writes `n` keys of every kind: short inline values, records of several classes, keys with
/// a deadline (some already past at `NOW`), memcache items with flags and CAS. Batches of 64.
fn fill(e: &mut Engine, round: u64, n: u64) {
    let keys: Vec<Vec<u8>> = (0..n).map(|i| key(round, i)).collect();
    let values: Vec<Vec<u8>> = (0..n)
        .map(|i| vec![i as u8; [3, 20, 90, 700, 1500][(i % 5) as usize]])
        .collect();
    let later = expire_args(NOW + 60_000, cond::ANY);
    let past = expire_args(NOW - 1, cond::ANY);
    let item = StoreArgs::set(7, NO_DEADLINE).encode();
    let ops: Vec<Op> = (0..n as usize)
        .map(|i| match i % 7 {
            0 => Op::put_expire(&keys[i], &values[i], &later),
            1 => Op::put_expire(&keys[i], &values[i], &past),
            2 => Op::mc_store(&keys[i], &values[i], &item),
            _ => Op::put(&keys[i], &values[i]),
        })
        .collect();
    for chunk in ops.chunks(64) {
        run(e, chunk);
    }
}

/// One stored key: key, value, deadline, memcache flags, CAS.
type Entry = (Vec<u8>, Vec<u8>, u64, u32, u64);

/// Everything the engine holds, in order, with deadlines and memcache meta.
fn contents(e: &Engine) -> Vec<Entry> {
    let mut all = Vec::new();
    let mut cursor = 0;
    loop {
        cursor = e.scan_items(cursor, 1024, |k, v, m| {
            all.push((k.to_vec(), v.to_vec(), m.deadline, m.flags, m.cas))
        });
        if cursor == 0 {
            break;
        }
    }
    all.sort();
    all
}

/// The memory part of a report, as comparable text: counts, slab free blocks and counters.
fn memory(r: &Report) -> String {
    format!(
        "{:?} {:?} {:?} {} {}",
        r.counts, r.slab.free_blocks, r.slab.allocs, r.slab_free_bytes, r.memory_utilization
    )
}

#[test]
fn after_clear_every_key_is_gone_and_memory_is_as_fresh() {
    let fresh = engine(EvictionPolicy::NoEviction).report();
    let mut e = engine(EvictionPolicy::NoEviction);
    fill(&mut e, 0, 3000);
    let before = e.report();
    assert!(before.counts.keys > 2000 && before.counts.chained_buckets > 0);
    assert!(before.counts.expiring_keys > 0 && before.slab_free_bytes < fresh.slab_free_bytes);
    let cas_next = e.cas_next();
    let expired = e.stats().expired_keys;

    e.clear();

    e.check_invariants();
    assert_eq!(memory(&e.report()), memory(&fresh));
    assert_eq!(
        format!("{:?}", e.report().slab),
        format!("{:?}", fresh.slab)
    );
    // What goes on: the CAS counter, the time, the totals of the counters.
    assert_eq!(e.cas_next(), cas_next);
    assert_eq!(e.now(), NOW);
    assert!(e.stats().expired_keys >= expired);
    assert!(contents(&e).is_empty());
    for i in 0..3000 {
        assert_eq!(
            e.get(&key(0, i)).unwrap(),
            None,
            "key {i} survived the clear"
        );
    }

    // The same keys go in again, and a memcache item takes a CAS after every earlier one.
    fill(&mut e, 0, 3000);
    e.check_invariants();
    assert_eq!(e.counts().keys, before.counts.keys);
    assert_eq!(e.get(&key(0, 3)).unwrap(), Some(vec![3u8; 700]));
    let cas = contents(&e).iter().map(|c| c.4).max().unwrap();
    assert!(
        cas >= cas_next,
        "CAS {cas} handed out again after the clear"
    );
}

#[test]
fn a_cleared_engine_behaves_as_a_new_one_and_clears_are_deterministic() {
    for policy in [
        EvictionPolicy::NoEviction,
        EvictionPolicy::AllKeysLru,
        EvictionPolicy::AllKeysRandom,
        EvictionPolicy::VolatileTtl,
    ] {
        let mut a = engine(policy);
        let mut b = engine(policy);
        for e in [&mut a, &mut b] {
            // Enough to fill the 2 MiB slab, so the eviction policies evict before the clear.
            fill(e, 0, 6000);
            e.clear();
            e.clear();
            fill(e, 1, 500);
            e.clear();
            fill(e, 2, 6000);
        }
        let mut new = engine(policy);
        fill(&mut new, 2, 6000);
        assert_eq!(a.cas_next(), b.cas_next(), "{policy:?}");
        assert_eq!(contents(&a), contents(&b), "{policy:?}");
        assert_eq!(memory(&a.report()), memory(&b.report()), "{policy:?}");
        // The keys, values, deadlines and meta after the last clear are a new engine's given
        // the same operations; only the CAS values differ (the counter went on).
        let strip = |c: Vec<Entry>| -> Vec<_> {
            c.into_iter().map(|(k, v, d, f, _)| (k, v, d, f)).collect()
        };
        assert_eq!(strip(contents(&a)), strip(contents(&new)), "{policy:?}");
        assert_eq!(memory(&a.report()), memory(&new.report()), "{policy:?}");
        assert_eq!(
            a.stats().evicted_keys > 0,
            policy != EvictionPolicy::NoEviction
        );
        a.check_invariants();
    }
}
