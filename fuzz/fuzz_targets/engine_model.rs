//! Fuzz target: batches of operations against two engines (Forward and Stall) and a `HashMap`
//! model each (the model is `directkv_testkit::model`).
//!
//! ```text
//!   fuzz input --arbitrary--> Input { config choice, FOps to the end of the input }
//!        split into batches where an FOp's `batch_end` byte is 0 (about 256 ops per batch)
//!        FOp (key index, action) --materialize against the model--> OwnedOp --> Op
//!        each batch: Engine(Forward).execute, Engine(Stall).execute, model op by op
//!        assert: per-op status and data equal the model's; check_invariants; contents equal
//! ```
//!
//! Operations: get, the puts, delete, cas, the vector updates, reduce and filter, wrong
//! functions and limits, the Redis string operations APPEND, INCRBY and INCRBYFLOAT (with
//! puts of number texts), and key expiry (issue 20): puts with a deadline or KEEPTTL, EXPIRE
//! with its condition bits, PERSIST, TTL, GETEX, against the timed model
//! (`model::apply_timed`) with a clock that ticks between batches; before the final comparison
//! a full pass of the sweep (`Engine::expire_step`) must leave nothing expired behind.
//!
//! The arena is 4 MiB with 2 MiB of slab, fillers take 1.5 MiB of it and values reach 16 KiB, so
//! out of memory is common.
//! The model cannot predict it: when an engine reports OutOfMemory for an operation that would
//! have written, that engine's model skips the operation. Forward and Stall can run out of memory
//! at different operations (forwarding never stores a same-key group's intermediate values), so
//! their results are only compared with each other while neither has run out of memory.

#![no_main]

use std::collections::HashSet;

use arbitrary::{Arbitrary, Unstructured};
use directkv_engine::ops::{
    FN_ADD, FN_COUNT, FN_EQ, FN_GT, FN_MAX, FN_SUB, FN_SUM, FN_SWAP, FN_XOR,
};
use directkv_engine::{
    expire_args, ElemType, Engine, EngineConfig, ExecMode, Op, OpError, OpKind, Results, Status,
    KEEP_DEADLINE, NO_DEADLINE,
};
use directkv_testkit::model::{self, Eff, Limits, OwnedOp, TimedStore};
use libfuzzer_sys::fuzz_target;

/// The clock of the first batch (ms); deadlines are this plus an offset of 0..255 ms, and each
/// `Tick` moves the next batch's clock on by up to 255 ms.
const CLOCK_START: u64 = 1_000;

const MEMORY_BYTES: usize = 4 << 20;
const VALUE_LEN_MAX: usize = 64 << 10;
/// What the model checks: the engine's default key limit and the value limit set here.
const LIMITS: Limits = Limits {
    key_len_max: 250,
    value_len_max: VALUE_LEN_MAX,
};
/// Bound on the operations of one input (the input length bounds it, too).
const OPS_MAX: usize = 2000;
/// Records that take 1.5 MiB of the 2 MiB slab region before the operations run (a 64 KiB slab
/// each), so out of memory needs only a few dozen values. Operations never address them.
const FILLERS: u8 = 24;
const FILLER_LEN: usize = 60_000;

#[derive(Debug)]
struct Input {
    /// 0: all records, 1: inline threshold 20, else 51.
    threshold: u8,
    /// Small windows cut same-key groups at window edges.
    small_window: bool,
    /// As many operations as the input holds, up to `OPS_MAX`.
    ops: Vec<FOp>,
}

impl Input {
    /// Decodes operations until the input ends. (`Vec`'s own `Arbitrary` reads a continuation
    /// flag before each element, so random inputs would decode to a handful of operations.)
    fn decode(data: &[u8]) -> arbitrary::Result<Input> {
        let mut u = Unstructured::new(data);
        let threshold = u.arbitrary()?;
        let small_window = u.arbitrary()?;
        let mut ops = Vec::new();
        while !u.is_empty() && ops.len() < OPS_MAX {
            ops.push(u.arbitrary()?);
        }
        Ok(Input {
            threshold,
            small_window,
            ops,
        })
    }
}

#[derive(Arbitrary, Debug, Clone, Copy)]
struct FOp {
    /// Below 128: one of 16 hot keys, so batches have same-key runs; else one of 128 more.
    key: u8,
    act: Act,
    no_return: bool,
    /// 0 ends the batch after this operation.
    batch_end: u8,
    /// 240 and above: the operation repeats 4 * (repeat - 239) times, for long same-key runs
    /// from few input bytes.
    repeat: u8,
}

impl FOp {
    fn times(&self) -> usize {
        if self.repeat >= 240 {
            4 * (self.repeat as usize - 239)
        } else {
            1
        }
    }
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Val {
    /// Short values with chosen bytes (counters, vectors, cas operands).
    Word(u64, u8),
    /// `len % 16385` bytes of `byte`.
    Fill(u16, u8),
    /// 8 KiB + 32 * n bytes of `n`: a 16 KiB slab each; about 32 of them fill what the fillers
    /// leave.
    Large(u8),
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Act {
    Get,
    Put(Val),
    PutNx(Val),
    PutXx(Val),
    Delete,
    /// Expect the current value (`None`) or a given one.
    Cas(Option<Val>, Val),
    /// Function choice, element choice, delta.
    S2s(u8, u8, u64),
    S2v(u8, u8, u64),
    /// Function choice, element choice, delta byte, one delta too many.
    V2v(u8, u8, u8, bool),
    /// Count (true) or sum, element choice, sigma.
    Reduce(bool, u8, u64),
    /// Greater-than (true) or equal, element choice, parameter.
    Filter(bool, u8, u64),
    /// A function id that is unknown or of the wrong kind, on an operation kind.
    BadFunc(u8, u8),
    EmptyKey,
    /// A put of one byte more than `value_len_max`.
    TooLarge,
    /// APPEND of the value (large ones reach `value_len_max` after a few appends).
    Append(Val),
    /// INCRBY by the delta (i64).
    IncrBy(i64),
    /// INCRBYFLOAT by the delta (any f64: NaN and the infinities make refused sums).
    IncrByFloat(f64),
    /// A put of one of `model::NUM_TEXTS`, so the counters meet numbers and near-numbers.
    PutNum(u8),
    /// A put with the deadline `CLOCK_START + offset` (255: KEEPTTL), condition bits.
    PutEx(Val, u8, u8),
    /// EXPIRE to `CLOCK_START + offset` with condition bits (NX 1, XX 2, GT 4, LT 8).
    Expire(u8, u8),
    Persist,
    Ttl,
    /// GETEX: no change (None), persist (Some(0)) or the deadline `CLOCK_START + offset`.
    GetEx(Option<u8>),
    /// A GET, and the next batch's clock moves on by this many ms.
    Tick(u8),
}

impl Val {
    fn bytes(self) -> Vec<u8> {
        match self {
            Val::Word(x, len) => x.to_le_bytes()[..(len % 9) as usize].to_vec(),
            Val::Fill(len, b) => vec![b; len as usize % ((16 << 10) + 1)],
            Val::Large(n) => vec![n; (8 << 10) + 32 * n as usize],
        }
    }
}

/// Key of byte `i` (hot keys for `i < 128`): its first byte is its index, so keys are distinct;
/// lengths 1..=40.
fn key(i: u8) -> Vec<u8> {
    let i = if i < 128 { i % 16 } else { i };
    let len = 1 + (i as usize * 7) % 40;
    (0..len).map(|j| i.wrapping_add(j as u8)).collect()
}

/// Filler key `i`: `key` never starts with 0xff followed by 0xfe.
fn filler(i: u8) -> Vec<u8> {
    vec![0xff, 0xfe, i]
}

fn elem(choice: u8) -> ElemType {
    [ElemType::U8, ElemType::U16, ElemType::U32, ElemType::U64][choice as usize % 4]
}

fn update_func(choice: u8) -> u16 {
    [FN_ADD, FN_SUB, FN_XOR, FN_MAX, FN_SWAP][choice as usize % 5]
}

fn scalar(x: u64, e: ElemType) -> Vec<u8> {
    x.to_le_bytes()[..e.width()].to_vec()
}

/// The concrete operation for `f`, seeing `cur`.
fn materialize(f: &FOp, cur: Option<&[u8]>) -> OwnedOp {
    let k = key(f.key);
    let with = |kind, func, e, arg| OwnedOp {
        func,
        elem: e,
        arg,
        ..OwnedOp::new(kind, k.clone())
    };
    let mut op = match f.act {
        Act::Get => OwnedOp::new(OpKind::Get, k.clone()),
        Act::Put(v) => OwnedOp {
            arg: v.bytes(),
            ..OwnedOp::new(OpKind::Put, k.clone())
        },
        Act::PutNx(v) => OwnedOp {
            arg: v.bytes(),
            ..OwnedOp::new(OpKind::PutNx, k.clone())
        },
        Act::PutXx(v) => OwnedOp {
            arg: v.bytes(),
            ..OwnedOp::new(OpKind::PutXx, k.clone())
        },
        Act::Delete => OwnedOp::new(OpKind::Delete, k.clone()),
        Act::Cas(expected, new) => {
            let arg = expected.map_or_else(|| cur.unwrap_or(&[]).to_vec(), Val::bytes);
            OwnedOp {
                arg,
                arg2: new.bytes(),
                ..OwnedOp::new(OpKind::Cas, k.clone())
            }
        }
        Act::S2s(func, e, d) => with(
            OpKind::UpdateS2S,
            update_func(func),
            elem(e),
            scalar(d, elem(e)),
        ),
        Act::S2v(func, e, d) => with(
            OpKind::UpdateS2V,
            update_func(func),
            elem(e),
            scalar(d, elem(e)),
        ),
        Act::V2v(func, e, d, extra) => {
            let len = cur.map_or(0, <[u8]>::len) + if extra { elem(e).width() } else { 0 };
            with(OpKind::UpdateV2V, update_func(func), elem(e), vec![d; len])
        }
        Act::Reduce(true, e, sigma) => with(
            OpKind::Reduce,
            FN_COUNT,
            elem(e),
            sigma.to_le_bytes().to_vec(),
        ),
        Act::Reduce(false, e, sigma) => {
            with(OpKind::Reduce, FN_SUM, elem(e), scalar(sigma, elem(e)))
        }
        Act::Filter(gt, e, p) => with(
            OpKind::Filter,
            if gt { FN_GT } else { FN_EQ },
            elem(e),
            scalar(p, elem(e)),
        ),
        Act::BadFunc(func, kind) => {
            let func = [999, 13, 40, 71, 1024, FN_SUM, FN_EQ, FN_ADD][func as usize % 8];
            let kind = [
                OpKind::UpdateS2S,
                OpKind::UpdateS2V,
                OpKind::Reduce,
                OpKind::Filter,
            ][kind as usize % 4];
            // A function of the right kind would be valid and outside the model: use add's id for
            // no kind but reduce and filter, where it is the wrong kind.
            let func = if func == FN_ADD && kind == OpKind::UpdateS2S {
                999
            } else {
                func
            };
            let func = if func == FN_ADD && kind == OpKind::UpdateS2V {
                13
            } else {
                func
            };
            let func = if func == FN_SUM && kind == OpKind::Reduce {
                40
            } else {
                func
            };
            let func = if func == FN_EQ && kind == OpKind::Filter {
                71
            } else {
                func
            };
            with(kind, func, ElemType::U8, vec![0])
        }
        Act::EmptyKey => OwnedOp {
            arg: b"v".to_vec(),
            ..OwnedOp::new(OpKind::Put, vec![])
        },
        Act::TooLarge => OwnedOp {
            arg: vec![0; VALUE_LEN_MAX + 1],
            ..OwnedOp::new(OpKind::Put, k.clone())
        },
        Act::Append(v) => {
            // At most 16 bytes past value_len_max, so appends near the limit sometimes
            // overflow it (and fail) without the argument itself being over-long.
            let cur_len = cur.map_or(0, <[u8]>::len);
            let mut arg = v.bytes();
            arg.truncate(VALUE_LEN_MAX.min((VALUE_LEN_MAX + 16).saturating_sub(cur_len)));
            OwnedOp {
                arg,
                ..OwnedOp::new(OpKind::Append, k.clone())
            }
        }
        Act::IncrBy(d) => OwnedOp {
            arg: d.to_le_bytes().to_vec(),
            ..OwnedOp::new(OpKind::IncrBy, k.clone())
        },
        Act::IncrByFloat(d) => OwnedOp {
            arg: d.to_le_bytes().to_vec(),
            ..OwnedOp::new(OpKind::IncrByFloat, k.clone())
        },
        Act::PutNum(i) => OwnedOp {
            arg: model::NUM_TEXTS[i as usize % model::NUM_TEXTS.len()]
                .as_bytes()
                .to_vec(),
            ..OwnedOp::new(OpKind::Put, k.clone())
        },
        Act::PutEx(v, off, c) => {
            let d = if off == 255 {
                KEEP_DEADLINE
            } else {
                CLOCK_START + u64::from(off)
            };
            OwnedOp {
                arg: v.bytes(),
                arg2: expire_args(d, c & 3).to_vec(),
                ..OwnedOp::new(OpKind::PutExpire, k.clone())
            }
        }
        Act::Expire(off, c) => OwnedOp {
            arg: expire_args(CLOCK_START + u64::from(off), c & 15).to_vec(),
            ..OwnedOp::new(OpKind::Expire, k.clone())
        },
        Act::Persist => OwnedOp::new(OpKind::Persist, k.clone()),
        Act::Ttl => OwnedOp::new(OpKind::Ttl, k.clone()),
        Act::GetEx(d) => OwnedOp {
            arg: match d {
                None => vec![],
                Some(0) => NO_DEADLINE.to_le_bytes().to_vec(),
                Some(off) => (CLOCK_START + u64::from(off)).to_le_bytes().to_vec(),
            },
            ..OwnedOp::new(OpKind::GetEx, k.clone())
        },
        Act::Tick(_) => OwnedOp::new(OpKind::Get, k.clone()),
    };
    op.no_return = f.no_return;
    op
}

struct Side {
    engine: Engine,
    model: TimedStore,
    out: Results,
    ooms: u64,
}

fn engine(input: &Input, mode: ExecMode) -> Engine {
    let mut cfg = EngineConfig::with_memory(MEMORY_BYTES);
    // `Engine::new` runs the tuner even when ratio and threshold are given; the default target
    // (50% of a 4 MiB arena in 32-byte key-values) does not fit, and the tuner's capacity search
    // then costs about 100 ms per engine under coverage instrumentation. A small, feasible target
    // keeps it cheap; the choice itself is overridden below.
    cfg.expected_kv_bytes = 1000;
    cfg.target_utilization = 0.05;
    cfg.hash_index_ratio = Some(0.5);
    cfg.inline_threshold = Some(match input.threshold {
        0 => 0,
        1 => 20,
        _ => 51,
    });
    cfg.value_len_max = VALUE_LEN_MAX;
    cfg.window = if input.small_window { 3 } else { 256 };
    cfg.mode = mode;
    Engine::new(cfg).expect("engine")
}

/// Checks `side`'s results at time `now` against its model, applying each operation to the
/// model.
fn check(side: &mut Side, ops: &[OwnedOp], now: u64) {
    assert_eq!(side.out.len(), ops.len());
    for (i, op) in ops.iter().enumerate() {
        let before = side.model.get(&op.key).cloned();
        let want = model::apply_timed(&mut side.model, op, now, LIMITS);
        let (status, data) = (side.out.status(i), side.out.data(i));
        // Out of memory: the engine stored nothing (an expired key it met is gone either way).
        let rewrote = matches!(want.eff, Eff::Set(_))
            || (op.kind != OpKind::Ttl && want.status == Status::Ok && before.is_some());
        if status == Status::Error(OpError::OutOfMemory) && rewrote {
            assert!(data.is_empty());
            match before.filter(|(_, d)| *d == NO_DEADLINE || *d > now) {
                Some(e) => drop(side.model.insert(op.key.clone(), e)),
                None => drop(side.model.remove(&op.key)),
            }
            side.ooms += 1;
            continue;
        }
        assert_eq!(status, want.status, "op {i} {op:?}");
        assert!(
            data == want.reply,
            "op {i} {op:?}: data {} bytes, model {} bytes",
            data.len(),
            want.reply.len()
        );
    }
}

/// Checks `side`'s invariants and that it holds exactly its model's key-values. Scanning the
/// 32768-bucket index dominates an execution, so this runs once, after the last batch, and reads
/// the contents with a get of each of the 256 possible keys rather than a second scan: with the
/// key count equal to the model's, no other key can be stored.
fn check_contents(side: &mut Side) {
    // One pass of the sweep leaves no expired key behind.
    let now = side.engine.now();
    let mut cursor = 0;
    loop {
        cursor = side.engine.expire_step(cursor, 4096).0;
        if cursor == 0 {
            break;
        }
    }
    side.model.retain(|_, (_, d)| *d == NO_DEADLINE || *d > now);
    side.engine.check_invariants();
    let keys: Vec<Vec<u8>> = (0..=u8::MAX)
        .map(key)
        .chain((0..FILLERS).map(filler))
        .collect();
    let gets: Vec<Op> = keys.iter().map(|k| Op::get(k)).collect();
    side.engine.execute(&gets, &mut side.out);
    for (i, k) in keys.iter().enumerate() {
        let stored = (side.out.status(i) == Status::Ok).then(|| side.out.data(i));
        assert!(
            stored == side.model.get(k).map(|(v, _)| v.as_slice()),
            "contents differ at key {k:?}"
        );
    }
    let counts = side.engine.counts();
    let kv_bytes: usize = side.model.iter().map(|(k, (v, _))| k.len() + v.len()).sum();
    let expiring = side
        .model
        .values()
        .filter(|(_, d)| *d != NO_DEADLINE)
        .count();
    assert_eq!(counts.expiring_keys, expiring as u64);
    assert_eq!(counts.keys, side.model.len() as u64);
    assert_eq!(counts.kv_bytes, kv_bytes as u64);
}

fn run(input: Input) {
    let mut sides: Vec<Side> = [ExecMode::Forward, ExecMode::Stall]
        .into_iter()
        .map(|mode| Side {
            engine: engine(&input, mode),
            model: TimedStore::new(),
            out: Results::default(),
            ooms: 0,
        })
        .collect();
    let fill: Vec<(Vec<u8>, Vec<u8>)> = (0..FILLERS)
        .map(|i| (filler(i), vec![i; FILLER_LEN]))
        .collect();
    let puts: Vec<Op> = fill.iter().map(|(k, v)| Op::put(k, v)).collect();
    for side in &mut sides {
        side.engine.execute(&puts, &mut side.out);
        assert!(side.out.iter().all(|(s, _)| s == Status::Ok), "fillers fit");
        side.model.extend(
            fill.iter()
                .map(|(k, v)| (k.clone(), (v.clone(), NO_DEADLINE))),
        );
    }
    let ops: Vec<FOp> = input
        .ops
        .iter()
        .flat_map(|f| std::iter::repeat_n(*f, f.times()))
        .take(OPS_MAX)
        .collect();
    let mut now = CLOCK_START;
    let mut tick = 0u64;
    for batch in ops.split_inclusive(|f| f.batch_end == 0) {
        now += std::mem::take(&mut tick);
        // Materialize against a copy of Forward's model's entries that the batch touches, as
        // each op will see it (the copy only chooses arguments: the check below runs the model
        // for real).
        let mut view = TimedStore::new();
        let mut touched = HashSet::new();
        let mut owned = Vec::with_capacity(batch.len());
        for f in batch {
            if let Act::Tick(n) = f.act {
                tick += u64::from(n);
            }
            let k = key(f.key);
            if touched.insert(k.clone()) {
                if let Some(e) = sides[0].model.get(&k) {
                    view.insert(k.clone(), e.clone());
                }
            }
            let cur = view
                .get(&k)
                .filter(|(_, d)| *d == NO_DEADLINE || *d > now)
                .map(|(v, _)| v.clone());
            let op = materialize(f, cur.as_deref());
            model::apply_timed(&mut view, &op, now, LIMITS);
            owned.push(op);
        }
        let ops: Vec<Op> = owned.iter().map(OwnedOp::as_op).collect();
        for side in &mut sides {
            side.engine.set_now(now);
            side.engine.execute(&ops, &mut side.out);
            check(side, &owned, now);
        }
        if sides.iter().all(|s| s.ooms == 0) {
            for i in 0..ops.len() {
                let (f, s) = (&sides[0].out, &sides[1].out);
                assert_eq!(
                    (f.status(i), f.data(i)),
                    (s.status(i), s.data(i)),
                    "Forward and Stall differ at op {i}"
                );
            }
        }
    }
    sides.iter_mut().for_each(check_contents);
}

fuzz_target!(|data: &[u8]| {
    if let Ok(input) = Input::decode(data) {
        run(input);
    }
});
