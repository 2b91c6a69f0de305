//! `Engine::execute_atomic` is all or nothing (issue 19 item 9): on a store filled to
//! out-of-memory and then given a little room back, a random multi-put batch (new keys, existing
//! keys, repeated keys, inline and record values of many classes, a few appends) is either
//! applied whole, every operation `Ok` and the store equal to the model, or refused with `OutOfMemory` and the store
//! byte-for-byte what it was (compared as `for_each` dumps).
//!
//! ```text
//!  seed ──> fill until 20 puts ran out of memory ──> delete `room` keys ──> dump
//!       ──> execute_atomic(batch) ──Ok──> dump == dump + batch, in order
//!                                 └─Err(OutOfMemory)──> dump unchanged
//! ```
//!
//! `PROPTEST_CASES` overrides the case count.

use std::collections::BTreeMap;

use directkv_engine::{Engine, EngineConfig, ExecMode, Op, OpError, Results, Status};
use proptest::prelude::*;

type Dump = BTreeMap<Vec<u8>, Vec<u8>>;

fn dump(e: &Engine) -> Dump {
    let mut d = Dump::new();
    e.for_each(|k, v| {
        assert!(
            d.insert(k.to_vec(), v.to_vec()).is_none(),
            "key listed twice"
        );
    });
    d
}

/// A small deterministic generator, so a case is its seed and a few numbers.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// A value length spread over inline values and records of several slab classes.
    fn value_len(&mut self) -> usize {
        let len = match self.below(4) {
            0 => 1 + self.below(8),
            1 => 9 + self.below(40),
            2 => 50 + self.below(300),
            _ => 400 + self.below(3000),
        };
        len as usize
    }
}

/// What one case did: the batch was stored whole, or refused.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Applied,
    Refused,
}

fn engine(mode: ExecMode) -> Engine {
    let mut cfg = EngineConfig::with_memory(directkv_engine::MEMORY_BYTES_MIN);
    cfg.value_len_max = 4096;
    cfg.mode = mode;
    Engine::new(cfg).unwrap()
}

/// Fills an engine to out-of-memory, frees `room` keys, runs a batch of `batch_len` puts (and
/// up to `appends_max` appends) atomically and checks the outcome. Panics on a violation.
fn run_case(
    seed: u64,
    room: usize,
    batch_len: usize,
    appends_max: usize,
    mode: ExecMode,
) -> Outcome {
    let mut rng = Rng(seed | 1);
    let mut e = engine(mode);
    let mut stored: Vec<Vec<u8>> = Vec::new();
    let mut failures = 0;
    let mut i = 0u64;
    while failures < 20 {
        let key = format!("fill{i}").into_bytes();
        let value = vec![(i % 251) as u8; rng.value_len()];
        match e.put(&key, &value) {
            Ok(()) => stored.push(key),
            Err(OpError::OutOfMemory) => failures += 1,
            Err(err) => panic!("fill: {err}"),
        }
        i += 1;
        assert!(i < 1_000_000, "the arena never filled");
    }
    for _ in 0..room.min(stored.len()) {
        let k = stored.swap_remove(rng.below(stored.len() as u64) as usize);
        assert_eq!(e.delete(&k), Ok(true));
    }
    let before = dump(&e);

    // (key, value, append): a put, or an append of a short suffix, whose stored value the check
    // can only bound (by value_len_max). At most `appends_max` (5) appends of at most 50 bytes
    // keep every value within value_len_max, so no operation fails for its own reason.
    assert!(appends_max <= 5);
    let mut batch: Vec<(Vec<u8>, Vec<u8>, bool)> = Vec::new();
    let mut appends = 0;
    for j in 0..batch_len {
        let key = match rng.below(4) {
            0 if !stored.is_empty() => stored[rng.below(stored.len() as u64) as usize].clone(),
            1 if !batch.is_empty() => batch[rng.below(batch.len() as u64) as usize].0.clone(),
            _ => format!("new{j}").into_bytes(),
        };
        let append = appends < appends_max && rng.below(5) == 0;
        let len = if append {
            appends += 1;
            1 + rng.below(50) as usize
        } else {
            rng.value_len()
        };
        batch.push((key, vec![b'a' + (j % 26) as u8; len], append));
    }
    let ops: Vec<Op> = batch
        .iter()
        .map(|(k, v, append)| {
            if *append {
                Op::append(k, v)
            } else {
                Op::put(k, v)
            }
        })
        .collect();
    let mut out = Results::default();
    let outcome = match e.execute_atomic(&ops, &mut out) {
        Ok(()) => {
            for i in 0..ops.len() {
                assert_eq!(out.status(i), Status::Ok, "op {i} of an applied batch");
            }
            let mut model = before;
            for (k, v, append) in batch {
                if append {
                    model.entry(k).or_default().extend_from_slice(&v);
                } else {
                    model.insert(k, v);
                }
            }
            assert_eq!(dump(&e), model, "the applied batch differs from the model");
            Outcome::Applied
        }
        Err(OpError::OutOfMemory) => {
            assert!(dump(&e) == before, "a refused batch changed the store");
            Outcome::Refused
        }
        Err(err) => panic!("execute_atomic: {err}"),
    };
    e.check_invariants();
    outcome
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn an_atomic_batch_near_out_of_memory_is_applied_whole_or_not_at_all(
        seed in any::<u64>(),
        room in 0usize..40,
        batch_len in 1usize..48,
        appends_max in 0usize..=5,
        stall in any::<bool>(),
    ) {
        let mode = if stall { ExecMode::Stall } else { ExecMode::Forward };
        run_case(seed, room, batch_len, appends_max, mode);
    }
}

/// The property above is only worth something if near out-of-memory both outcomes happen.
#[test]
fn near_out_of_memory_some_batches_fit_and_some_do_not() {
    let (mut applied, mut refused) = (0, 0);
    for seed in 0..24u64 {
        let room = (seed as usize * 7) % 40;
        let batch_len = 1 + (seed as usize * 13) % 40;
        match run_case(
            seed * 0x9e37_79b9 + 1,
            room,
            batch_len,
            0,
            ExecMode::Forward,
        ) {
            Outcome::Applied => applied += 1,
            Outcome::Refused => refused += 1,
        }
    }
    assert!(applied >= 3, "applied {applied}, refused {refused}");
    assert!(refused >= 3, "applied {applied}, refused {refused}");
}

/// A batch with one argument over a limit is refused with that argument's error, however early
/// or late in the batch it is, and nothing is stored.
#[test]
fn a_batch_with_one_bad_argument_stores_nothing() {
    let mut e = engine(ExecMode::Forward);
    let long_key = vec![b'k'; 251];
    let big = vec![b'v'; 4097];
    for (bad, expected) in [
        (
            Op::put(&long_key, b"v"),
            OpError::KeyTooLong { len: 251, max: 250 },
        ),
        (
            Op::put(b"k", &big),
            OpError::ValueTooLarge {
                len: 4097,
                max: 4096,
            },
        ),
    ] {
        for at in [0, 3, 6] {
            let mut ops = vec![Op::put(b"a", b"1"); 6];
            ops.insert(at, bad);
            let mut out = Results::default();
            assert_eq!(e.execute_atomic(&ops, &mut out), Err(expected));
            assert!(dump(&e).is_empty());
        }
    }
}
