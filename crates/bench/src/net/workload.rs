//! Network benchmark workloads: which operations a run sends, on which keys, in which order.
//!
//! ```text
//!   WorkloadSpec ──(stream index)──> OpStream ──fill(depth)──> [BenchOp; depth] ──> Driver
//!        │                              ├─ KeyGen (dist.rs): key ids in [0, keys), drawn ahead
//!        │                              │  into a pool the stream cycles through
//!        │                              └─ SmallRng:         read or write, per the mix
//!        └──> LoadStream ──fill(depth)──> [Put; depth] for key ids 0, 1, ..., keys-1
//! ```
//!
//! Goals:
//! - Deterministic: connection `i` of a run gets `OpStream::with_pool(spec, i, ..)`, seeded
//!   from `(spec.seed, i)` only, so directkv, Redis and memcached receive the same operations in
//!   the same batches when run with the same spec, depth and connection count.
//! - The YCSB core mixes (A 50/50 read/update, B 95/5, C read only, F 50/50 read /
//!   read-modify-write) and KV-Direct's own: atomic adds on one key or on `--dist` keys, and
//!   vector update/reduce/filter on u32 vectors.
//!
//! What each target is loaded with (`ValueFormat`): YCSB workloads store `write_value(id)`, a
//! printable `value_size`-byte string; atomic workloads store the decimal string `"0"` on every
//! target (RESP INCRBY and memcached incr both need a decimal string, and Redis rejects leading
//! zeros, so the value is one byte whatever `--value-size` says); vector workloads store
//! `value_size / 4` u32 elements (directkv's DKV.VSET; Redis and memcached cannot run them).
//!
//! Non-goals: YCSB D and E (insert-latest and scans need key insertion and ranges the engine
//! does not have), and value verification (the integration tests do that).

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::dist::{Distribution, KeyGen};
use crate::net::driver::{BenchOp, BenchOpKind, DataShape};

/// The width of one vector element, bytes: vector workloads run on u32 elements.
pub const VECTOR_ELEM_BYTES: usize = 4;

/// A named workload: the operation mix of every batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WorkloadKind {
    YcsbA,
    YcsbB,
    YcsbC,
    YcsbF,
    AtomicSingle,
    AtomicZipf,
    VectorUpdate,
    VectorReduce,
    VectorFilter,
}

impl WorkloadKind {
    pub const ALL: [WorkloadKind; 9] = [
        WorkloadKind::YcsbA,
        WorkloadKind::YcsbB,
        WorkloadKind::YcsbC,
        WorkloadKind::YcsbF,
        WorkloadKind::AtomicSingle,
        WorkloadKind::AtomicZipf,
        WorkloadKind::VectorUpdate,
        WorkloadKind::VectorReduce,
        WorkloadKind::VectorFilter,
    ];

    /// Parses the names `name` gives (`ycsb-a`, ..., `vector-filter`), or explains what exists.
    pub fn parse(s: &str) -> Result<WorkloadKind, String> {
        let want = s.trim().to_ascii_lowercase();
        WorkloadKind::ALL
            .into_iter()
            .find(|w| w.name() == want)
            .ok_or_else(|| {
                let names: Vec<&str> = WorkloadKind::ALL.iter().map(|w| w.name()).collect();
                format!("unknown workload {s:?} (one of: {})", names.join(", "))
            })
    }

    pub fn name(&self) -> &'static str {
        match self {
            WorkloadKind::YcsbA => "ycsb-a",
            WorkloadKind::YcsbB => "ycsb-b",
            WorkloadKind::YcsbC => "ycsb-c",
            WorkloadKind::YcsbF => "ycsb-f",
            WorkloadKind::AtomicSingle => "atomic-single",
            WorkloadKind::AtomicZipf => "atomic-zipf",
            WorkloadKind::VectorUpdate => "vector-update",
            WorkloadKind::VectorReduce => "vector-reduce",
            WorkloadKind::VectorFilter => "vector-filter",
        }
    }

    /// `(fraction of reads, the other operation)`: each operation is a Get with probability
    /// `fraction`, else the other kind.
    pub fn mix(&self) -> (f64, BenchOpKind) {
        match self {
            WorkloadKind::YcsbA => (0.5, BenchOpKind::Put),
            WorkloadKind::YcsbB => (0.95, BenchOpKind::Put),
            WorkloadKind::YcsbC => (1.0, BenchOpKind::Put),
            WorkloadKind::YcsbF => (0.5, BenchOpKind::ReadModifyWrite),
            WorkloadKind::AtomicSingle | WorkloadKind::AtomicZipf => (0.0, BenchOpKind::AtomicAdd),
            WorkloadKind::VectorUpdate => (0.0, BenchOpKind::VectorUpdate),
            WorkloadKind::VectorReduce => (0.0, BenchOpKind::VectorReduce),
            WorkloadKind::VectorFilter => (0.0, BenchOpKind::VectorFilter),
        }
    }

    /// How the load phase stores values for this workload, or why `shape` does not fit it.
    pub fn value_format(&self, shape: DataShape) -> Result<ValueFormat, String> {
        match self {
            WorkloadKind::AtomicSingle | WorkloadKind::AtomicZipf => Ok(ValueFormat::Counter),
            WorkloadKind::VectorUpdate
            | WorkloadKind::VectorReduce
            | WorkloadKind::VectorFilter => {
                if shape.value_size == 0 || !shape.value_size.is_multiple_of(VECTOR_ELEM_BYTES) {
                    return Err(format!(
                        "vector workloads need --value-size a positive multiple of {VECTOR_ELEM_BYTES} (u32 elements), got {}",
                        shape.value_size
                    ));
                }
                Ok(ValueFormat::VectorU32 {
                    elems: shape.value_size / VECTOR_ELEM_BYTES,
                })
            }
            _ => Ok(ValueFormat::Bytes),
        }
    }
}

/// What the load phase writes for each key (see the module comment).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueFormat {
    /// `write_value(id, value_size)`.
    Bytes,
    /// The decimal string "0".
    Counter,
    /// `elems` u32 elements, element `i` of key `id` being `vector_elem(id, i)`.
    VectorU32 { elems: usize },
}

/// Element `i` of the vector the load phase stores for `key_id`: small, mostly non-zero (every
/// 7th is zero so that filters have something to drop), and derived from the id.
pub fn vector_elem(key_id: u64, i: usize) -> u32 {
    (key_id.wrapping_add(i as u64) % 7) as u32 * (1 + i as u32 % 100)
}

/// Everything that fixes a run's operation streams.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WorkloadSpec {
    pub kind: WorkloadKind,
    pub dist: Distribution,
    pub keys: u64,
    pub shape: DataShape,
    pub seed: u64,
}

/// Key ids drawn ahead, over all of a run's connections: 32 MiB of ids (see `OpStream`).
pub const KEY_POOL_IDS_TOTAL: usize = 1 << 22;
/// Bounds of one connection's key-id pool.
pub const KEY_POOL_IDS_MIN: usize = 1 << 16;
pub const KEY_POOL_IDS_MAX: usize = 1 << 20;

/// The key-id pool of each of `connections` streams: `KEY_POOL_IDS_TOTAL` shared out, within
/// the bounds.
pub fn key_pool_len(connections: usize) -> usize {
    (KEY_POOL_IDS_TOTAL / connections.max(1)).clamp(KEY_POOL_IDS_MIN, KEY_POOL_IDS_MAX)
}

/// The key generator's seed of stream `stream_index`: distinct and well mixed per stream.
fn stream_seed(spec: &WorkloadSpec, stream_index: u64) -> u64 {
    spec.seed
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(stream_index.wrapping_mul(0xD1B5_4A32_D192_ED03))
}

/// The deterministic operation stream of one connection.
///
/// Key ids are drawn before the run into a pool that the stream then cycles through: a YCSB
/// Zipf draw costs a `powf` and a 64-bit division (about 50 ns), which at millions of
/// operations per second was a seventh of the load generator's core, time the measured server
/// waited for. The pool holds the stream's first draws in order, so a run of up to the pool's
/// length sends exactly the unpooled stream; a longer run repeats it, which changes no key's
/// frequency, and no server can profit from the order of a million-id cycle.
pub struct OpStream {
    pool: Vec<u64>,
    next: usize,
    mix_rng: SmallRng,
    read_fraction: f64,
    other: BenchOpKind,
}

impl OpStream {
    /// Stream `stream_index` of `spec` (one per connection) with a pool of
    /// `KEY_POOL_IDS_MAX` key ids. Panics if `spec.keys` is 0.
    pub fn new(spec: &WorkloadSpec, stream_index: u64) -> OpStream {
        OpStream::with_pool(spec, stream_index, KEY_POOL_IDS_MAX)
    }

    /// [`OpStream::new`] with a pool of `pool_len` key ids (at least one).
    pub fn with_pool(spec: &WorkloadSpec, stream_index: u64, pool_len: usize) -> OpStream {
        // Distinct seeds for keys and for the mix, so that the two never move in lockstep.
        let base = stream_seed(spec, stream_index);
        let (read_fraction, other) = spec.kind.mix();
        let single_key = spec.kind == WorkloadKind::AtomicSingle;
        let mut pool = vec![0u64; if single_key { 1 } else { pool_len.max(1) }];
        if !single_key {
            KeyGen::new(spec.dist, spec.keys, base).fill(&mut pool);
        }
        OpStream {
            pool,
            next: 0,
            mix_rng: SmallRng::seed_from_u64(base ^ 0x5851_F42D_4C95_7F2D),
            read_fraction,
            other,
        }
    }

    /// Replaces the contents of `out` with the next `n` operations.
    pub fn fill(&mut self, out: &mut Vec<BenchOp>, n: usize) {
        out.clear();
        for _ in 0..n {
            let key_id = self.pool[self.next];
            self.next += 1;
            if self.next == self.pool.len() {
                self.next = 0;
            }
            let kind = if self.read_fraction >= 1.0
                || (self.read_fraction > 0.0 && self.mix_rng.gen::<f64>() < self.read_fraction)
            {
                BenchOpKind::Get
            } else {
                self.other
            };
            out.push(BenchOp { kind, key_id });
        }
    }
}

/// The load phase's stream: one Put for every key id, in order.
pub struct LoadStream {
    next: u64,
    keys: u64,
}

impl LoadStream {
    pub fn new(keys: u64) -> LoadStream {
        LoadStream { next: 0, keys }
    }

    /// Replaces `out` with the next at most `n` Puts; returns false once every key was written.
    pub fn fill(&mut self, out: &mut Vec<BenchOp>, n: usize) -> bool {
        out.clear();
        let end = self.keys.min(self.next.saturating_add(n as u64));
        out.extend((self.next..end).map(|key_id| BenchOp {
            kind: BenchOpKind::Put,
            key_id,
        }));
        self.next = end;
        !out.is_empty()
    }
}

/// Keys that fill `utilization` of `memory_bytes` with `shape`-sized pairs (at least one).
pub fn keys_for_utilization(memory_bytes: u64, utilization: f64, shape: DataShape) -> u64 {
    let pair = (shape.key_size + shape.value_size).max(1) as f64;
    ((memory_bytes as f64 * utilization / pair) as u64).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(kind: WorkloadKind) -> WorkloadSpec {
        WorkloadSpec {
            kind,
            dist: Distribution::YcsbZipf { theta: 0.99 },
            keys: 100_000,
            shape: DataShape {
                key_size: 8,
                value_size: 8,
            },
            seed: 7,
        }
    }

    fn fractions(kind: WorkloadKind) -> std::collections::HashMap<BenchOpKind, f64> {
        let mut stream = OpStream::new(&spec(kind), 0);
        let mut ops = Vec::new();
        let mut counts = std::collections::HashMap::new();
        let total = 200_000;
        for _ in 0..total / 100 {
            stream.fill(&mut ops, 100);
            for op in &ops {
                *counts.entry(op.kind).or_insert(0u64) += 1;
            }
        }
        counts
            .into_iter()
            .map(|(k, c)| (k, c as f64 / total as f64))
            .collect()
    }

    #[test]
    fn ycsb_mixes_have_their_read_and_update_fractions() {
        // 200k draws: the standard deviation of a 50% fraction is 0.11%, so 1% is > 9 sigma.
        let a = fractions(WorkloadKind::YcsbA);
        assert!((a[&BenchOpKind::Get] - 0.5).abs() < 0.01, "{a:?}");
        assert!((a[&BenchOpKind::Put] - 0.5).abs() < 0.01, "{a:?}");
        let b = fractions(WorkloadKind::YcsbB);
        assert!((b[&BenchOpKind::Get] - 0.95).abs() < 0.005, "{b:?}");
        assert!((b[&BenchOpKind::Put] - 0.05).abs() < 0.005, "{b:?}");
        assert_eq!(fractions(WorkloadKind::YcsbC)[&BenchOpKind::Get], 1.0);
        let f = fractions(WorkloadKind::YcsbF);
        assert!((f[&BenchOpKind::Get] - 0.5).abs() < 0.01, "{f:?}");
        assert!(
            (f[&BenchOpKind::ReadModifyWrite] - 0.5).abs() < 0.01,
            "{f:?}"
        );
        assert_eq!(fractions(WorkloadKind::AtomicZipf).len(), 1);
        assert_eq!(
            fractions(WorkloadKind::VectorFilter)[&BenchOpKind::VectorFilter],
            1.0
        );
    }

    #[test]
    fn streams_are_deterministic_per_seed_and_index() {
        let mut a = OpStream::new(&spec(WorkloadKind::YcsbA), 3);
        let mut b = OpStream::new(&spec(WorkloadKind::YcsbA), 3);
        let mut c = OpStream::new(&spec(WorkloadKind::YcsbA), 4);
        let (mut x, mut y, mut z) = (Vec::new(), Vec::new(), Vec::new());
        a.fill(&mut x, 1000);
        b.fill(&mut y, 1000);
        c.fill(&mut z, 1000);
        assert_eq!(x, y);
        assert_ne!(x, z);
        assert!(x.iter().all(|op| op.key_id < 100_000));
    }

    #[test]
    fn a_pooled_stream_sends_the_generator_draws_in_order_then_repeats_them() {
        let spec = spec(WorkloadKind::YcsbC);
        let mut direct = KeyGen::new(spec.dist, spec.keys, stream_seed(&spec, 0));
        let want: Vec<u64> = (0..1000).map(|_| direct.next_index()).collect();
        let mut s = OpStream::with_pool(&spec, 0, 1000);
        let mut ops = Vec::new();
        s.fill(&mut ops, 1000);
        assert_eq!(ops.iter().map(|o| o.key_id).collect::<Vec<_>>(), want);
        s.fill(&mut ops, 1500);
        let again: Vec<u64> = ops.iter().map(|o| o.key_id).collect();
        assert_eq!(&again[..1000], &want[..]);
        assert_eq!(&again[1000..], &want[..500]);
        assert_eq!(key_pool_len(4), KEY_POOL_IDS_MAX);
        assert_eq!(key_pool_len(1 << 12), KEY_POOL_IDS_MIN);
    }

    #[test]
    fn atomic_single_hits_one_key_and_load_covers_every_key_once() {
        let mut s = OpStream::new(&spec(WorkloadKind::AtomicSingle), 0);
        let mut ops = Vec::new();
        s.fill(&mut ops, 500);
        assert!(ops
            .iter()
            .all(|op| op.key_id == 0 && op.kind == BenchOpKind::AtomicAdd));

        let mut load = LoadStream::new(1001);
        let mut seen = Vec::new();
        while load.fill(&mut ops, 64) {
            assert!(ops.len() <= 64);
            seen.extend(ops.iter().map(|op| op.key_id));
        }
        assert_eq!(seen, (0..1001).collect::<Vec<_>>());
    }

    #[test]
    fn names_round_trip_and_bad_input_is_explained() {
        for w in WorkloadKind::ALL {
            assert_eq!(WorkloadKind::parse(w.name()), Ok(w));
        }
        let e = WorkloadKind::parse("ycsb-z").unwrap_err();
        assert!(
            e.contains("unknown workload") && e.contains("ycsb-b"),
            "{e}"
        );
        let shape = DataShape {
            key_size: 8,
            value_size: 6,
        };
        assert!(WorkloadKind::VectorUpdate.value_format(shape).is_err());
        assert_eq!(
            keys_for_utilization(
                1 << 30,
                0.5,
                DataShape {
                    key_size: 8,
                    value_size: 8
                }
            ),
            (1u64 << 29) / 16
        );
    }
}
