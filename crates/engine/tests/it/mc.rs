//! Memcache items in the engine (issue 21 item 3): the five memcache operations and their
//! statuses, item meta (client flags, CAS unique) kept with the value through every record
//! path, dropped by the RESP/native writes that change the value, forwarded within a batch
//! (compared with testkit's `mc_model` op by op), expired and evicted like any key, and what
//! it costs per item.

use directkv_engine::mc::{self, ArithArgs, ItemMeta, StoreArgs, StoreMode};
use directkv_engine::{
    ElemType, Engine, EngineConfig, EvictionPolicy, ExecMode, Op, OpError, OpKind, Results, Status,
    NO_DEADLINE,
};
use directkv_testkit::mc_model::{Item, McModel};
use directkv_testkit::model::{Limits, OwnedOp};
use proptest::prelude::*;

const VALUE_LEN_MAX: usize = 4096;
const NOW: u64 = 1_000_000;
const LATER: u64 = 5_000_000;

fn engine_with(mem_mb: usize, threshold: usize, mode: ExecMode) -> Engine {
    let mut cfg = EngineConfig::with_memory(mem_mb << 20);
    cfg.hash_index_ratio = Some(0.5);
    cfg.inline_threshold = Some(threshold);
    cfg.value_len_max = VALUE_LEN_MAX;
    cfg.mode = mode;
    let mut e = Engine::new(cfg).unwrap();
    e.set_now(NOW);
    e
}

fn engine() -> Engine {
    engine_with(8, 51, ExecMode::Forward)
}

fn run(e: &mut Engine, ops: &[Op]) -> Vec<(Status, Vec<u8>)> {
    let mut out = Results::default();
    e.execute(ops, &mut out);
    out.iter().map(|(s, d)| (s, d.to_vec())).collect()
}

fn one(e: &mut Engine, op: Op) -> (Status, Vec<u8>) {
    run(e, &[op]).pop().unwrap()
}

fn u64s(d: &[u8]) -> Vec<u64> {
    d.chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// McStore; returns (status, cas if Ok).
fn store(e: &mut Engine, key: &[u8], data: &[u8], a: StoreArgs) -> (Status, u64) {
    let args = a.encode();
    let (s, d) = one(e, Op::mc_store(key, data, &args));
    (s, if s == Status::Ok { u64s(&d)[0] } else { 0 })
}

fn set(flags: u32, deadline: u64) -> StoreArgs {
    StoreArgs::set(flags, deadline)
}

fn with_mode(mode: StoreMode, compare_cas: u64) -> StoreArgs {
    StoreArgs {
        mode,
        compare_cas,
        ..StoreArgs::set(0, NO_DEADLINE)
    }
}

/// McGet: the value and its meta, None when missing.
fn gets(e: &mut Engine, key: &[u8], want_cas: bool) -> Option<(Vec<u8>, ItemMeta)> {
    let want: &[u8] = if want_cas { &mc::WANT_CAS } else { &[] };
    let (s, d) = one(e, Op::mc_get(key, &[], want));
    match s {
        Status::Ok => {
            let (v, m) = mc::split_get(&d).unwrap();
            Some((v.to_vec(), m))
        }
        Status::NotFound => None,
        s => panic!("{s:?}"),
    }
}

fn arith(e: &mut Engine, key: &[u8], a: ArithArgs) -> (Status, Vec<u64>) {
    let args = a.encode();
    let (s, d) = one(e, Op::mc_arith(key, &args));
    (s, u64s(&d))
}

#[test]
fn store_get_and_every_store_status() {
    let mut e = engine();
    assert_eq!(e.cas_next(), 1);
    assert_eq!(
        store(&mut e, b"k", b"v1", set(5, NO_DEADLINE)),
        (Status::Ok, 1)
    );
    let (v, m) = gets(&mut e, b"k", false).unwrap();
    assert_eq!(
        (v, m.flags, m.cas, m.deadline),
        (b"v1".to_vec(), 5, 1, NO_DEADLINE)
    );
    // Every operation takes a number (used or not): a write takes its own.
    let first = e.cas_next();
    // A plain get sees the value alone.
    assert_eq!(one(&mut e, Op::get(b"k")), (Status::Ok, b"v1".to_vec()));
    // add on a live key, replace/append/prepend on a missing one: not stored.
    assert_eq!(
        store(&mut e, b"k", b"x", with_mode(StoreMode::Add, 0)).0,
        Status::NotStored
    );
    for mode in [StoreMode::Replace, StoreMode::Append, StoreMode::Prepend] {
        assert_eq!(
            store(&mut e, b"nope", b"x", with_mode(mode, 0)).0,
            Status::NotStored
        );
    }
    assert_eq!(e.cas_next(), first + 5);
    let next = e.cas_next();
    assert_eq!(
        store(&mut e, b"new", b"a", with_mode(StoreMode::Add, 0)),
        (Status::Ok, next)
    );
    let r = store(&mut e, b"new", b"b", with_mode(StoreMode::Replace, 0));
    assert_eq!(r, (Status::Ok, next + 1));
    // cas: a stale CAS mismatches, a missing key is not found, the current one stores.
    assert_eq!(
        store(&mut e, b"k", b"c", with_mode(StoreMode::Set, 99)).0,
        Status::CasMismatch
    );
    assert_eq!(
        store(&mut e, b"gone", b"c", with_mode(StoreMode::Set, 1)).0,
        Status::NotFound
    );
    let next = e.cas_next();
    assert_eq!(
        store(&mut e, b"k", b"v2", with_mode(StoreMode::Set, 1)),
        (Status::Ok, next)
    );
    // The flags of a set are the op's (0 here); append and prepend keep flags and deadline.
    store(&mut e, b"a", b"x", set(9, LATER));
    store(
        &mut e,
        b"a",
        b"yz",
        StoreArgs {
            flags: 3,
            ..with_mode(StoreMode::Append, 0)
        },
    );
    store(
        &mut e,
        b"a",
        b"ww",
        StoreArgs {
            flags: 4,
            ..with_mode(StoreMode::Prepend, 0)
        },
    );
    let (v, m) = gets(&mut e, b"a", false).unwrap();
    assert_eq!((v, m.flags, m.deadline), (b"wwxyz".to_vec(), 9, LATER));
    // A given CAS (meta E) is taken as is and does not advance the counter.
    let given = StoreArgs {
        new_cas: 777,
        ..set(0, NO_DEADLINE)
    };
    assert_eq!(store(&mut e, b"e", b"x", given), (Status::Ok, 777));
    assert_eq!(gets(&mut e, b"e", false).unwrap().1.cas, 777);
    e.check_invariants();
}

/// memcached's negative exptime: STORED, and nothing to read (an existing item is gone too);
/// add on a live key is still NOT_STORED.
#[test]
fn a_past_deadline_stores_nothing_visible() {
    let mut e = engine();
    assert_eq!(store(&mut e, b"neg", b"x", set(3, NOW - 1)).0, Status::Ok);
    assert!(gets(&mut e, b"neg", false).is_none());
    store(&mut e, b"live", b"x", set(7, NO_DEADLINE));
    let add = StoreArgs {
        deadline: NOW,
        ..with_mode(StoreMode::Add, 0)
    };
    assert_eq!(store(&mut e, b"live", b"y", add).0, Status::NotStored);
    assert_eq!(store(&mut e, b"live", b"x", set(7, NOW)).0, Status::Ok);
    assert!(gets(&mut e, b"live", false).is_none());
    assert_eq!(e.counts().keys, 0);
}

#[test]
fn delete_touch_and_gat_keep_or_check_the_cas() {
    let mut e = engine();
    let (_, cas) = store(&mut e, b"k", b"v", set(1, NO_DEADLINE));
    let stale = mc::u64_arg(cas + 100);
    assert_eq!(
        one(&mut e, Op::mc_delete(b"k", &stale)).0,
        Status::CasMismatch
    );
    assert_eq!(one(&mut e, Op::mc_delete(b"nope", &[])).0, Status::NotFound);
    // touch and gat change the deadline, not the CAS (as memcached 1.6.18).
    let d = mc::u64_arg(LATER);
    assert_eq!(
        one(&mut e, Op::mc_touch(b"k", &d)),
        (Status::Ok, cas.to_le_bytes().to_vec())
    );
    assert_eq!(one(&mut e, Op::mc_touch(b"nope", &d)).0, Status::NotFound);
    let m = gets(&mut e, b"k", false).unwrap().1;
    assert_eq!((m.cas, m.deadline, m.flags), (cas, LATER, 1));
    let t = mc::touch_arg(LATER + 1);
    let (s, data) = one(&mut e, Op::mc_get(b"k", &t, &[]));
    let (v, m) = mc::split_get(&data).unwrap();
    assert_eq!(
        (s, v, m.cas, m.deadline),
        (Status::Ok, &b"v"[..], cas, LATER + 1)
    );
    // gat with NO_DEADLINE removes the deadline; with a past one reads, then it is gone.
    let t = mc::touch_arg(NO_DEADLINE);
    one(&mut e, Op::mc_get(b"k", &t, &[]));
    assert_eq!(gets(&mut e, b"k", false).unwrap().1.deadline, NO_DEADLINE);
    let t = mc::touch_arg(NOW);
    assert_eq!(one(&mut e, Op::mc_get(b"k", &t, &[])).0, Status::Ok);
    assert!(gets(&mut e, b"k", false).is_none());
    // delete with the right CAS.
    let (_, cas) = store(&mut e, b"k", b"v", set(1, NO_DEADLINE));
    let right = mc::u64_arg(cas);
    assert_eq!(one(&mut e, Op::mc_delete(b"k", &right)).0, Status::Ok);
    // touch with a past deadline: touched, then gone.
    store(&mut e, b"k", b"v", set(1, NO_DEADLINE));
    let past = mc::u64_arg(NOW - 5);
    assert_eq!(one(&mut e, Op::mc_touch(b"k", &past)).0, Status::Ok);
    assert!(gets(&mut e, b"k", false).is_none());
    e.check_invariants();
}

/// incr/decr as memcached 1.6.18 does them (each case tried there): wrap at 2^64, stop at 0,
/// a shorter result padded with spaces to the value's length, leading and trailing white space,
/// non-numbers refused, flags and deadline kept, a new CAS.
#[test]
fn incr_and_decr_follow_memcached() {
    let mut e = engine();
    // (value, incr, delta, the number replied or None for not a number, the value after)
    type Case = (&'static [u8], bool, u64, Option<u64>, &'static [u8]);
    let cases: &[Case] = &[
        (b"10", false, 1, Some(9), b"9 "),
        (b"10", true, u64::MAX, Some(9), b"9 "),
        (
            b"18446744073709551615",
            true,
            1,
            Some(0),
            b"0                   ",
        ),
        (b"5", false, 10, Some(0), b"0"),
        (b"99", true, 1, Some(100), b"100"),
        (b" 12 ", true, 1, Some(13), b"13  "),
        (b"12 34", true, 1, Some(13), b"13   "),
        (b"00012", true, 1, Some(13), b"13   "),
        (b"+5", true, 1, Some(6), b"6 "),
        (b"-0", true, 1, Some(1), b"1 "),
        (b"\t7\n", true, 1, Some(8), b"8  "),
        (b"1\x002", true, 1, Some(2), b"2  "),
        (b"abc", true, 1, None, b"abc"),
        (b"12abc", true, 1, None, b"12abc"),
        (b"-5", true, 1, None, b"-5"),
        (b" ", true, 1, None, b" "),
        (b"", true, 1, None, b""),
        (
            b"18446744073709551616",
            true,
            1,
            None,
            b"18446744073709551616",
        ),
        (
            b"123456789012345678901",
            false,
            1,
            None,
            b"123456789012345678901",
        ),
    ];
    for (i, &(value, incr, delta, want, stored)) in cases.iter().enumerate() {
        let key = format!("n{i}").into_bytes();
        let (_, cas) = store(&mut e, &key, value, set(42, LATER));
        let (s, d) = arith(&mut e, &key, ArithArgs::new(incr, delta));
        match want {
            Some(n) => {
                assert_eq!(
                    (s, d[0]),
                    (Status::Ok, n),
                    "{:?}",
                    String::from_utf8_lossy(value)
                );
                assert!(d[1] > cas);
            }
            None => assert_eq!(s, Status::Error(OpError::NotAnInteger), "{value:?}"),
        }
        if value.is_empty() {
            // An empty value is stored like any: memcached refuses to count it.
            continue;
        }
        let (v, m) = gets(&mut e, &key, false).unwrap();
        assert_eq!(v, stored, "{:?}", String::from_utf8_lossy(value));
        assert_eq!((m.flags, m.deadline), (42, LATER));
    }
    // Missing: not found, or created by ma N (initial value, its deadline, flags 0).
    assert_eq!(
        arith(&mut e, b"m", ArithArgs::new(true, 1)).0,
        Status::NotFound
    );
    let create = ArithArgs {
        create: Some((7, LATER)),
        ..ArithArgs::new(true, 1)
    };
    let (s, d) = arith(&mut e, b"m", create);
    assert_eq!((s, d[0]), (Status::Ok, 7));
    let (v, m) = gets(&mut e, b"m", false).unwrap();
    assert_eq!(
        (v, m.flags, m.cas, m.deadline),
        (b"7".to_vec(), 0, d[1], LATER)
    );
    // The CAS is compared before the value is read.
    let stale = ArithArgs {
        compare_cas: 1,
        ..ArithArgs::new(true, 1)
    };
    assert_eq!(arith(&mut e, b"m", stale).0, Status::CasMismatch);
    let right = ArithArgs {
        compare_cas: d[1],
        ..ArithArgs::new(true, 1)
    };
    let (_, d8) = arith(&mut e, b"m", right);
    assert_eq!(d8[0], 8);
    // The reply says the deadline before and whether the item was created (ma's `t`).
    assert_eq!((d[2], d[3]), (NO_DEADLINE, 1));
    assert_eq!((d8[2], d8[3]), (LATER, 0));
    // ma T: a successful arithmetic gives the item the new deadline; a refused one does not.
    let touch = |d| ArithArgs {
        touch: Some(d),
        ..ArithArgs::new(true, 1)
    };
    assert_eq!(
        arith(&mut e, b"m", touch(LATER + 7)).1[..3],
        [9, d8[1] + 1, LATER]
    );
    assert_eq!(gets(&mut e, b"m", false).unwrap().1.deadline, LATER + 7);
    let refused = ArithArgs {
        compare_cas: 1,
        ..touch(NO_DEADLINE)
    };
    assert_eq!(arith(&mut e, b"m", refused).0, Status::CasMismatch);
    assert_eq!(gets(&mut e, b"m", false).unwrap().1.deadline, LATER + 7);
    e.check_invariants();
}

/// A RESP-style write that changes the value drops the meta, so the CAS a client held no
/// longer matches; a read or a deadline change keeps it; `gets` gives a meta-less key a CAS.
#[test]
fn resp_writes_drop_meta_and_gets_attaches_it() {
    let mut e = engine();
    for (i, change) in ["put", "append", "incr", "cas", "update"]
        .iter()
        .enumerate()
    {
        let key = format!("k{i}").into_bytes();
        let (_, cas) = store(&mut e, &key, b"12345678", set(8, NO_DEADLINE));
        let delta = 1i64.to_le_bytes();
        let one8 = 1u64.to_le_bytes();
        let op = match *change {
            "put" => Op::put(&key, b"other"),
            "append" => Op::append(&key, b"!"),
            "incr" => Op::incr_by(&key, &delta),
            "cas" => Op::cas(&key, b"12345678", b"x"),
            _ => Op::update_s2s(&key, directkv_engine::ops::FN_ADD, ElemType::U64, &one8),
        };
        assert_eq!(one(&mut e, op).0, Status::Ok, "{change}");
        let m = gets(&mut e, &key, false).unwrap().1;
        assert_eq!((m.flags, m.cas), (0, 0), "{change}");
        let cas_set = StoreArgs {
            compare_cas: cas,
            ..set(0, NO_DEADLINE)
        };
        assert_eq!(
            store(&mut e, &key, b"y", cas_set).0,
            Status::CasMismatch,
            "{change}"
        );
        let del = mc::u64_arg(cas);
        assert_eq!(
            one(&mut e, Op::mc_delete(&key, &del)).0,
            Status::CasMismatch
        );
    }
    // Reads and deadline changes keep it.
    let inline_before = e.counts().inline_keys;
    let (_, cas) = store(&mut e, b"keep", b"v", set(8, NO_DEADLINE));
    let ex = directkv_engine::expire_args(LATER, directkv_engine::cond::ANY);
    run(
        &mut e,
        &[Op::get(b"keep"), Op::expire(b"keep", &ex), Op::ttl(b"keep")],
    );
    let m = gets(&mut e, b"keep", false).unwrap().1;
    assert_eq!((m.flags, m.cas, m.deadline), (8, cas, LATER));
    one(&mut e, Op::persist(b"keep"));
    assert_eq!(gets(&mut e, b"keep", false).unwrap().1.cas, cas);
    // An inline key written by RESP: gets without want_cas reports no CAS, with it one that a
    // cas then matches (the entry becomes a record with meta).
    one(&mut e, Op::put(b"inl", b"value"));
    assert_eq!(e.counts().inline_keys, inline_before + 1);
    assert_eq!(gets(&mut e, b"inl", false).unwrap().1.cas, 0);
    let next = e.cas_next();
    let (v, m) = gets(&mut e, b"inl", true).unwrap();
    assert_eq!((v, m.flags, m.cas), (b"value".to_vec(), 0, next));
    assert_eq!(e.counts().inline_keys, inline_before);
    assert_eq!(
        gets(&mut e, b"inl", true).unwrap().1.cas,
        next,
        "asked twice, one CAS"
    );
    let cas_set = StoreArgs {
        compare_cas: next,
        ..set(1, NO_DEADLINE)
    };
    assert_eq!(store(&mut e, b"inl", b"new", cas_set).0, Status::Ok);
    // A RESP put of a short value goes back inline.
    one(&mut e, Op::put(b"inl", b"v"));
    assert_eq!(e.counts().inline_keys, inline_before + 1);
    e.check_invariants();
}

/// Malformed arguments are refused before anything changes.
#[test]
fn malformed_arguments_are_refused() {
    let mut e = engine();
    let bad = Status::Error(OpError::BadMcArgs);
    let mut args = StoreArgs::set(0, 0).encode();
    args[0] = 9;
    assert_eq!(one(&mut e, Op::mc_store(b"k", b"v", &args)).0, bad);
    let short = Op {
        arg2: &args[..5],
        ..Op::mc_store(b"k", b"v", &args)
    };
    assert_eq!(one(&mut e, short).0, bad);
    assert_eq!(one(&mut e, Op::mc_get(b"k", &[1, 2, 3], &[])).0, bad);
    assert_eq!(one(&mut e, Op::mc_get(b"k", &[], &[2])).0, bad);
    assert_eq!(one(&mut e, Op::mc_delete(b"k", &[1])).0, bad);
    let t = Op {
        arg: &[],
        ..Op::mc_touch(b"k", &[0; 8])
    };
    assert_eq!(one(&mut e, t).0, bad);
    let mut a = ArithArgs::new(true, 1).encode();
    a[0] = 2;
    assert_eq!(one(&mut e, Op::mc_arith(b"k", &a)).0, bad);
    let big = vec![0u8; VALUE_LEN_MAX + 1];
    let args = StoreArgs::set(0, 0).encode();
    assert!(matches!(
        one(&mut e, Op::mc_store(b"k", &big, &args)).0,
        Status::Error(OpError::ValueTooLarge { .. })
    ));
    assert_eq!(e.counts().keys, 0);
}

/// An append past the value limit fails alone and in a group, and changes nothing.
#[test]
fn an_append_past_the_limit_fails_and_changes_nothing() {
    for mode in [ExecMode::Forward, ExecMode::Stall] {
        let mut e = engine_with(8, 51, mode);
        store(
            &mut e,
            b"k",
            &vec![1u8; VALUE_LEN_MAX - 1],
            set(0, NO_DEADLINE),
        );
        let app = with_mode(StoreMode::Append, 0).encode();
        let g = Op::mc_get(b"k", &[], &[]);
        let r = run(&mut e, &[g, Op::mc_store(b"k", b"xx", &app), g]);
        assert!(matches!(
            r[1].0,
            Status::Error(OpError::ValueTooLarge { .. })
        ));
        assert_eq!(r[0], r[2]);
    }
}

#[test]
fn lazy_and_active_expiry_of_items_with_meta() {
    let mut e = engine_with(8, 51, ExecMode::Forward);
    for i in 0..200u64 {
        let key = format!("t{i}");
        let d = if i % 2 == 0 { NOW + 10 } else { LATER };
        store(
            &mut e,
            key.as_bytes(),
            b"0123456789abcdef",
            set(i as u32, d),
        );
    }
    assert_eq!(e.counts().expiring_keys, 200);
    e.set_now(NOW + 10);
    // Lazy: a lookup finds t0 expired.
    assert!(gets(&mut e, b"t0", false).is_none());
    assert_eq!(e.reclaimed_keys().collect::<Vec<_>>(), vec![&b"t0"[..]]);
    // Active: a whole pass removes the other 99.
    let (mut cursor, mut removed) = (0u64, 0u64);
    loop {
        let (next, n) = e.expire_step(cursor, 64);
        removed += n;
        if next == 0 {
            break;
        }
        cursor = next;
    }
    assert_eq!(removed, 99);
    assert_eq!(e.counts().keys, 100);
    let m = gets(&mut e, b"t1", false).unwrap().1;
    assert_eq!((m.flags, m.deadline), (1, LATER));
    e.check_invariants();
}

#[test]
fn eviction_takes_items_with_meta_and_writes_go_on() {
    let mut cfg = EngineConfig::with_memory(4 << 20);
    cfg.hash_index_ratio = Some(0.5);
    cfg.value_len_max = VALUE_LEN_MAX;
    cfg.eviction_policy = EvictionPolicy::AllKeysLru;
    let mut e = Engine::new(cfg).unwrap();
    e.set_now(NOW);
    let value = vec![7u8; 100];
    let keys: Vec<Vec<u8>> = (0..40_000u32)
        .map(|i| format!("m:{i:08}").into_bytes())
        .collect();
    let args = StoreArgs::set(3, NO_DEADLINE).encode();
    for chunk in keys.chunks(32) {
        let ops: Vec<Op> = chunk
            .iter()
            .map(|k| Op::mc_store(k, &value, &args))
            .collect();
        let r = run(&mut e, &ops);
        assert!(r.iter().all(|(s, _)| *s == Status::Ok), "{r:?}");
    }
    let r = e.report();
    assert!(
        r.stats.evicted_keys > 0 && r.counts.keys < 40_000,
        "{:?}",
        r.counts
    );
    // What is left is whole: value, flags and a CAS, every CAS distinct.
    let mut cas = std::collections::HashSet::new();
    let mut cursor = 0;
    loop {
        cursor = e.scan_items(cursor, 256, |_, v, m| {
            assert_eq!((v, m.flags), (&value[..], 3));
            assert!(cas.insert(m.cas));
        });
        if cursor == 0 {
            break;
        }
    }
    assert_eq!(cas.len() as u64, r.counts.keys);
    e.check_invariants();
}

/// `scan_items` reports the meta; the CAS counter can be read and restored, and the same
/// operations from the same counter give the same CAS values.
#[test]
fn scan_items_and_the_cas_counter() {
    let ops_run = |e: &mut Engine| {
        store(e, b"a", b"1", set(1, NO_DEADLINE));
        one(e, Op::put(b"b", b"2"));
        arith(e, b"a", ArithArgs::new(true, 5));
        gets(e, b"b", true);
    };
    let mut e = engine();
    e.set_cas_next(1000);
    ops_run(&mut e);
    assert_eq!(e.cas_next(), 1004);
    let mut seen = vec![];
    e.scan_items(0, u64::MAX, |k, v, m| {
        seen.push((k.to_vec(), v.to_vec(), m.flags, m.cas))
    });
    seen.sort();
    assert_eq!(
        seen,
        vec![
            (b"a".to_vec(), b"6".to_vec(), 1, 1002),
            (b"b".to_vec(), b"2".to_vec(), 0, 1003)
        ]
    );
    e.set_cas_next(0);
    assert_eq!(e.cas_next(), 1, "0 means no CAS: the counter starts at 1");
}

/// An all-or-nothing batch of memcache writes is checked like any other.
#[test]
fn atomic_batches_count_memcache_writes() {
    let mut e = engine();
    let args = StoreArgs::set(0, NO_DEADLINE).encode();
    let ar = ArithArgs::new(true, 1).encode();
    let g = mc::touch_arg(LATER);
    let ops = [
        Op::mc_store(b"a", b"10", &args),
        Op::mc_arith(b"a", &ar),
        Op::mc_get(b"a", &g, &mc::WANT_CAS),
        Op::mc_delete(b"zz", &[]),
    ];
    e.check_atomic(&ops).unwrap();
    let mut out = Results::default();
    e.execute_atomic(&ops, &mut out).unwrap();
    assert_eq!(out.status(1), Status::Ok);
    assert_eq!(u64s(out.data(1))[0], 11);
}

/// MEMORY USAGE's figure for an item with meta: a record with 12 more header bytes.
#[test]
fn footprint_of_items_with_meta() {
    let e = engine();
    let plain = e.item_footprint_bytes(8, 8, false, false);
    let meta = e.item_footprint_bytes(8, 8, false, true);
    assert_eq!(plain, e.footprint_bytes(8, 8, false));
    // Inline 16 bytes (+ its share of the bucket's metadata) against a pointer slot and a
    // 32-byte block.
    assert!(meta > plain && meta <= 8 + 2 + 32, "{plain} {meta}");
    // With a deadline too the record is 38 bytes: a 64-byte block.
    assert_eq!(e.item_footprint_bytes(8, 8, true, true), meta + 32);
}

// ---------------------------------------------------------------------------------------------
// Forwarding: batches mixing memcache and other operations on a few keys, through a Forward
// engine, a Stall engine and one operation per batch, against the model.

#[derive(Clone, Copy, Debug)]
enum CasPick {
    None,
    Current,
    Stale,
}

#[derive(Clone, Copy, Debug)]
enum AOp {
    Store {
        mode: u8,
        flags: u32,
        dl: u8,
        cas: CasPick,
        given: bool,
        val: u8,
    },
    Get {
        touch: Option<u8>,
        want: bool,
    },
    Delete(CasPick),
    Arith {
        incr: bool,
        delta: u8,
        cas: CasPick,
        create: Option<(u8, u8)>,
        touch: Option<u8>,
    },
    Touch(u8),
    Put(u8),
    RespGet,
    Append(u8),
    IncrBy,
    Add8,
    RespDelete,
}

const VALUES: &[&[u8]] = &[
    b"10",
    b" 12 ",
    b"99",
    b"abc",
    b"18446744073709551615",
    b"12345678",
    b"0",
    b"a longer value that is not inline: forty-odd bytes",
];
const DELTAS: &[u64] = &[1, 5, u64::MAX, 1 << 63, 0];

fn deadline(pick: u8) -> u64 {
    [NO_DEADLINE, LATER, LATER + 7, NOW - 1][usize::from(pick % 4)]
}

fn aop() -> impl Strategy<Value = AOp> {
    let cas = prop_oneof![
        Just(CasPick::None),
        Just(CasPick::Current),
        Just(CasPick::Stale)
    ];
    prop_oneof![
        4 => (0u8..5, 0u32..4, any::<u8>(), cas.clone(), any::<bool>(), any::<u8>()).prop_map(
            |(mode, flags, dl, cas, given, val)| AOp::Store { mode, flags, dl, cas, given, val }
        ),
        3 => (proptest::option::of(any::<u8>()), any::<bool>())
            .prop_map(|(touch, want)| AOp::Get { touch, want }),
        1 => cas.clone().prop_map(AOp::Delete),
        3 => (
            (any::<bool>(), any::<u8>(), cas),
            proptest::option::of((any::<u8>(), any::<u8>())),
            proptest::option::of(any::<u8>())
        )
            .prop_map(|((incr, delta, cas), create, touch)| AOp::Arith {
                incr,
                delta,
                cas,
                create,
                touch
            }),
        1 => any::<u8>().prop_map(AOp::Touch),
        1 => any::<u8>().prop_map(AOp::Put),
        1 => Just(AOp::RespGet),
        1 => any::<u8>().prop_map(AOp::Append),
        1 => Just(AOp::IncrBy),
        1 => Just(AOp::Add8),
        1 => Just(AOp::RespDelete),
    ]
}

fn materialize(a: &AOp, key: &[u8], m: &McModel) -> OwnedOp {
    let cur = m.items.get(key).map_or(0, |i: &Item| i.cas);
    let pick = |c: CasPick| match c {
        CasPick::None => 0,
        CasPick::Current => cur,
        CasPick::Stale => cur + 1_000_000,
    };
    let o = |kind: OpKind| OwnedOp::new(kind, key.to_vec());
    match *a {
        AOp::Store {
            mode,
            flags,
            dl,
            cas,
            given,
            val,
        } => {
            let args = StoreArgs {
                mode: StoreMode::from_code(mode).unwrap(),
                flags,
                deadline: deadline(dl),
                compare_cas: pick(cas),
                new_cas: if given { 5_000 + u64::from(val) } else { 0 },
            };
            OwnedOp {
                arg: VALUES[usize::from(val) % VALUES.len()].to_vec(),
                arg2: args.encode().to_vec(),
                ..o(OpKind::McStore)
            }
        }
        AOp::Get { touch, want } => OwnedOp {
            arg: touch.map_or(vec![], |t| mc::touch_arg(deadline(t)).to_vec()),
            arg2: if want { mc::WANT_CAS.to_vec() } else { vec![] },
            ..o(OpKind::McGet)
        },
        AOp::Delete(c) => OwnedOp {
            arg: match c {
                CasPick::None => vec![],
                c => mc::u64_arg(pick(c)).to_vec(),
            },
            ..o(OpKind::McDelete)
        },
        AOp::Arith {
            incr,
            delta,
            cas,
            create,
            touch,
        } => {
            let args = ArithArgs {
                incr,
                delta: DELTAS[usize::from(delta) % DELTAS.len()],
                compare_cas: pick(cas),
                new_cas: 0,
                create: create.map(|(i, d)| (u64::from(i), deadline(d))),
                touch: touch.map(deadline),
            };
            OwnedOp {
                arg2: args.encode().to_vec(),
                ..o(OpKind::McArith)
            }
        }
        AOp::Touch(d) => OwnedOp {
            arg: mc::u64_arg(deadline(d)).to_vec(),
            ..o(OpKind::McTouch)
        },
        AOp::Put(v) => OwnedOp {
            arg: VALUES[usize::from(v) % VALUES.len()].to_vec(),
            ..o(OpKind::Put)
        },
        AOp::RespGet => o(OpKind::Get),
        AOp::Append(v) => OwnedOp {
            arg: vec![b'0' + v % 10],
            ..o(OpKind::Append)
        },
        AOp::IncrBy => OwnedOp {
            arg: 3i64.to_le_bytes().to_vec(),
            ..o(OpKind::IncrBy)
        },
        AOp::Add8 => o(OpKind::UpdateS2S).with(
            directkv_engine::ops::FN_ADD,
            ElemType::U64,
            2u64.to_le_bytes().to_vec(),
        ),
        AOp::RespDelete => o(OpKind::Delete),
    }
}

fn contents(e: &Engine) -> Vec<(Vec<u8>, Item)> {
    let mut v = vec![];
    e.scan_items(0, u64::MAX, |k, val, m| {
        v.push((
            k.to_vec(),
            Item {
                value: val.to_vec(),
                flags: m.flags,
                cas: m.cas,
                deadline: m.deadline,
            },
        ))
    });
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

fn model_contents(m: &McModel) -> Vec<(Vec<u8>, Item)> {
    let mut v: Vec<_> = m
        .items
        .iter()
        .map(|(k, i)| (k.clone(), i.clone()))
        .collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

fn check_batches(batches: &[Vec<(u8, AOp)>], threshold: usize) -> Result<(), TestCaseError> {
    let keys: [&[u8]; 3] = [b"hot", b"k2", b"a-key-of-twenty-byte"];
    let limits = Limits {
        key_len_max: 250,
        value_len_max: VALUE_LEN_MAX,
    };
    let mut model = McModel::new(limits, NOW);
    let mut fwd = engine_with(8, threshold, ExecMode::Forward);
    let mut stall = engine_with(8, threshold, ExecMode::Stall);
    let mut single = engine_with(8, threshold, ExecMode::Forward);
    for batch in batches {
        let mut owned = vec![];
        let mut want = vec![];
        for (k, a) in batch {
            let op = materialize(a, keys[usize::from(*k) % 3], &model);
            want.push(model.apply(&op));
            owned.push(op);
        }
        let ops: Vec<Op> = owned.iter().map(OwnedOp::as_op).collect();
        let got_f = run(&mut fwd, &ops);
        let got_s = run(&mut stall, &ops);
        let got_1: Vec<_> = ops.iter().map(|op| one(&mut single, *op)).collect();
        for (i, w) in want.iter().enumerate() {
            prop_assert_eq!(&got_f[i], w, "forward op {} {:?}", i, owned[i]);
            prop_assert_eq!(&got_s[i], w, "stall op {} {:?}", i, owned[i]);
            prop_assert_eq!(&got_1[i], w, "one by one op {} {:?}", i, owned[i]);
        }
        let m = model_contents(&model);
        for e in [&fwd, &stall, &single] {
            e.check_invariants();
            prop_assert_eq!(&contents(e), &m);
            prop_assert_eq!(e.cas_next(), model.cas_next);
        }
    }
    Ok(())
}

fn batches() -> impl Strategy<Value = Vec<Vec<(u8, AOp)>>> {
    proptest::collection::vec(proptest::collection::vec((0u8..3, aop()), 1..24), 1..6)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    /// Same-key groups of memcache and other operations give the model's results, forwarded
    /// (Forward), stalled (Stall) and one by one, inline threshold 51.
    #[test]
    fn forwarding_matches_the_model(b in batches()) {
        check_batches(&b, 51)?;
    }

    /// The same with every key-value a record.
    #[test]
    fn forwarding_matches_the_model_all_records(b in batches()) {
        check_batches(&b, 0)?;
    }
}

/// A memcached get that only reads (no touch, no CAS to give) is answered the read-only way
/// (`retire::run_single`, without apply and store): with the value, flags, CAS and deadline
/// as before, counted once as an `McGet`, in a window with writes; one after a write of its key
/// in the same window sees the write; a `gets` of an entry without meta still gives it a CAS,
/// which a get after it sees.
#[test]
fn plain_gets_take_the_read_road_with_their_meta() {
    for threshold in [0, 51] {
        let mut e = engine_with(8, threshold, ExecMode::Forward);
        let (_, cas_a) = store(&mut e, b"a", b"va", set(7, LATER));
        let (_, cas_b) = store(&mut e, b"b", b"vb", set(9, NO_DEADLINE));
        assert_eq!(one(&mut e, Op::put(b"r", b"resp")).0, Status::Ok);
        e.reset_stats();
        let args = set(3, NO_DEADLINE).encode();
        let ops = [
            Op::mc_store(b"w", b"vw", &args),
            Op::mc_get(b"a", &[], &[]),
            Op::mc_get(b"b", &[], &[0]),
            Op::mc_get(b"missing", &[], &[]),
            Op::mc_get(b"w", &[], &[]),
            Op::mc_get(b"r", &[], &[]),
            Op::get(b"a"),
            Op::mc_get(b"r", &[], &mc::WANT_CAS),
            Op::mc_get(b"r", &[], &[]),
        ];
        let got = run(&mut e, &ops);
        assert_eq!(got[0].0, Status::Ok);
        let cas_w = u64s(&got[0].1)[0];
        let meta = |d: &[u8]| mc::split_get(d).map(|(v, m)| (v.to_vec(), m));
        let item = |v: &[u8], flags, cas, deadline| {
            Some((
                v.to_vec(),
                ItemMeta {
                    flags,
                    cas,
                    deadline,
                },
            ))
        };
        assert_eq!(meta(&got[1].1), item(b"va", 7, cas_a, LATER));
        assert_eq!(meta(&got[2].1), item(b"vb", 9, cas_b, NO_DEADLINE));
        assert_eq!(got[3].0, Status::NotFound);
        assert_eq!(meta(&got[4].1), item(b"vw", 3, cas_w, NO_DEADLINE));
        assert_eq!(meta(&got[5].1), item(b"resp", 0, 0, NO_DEADLINE));
        assert_eq!(got[6], (Status::Ok, b"va".to_vec()));
        // `gets` gave the RESP key a CAS (its operation's), which the get after it sees.
        let given = meta(&got[7].1).expect("found").1.cas;
        assert!(given > cas_w, "{given} {cas_w}");
        assert_eq!(meta(&got[8].1), item(b"resp", 0, given, NO_DEADLINE));
        let s = e.stats();
        assert_eq!(s.kind(OpKind::McGet).ops, 7, "threshold {threshold}");
        assert_eq!(s.kind(OpKind::Get).ops, 1);
        assert_eq!(s.kind(OpKind::McStore).ops, 1);
        e.check_invariants();
    }
}

// ---------------------------------------------------------------------------------------------
// Memory: what flags and CAS cost per item.

/// 1 M items of an 8-byte key and an 8-byte value: arena bytes per key with meta (McStore)
/// and without (Put), index ratio 0.25 and inline threshold 51 as `deadline_cost_in_bytes_per_key`.
/// The figure is in ARCHITECTURE.md.
#[test]
fn meta_cost_in_bytes_per_key() {
    let keys = 1_000_000u64;
    let used_per_key = |ratio: f64, meta: bool| {
        let mut cfg = EngineConfig::with_memory(256 << 20);
        cfg.hash_index_ratio = Some(ratio);
        cfg.inline_threshold = Some(51);
        cfg.value_len_max = VALUE_LEN_MAX;
        let mut e = Engine::new(cfg).unwrap();
        e.set_now(1);
        let args = StoreArgs::set(0xABCD, NO_DEADLINE).encode();
        let mut ks = Vec::with_capacity(1024);
        let mut out = Results::default();
        for base in (0..keys).step_by(1024) {
            ks.clear();
            ks.extend((base..(base + 1024).min(keys)).map(|i| (i * 0x9e37_79b9).to_le_bytes()));
            let ops: Vec<Op> = ks
                .iter()
                .map(|k| {
                    if meta {
                        Op::mc_store(k, k, &args)
                    } else {
                        Op::put(k, k)
                    }
                })
                .collect();
            e.execute(&ops, &mut out);
            assert!(out.iter().all(|(s, _)| s == Status::Ok));
        }
        let r = e.report();
        assert_eq!(r.counts.keys, keys);
        let used = r.arena_bytes as u64 - r.slab_free_bytes;
        used as f64 / keys as f64
    };
    for ratio in [0.25, 0.125] {
        let (plain, meta) = (used_per_key(ratio, false), used_per_key(ratio, true));
        println!(
            "arena bytes per key, 8 + 8-byte keys, 1 M keys, index ratio {ratio}, inline \
             threshold 51: {plain:.1} without meta, {meta:.1} with flags and CAS: {:.1} more",
            meta - plain
        );
        // A 32-byte block (and a pointer slot) instead of 16 inline bytes.
        assert!(meta - plain <= 40.0, "{plain} {meta}");
    }
}
