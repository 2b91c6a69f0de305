//! Property tests of the engine against a `HashMap` model (STYLE habit 11).
//!
//! Every case runs the same batches through two engines, one in `ExecMode::Forward` and one in
//! `ExecMode::Stall`, and through a model that applies the operations one by one to a
//! `HashMap<Vec<u8>, Vec<u8>>`. The status and data of every operation must agree across all three
//! (under out of memory, each engine with its own model only: see (d)), and after every batch both
//! engines must pass `check_invariants` and hold exactly the model's key-values.
//!
//! ```text
//!   proptest ──> Case { keys, batches of AOp }   (abstract: key index, value length + seed, ...)
//!                  │ materialize against the model state the op will see (cas "expect the
//!                  ▼ current value", v2v deltas as long as the current value)
//!                Vec<OwnedOp> ──> Vec<Op> ──> Engine(Forward).execute ──┐
//!                                        └──> Engine(Stall).execute   ──┼──> compare per op
//!                model_apply, op by op, on one model per engine ───────┘    and contents
//! ```
//!
//! The model computes arithmetic independently of the engine, for a small vocabulary: unsigned
//! element types only, update functions add/sub/xor/max/swap, reduce sum/count, filter eq/gt,
//! the Redis string operations APPEND, INCRBY and INCRBYFLOAT (with puts of number texts so the
//! counters meet integers, floats and texts Redis refuses), plus
//! operations that must fail (wrong width, unknown function, wrong function kind, length
//! mismatch) and the empty key, which Redis allows and the engine stores as a record. Out of memory is the one outcome the model cannot predict: when an
//! engine reports it for an operation that would have written, that engine's model skips the
//! operation, and the store must show that nothing changed. Forward mode stores only the final
//! value of a same-key group, so it can succeed where Stall mode runs out of memory; the two are
//! therefore not compared with each other under memory pressure (an ignored test below pins the
//! divergence down).
//!
//! Configurations: (a) inline threshold 51, (b) no inline key-values, (c) a tiny index with
//! long chains (a random-operation test over a pre-filled table, and a bulk insert/delete test
//! that must leave no chained bucket behind), (d) out of memory, (e) small pipeline windows,
//! (f) windows of GETs only and (g) windows of GETs and PUTs only, each batch followed by a copy
//! made of those operations (both take their own paths without the reservation station).
//! `PROPTEST_CASES` overrides every test's case count, for longer runs.

use std::collections::{HashMap, HashSet};
use std::ops::RangeInclusive;
use std::sync::atomic::{AtomicU64, Ordering};

use directkv_engine::ops::{
    FN_ADD, FN_COUNT, FN_EQ, FN_GT, FN_MAX, FN_SUB, FN_SUM, FN_SWAP, FN_XOR,
};
use directkv_engine::{
    ElemType, Engine, EngineConfig, ExecMode, Op, OpError, OpKind, Results, Status,
};
use directkv_testkit::model::{self, Bytes, Eff, Limits, Outcome, OwnedOp, Store};
use proptest::prelude::*;
use proptest::test_runner::{TestCaseError, TestRunner};

/// The engine's default key limit, and the value limit every configuration here sets.
const KEY_LEN_MAX: usize = 250;
const VALUE_LEN_MAX: usize = 64 << 10;

// ---------------------------------------------------------------------------------------------
// Abstract operations, as proptest generates and shrinks them.

/// A value: `len` bytes drawn from `seed`, each below `alphabet` (0 = any byte). Small alphabets
/// make equal values and filter matches common.
#[derive(Clone, Copy, Debug)]
struct Val {
    len: u16,
    seed: u32,
    alphabet: u8,
}

impl Val {
    fn bytes(&self) -> Vec<u8> {
        pattern(self.len as usize, u64::from(self.seed), self.alphabet)
    }
}

fn splitmix(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn pattern(len: usize, seed: u64, alphabet: u8) -> Vec<u8> {
    let mut x = seed;
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        let word = splitmix(&mut x).to_le_bytes();
        let take = (len - out.len()).min(8);
        out.extend(
            word[..take]
                .iter()
                .map(|&b| if alphabet == 0 { b } else { b % alphabet }),
        );
    }
    out
}

/// Which key an operation addresses: `Hot(i)` one of the first `hot` keys of the case (so
/// batches have many same-key runs), `Any(i)` any key of the case, fillers included.
#[derive(Clone, Copy, Debug)]
enum Key {
    Hot(u8),
    Any(u32),
}

#[derive(Clone, Copy, Debug)]
enum CasExp {
    /// The value the operation will see (empty when the key is missing).
    Current,
    Empty,
    Lit(Val),
}

/// Operations whose outcome is an error (or NotFound) that the model must predict.
#[derive(Clone, Copy, Debug)]
enum Bad {
    /// s2s with function id 999: UnknownFunction, whether or not the key exists.
    UnknownUpdate,
    /// reduce with function id 999: NotFound on a missing key, else UnknownFunction.
    UnknownReduce,
    /// s2s with a reduce function id: WrongFunctionKind.
    WrongKind,
    /// u64 add with a 3-byte delta: WrongWidth.
    ShortDelta,
    /// u8 filter with a 2-byte parameter: WrongWidth.
    WideParam,
    /// A put with an empty key: stored like any other key (it used to be KeyEmpty).
    EmptyKey,
    /// A get with a 251-byte key: KeyTooLong.
    LongKey,
    /// A put of one byte more than value_len_max: ValueTooLarge.
    LargeValue,
    /// u8 v2v with one delta too many: LengthMismatch.
    V2vMismatch,
    /// count over u32 elements: WrongWidth unless the length is a multiple of 4.
    CountU32,
    /// u16 xor over the vector: WrongWidth on odd lengths.
    S2vU16,
}

#[derive(Clone, Copy, Debug)]
enum Act {
    Get,
    Put(Val),
    PutNx(Val),
    PutXx(Val),
    Delete,
    Cas(CasExp, Val),
    /// Function, u64 (true) or u32 (false), delta.
    S2s(u16, bool, u64),
    /// u8 function and delta.
    S2v(u16, u8),
    /// u8 function, seed of deltas as long as the current value.
    V2v(u16, u32),
    /// u8 sum with sigma.
    Sum(u8),
    /// count over u8 with sigma.
    Count(u64),
    /// u8 filter function and parameter.
    Filter(u16, u8),
    /// APPEND of the value.
    Append(Val),
    /// INCRBY by the delta.
    IncrBy(i64),
    /// INCRBYFLOAT by the delta.
    IncrByFloat(f64),
    /// A put of a number's text (`model::NUM_TEXTS`), so the counters meet integers and floats.
    PutNum(u8),
    Bad(Bad),
    /// SETRANGE at the byte offset (huge ones are refused by the limit) of the value.
    SetRange(u64, Val),
    /// SETBIT at the bit offset to the byte (0 or 1; 2 is malformed).
    SetBit(u64, u8),
}

#[derive(Clone, Copy)]
struct AOp {
    key: Key,
    act: Act,
    no_return: bool,
}

/// One line per operation, also under `{:#?}`, so a shrunk case reads as a list.
impl std::fmt::Debug for AOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let no_return = if self.no_return { " no_return" } else { "" };
        write!(f, "{:?} {:?}{no_return}", self.key, self.act)
    }
}

// ---------------------------------------------------------------------------------------------
// Concrete operations.

/// The keys of a case: the first `hot` are the small key space, the rest fillers.
struct Keys {
    all: Vec<Vec<u8>>,
    hot: usize,
}

impl Keys {
    fn get(&self, k: Key) -> &[u8] {
        match k {
            Key::Hot(i) => &self.all[i as usize % self.hot],
            Key::Any(i) => &self.all[i as usize % self.all.len()],
        }
    }
}

/// Turns `a` into a concrete operation; `cur` is the value it will see.
fn materialize(a: &AOp, key: &[u8], cur: Option<&[u8]>) -> OwnedOp {
    let cur_len = cur.map_or(0, <[u8]>::len);
    let mut op = match a.act {
        Act::Get => OwnedOp::new(OpKind::Get, key),
        Act::Put(v) => OwnedOp {
            arg: v.bytes(),
            ..OwnedOp::new(OpKind::Put, key)
        },
        Act::PutNx(v) => OwnedOp {
            arg: v.bytes(),
            ..OwnedOp::new(OpKind::PutNx, key)
        },
        Act::PutXx(v) => OwnedOp {
            arg: v.bytes(),
            ..OwnedOp::new(OpKind::PutXx, key)
        },
        Act::Delete => OwnedOp::new(OpKind::Delete, key),
        Act::Cas(exp, new) => {
            let expected = match exp {
                CasExp::Current => cur.unwrap_or(&[]).to_vec(),
                CasExp::Empty => vec![],
                CasExp::Lit(v) => v.bytes(),
            };
            OwnedOp {
                arg: expected,
                arg2: new.bytes(),
                ..OwnedOp::new(OpKind::Cas, key)
            }
        }
        Act::S2s(func, true, d) => {
            OwnedOp::new(OpKind::UpdateS2S, key).with(func, ElemType::U64, d.to_le_bytes().to_vec())
        }
        Act::S2s(func, false, d) => OwnedOp::new(OpKind::UpdateS2S, key).with(
            func,
            ElemType::U32,
            (d as u32).to_le_bytes().to_vec(),
        ),
        Act::S2v(func, d) => OwnedOp::new(OpKind::UpdateS2V, key).with(func, ElemType::U8, vec![d]),
        Act::V2v(func, seed) => OwnedOp::new(OpKind::UpdateV2V, key).with(
            func,
            ElemType::U8,
            pattern(cur_len, u64::from(seed), 0),
        ),
        Act::Sum(sigma) => {
            OwnedOp::new(OpKind::Reduce, key).with(FN_SUM, ElemType::U8, vec![sigma])
        }
        Act::Count(sigma) => OwnedOp::new(OpKind::Reduce, key).with(
            FN_COUNT,
            ElemType::U8,
            sigma.to_le_bytes().to_vec(),
        ),
        Act::Filter(func, p) => OwnedOp::new(OpKind::Filter, key).with(func, ElemType::U8, vec![p]),
        Act::Append(v) => {
            // At most 16 bytes past value_len_max, so appends near the limit sometimes
            // overflow it (and fail) without the argument itself being over-long.
            let mut arg = v.bytes();
            arg.truncate(VALUE_LEN_MAX.min((VALUE_LEN_MAX + 16).saturating_sub(cur_len)));
            OwnedOp {
                arg,
                ..OwnedOp::new(OpKind::Append, key)
            }
        }
        Act::IncrBy(d) => OwnedOp {
            arg: d.to_le_bytes().to_vec(),
            ..OwnedOp::new(OpKind::IncrBy, key)
        },
        Act::IncrByFloat(d) => OwnedOp {
            arg: d.to_le_bytes().to_vec(),
            ..OwnedOp::new(OpKind::IncrByFloat, key)
        },
        Act::SetRange(off, v) => {
            let mut arg2 = v.bytes();
            arg2.truncate(16);
            OwnedOp {
                arg: off.to_le_bytes().to_vec(),
                arg2,
                ..OwnedOp::new(OpKind::SetRange, key)
            }
        }
        Act::SetBit(off, bit) => OwnedOp {
            arg: off.to_le_bytes().to_vec(),
            arg2: vec![bit],
            ..OwnedOp::new(OpKind::SetBit, key)
        },
        Act::PutNum(i) => OwnedOp {
            arg: model::NUM_TEXTS[i as usize % model::NUM_TEXTS.len()]
                .as_bytes()
                .to_vec(),
            ..OwnedOp::new(OpKind::Put, key)
        },
        Act::Bad(b) => {
            let s2s = OwnedOp::new(OpKind::UpdateS2S, key);
            match b {
                Bad::UnknownUpdate => s2s.with(999, ElemType::U64, 1u64.to_le_bytes().to_vec()),
                Bad::UnknownReduce => {
                    OwnedOp::new(OpKind::Reduce, key).with(999, ElemType::U8, vec![0])
                }
                Bad::WrongKind => s2s.with(FN_SUM, ElemType::U64, 1u64.to_le_bytes().to_vec()),
                Bad::ShortDelta => s2s.with(FN_ADD, ElemType::U64, vec![1, 2, 3]),
                Bad::WideParam => {
                    OwnedOp::new(OpKind::Filter, key).with(FN_GT, ElemType::U8, vec![1, 2])
                }
                Bad::EmptyKey => OwnedOp {
                    arg: b"v".to_vec(),
                    ..OwnedOp::new(OpKind::Put, b"")
                },
                Bad::LongKey => OwnedOp::new(OpKind::Get, [b'k'; KEY_LEN_MAX + 1]),
                Bad::LargeValue => OwnedOp {
                    arg: vec![0; VALUE_LEN_MAX + 1],
                    ..OwnedOp::new(OpKind::Put, key)
                },
                Bad::V2vMismatch => OwnedOp::new(OpKind::UpdateV2V, key).with(
                    FN_ADD,
                    ElemType::U8,
                    vec![1; cur_len + 1],
                ),
                Bad::CountU32 => OwnedOp::new(OpKind::Reduce, key).with(
                    FN_COUNT,
                    ElemType::U32,
                    7u64.to_le_bytes().to_vec(),
                ),
                Bad::S2vU16 => OwnedOp::new(OpKind::UpdateS2V, key).with(
                    FN_XOR,
                    ElemType::U16,
                    vec![0x5a, 0xa5],
                ),
            }
        }
    };
    op.no_return = a.no_return;
    op
}

// ---------------------------------------------------------------------------------------------
// The model: SPEC section 1 for unsigned element types, written without the engine's code, is
// `directkv_testkit::model`, shared with the `engine_model` fuzz target.

/// What the model checks: the engine's default key limit and the value limit set here.
const LIMITS: Limits = Limits {
    key_len_max: KEY_LEN_MAX,
    value_len_max: VALUE_LEN_MAX,
};

fn model_apply(cur: Option<&[u8]>, op: &OwnedOp) -> Outcome {
    model::apply(cur, op, LIMITS)
}

// ---------------------------------------------------------------------------------------------
// The harness: two engines, one model each.

const MODES: [ExecMode; 2] = [ExecMode::Forward, ExecMode::Stall];

struct Harness {
    engines: Vec<Engine>,
    models: Vec<Store>,
    results: Vec<Results>,
    /// Out of memory may happen (config d).
    oom: bool,
    /// Forward and Stall must give identical results.
    cross: bool,
    /// Check invariants and contents after every batch (else only in `check_all`).
    check_each_batch: bool,
    /// Operations that ran out of memory, per engine.
    ooms: [u64; 2],
}

impl Harness {
    fn new(cfg: &EngineConfig, oom: bool) -> Harness {
        let engines = MODES
            .iter()
            .map(|&mode| {
                let mut e = Engine::new(EngineConfig {
                    mode,
                    ..cfg.clone()
                })
                .expect("engine");
                // The Stall engine runs the baseline x86-64 build of the pipeline, the Forward
                // one the x86-64-v3 build where the CPU has it: both are checked against the
                // model and against each other.
                e.set_wide_code(mode == ExecMode::Forward);
                e
            })
            .collect();
        Harness {
            engines,
            models: vec![Store::new(), Store::new()],
            results: vec![Results::default(), Results::default()],
            oom,
            cross: true,
            check_each_batch: true,
            ooms: [0; 2],
        }
    }

    /// Stores `kvs` in both engines and models; every put must succeed.
    fn preload(&mut self, kvs: &[(Vec<u8>, Vec<u8>)]) {
        for chunk in kvs.chunks(512) {
            let ops: Vec<Op> = chunk.iter().map(|(k, v)| Op::put(k, v)).collect();
            for (e, out) in self.engines.iter_mut().zip(&mut self.results) {
                e.execute(&ops, out);
                assert!(out.iter().all(|(s, _)| s == Status::Ok), "preload failed");
            }
        }
        for m in &mut self.models {
            m.extend(kvs.iter().cloned());
        }
    }

    /// Runs one batch through both engines and the models and compares everything.
    fn run(&mut self, batch: &[AOp], keys: &Keys) -> Result<(), TestCaseError> {
        let owned = self.materialize(batch, keys);
        let ops: Vec<Op> = owned.iter().map(OwnedOp::as_op).collect();
        for (e, out) in self.engines.iter_mut().zip(&mut self.results) {
            e.execute(&ops, out);
        }
        for e in 0..MODES.len() {
            self.check_results(e, &owned)?;
        }
        if self.cross {
            for (i, op) in owned.iter().enumerate() {
                let (f, s) = (&self.results[0], &self.results[1]);
                prop_assert_eq!(
                    (f.status(i), Bytes(f.data(i))),
                    (s.status(i), Bytes(s.data(i))),
                    "Forward and Stall differ at op {} of {}: {:?}",
                    i,
                    owned.len(),
                    op
                );
            }
        }
        if self.check_each_batch {
            self.check_all()?;
        }
        Ok(())
    }

    fn check_all(&self) -> Result<(), TestCaseError> {
        for (e, m) in self.engines.iter().zip(&self.models) {
            e.check_invariants();
            check_contents(e, m)?;
        }
        Ok(())
    }

    /// Concrete ops for `batch`, each seeing the model state of its position (assuming no out of
    /// memory, which only matters for the arguments chosen, never for the checks).
    fn materialize(&self, batch: &[AOp], keys: &Keys) -> Vec<OwnedOp> {
        let base = &self.models[0];
        let mut overlay: HashMap<Vec<u8>, Option<Vec<u8>>> = HashMap::new();
        let mut owned = Vec::with_capacity(batch.len());
        for a in batch {
            let key = keys.get(a.key);
            let cur = match overlay.get(key) {
                Some(v) => v.clone(),
                None => base.get(key).cloned(),
            };
            let op = materialize(a, key, cur.as_deref());
            match model_apply(cur.as_deref(), &op).eff {
                Eff::Keep => {}
                Eff::Set(v) => {
                    overlay.insert(op.key.clone(), Some(v));
                }
                Eff::Delete => {
                    overlay.insert(op.key.clone(), None);
                }
            }
            owned.push(op);
        }
        owned
    }

    fn check_results(&mut self, e: usize, owned: &[OwnedOp]) -> Result<(), TestCaseError> {
        let out = &self.results[e];
        let m = &mut self.models[e];
        prop_assert_eq!(out.len(), owned.len());
        for (i, op) in owned.iter().enumerate() {
            let want = model_apply(m.get(&op.key).map(Vec::as_slice), op);
            let got = (out.status(i), out.data(i));
            if self.oom
                && got.0 == Status::Error(OpError::OutOfMemory)
                && matches!(want.eff, Eff::Set(_))
            {
                prop_assert!(got.1.is_empty(), "an error carries no data");
                self.ooms[e] += 1;
                continue;
            }
            prop_assert_eq!(
                (got.0, Bytes(got.1)),
                (want.status, Bytes(&want.reply)),
                "{:?} engine, op {} of {}: {:?}",
                MODES[e],
                i,
                owned.len(),
                op
            );
            model::store(m, &op.key, want.eff);
        }
        Ok(())
    }
}

fn check_contents(e: &Engine, m: &Store) -> Result<(), TestCaseError> {
    // Visited keys are remembered by the model's copy, so a key stored twice is caught without
    // copying every key.
    let mut seen: HashSet<&[u8]> = HashSet::with_capacity(m.len());
    let mut wrong: Vec<String> = Vec::new();
    e.for_each(|k, v| match m.get_key_value(k) {
        Some((mk, mv)) if mv[..] == *v => {
            if !seen.insert(mk) {
                wrong.push(format!("key {k:?} stored twice"));
            }
        }
        other => wrong.push(format!(
            "key {k:?}: engine has {} bytes, model {:?}",
            v.len(),
            other.map(|(_, v)| v.len())
        )),
    });
    prop_assert!(
        wrong.is_empty(),
        "contents differ: {:?}",
        &wrong[..wrong.len().min(5)]
    );
    prop_assert_eq!(
        seen.len(),
        m.len(),
        "engine holds {} keys, model {}",
        seen.len(),
        m.len()
    );
    let kv_bytes: usize = m.iter().map(|(k, v)| k.len() + v.len()).sum();
    prop_assert_eq!(e.counts().keys, m.len() as u64);
    prop_assert_eq!(e.counts().kv_bytes, kv_bytes as u64);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Strategies.

/// The shape of a configuration's workload.
#[derive(Clone)]
struct Profile {
    /// Distinct keys of the small key space.
    hot_keys: RangeInclusive<usize>,
    /// Values up to 20000 bytes (out of memory), else up to 300.
    big_values: bool,
    /// Share (in 1/8) of operations on `Key::Any`.
    any_key_eighths: u32,
}

fn key_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => prop::collection::vec(any::<u8>(), 1..=8),
        2 => prop::collection::vec(any::<u8>(), 9..=40),
        // Up to key_len_max: records with long keys.
        1 => prop::collection::vec(any::<u8>(), 41..=KEY_LEN_MAX),
        1 => prop::collection::vec(0u8..4, 1..=3),
        // The empty key (Redis allows it): always a record, whatever the inline threshold.
        1 => Just(Vec::new()),
    ]
}

fn val(big: bool) -> BoxedStrategy<Val> {
    let len = if big {
        prop_oneof![
            3 => 0u16..=16,
            2 => Just(8u16),
            2 => 17u16..=8000,
            10 => 8000u16..=20000,
        ]
        .boxed()
    } else {
        prop_oneof![
            2 => Just(0u16),
            8 => 1u16..=16,
            6 => prop_oneof![Just(4u16), Just(8)],
            4 => 45u16..=55,
            2 => 250u16..=260,
            3 => 0u16..=300,
        ]
        .boxed()
    };
    (len, any::<u32>(), prop_oneof![Just(2u8), Just(16), Just(0)])
        .prop_map(|(len, seed, alphabet)| Val {
            len,
            seed,
            alphabet,
        })
        .boxed()
}

fn small_u64() -> impl Strategy<Value = u64> {
    prop_oneof![3 => 0u64..=3, 1 => any::<u64>(), 1 => Just(u64::MAX)]
}

/// INCRBY deltas: small ones (counters), and ones at i64's edges (overflow).
fn small_i64() -> impl Strategy<Value = i64> {
    prop_oneof![4 => -3i64..=3, 1 => any::<i64>(), 1 => prop_oneof![Just(i64::MAX), Just(i64::MIN)]]
}

/// INCRBYFLOAT deltas: simple fractions, any finite double, and the infinities (refused sums).
fn small_f64() -> impl Strategy<Value = f64> {
    prop_oneof![
        4 => (-8i32..=8).prop_map(|n| f64::from(n) * 0.25),
        2 => prop::num::f64::NORMAL,
        1 => prop_oneof![Just(0.1), Just(f64::INFINITY), Just(f64::NEG_INFINITY), Just(1e308)],
    ]
}

fn act(big: bool) -> BoxedStrategy<Act> {
    let bad = prop_oneof![
        Just(Bad::UnknownUpdate),
        Just(Bad::UnknownReduce),
        Just(Bad::WrongKind),
        Just(Bad::ShortDelta),
        Just(Bad::WideParam),
        Just(Bad::EmptyKey),
        Just(Bad::LongKey),
        Just(Bad::LargeValue),
        Just(Bad::V2vMismatch),
        Just(Bad::CountU32),
        Just(Bad::S2vU16),
    ];
    let s2s = prop_oneof![
        5 => (prop_oneof![Just(FN_ADD), Just(FN_SUB), Just(FN_XOR), Just(FN_MAX), Just(FN_SWAP)], small_u64())
            .prop_map(|(f, d)| Act::S2s(f, true, d)),
        2 => small_u64().prop_map(|d| Act::S2s(FN_ADD, false, d)),
    ];
    let cas_exp = prop_oneof![3 => Just(CasExp::Current), 1 => Just(CasExp::Empty), 1 => val(big).prop_map(CasExp::Lit)];
    let u8_update = || prop_oneof![Just(FN_ADD), Just(FN_XOR)];
    prop_oneof![
        10 => Just(Act::Get),
        10 => val(big).prop_map(Act::Put),
        3 => val(big).prop_map(Act::PutNx),
        3 => val(big).prop_map(Act::PutXx),
        5 => Just(Act::Delete),
        5 => (cas_exp, val(big)).prop_map(|(e, v)| Act::Cas(e, v)),
        10 => s2s,
        4 => (u8_update(), any::<u8>()).prop_map(|(f, d)| Act::S2v(f, d)),
        4 => (u8_update(), any::<u32>()).prop_map(|(f, s)| Act::V2v(f, s)),
        3 => any::<u8>().prop_map(Act::Sum),
        2 => small_u64().prop_map(Act::Count),
        4 => (prop_oneof![Just(FN_EQ), Just(FN_GT)], prop_oneof![0u8..16, any::<u8>()]).prop_map(|(f, p)| Act::Filter(f, p)),
        3 => bad.prop_map(Act::Bad),
        // Short appends even with big values: under out of memory the model's view of a value
        // can be shorter than the engine's, so the limit above could be missed.
        4 => val(false).prop_map(Act::Append),
        4 => small_i64().prop_map(Act::IncrBy),
        3 => small_f64().prop_map(Act::IncrByFloat),
        3 => any::<u8>().prop_map(Act::PutNum),
        // Small offsets (values stay short, as for appends), and offsets past the limit.
        3 => (prop_oneof![8 => 0u64..=300, 1 => (VALUE_LEN_MAX as u64 - 8)..=u64::MAX], val(false))
            .prop_map(|(o, v)| Act::SetRange(o, v)),
        3 => (prop_oneof![8 => 0u64..=2400, 1 => (VALUE_LEN_MAX as u64 * 8 - 8)..=u64::MAX],
            prop_oneof![4 => 0u8..=1, 1 => Just(2u8)])
            .prop_map(|(o, b)| Act::SetBit(o, b)),
    ]
    .boxed()
}

fn key(p: &Profile) -> BoxedStrategy<Key> {
    let hot = any::<u8>().prop_map(Key::Hot);
    if p.any_key_eighths == 0 {
        return hot.boxed();
    }
    prop_oneof![8 - p.any_key_eighths => hot, p.any_key_eighths => any::<u32>().prop_map(Key::Any)]
        .boxed()
}

fn aop(p: &Profile) -> BoxedStrategy<AOp> {
    (key(p), act(p.big_values), prop::bool::weighted(0.15))
        .prop_map(|(key, act, no_return)| AOp {
            key,
            act,
            no_return,
        })
        .boxed()
}

/// A batch: singles and same-key runs, 1..=600 operations in all.
fn batch(p: &Profile) -> BoxedStrategy<Vec<AOp>> {
    let chunk = prop_oneof![
        3 => aop(p).prop_map(|a| vec![a]),
        1 => (key(p), prop::collection::vec(aop(p), 1..=24)).prop_map(|(k, run)| {
            run.into_iter().map(|a| AOp { key: k, ..a }).collect::<Vec<_>>()
        }),
    ];
    // One size range (not a union of small and large batches) so shrinking can drop any chunk.
    prop::collection::vec(chunk, 1..=160)
        .prop_map(|chunks| {
            let mut ops: Vec<AOp> = chunks.into_iter().flatten().collect();
            ops.truncate(600);
            ops
        })
        .boxed()
}

#[derive(Clone)]
struct Case {
    keys: Vec<Vec<u8>>,
    batches: Vec<Vec<AOp>>,
}

impl std::fmt::Debug for Case {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "keys {:?}", self.keys)?;
        for (i, b) in self.batches.iter().enumerate() {
            writeln!(f, "batch {i}:")?;
            for (j, a) in b.iter().enumerate() {
                writeln!(f, "  {j}: {a:?}")?;
            }
        }
        Ok(())
    }
}

fn case(p: Profile) -> impl Strategy<Value = Case> {
    let keys = prop::collection::vec(key_bytes(), p.hot_keys.clone());
    (keys, prop::collection::vec(batch(&p), 1..=4)).prop_map(|(keys, batches)| {
        let mut seen = HashSet::new();
        let keys = keys
            .into_iter()
            .filter(|k| seen.insert(k.clone()))
            .collect();
        Case { keys, batches }
    })
}

fn small_profile() -> Profile {
    Profile {
        hot_keys: 1..=24,
        big_values: false,
        any_key_eighths: 0,
    }
}

// Cases per test as (release, debug), sized so that the file takes well under a minute under
// `cargo test --release` and a few minutes in a debug build on two cores.
const CASES_SMALL_KEYS: (u32, u32) = (256, 24);
const CASES_SMALL_WINDOWS: (u32, u32) = (128, 12);
const CASES_CHAINS: (u32, u32) = (12, 2);
const CASES_BULK: (u32, u32) = (4, 1);
const CASES_OOM: (u32, u32) = (128, 12);

/// Case count: `release` in optimized builds, `debug` otherwise; `PROPTEST_CASES` overrides both.
fn config(release: u32, debug: u32) -> ProptestConfig {
    let cases = match std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        Some(n) => n,
        None if cfg!(debug_assertions) => debug,
        None => release,
    };
    // No regression files: a failure prints the minimal case, which belongs in a named test.
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

fn engine_config(memory_mib: usize, ratio: f64, threshold: usize) -> EngineConfig {
    let mut cfg = EngineConfig::with_memory(memory_mib << 20);
    cfg.hash_index_ratio = Some(ratio);
    cfg.inline_threshold = Some(threshold);
    // Values stay far below this; a smaller limit keeps the engines' scratch buffers small.
    cfg.value_len_max = VALUE_LEN_MAX;
    assert_eq!(cfg.key_len_max, KEY_LEN_MAX);
    cfg
}

fn run_case(cfg: &EngineConfig, c: &Case, oom: bool) -> Result<(), TestCaseError> {
    let mut h = Harness::new(cfg, oom);
    let keys = Keys {
        hot: c.keys.len(),
        all: c.keys.clone(),
    };
    for b in &c.batches {
        h.run(b, &keys)?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// (a), (b), (e): small key space.

proptest! {
    #![proptest_config(config(CASES_SMALL_KEYS.0, CASES_SMALL_KEYS.1))]

    /// (a) Inline threshold 51: keys of 1..=40 bytes with values around 4..55 bytes cross it.
    #[test]
    fn model_inline_threshold_51(c in case(small_profile())) {
        run_case(&engine_config(4, 0.5, 51), &c, false)?;
    }

    /// (b) Everything in slab records.
    #[test]
    fn model_all_records(c in case(small_profile())) {
        run_case(&engine_config(4, 0.5, 0), &c, false)?;
    }

}

proptest! {
    #![proptest_config(config(CASES_SMALL_WINDOWS.0, CASES_SMALL_WINDOWS.1))]

    /// (e) Small windows: every batch spans many windows, and groups are cut at window edges.
    #[test]
    fn model_small_windows(c in case(small_profile()), window in prop_oneof![Just(1usize), 2usize..=9]) {
        let mut cfg = engine_config(4, 0.5, 51);
        cfg.window = window;
        run_case(&cfg, &c, false)?;
    }
}

// ---------------------------------------------------------------------------------------------
// (f) Read-only windows: a window of valid GETs skips the reservation station.

/// Each batch of the case followed by a copy of it in which every operation is a GET of the same
/// key (same-key runs included), so the read-only path of the pipeline sees the store that every
/// kind of write left. A GET with a too-long key stays as it is: one invalid GET makes its window
/// take the general path.
fn gets_only_after_each(p: Profile) -> impl Strategy<Value = Case> {
    each_followed_by(p, |act| match act {
        Act::Bad(Bad::LongKey) => act,
        _ => Act::Get,
    })
}

/// Each batch of the case followed by a copy of it with every operation's action rewritten
/// by `rewrite` (same keys, same order, same no-return flags).
fn each_followed_by(p: Profile, rewrite: fn(Act) -> Act) -> impl Strategy<Value = Case> {
    case(p).prop_map(move |mut c| {
        let mut batches = Vec::with_capacity(2 * c.batches.len());
        for b in c.batches {
            let copy = b
                .iter()
                .map(|a| AOp {
                    act: rewrite(a.act),
                    ..*a
                })
                .collect();
            batches.push(b);
            batches.push(copy);
        }
        c.batches = batches;
        c
    })
}

const CASES_GETS_ONLY: (u32, u32) = (128, 12);
const CASES_GETS_ONLY_CHAINS: (u32, u32) = (6, 1);

proptest! {
    #![proptest_config(config(CASES_GETS_ONLY.0, CASES_GETS_ONLY.1))]

    /// Inline key-values and records side by side, in windows of 1..=9 operations and in the
    /// default window.
    #[test]
    fn model_gets_only_windows(c in gets_only_after_each(small_profile()), window in prop_oneof![Just(256usize), 1usize..=9]) {
        let mut cfg = engine_config(4, 0.5, 51);
        cfg.window = window;
        run_case(&cfg, &c, false)?;
    }

    /// Every key-value in a record.
    #[test]
    fn model_gets_only_all_records(c in gets_only_after_each(small_profile())) {
        run_case(&engine_config(4, 0.5, 0), &c, false)?;
    }
}

proptest! {
    #![proptest_config(config(CASES_GETS_ONLY_CHAINS.0, CASES_GETS_ONLY_CHAINS.1))]

    /// Read-only windows over chained buckets: the tiny index of (c), GETs of any key.
    #[test]
    fn model_gets_only_chains(c in gets_only_after_each(Profile { any_key_eighths: 4, ..small_profile() })) {
        run_tiny_index(&c)?;
    }
}

// ---------------------------------------------------------------------------------------------
// (g) GET/PUT windows: a window of valid GETs and PUTs runs in order without the station.

/// Each batch of the case followed by a copy of it made of GETs and PUTs only: plain and
/// replace-only PUTs stay, operations that carry a value become plain PUTs of it, the rest
/// GETs of the same key (same-key runs included), so the in-order path for GET/PUT windows
/// sees every kind of stored value and every mix of reads and writes of one key. Too-long
/// keys and too-large values stay as they are: their windows take the general path.
fn gets_and_puts_after_each(p: Profile) -> impl Strategy<Value = Case> {
    each_followed_by(p, |act| match act {
        Act::Put(_) | Act::PutXx(_) | Act::Bad(Bad::LongKey | Bad::LargeValue) => act,
        Act::PutNx(v) | Act::Cas(_, v) => Act::Put(v),
        _ => Act::Get,
    })
}

const CASES_GETS_PUTS: (u32, u32) = (128, 12);

proptest! {
    #![proptest_config(config(CASES_GETS_PUTS.0, CASES_GETS_PUTS.1))]

    /// Windows of GETs and PUTs over inline key-values and records, in windows of 1..=9
    /// operations and in the default window.
    #[test]
    fn model_gets_and_puts_windows(c in gets_and_puts_after_each(small_profile()), window in prop_oneof![Just(256usize), 1usize..=9]) {
        let mut cfg = engine_config(4, 0.5, 51);
        cfg.window = window;
        run_case(&cfg, &c, false)?;
    }

    /// Every key-value in a record.
    #[test]
    fn model_gets_and_puts_all_records(c in gets_and_puts_after_each(small_profile())) {
        run_case(&engine_config(4, 0.5, 0), &c, false)?;
    }
}

proptest! {
    #![proptest_config(config(CASES_GETS_ONLY_CHAINS.0, CASES_GETS_ONLY_CHAINS.1))]

    /// GET/PUT windows over chained buckets: the tiny index of (c), operations on any key.
    #[test]
    fn model_gets_and_puts_chains(c in gets_and_puts_after_each(Profile { any_key_eighths: 4, ..small_profile() })) {
        run_tiny_index(&c)?;
    }
}

// ---------------------------------------------------------------------------------------------
// (c) A tiny index: 8 MiB at ratio 0.01 clamps the index to 2 MiB, 32768 buckets.

/// Filler keys that share the table with the case keys: 5 bytes, disjoint from 4-byte keys.
fn filler(i: u32) -> Vec<u8> {
    let mut k = vec![0xf0];
    k.extend_from_slice(&i.to_le_bytes());
    k
}

const FILLERS: u32 = 150_000;

/// Runs the case in the tiny index of (c) pre-filled with the fillers (checked to have chained
/// many buckets), its operations on the case's keys and, for `Key::Any`, on any key, fillers
/// included.
fn run_tiny_index(c: &Case) -> Result<(), TestCaseError> {
    let cfg = engine_config(8, 0.01, 51);
    let mut h = Harness::new(&cfg, false);
    let fill: Vec<(Vec<u8>, Vec<u8>)> = (0..FILLERS)
        .map(|i| (filler(i), i.to_le_bytes().to_vec()))
        .collect();
    h.preload(&fill);
    prop_assert!(
        h.engines[0].counts().chained_buckets > 1000,
        "{:?}",
        h.engines[0].counts()
    );
    run_batches(&mut h, c, fill)
}

/// Runs the case's batches on `h`, which holds `fill` besides: `Key::Any` addresses the case's
/// keys and the fill's.
fn run_batches(
    h: &mut Harness,
    c: &Case,
    fill: Vec<(Vec<u8>, Vec<u8>)>,
) -> Result<(), TestCaseError> {
    let mut all = c.keys.clone();
    all.extend(fill.into_iter().map(|(k, _)| k));
    let keys = Keys {
        hot: c.keys.len(),
        all,
    };
    for b in &c.batches {
        h.run(b, &keys)?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(config(CASES_CHAINS.0, CASES_CHAINS.1))]

    /// 150k filler keys (5 per bucket on average, 2 inline slots each, so many buckets chain)
    /// plus the small key space; a quarter of the operations address any key, fillers included,
    /// so chained buckets are created and freed by puts, deletes, cas and updates.
    #[test]
    fn model_tiny_index_chains(c in case(Profile { any_key_eighths: 2, ..small_profile() })) {
        run_tiny_index(&c)?;
    }

}

proptest! {
    #![proptest_config(config(CASES_BULK.0, CASES_BULK.1))]

    /// About 100k distinct 4-byte keys inserted in bulk (with values that are inline or not),
    /// random deletes and re-reads, then everything deleted: no chained bucket may remain.
    #[test]
    fn bulk_insert_delete_leaves_no_chains(seed in any::<u64>(), keys_n in 90_000u32..=110_000) {
        let cfg = engine_config(8, 0.01, 51);
        let mut h = Harness::new(&cfg, false);
        h.check_each_batch = false;
        let mut x = seed;
        let mut seen = HashSet::new();
        let mut all: Vec<Vec<u8>> = Vec::with_capacity(keys_n as usize);
        while all.len() < keys_n as usize {
            let k = (splitmix(&mut x) as u32).to_le_bytes().to_vec();
            if seen.insert(k.clone()) {
                all.push(k);
            }
        }
        let keys = Keys { hot: all.len(), all };
        let n = keys.all.len() as u32;
        let value = |x: &mut u64| {
            let r = splitmix(x);
            let len = [0u16, 1, 4, 8, 30, 46, 47, 60][(r % 8) as usize];
            Val { len, seed: (r >> 32) as u32, alphabet: 0 }
        };
        let op = |i: u32, act: Act| AOp { key: Key::Any(i), act, no_return: false };
        // Insert everything, with a few reads of earlier keys mixed in.
        let mut batch = Vec::new();
        for i in 0..n {
            batch.push(op(i, Act::Put(value(&mut x))));
            if splitmix(&mut x).is_multiple_of(8) {
                batch.push(op(splitmix(&mut x) as u32 % (i + 1), Act::Get));
            }
            if batch.len() >= 600 || i == n - 1 {
                h.run(&std::mem::take(&mut batch), &keys)?;
            }
        }
        h.check_all()?;
        prop_assert!(h.engines[0].counts().chained_buckets > 1000, "{:?}", h.engines[0].counts());
        // Delete in random order, half first with gets, re-puts and repeated deletes mixed in,
        // then the rest.
        let mut order: Vec<u32> = (0..n).collect();
        for i in (1..order.len()).rev() {
            order.swap(i, (splitmix(&mut x) % (i as u64 + 1)) as usize);
        }
        for (pos, &i) in order.iter().enumerate() {
            batch.push(op(i, Act::Delete));
            if pos < order.len() / 2 {
                match splitmix(&mut x) % 16 {
                    0 => batch.push(op(i, Act::Get)),
                    1 => batch.push(op(i, Act::Delete)),
                    2 => {
                        batch.push(op(i, Act::Put(value(&mut x))));
                        batch.push(op(i, Act::Delete));
                    }
                    3 => batch.push(op(order[splitmix(&mut x) as usize % order.len()], Act::Get)),
                    _ => {}
                }
            }
            if batch.len() >= 600 || pos == order.len() - 1 {
                h.run(&std::mem::take(&mut batch), &keys)?;
            }
            if pos == order.len() / 2 {
                h.check_all()?;
            }
        }
        h.check_all()?;
        for e in &h.engines {
            let counts = e.counts();
            prop_assert_eq!(counts.keys, 0);
            prop_assert_eq!(counts.kv_bytes, 0);
            prop_assert_eq!(counts.chained_buckets, 0, "{:?}", counts);
            prop_assert_eq!(e.chain_histogram().iter().skip(1).sum::<u64>(), 0);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// (d) Out of memory: 4 MiB, half of it slab, values up to 20000 bytes in records.

/// 4 MiB at ratio 0.5, all records, value_len_max 64 KiB (from `engine_config`).
fn oom_config() -> EngineConfig {
    engine_config(4, 0.5, 0)
}

/// Puts that do not fit return OutOfMemory and change nothing; every other result still
/// matches the model. Filler records of 10000 bytes (16 KiB slabs) take most of the 2 MiB slab
/// region first; an eighth of the operations address any key, so fillers get replaced and deleted
/// too. Each engine is checked against its own model: Forward and Stall may run out of memory at
/// different operations (see `forwarding_stores_only_the_net_effect_of_a_group_under_out_of_memory`).
/// A plain test around a `TestRunner`, so it can assert that out of memory did happen.
#[test]
fn model_out_of_memory() {
    check_out_of_memory(case(oom_profile()));
}

/// The same with every batch followed by its GET/PUT copy (`gets_and_puts_after_each`), so
/// PUTs that do not fit also run in GET/PUT windows, where each runs on its own in order.
#[test]
fn model_gets_and_puts_out_of_memory() {
    check_out_of_memory(gets_and_puts_after_each(oom_profile()));
}

fn oom_profile() -> Profile {
    Profile {
        hot_keys: 16..=96,
        big_values: true,
        any_key_eighths: 1,
    }
}

fn check_out_of_memory(cases: impl Strategy<Value = Case>) {
    let ooms = AtomicU64::new(0);
    let strategy = (cases, 95u32..=126);
    let result =
        TestRunner::new(config(CASES_OOM.0, CASES_OOM.1)).run(&strategy, |(c, fillers)| {
            let mut h = Harness::new(&oom_config(), true);
            h.cross = false;
            let fill: Vec<(Vec<u8>, Vec<u8>)> = (0..fillers)
                .map(|i| (filler(i), pattern(10_000, u64::from(i), 0)))
                .collect();
            h.preload(&fill);
            run_batches(&mut h, &c, fill)?;
            ooms.fetch_add(h.ooms[0] + h.ooms[1], Ordering::Relaxed);
            Ok(())
        });
    if let Err(e) = result {
        panic!("{e}");
    }
    assert!(
        ooms.load(Ordering::Relaxed) > 0,
        "no operation ran out of memory: the test does not test what it says"
    );
}

/// Fills the 2 MiB slab region of `oom_config` with `n` records of 10000 bytes (16 KiB slabs
/// each: 128 fill it).
fn full_engine(mode: ExecMode, n: u32) -> Engine {
    let mut e = Engine::new(EngineConfig {
        mode,
        ..oom_config()
    })
    .unwrap();
    for i in 0..n {
        e.put(&filler(i), &[1u8; 10_000]).unwrap();
    }
    e
}

fn results(e: &mut Engine, ops: &[Op]) -> Vec<(Status, Vec<u8>)> {
    let mut out = Results::default();
    e.execute(ops, &mut out);
    out.iter().map(|(s, d)| (s, d.to_vec())).collect()
}

/// A same-key group whose final value does not fit is replayed op by op, so every operation
/// gets the result it would have had alone, in both modes.
#[test]
fn group_write_back_out_of_memory_replays_each_op() {
    let big = vec![2u8; 20_000];
    for mode in MODES {
        let mut e = full_engine(mode, 127);
        e.put(b"k", b"old").unwrap();
        let ops = [
            Op::get(b"k"),
            Op::put(b"k", &big),
            Op::get(b"k"),
            Op::put_xx(b"k", &big),
            Op::get(b"k"),
        ];
        let oom = (Status::Error(OpError::OutOfMemory), vec![]);
        let old = (Status::Ok, b"old".to_vec());
        assert_eq!(
            results(&mut e, &ops),
            vec![old.clone(), oom.clone(), old.clone(), oom, old],
            "{mode:?}"
        );
        e.check_invariants();
    }
}

/// Forward mode only writes a same-key group's final value, so an intermediate value that would
/// not fit never runs out of memory; Stall mode stores every value and does. Both outcomes are
/// linearizable, but the modes disagree, and the memory left afterwards differs, so later
/// operations can disagree too.
#[test]
fn forwarding_stores_only_the_net_effect_of_a_group_under_out_of_memory() {
    // Documented behaviour, not a bug: a forwarded group writes back only its final value, so
    // a value that is replaced or deleted within the same window never needs memory. Stall mode
    // stores every value and reports the out-of-memory error. Both are linearizable, and the
    // store ends in the same state.
    let big = vec![2u8; 20_000];
    let ops = [Op::put(b"k", &big), Op::delete(b"k")];
    let mut fwd = full_engine(ExecMode::Forward, 127);
    let mut stall = full_engine(ExecMode::Stall, 127);
    let forward = results(&mut fwd, &ops);
    let stalled = results(&mut stall, &ops);
    assert_eq!(forward, vec![(Status::Ok, vec![]), (Status::Ok, vec![])]);
    assert_eq!(
        stalled,
        vec![
            (Status::Error(OpError::OutOfMemory), vec![]),
            (Status::NotFound, vec![])
        ]
    );
    assert_eq!(fwd.counts().keys, stall.counts().keys);
    assert_eq!(fwd.get(b"k").unwrap(), None);
    assert_eq!(stall.get(b"k").unwrap(), None);
}

/// An APPEND that would make a value longer than value_len_max fails and stores nothing, as
/// the model says, also inside a same-key group whose final value fits (a later PUT replaces
/// it): Forward mode reported Ok, let the GET after it read the over-long value and stored the
/// PUT (found by the model test once it generated APPEND; issue 19 item 20).
#[test]
fn append_past_the_value_limit_in_a_group_fails() {
    let base = vec![1u8; VALUE_LEN_MAX - 10];
    let tail = vec![2u8; 20];
    for mode in MODES {
        let mut e = Engine::new(EngineConfig {
            mode,
            ..engine_config(4, 0.5, 51)
        })
        .unwrap();
        e.put(b"k", &base).unwrap();
        let ops = [Op::append(b"k", &tail), Op::get(b"k"), Op::put(b"k", b"x")];
        let too_large = OpError::ValueTooLarge {
            len: VALUE_LEN_MAX + 10,
            max: VALUE_LEN_MAX,
        };
        // Statuses and data lengths: the data is tens of kilobytes.
        let got: Vec<(Status, usize)> = results(&mut e, &ops)
            .into_iter()
            .map(|(s, d)| (s, d.len()))
            .collect();
        let want = vec![
            (Status::Error(too_large), 0),
            (Status::Ok, base.len()),
            (Status::Ok, 0),
        ];
        assert_eq!(got, want, "{mode:?}");
        e.check_invariants();
    }
}
