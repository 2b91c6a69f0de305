//! `directkv bench engine`: drives one engine in-process, with no network, to measure the data
//! path against the machine's own limit (random 64-byte line reads over an arena of the same
//! size, measured in the same run).
//!
//! ```text
//!  load phase: put keys 0..n (to the target memory utilization)
//!  measure   : pre-generated key indices ──> batches of Op ──> Engine::execute ──> ops/s
//!              memory accesses per op from the engine's counters
//!  probe     : random line reads over the engine's arena ──> line_reads_per_sec
//! ```
//!
//! Key indices are generated before timing (Zipf sampling costs more than a GET) and replayed
//! in a cycle; key bytes are the index in little-endian, padded, so they are distinct.

use std::time::Instant;

use directkv_engine::ops::{FN_ADD, FN_GT, FN_SUM};
use directkv_engine::{ElemType, Engine, EngineConfig, ExecMode, Op, OpKind, Results, Status};
use serde::Serialize;

use crate::dist::{Distribution, KeyGen};
use crate::machine::probe;

/// Pre-generated key indices replayed during measurement.
const INDEX_POOL_LEN_MAX: usize = 8 << 20;
/// Distinct values used by puts.
const VALUE_POOL_LEN: usize = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Workload {
    Get,
    Put,
    MixedA,
    MixedB,
    AtomicSingle,
    AtomicZipf,
    Vector,
}

impl Workload {
    pub fn parse(s: &str) -> Option<Workload> {
        Some(match s {
            "get" => Workload::Get,
            "put" => Workload::Put,
            "mixed-a" => Workload::MixedA,
            "mixed-b" => Workload::MixedB,
            "atomic-single" => Workload::AtomicSingle,
            "atomic-zipf" => Workload::AtomicZipf,
            "vector" => Workload::Vector,
            _ => return None,
        })
    }

    /// Share of reads (per 1000).
    fn reads_per_mille(self) -> u32 {
        match self {
            Workload::Get => 1000,
            Workload::MixedA => 500,
            Workload::MixedB => 950,
            _ => 0,
        }
    }
}

#[derive(Debug, Clone)]
pub struct EngineBenchArgs {
    pub workload: Workload,
    pub dist: Distribution,
    /// Keys to load; default from memory, target utilization and key-value size.
    pub keys: Option<u64>,
    pub key_size: usize,
    pub value_size: usize,
    pub memory: usize,
    pub batch: usize,
    pub seconds: f64,
    pub mode: ExecMode,
    pub utilization: f64,
    pub hash_index_ratio: Option<f64>,
    pub inline_threshold: Option<usize>,
    pub window: usize,
    pub runs: usize,
    pub seed: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct RunResult {
    /// Operations executed in the timed loop, errors included.
    pub ops: u64,
    /// Operations whose status was an error (e.g. out-of-memory puts): not throughput.
    pub errors: u64,
    pub seconds: f64,
    /// Successful operations (`ops - errors`) per second.
    pub ops_per_sec: f64,
    pub line_reads_per_sec: f64,
    pub ratio: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct EngineBenchReport {
    pub workload: Workload,
    pub dist: String,
    pub mode: &'static str,
    pub keys: u64,
    pub key_size: usize,
    pub value_size: usize,
    pub memory: usize,
    pub batch: usize,
    pub seconds: f64,
    pub runs: Vec<RunResult>,
    /// Operations that failed, over all runs (issue 19 item 18: non-zero means the
    /// configuration is broken and `ops_per_sec` is not comparable).
    pub errors: u64,
    /// Medians over the runs.
    pub ops_per_sec: f64,
    pub line_reads_per_sec: f64,
    pub ops_per_line_read: f64,
    pub accesses_per_op: f64,
    pub lines_per_op: f64,
    pub accesses_per_get: Option<f64>,
    pub accesses_per_put: Option<f64>,
    pub forwarded_share: f64,
    pub memory_utilization: f64,
    pub hash_index_ratio: f64,
    pub inline_threshold: usize,
    pub chained_buckets: u64,
    /// Main buckets by number of chained buckets behind them (index = chain length).
    pub chain_histogram: Vec<u64>,
    pub stalls: u64,
    pub slab_free_bytes: u64,
    pub load_seconds: f64,
    pub load_ops_per_sec: f64,
}

/// Key bytes of index `i`: little-endian, zero-padded to `key_size`.
pub fn key_bytes(i: u64, key_size: usize, out: &mut [u8]) {
    let le = i.to_le_bytes();
    let n = key_size.min(8);
    out[..n].copy_from_slice(&le[..n]);
    out[n..key_size].fill(0x6b);
}

fn check_key_space(keys: u64, key_size: usize) -> Result<(), String> {
    if key_size == 0 {
        return Err("--key-size must be at least 1".into());
    }
    if key_size < 8 && keys > 1u64 << (8 * key_size) {
        return Err(format!("{keys} keys do not fit in {key_size}-byte keys"));
    }
    Ok(())
}

pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

pub fn engine_config(a: &EngineBenchArgs, kv: usize, utilization: f64) -> EngineConfig {
    let mut cfg = EngineConfig::with_memory(a.memory);
    cfg.expected_kv_bytes = kv;
    cfg.target_utilization = utilization;
    cfg.hash_index_ratio = a.hash_index_ratio;
    cfg.inline_threshold = a.inline_threshold;
    cfg.window = a.window;
    cfg.mode = a.mode;
    cfg.prefault = true;
    cfg
}

/// Puts keys `from..to` with values of `value_size` in batches; stops at the first error.
/// Returns the number stored.
pub fn load(
    e: &mut Engine,
    from: u64,
    to: u64,
    key_size: usize,
    value_size: usize,
    batch: usize,
) -> u64 {
    let batch = batch.max(1);
    let mut keys = vec![0u8; batch * key_size];
    let mut values = vec![0u8; batch * value_size];
    let mut out = Results::with_capacity(batch, 0);
    let mut i = from;
    while i < to {
        let n = ((to - i) as usize).min(batch);
        for j in 0..n {
            key_bytes(i + j as u64, key_size, &mut keys[j * key_size..]);
            let v = &mut values[j * value_size..(j + 1) * value_size];
            let le = (i + j as u64).to_le_bytes();
            let m = value_size.min(8);
            v[..m].copy_from_slice(&le[..m]);
        }
        let ops: Vec<Op> = (0..n)
            .map(|j| {
                Op::put(
                    &keys[j * key_size..(j + 1) * key_size],
                    &values[j * value_size..(j + 1) * value_size],
                )
            })
            .collect();
        e.execute(&ops, &mut out);
        for j in 0..n {
            if !matches!(out.status(j), Status::Ok) {
                return i - from + j as u64;
            }
        }
        i += n as u64;
    }
    to - from
}

fn elem_for(value_size: usize) -> Result<ElemType, String> {
    Ok(match value_size {
        1 => ElemType::U8,
        2 => ElemType::U16,
        4 => ElemType::U32,
        8 => ElemType::U64,
        _ => {
            return Err(format!(
                "atomic workloads need --value-size 1, 2, 4 or 8 (got {value_size})"
            ))
        }
    })
}

/// Everything a measured run needs, built before timing.
struct Stream {
    keys: Vec<u8>,
    kinds: Vec<u8>,
    values: Vec<u8>,
    deltas: Vec<u8>,
    key_size: usize,
}

fn build_stream(a: &EngineBenchArgs, keys: u64) -> Stream {
    let pool = (a.seconds * 4e7).clamp(1e5, INDEX_POOL_LEN_MAX as f64) as usize;
    let mut idx = vec![0u64; pool];
    if a.workload == Workload::AtomicSingle {
        idx.fill(0);
    } else {
        KeyGen::new(a.dist, keys, a.seed).fill(&mut idx);
    }
    let mut kb = vec![0u8; pool * a.key_size];
    for (j, &i) in idx.iter().enumerate() {
        key_bytes(i, a.key_size, &mut kb[j * a.key_size..]);
    }
    // Operation choice per position: 0 read, 1 write, 2 vector update, 3 reduce, 4 filter.
    let mut x = a.seed | 1;
    let kinds = (0..pool)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            match a.workload {
                Workload::Vector => (x % 3) as u8 + 2,
                w => u8::from((x % 1000) as u32 >= w.reads_per_mille()),
            }
        })
        .collect();
    let values = (0..VALUE_POOL_LEN * a.value_size)
        .map(|i| (i * 31 % 251) as u8)
        .collect();
    let deltas = 1u64.to_le_bytes().to_vec();
    Stream {
        keys: kb,
        kinds,
        values,
        deltas,
        key_size: a.key_size,
    }
}

/// What one timed run did.
struct Timed {
    ops: u64,
    errors: u64,
    seconds: f64,
}

/// One timed run. Never inlined, so that profilers (e.g.
/// `valgrind --tool=callgrind --toggle-collect='*engine::run::measure*'`) can single it out.
#[inline(never)]
fn measure(e: &mut Engine, a: &EngineBenchArgs, s: &Stream) -> Result<Timed, String> {
    let elem = if matches!(a.workload, Workload::AtomicSingle | Workload::AtomicZipf) {
        elem_for(a.value_size)?
    } else {
        ElemType::U32
    };
    let width = elem.width();
    let sigma = [0u8; 8];
    let param = 128u32.to_le_bytes();
    let vs = a.value_size;
    let value = |pos: usize| {
        let v = (pos % VALUE_POOL_LEN) * vs;
        &s.values[v..v + vs]
    };
    // The workload is chosen once, so that each operation costs the benchmark only its key
    // and the push (the engine, not the benchmark, is what is measured).
    Ok(match a.workload {
        Workload::AtomicSingle | Workload::AtomicZipf => timed(e, a, s, |_, key| {
            Op::update_s2s(key, FN_ADD, elem, &s.deltas[..width])
        }),
        Workload::Get => timed(e, a, s, |_, key| Op::get(key)),
        Workload::Put => timed(e, a, s, |pos, key| Op::put(key, value(pos))),
        Workload::MixedA | Workload::MixedB | Workload::Vector => {
            timed(e, a, s, |pos, key| match s.kinds[pos] {
                0 => Op::get(key),
                1 => Op::put(key, value(pos)),
                2 => Op::update_s2v(key, FN_ADD, ElemType::U32, &s.deltas[..4]),
                3 => Op::reduce(key, FN_SUM, ElemType::U32, &sigma[..4]),
                _ => Op::filter(key, FN_GT, ElemType::U32, &param),
            })
        }
    })
}

/// The timed loop of [`measure`]: batches of `a.batch` operations made by `make` from the
/// stream's positions in turn, for `a.seconds`. The statuses of each batch are read after
/// `execute` returns (outside the engine, one byte compare per operation) and errors counted.
#[inline(always)]
fn timed<'s>(
    e: &mut Engine,
    a: &EngineBenchArgs,
    s: &'s Stream,
    make: impl Fn(usize, &'s [u8]) -> Op<'s>,
) -> Timed {
    let pool = s.kinds.len();
    let ks = s.key_size;
    let mut out = Results::with_capacity(a.batch, a.batch * (a.value_size + 16));
    let mut ops: Vec<Op> = Vec::with_capacity(a.batch);
    let mut pos = 0usize;
    let mut done = 0u64;
    let mut errors = 0u64;
    let start = Instant::now();
    loop {
        ops.clear();
        for _ in 0..a.batch {
            ops.push(make(pos, &s.keys[pos * ks..(pos + 1) * ks]));
            pos += 1;
            if pos == pool {
                pos = 0;
            }
        }
        e.execute(&ops, &mut out);
        errors += (0..ops.len())
            .filter(|&j| matches!(out.status(j), Status::Error(_)))
            .count() as u64;
        done += ops.len() as u64;
        if done % (1 << 16) < a.batch as u64 && start.elapsed().as_secs_f64() >= a.seconds {
            break;
        }
    }
    Timed {
        ops: done,
        errors,
        seconds: start.elapsed().as_secs_f64(),
    }
}

pub fn run(a: &EngineBenchArgs) -> Result<EngineBenchReport, String> {
    if a.workload == Workload::Vector && !a.value_size.is_multiple_of(4) {
        return Err(
            "the vector workload uses u32 elements: --value-size must be a multiple of 4".into(),
        );
    }
    let kv = a.key_size + a.value_size;
    let keys = a
        .keys
        .unwrap_or(((a.memory as f64 * a.utilization) / kv as f64) as u64)
        .max(1);
    check_key_space(keys, a.key_size)?;
    let mut e = Engine::new(engine_config(a, kv, a.utilization)).map_err(|e| e.to_string())?;
    let t = Instant::now();
    let loaded = load(&mut e, 0, keys, a.key_size, a.value_size, 256);
    let load_seconds = t.elapsed().as_secs_f64();
    if loaded < keys {
        return Err(format!(
            "out of memory after loading {loaded} of {keys} keys ({:.3} memory utilization): lower --keys or raise --memory",
            e.memory_utilization()
        ));
    }
    let stream = build_stream(a, keys);
    let (base, len) = e.arena_region();
    let mut runs = Vec::new();
    e.reset_stats();
    for _ in 0..a.runs.max(1) {
        let t = measure(&mut e, a, &stream)?;
        let ops_per_sec = (t.ops - t.errors) as f64 / t.seconds.max(f64::MIN_POSITIVE);
        // SAFETY: the arena stays mapped while `e` lives, and nothing writes it during the probe.
        let line_reads_per_sec =
            unsafe { probe::line_reads_per_sec_at(base, len, a.seconds.min(2.0)) };
        runs.push(RunResult {
            ops: t.ops,
            errors: t.errors,
            seconds: t.seconds,
            ops_per_sec,
            line_reads_per_sec,
            ratio: ops_per_sec / line_reads_per_sec,
        });
    }
    let r = e.report();
    let total = r.stats.total();
    let per = |k: OpKind| {
        let c = r.stats.kind(k);
        (c.ops > 0).then(|| c.accesses_per_op())
    };
    let med = |f: fn(&RunResult) -> f64| median(&mut runs.iter().map(f).collect::<Vec<_>>());
    Ok(EngineBenchReport {
        workload: a.workload,
        dist: if a.workload == Workload::AtomicSingle {
            "single-key".into()
        } else {
            a.dist.name()
        },
        mode: match a.mode {
            ExecMode::Forward => "forward",
            ExecMode::Stall => "stall",
        },
        keys,
        key_size: a.key_size,
        value_size: a.value_size,
        memory: r.arena_bytes,
        batch: a.batch,
        seconds: a.seconds,
        errors: runs.iter().map(|r| r.errors).sum(),
        ops_per_sec: med(|r| r.ops_per_sec),
        line_reads_per_sec: med(|r| r.line_reads_per_sec),
        ops_per_line_read: med(|r| r.ratio),
        runs,
        accesses_per_op: total.accesses() as f64 / total.ops.max(1) as f64,
        lines_per_op: total.lines() as f64 / total.ops.max(1) as f64,
        accesses_per_get: per(OpKind::Get),
        accesses_per_put: per(OpKind::Put),
        forwarded_share: r.stats.forwarded as f64 / total.ops.max(1) as f64,
        memory_utilization: r.memory_utilization,
        hash_index_ratio: r.hash_index_ratio,
        inline_threshold: r.inline_threshold,
        chained_buckets: r.counts.chained_buckets,
        chain_histogram: e.chain_histogram(),
        stalls: r.stats.stalls,
        slab_free_bytes: r.slab_free_bytes,
        load_seconds,
        load_ops_per_sec: keys as f64 / load_seconds,
    })
}
