//! The crash model test (issue 22 item 5, third kind): random batches with an injected clock
//! run on an `Engine`, each batch's record appended to a `LogWriter` whose file system
//! (`FaultFs`) "dies" at a random operation; the log is then replayed into a fresh engine,
//! which must hold exactly the timed `HashMap` model of the batches the writer had written (a
//! superset of those acknowledged), and the run goes on from the recovered engine and the
//! reopened log, crashing again, several times per seed.
//!
//! ```text
//!   per seed, CRASHES_PER_SEED times:
//!     open the log (FaultFs: crash or short write at a random op from here on; recovery itself
//!       may be hit, and is then retried on the disk as the crash left it)
//!     loop: now += 0..20 ms; batch of 1..12 random ops on 16 keys; engine.execute; model.apply
//!           record → append; every 1..4 batches write_out (acks policy `no`/`everysec`), and
//!           under `always` sync (acks those); each success moves the "written"/"acked" marks
//!     the first log error is the crash: the engine's state is lost
//!     replay the file into a fresh engine == model at the written mark (live keys, values,
//!       deadlines at that batch's now); written mark >= acked mark
//!     continue from the replayed engine and the model at the written mark
//! ```
//!
//! What it would catch: a record that does not replay to its batch's effect (deadlines,
//! expiry by a later `now`, INCR, APPEND), a writer that calls written or durable what the file
//! does not hold, a torn tail (short write) that recovery does not cut cleanly, a reopened log
//! that continues at the wrong Lsn or after garbage. Non-goals: power loss (data written but not
//! synced lost: `FaultFs` cannot observe it, docs/persistence.md), snapshots (their crash tests
//! are `manifest_crash.rs` and `snapshot_files.rs`), evictions (`batch_replay.rs`).

use directkv_engine::{expire_args, ElemType, Engine, EngineConfig, OpKind, Results, NO_DEADLINE};
use directkv_persist::batch;
use directkv_persist::fs::{Fault, FaultFs, RealFs};
use directkv_persist::log::{self, LogLimits, LogWriter};
use directkv_testkit::model::{apply_timed, Limits, OwnedOp, TimedStore};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::common::TestDir;

const LIMITS: Limits = Limits {
    key_len_max: 250,
    value_len_max: 1024,
};
/// Seeds per policy, crashes per seed, and the farthest operation (counted from the log's
/// opening) a crash is planned at.
const SEEDS: u64 = 24;
const CRASHES_PER_SEED: usize = 8;
const CRASH_OP_MAX: u64 = 60;
/// Keys the batches touch.
const KEYS: u32 = 16;

fn engine() -> Engine {
    let mut cfg = EngineConfig::with_memory(8 << 20);
    cfg.value_len_max = LIMITS.value_len_max;
    Engine::new(cfg).unwrap()
}

/// A random op on one of `KEYS` keys: writes of every logged kind, deadlines in the past and
/// a little ahead (so later batches' `now` expire them), and reads.
fn random_op(r: &mut SmallRng, now: u64, seq: u64) -> OwnedOp {
    let key = format!("k{}", r.gen_range(0..KEYS)).into_bytes();
    let value = format!("v{seq}").into_bytes();
    let deadline = |r: &mut SmallRng| match r.gen_range(0..4) {
        0 => now - r.gen_range(1..100u64),
        _ => now + r.gen_range(1..300u64),
    };
    let mut op = match r.gen_range(0..10) {
        0..=2 => OwnedOp::new(OpKind::Put, key).with(0, ElemType::U8, value),
        3 => OwnedOp::new(OpKind::Delete, key),
        4 => OwnedOp::new(OpKind::Append, key).with(0, ElemType::U8, value),
        5 => OwnedOp::new(OpKind::IncrBy, key).with(0, ElemType::U8, 1i64.to_le_bytes().to_vec()),
        6 => {
            let mut op = OwnedOp::new(OpKind::PutExpire, key).with(0, ElemType::U8, value);
            op.arg2 = expire_args(deadline(r), directkv_engine::cond::ANY).to_vec();
            op
        }
        7 => {
            let mut op = OwnedOp::new(OpKind::Expire, key);
            op.arg = expire_args(deadline(r), directkv_engine::cond::ANY).to_vec();
            op
        }
        8 => OwnedOp::new(OpKind::Persist, key),
        _ => OwnedOp::new(OpKind::Get, key),
    };
    op.elem = ElemType::U8;
    op
}

type Live = Vec<(Vec<u8>, Vec<u8>, u64)>;

/// Every key-value whose deadline has not passed at `now`, with its deadline, sorted.
fn live(e: &Engine, now: u64) -> Live {
    let mut v = vec![];
    e.for_each_with_deadline(|k, val, d| {
        if d == NO_DEADLINE || d > now {
            v.push((k.to_vec(), val.to_vec(), d));
        }
    });
    v.sort();
    v
}

fn live_model(m: &TimedStore, now: u64) -> Live {
    let mut v: Live = m
        .iter()
        .filter(|(_, (_, d))| *d == NO_DEADLINE || *d > now)
        .map(|(k, (val, d))| (k.clone(), val.clone(), *d))
        .collect();
    v.sort();
    v
}

/// The log replayed into a fresh engine.
fn recover(path: &std::path::Path) -> (Engine, u64) {
    let mut e = engine();
    let mut out = Results::default();
    let scan = log::replay(&RealFs, path, LogLimits::default(), |_, payload| {
        batch::decode(payload)
            .map_err(|err| err.to_string())?
            .replay(&mut e, &mut out);
        Ok(())
    })
    .unwrap();
    (e, scan.records)
}

/// A state the file may hold after a crash: the model and clock after its `records`-th record.
#[derive(Clone)]
struct Mark {
    model: TimedStore,
    now: u64,
    records: u64,
}

/// Recovers the log at `path` and holds it to the marks: it must be one of them (one per
/// record appended since the last write that returned, that one included), with at least
/// `acked` records. Returns the mark it is, the run's new starting point.
fn recover_to_a_mark(
    path: &std::path::Path,
    marks: &[Mark],
    acked: u64,
    ctx: &str,
) -> (Engine, Mark) {
    let (a, records) = recover(path);
    assert!(
        records >= acked,
        "{ctx}: {records} records recovered, {acked} acknowledged"
    );
    let mark = marks
        .iter()
        .find(|m| m.records == records)
        .unwrap_or_else(|| {
            panic!(
                "{ctx}: {records} records recovered, the writer appended {}..={}",
                marks[0].records,
                marks[marks.len() - 1].records
            )
        })
        .clone();
    assert_eq!(
        live(&a, mark.now),
        live_model(&mark.model, mark.now),
        "{ctx}: the recovered store is not the model after its {records} records"
    );
    (a, mark)
}

/// What the crashes of a run did, so the tests can show each case happened.
#[derive(Debug, Default)]
struct Seen {
    crashes: usize,
    /// Recoveries that found more records than the last write that returned (a short write
    /// landed some whole).
    beyond_written: usize,
    /// Crashes that hit the recovery (its truncation of a torn tail, or its sync).
    in_recovery: usize,
    records: u64,
}

/// Runs one seed under `always` (sync acknowledges) or not (write acknowledges).
fn run_seed(seed: u64, always: bool, seen: &mut Seen) {
    let dir = TestDir::new(&format!("crash-model-{seed}-{always}"));
    let path = dir.join("log-0000-0000000001.dkvl");
    let mut r = SmallRng::seed_from_u64(seed);
    crate::common::new_log(&path);
    // The states the file may hold: after the last write that returned (marks[0]) and after
    // each record appended since (a short write can land some of them whole).
    let mut marks = vec![Mark {
        model: TimedStore::new(),
        now: 1_700_000_000_000,
        records: 0,
    }];
    let mut acked = 0u64;
    let mut exact = true;
    let mut seq = 0u64;
    let mut out = Results::default();
    let mut scratch = vec![];
    let mut ctx = format!("seed {seed} always {always}: start");
    for crash in 0..CRASHES_PER_SEED {
        if exact {
            // A crash lets nothing through after it: the file ends at the last write.
            marks.truncate(1);
        }
        let (mut a, start) = recover_to_a_mark(&path, &marks, acked, &ctx);
        seen.beyond_written += (start.records > marks[0].records) as usize;
        seen.crashes += 1;
        // Operation 0 (and 1 after a torn tail) is the recovery's truncation or sync.
        let fault = match r.gen_range(0..20) {
            0..=1 => Fault::Crash(r.gen_range(0..2)),
            2..=6 => Fault::ShortWrite(r.gen_range(0..CRASH_OP_MAX / 3)),
            _ => Fault::Crash(r.gen_range(1..CRASH_OP_MAX)),
        };
        exact = matches!(fault, Fault::Crash(_));
        ctx = format!("seed {seed} always {always} crash {crash} ({fault:?})");
        marks = vec![start];
        let fs = FaultFs::new(Some(fault));
        let Ok((mut w, _)) = LogWriter::open(&fs, &path, LogLimits::default()) else {
            // The crash hit the recovery itself (its truncation or sync): recover again.
            seen.in_recovery += 1;
            continue;
        };
        let mut model = marks[0].model.clone();
        let mut now = marks[0].now;
        let mut appended = marks[0].records;
        loop {
            now += r.gen_range(0..20u64);
            let ops: Vec<OwnedOp> = (0..r.gen_range(1..12))
                .map(|_| {
                    seq += 1;
                    random_op(&mut r, now, seq)
                })
                .collect();
            let engine_ops: Vec<_> = ops.iter().map(OwnedOp::as_op).collect();
            a.set_now(now);
            let cas_before = a.cas_next();
            a.execute(&engine_ops, &mut out);
            for op in &ops {
                apply_timed(&mut model, op, now, LIMITS);
            }
            scratch.clear();
            let head = batch::RecordHead {
                now,
                flush: false,
                cas_before,
                cas_after: a.cas_next(),
            };
            if batch::encode_record(&mut scratch, &head, [], &engine_ops, []) {
                w.append(&scratch).unwrap();
                appended += 1;
                marks.push(Mark {
                    model: model.clone(),
                    now,
                    records: appended,
                });
            }
            if r.gen_range(0..3) != 0 {
                continue;
            }
            let Ok(lsn) = w.write_out() else {
                break;
            };
            assert_eq!(lsn, appended, "{ctx}: written lsn");
            marks.drain(..marks.len() - 1);
            if !always {
                acked = lsn;
                continue;
            }
            let Ok(durable) = w.sync() else {
                break;
            };
            assert_eq!(durable, lsn, "{ctx}: durable lsn");
            acked = durable;
        }
        // The crash: the engine is gone; the writer never acknowledged what it did not write.
        assert!(w.written_lsn() >= acked, "{ctx}: acked past written");
        assert_eq!(w.written_lsn(), marks[0].records, "{ctx}: written mark");
        // (Durable may be ahead: reopening syncs records an earlier crash left unsynced.)
        if always {
            assert!(w.durable_lsn() >= acked, "{ctx}: acked past durable");
        }
    }
    if exact {
        marks.truncate(1);
    }
    let (_, last) = recover_to_a_mark(&path, &marks, acked, &format!("{ctx}, the last recovery"));
    seen.records += last.records;
}

fn run_seeds(first: u64, always: bool) {
    let mut seen = Seen::default();
    for seed in first..first + SEEDS {
        run_seed(seed, always, &mut seen);
    }
    eprintln!("crash model, always {always}: {seen:?}");
    assert!(
        seen.beyond_written > 0,
        "no short write landed a record: {seen:?}"
    );
    assert!(seen.in_recovery > 0, "no crash hit a recovery: {seen:?}");
}

#[test]
fn crashes_at_random_points_recover_the_written_prefix_write_acknowledges() {
    run_seeds(0, false);
}

#[test]
fn crashes_at_random_points_recover_the_written_prefix_sync_acknowledges() {
    run_seeds(1_000, true);
}
