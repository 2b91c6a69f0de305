//! `bench engine --sweep-utilization` and `--fill-max`: memory accesses per GET and PUT as the
//! store fills (seed 002, figure "Number of memory accesses"), and the highest memory
//! utilization the tuned table reaches before its first out-of-memory error.

use directkv_engine::{tune, Engine, EngineConfig, Op, OpKind, Results};
use serde::Serialize;

use crate::dist::{Distribution, KeyGen};
use crate::engine::run::{key_bytes, load};

/// Operations measured at each utilization point.
const SWEEP_OPS: usize = 1 << 20;

/// Splits a key-value size into key and value sizes: 10 -> 6 + 4, 16 -> 8 + 8, 254 -> 8 + 246.
pub fn split_kv(kv: usize) -> (usize, usize) {
    let key = if kv <= 4 {
        kv
    } else if kv <= 12 {
        kv - 4
    } else {
        8
    };
    (key.max(1), kv.saturating_sub(key.max(1)))
}

#[derive(Debug, Serialize)]
pub struct SweepPoint {
    pub kv_size: usize,
    pub target_utilization: f64,
    pub memory_utilization: f64,
    pub accesses_per_get: f64,
    pub accesses_per_put: f64,
    pub lines_per_get: f64,
    pub lines_per_put: f64,
    pub hash_index_ratio: f64,
    pub inline_threshold: usize,
    pub chained_buckets: u64,
}

fn config(memory: usize, kv: usize, u: f64) -> EngineConfig {
    let mut cfg = EngineConfig::with_memory(memory);
    cfg.expected_kv_bytes = kv;
    cfg.target_utilization = u;
    cfg
}

/// Accesses of uniform GETs and same-size PUTs over the `keys` loaded keys.
fn measure_accesses(e: &mut Engine, keys: u64, key_size: usize, value_size: usize) -> [f64; 4] {
    let mut idx = vec![0u64; SWEEP_OPS];
    KeyGen::new(Distribution::Uniform, keys, 7).fill(&mut idx);
    let mut kb = vec![0u8; SWEEP_OPS * key_size];
    for (j, &i) in idx.iter().enumerate() {
        key_bytes(i, key_size, &mut kb[j * key_size..]);
    }
    let value = vec![0x5au8; value_size];
    let mut out = Results::default();
    e.reset_stats();
    for half in [false, true] {
        for chunk in kb.chunks(256 * key_size) {
            let ops: Vec<Op> = chunk
                .chunks(key_size)
                .map(|k| if half { Op::put(k, &value) } else { Op::get(k) })
                .collect();
            e.execute(&ops, &mut out);
        }
    }
    let s = e.stats();
    let (g, p) = (s.kind(OpKind::Get), s.kind(OpKind::Put));
    let per = |x: u64, n: u64| x as f64 / n.max(1) as f64;
    [
        per(g.accesses(), g.ops),
        per(p.accesses(), p.ops),
        per(g.lines(), g.ops),
        per(p.lines(), p.ops),
    ]
}

/// One point per target utilization from 0.1 up, while the tuner says it fits.
pub fn sweep(memory: usize, kv: usize, mut emit: impl FnMut(&SweepPoint)) -> Result<(), String> {
    let (key_size, value_size) = split_kv(kv);
    for step in 1..=9 {
        let u = step as f64 / 10.0;
        if !tune(memory, kv, u).feasible {
            break;
        }
        let mut e = Engine::new(config(memory, kv, u)).map_err(|e| e.to_string())?;
        let keys = (memory as f64 * u / kv as f64) as u64;
        let loaded = load(&mut e, 0, keys, key_size, value_size, 256);
        if loaded < keys {
            break;
        }
        let [g, p, lg, lp] = measure_accesses(&mut e, keys, key_size, value_size);
        let r = e.report();
        emit(&SweepPoint {
            kv_size: kv,
            target_utilization: u,
            memory_utilization: r.memory_utilization,
            accesses_per_get: g,
            accesses_per_put: p,
            lines_per_get: lg,
            lines_per_put: lp,
            hash_index_ratio: r.hash_index_ratio,
            inline_threshold: r.inline_threshold,
            chained_buckets: r.counts.chained_buckets,
        });
    }
    Ok(())
}

#[derive(Debug, Serialize)]
pub struct FillMax {
    pub kv_size: usize,
    pub max_memory_utilization: f64,
    pub keys: u64,
    pub hash_index_ratio: f64,
    pub inline_threshold: usize,
    pub chained_buckets: u64,
    pub accesses_per_get: f64,
    pub accesses_per_put: f64,
}

/// Fills a table tuned for capacity until the first out-of-memory error.
pub fn fill_max(memory: usize, kv: usize) -> Result<FillMax, String> {
    let (key_size, value_size) = split_kv(kv);
    let mut e = Engine::new(config(memory, kv, 1.0)).map_err(|e| e.to_string())?;
    let cap = (memory / kv.max(1)) as u64 + 1;
    let keys = load(&mut e, 0, cap, key_size, value_size, 256);
    let max_memory_utilization = e.memory_utilization();
    let [g, p, _, _] = measure_accesses(&mut e, keys, key_size, value_size);
    let r = e.report();
    Ok(FillMax {
        kv_size: kv,
        max_memory_utilization,
        keys,
        hash_index_ratio: r.hash_index_ratio,
        inline_threshold: r.inline_threshold,
        chained_buckets: r.counts.chained_buckets,
        accesses_per_get: g,
        accesses_per_put: p,
    })
}
