//! Black-box behaviour of one engine: every operation kind, inline and record storage, chains,
//! limits and out of memory.

use directkv_engine::ops::*;
use directkv_engine::{
    ElemType, Engine, EngineConfig, ExecMode, Op, OpError, OpKind, Results, Status,
};

fn engine(mem_mb: usize, ratio: f64, threshold: usize) -> Engine {
    let mut cfg = EngineConfig::with_memory(mem_mb << 20);
    cfg.hash_index_ratio = Some(ratio);
    cfg.inline_threshold = Some(threshold);
    cfg.value_len_max = 64 << 10;
    Engine::new(cfg).unwrap()
}

#[test]
fn get_put_delete_inline_and_records() {
    for threshold in [0, 51] {
        let mut e = engine(8, 0.5, threshold);
        assert_eq!(e.get(b"a").unwrap(), None);
        e.put(b"a", b"1").unwrap();
        e.put(b"long", &[7u8; 300]).unwrap();
        assert_eq!(e.get(b"a").unwrap().as_deref(), Some(&b"1"[..]));
        assert_eq!(e.get(b"long").unwrap().unwrap(), vec![7u8; 300]);
        // Grow and shrink across the inline threshold and slab classes.
        for len in [0usize, 3, 40, 45, 60, 200, 254, 2000, 5, 0] {
            let v = vec![len as u8; len];
            e.put(b"a", &v).unwrap();
            assert_eq!(
                e.get(b"a").unwrap().unwrap(),
                v,
                "len {len} threshold {threshold}"
            );
        }
        assert!(e.delete(b"a").unwrap());
        assert!(!e.delete(b"a").unwrap());
        assert_eq!(e.get(b"a").unwrap(), None);
        e.check_invariants();
        assert_eq!(e.counts().keys, 1);
    }
}

#[test]
fn a_record_stored_early_in_a_batch_is_found_by_a_later_read_only_window() {
    // The batch starts with only inline key-values; its first window stores a record, and the
    // next window, all GETs, must look for that record, not only down the chains.
    let mut cfg = EngineConfig::with_memory(8 << 20);
    cfg.window = 4;
    cfg.inline_threshold = Some(16);
    let mut e = Engine::new(cfg).unwrap();
    e.put(b"small", b"v").unwrap();
    let big = vec![9u8; 100];
    let ops = [
        Op::put(b"big", &big),
        Op::get(b"small"),
        Op::get(b"small"),
        Op::get(b"small"),
        Op::get(b"big"),
        Op::get(b"small"),
        Op::get(b"nothing"),
        Op::get(b"big"),
    ];
    let mut out = Results::with_capacity(ops.len(), 1024);
    e.execute(&ops, &mut out);
    for i in [4, 7] {
        assert_eq!(out.status(i), Status::Ok, "op {i}");
        assert_eq!(out.data(i), &big[..], "op {i}");
    }
    assert_eq!(out.status(6), Status::NotFound);
    assert_eq!(out.data(5), b"v");
}

#[test]
fn conditional_puts_and_cas() {
    let mut e = engine(8, 0.5, 51);
    let mut out = Results::default();
    e.execute(
        &[
            Op::put_xx(b"k", b"x"),
            Op::put_nx(b"k", b"v1"),
            Op::put_nx(b"k", b"v2"),
            Op::cas(b"k", b"nope", b"v3"),
            Op::cas(b"k", b"v1", b"v4"),
            Op::get(b"k"),
            Op::cas(b"new", b"", b"created"),
            Op::get(b"new"),
        ],
        &mut out,
    );
    let got: Vec<(Status, Vec<u8>)> = out.iter().map(|(s, d)| (s, d.to_vec())).collect();
    assert_eq!(
        got,
        vec![
            (Status::NotStored, vec![]),
            (Status::Ok, vec![]),
            (Status::NotStored, vec![]),
            (Status::CasMismatch, b"v1".to_vec()),
            (Status::Ok, b"v1".to_vec()),
            (Status::Ok, b"v4".to_vec()),
            (Status::Ok, vec![]),
            (Status::Ok, b"created".to_vec()),
        ]
    );
}

#[test]
fn atomics_vectors_reduce_filter() {
    let mut e = engine(8, 0.5, 51);
    let one = 1u64.to_le_bytes();
    assert_eq!(
        e.update(b"c", FN_ADD, ElemType::U64, &one).unwrap(),
        0u64.to_le_bytes()
    );
    assert_eq!(
        e.update(b"c", FN_ADD, ElemType::U64, &one).unwrap(),
        1u64.to_le_bytes()
    );
    assert_eq!(e.get(b"c").unwrap().unwrap(), 2u64.to_le_bytes());
    let v: Vec<u8> = [1u32, 5, 0, 9]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    e.put(b"vec", &v).unwrap();
    e.put(b"odd", b"abc").unwrap();
    let mut out = Results::default();
    let d: Vec<u8> = [10u32, 10, 10, 10]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    e.execute(
        &[
            Op::update_s2v(b"vec", FN_MUL, ElemType::U32, &2u32.to_le_bytes()),
            Op::update_v2v(b"vec", FN_ADD, ElemType::U32, &d),
            Op::reduce(b"vec", FN_SUM, ElemType::U32, &0u32.to_le_bytes()),
            Op::filter(b"vec", FN_GT, ElemType::U32, &15u32.to_le_bytes()),
            Op::reduce(b"missing", FN_SUM, ElemType::U32, &0u32.to_le_bytes()),
            Op::update_s2v(b"odd", FN_ADD, ElemType::U16, &1u16.to_le_bytes()),
            Op::update_s2s(b"c", 999, ElemType::U64, &one),
            Op::update_s2s(b"c", FN_ADD, ElemType::U64, &one).no_return(),
        ],
        &mut out,
    );
    assert_eq!(out.status(0), Status::Ok);
    assert_eq!(out.data(0), &v[..]);
    assert_eq!(out.data(2), &(12u32 + 20 + 10 + 28).to_le_bytes());
    let f: Vec<u8> = [20u32, 28].iter().flat_map(|x| x.to_le_bytes()).collect();
    assert_eq!(out.data(3), &f[..]);
    assert_eq!(out.status(4), Status::NotFound);
    assert_eq!(
        out.status(5),
        Status::Error(OpError::WrongWidth { len: 3, width: 2 })
    );
    assert_eq!(out.status(6), Status::Error(OpError::UnknownFunction(999)));
    assert_eq!((out.status(7), out.data(7)), (Status::Ok, &[][..]));
    assert_eq!(e.get(b"c").unwrap().unwrap(), 3u64.to_le_bytes());
}

#[test]
fn limits_are_checked() {
    let mut e = engine(8, 0.5, 51);
    // The empty key is a key (Redis allows it).
    assert_eq!(e.put(b"", b"x"), Ok(()));
    assert_eq!(e.get(b"").unwrap().as_deref(), Some(&b"x"[..]));
    assert_eq!(
        e.put(&[1u8; 251], b"x"),
        Err(OpError::KeyTooLong { len: 251, max: 250 })
    );
    assert!(e.put(&[1u8; 250], b"x").is_ok());
    assert_eq!(
        e.put(b"k", &vec![0u8; (64 << 10) + 1]),
        Err(OpError::ValueTooLarge {
            len: 65537,
            max: 65536
        })
    );
    assert!(e.put(b"k", &vec![0u8; 64 << 10]).is_ok());
}

#[test]
fn chains_grow_and_shrink() {
    // A tiny index forces long chains.
    let mut e = engine(16, 0.01, 51);
    let keys: Vec<Vec<u8>> = (0..300_000u32).map(|i| i.to_le_bytes().to_vec()).collect();
    for k in &keys {
        e.put(k, b"vvvv").unwrap();
    }
    assert!(e.counts().chained_buckets > 10_000, "{:?}", e.counts());
    for k in &keys {
        assert_eq!(e.get(k).unwrap().unwrap(), b"vvvv");
    }
    for k in &keys {
        assert!(e.delete(k).unwrap());
    }
    assert_eq!(e.counts().chained_buckets, 0);
    assert_eq!(e.counts().keys, 0);
    e.check_invariants();
}

#[test]
fn out_of_memory_is_an_error_and_changes_nothing() {
    let mut e = engine(4, 0.5, 0);
    let mut stored = 0u32;
    let err = loop {
        match e.put(&stored.to_le_bytes(), &[1u8; 100]) {
            Ok(()) => stored += 1,
            Err(err) => break err,
        }
    };
    assert_eq!(err, OpError::OutOfMemory);
    assert_eq!(e.counts().keys, stored as u64);
    // Growing a value fails too, and the old value stays.
    assert_eq!(
        e.put(&0u32.to_le_bytes(), &[2u8; 10_000]),
        Err(OpError::OutOfMemory)
    );
    assert_eq!(e.get(&0u32.to_le_bytes()).unwrap().unwrap(), vec![1u8; 100]);
    // Deleting frees space again.
    assert!(e.delete(&1u32.to_le_bytes()).unwrap());
    e.put(&stored.to_le_bytes(), &[1u8; 100]).unwrap();
    e.check_invariants();
}

#[test]
fn same_key_runs_forward_and_keep_order() {
    for mode in [ExecMode::Forward, ExecMode::Stall] {
        let mut e = engine(8, 0.5, 51);
        e.set_mode(mode);
        let one = 1u64.to_le_bytes();
        let mut ops = Vec::new();
        for _ in 0..1000 {
            ops.push(Op::update_s2s(b"hot", FN_ADD, ElemType::U64, &one));
        }
        ops.push(Op::get(b"hot"));
        let mut out = Results::default();
        e.execute(&ops, &mut out);
        for i in 0..1000 {
            assert_eq!(out.data(i), &(i as u64).to_le_bytes(), "mode {mode:?}");
        }
        assert_eq!(out.data(1000), &1000u64.to_le_bytes());
        let s = e.stats();
        match mode {
            ExecMode::Forward => {
                assert!(s.forwarded >= 990, "{s:?}");
                // One lookup and one write-back per window of 256.
                assert!(s.kind(OpKind::UpdateS2S).accesses() < 20, "{s:?}");
            }
            ExecMode::Stall => {
                assert_eq!(s.forwarded, 0);
                assert!(s.stalls >= 999);
                assert_eq!(s.kind(OpKind::UpdateS2S).accesses(), 2000);
            }
        }
    }
}

#[test]
fn inline_threshold_boundary() {
    // Key-values below the threshold are inline; at the threshold they go to the slab.
    let mut e = engine(8, 0.5, 11);
    e.put(b"abcdef", b"1234").unwrap(); // 10 bytes < 11: inline
    assert_eq!(e.counts().inline_keys, 1);
    e.put(b"abcdeg", b"12345").unwrap(); // 11 bytes: record
    assert_eq!(e.counts().inline_keys, 1);
    assert_eq!(e.counts().keys, 2);
    // Growing across the threshold moves the key-value out of the bucket and back.
    e.put(b"abcdef", b"12345").unwrap();
    assert_eq!(e.counts().inline_keys, 0);
    e.put(b"abcdef", b"1234").unwrap();
    assert_eq!(e.counts().inline_keys, 1);
    assert_eq!(e.get(b"abcdeg").unwrap().unwrap(), b"12345");
    e.check_invariants();
}

#[test]
fn secondary_hash_collisions_compare_full_keys() {
    use directkv_engine::hash::secondary_hash;
    use directkv_engine::key_hash;
    use std::collections::HashMap;
    // Everything in records, tiny index: many keys share a bucket, some share the secondary hash.
    let mut e = engine(16, 0.01, 0);
    let keys: Vec<Vec<u8>> = (0..200_000u32)
        .map(|i| format!("key-{i}").into_bytes())
        .collect();
    let mut by_bucket_sec: HashMap<(u64, u16), u32> = HashMap::new();
    let buckets = e.report().index_bytes as u64 / 64;
    for k in &keys {
        e.put(k, k).unwrap();
        let h = key_hash(k);
        *by_bucket_sec
            .entry((((h & 0xffff_ffff) * buckets) >> 32, secondary_hash(h)))
            .or_default() += 1;
    }
    let collisions = by_bucket_sec.values().filter(|&&n| n > 1).count();
    assert!(
        collisions > 100,
        "the test needs colliding keys, found {collisions}"
    );
    for k in &keys {
        assert_eq!(e.get(k).unwrap().as_deref(), Some(&k[..]));
    }
    assert_eq!(e.get(b"key-200000").unwrap(), None);
    e.check_invariants();
}

#[test]
fn report_counts_accesses_chains_and_utilization() {
    let mut e = engine(8, 0.5, 51);
    for i in 0..1000u32 {
        e.put(&i.to_le_bytes(), b"vv").unwrap();
    }
    e.reset_stats();
    let keys: Vec<[u8; 4]> = (0..1000u32).map(|i| i.to_le_bytes()).collect();
    let ops: Vec<Op> = keys.iter().map(|k| Op::get(k)).collect();
    let mut out = Results::default();
    e.execute(&ops, &mut out);
    let r = e.report();
    let g = r.stats.kind(OpKind::Get);
    assert_eq!(g.ops, 1000);
    // Few keys in a large index: one bucket line per GET.
    assert_eq!(g.accesses(), 1000);
    assert_eq!(r.counts.kv_bytes, 6000);
    assert!((r.memory_utilization - 6000.0 / r.arena_bytes as f64).abs() < 1e-12);
    let hist = e.chain_histogram();
    assert_eq!(hist.iter().sum::<u64>(), r.index_bytes as u64 / 64);
}

#[test]
fn replacing_an_inline_value_in_place_costs_one_read_and_one_write() {
    let mut e = engine(8, 0.5, 51);
    for i in 0..1000u32 {
        e.put(&i.to_le_bytes(), b"vv").unwrap();
    }
    e.reset_stats();
    let keys: Vec<[u8; 4]> = (0..1000u32).map(|i| i.to_le_bytes()).collect();
    // Same length (rewritten in place), other lengths (moved within the bucket), replace-only
    // puts of present and missing keys: every result and every stored value must be right.
    let ops: Vec<Op> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| match i % 4 {
            0 => Op::put(k, b"ab"),
            1 => Op::put_xx(k, b"cd"),
            2 => Op::put(k, b"efg"),
            _ => Op::put_xx(k, b"h"),
        })
        .collect();
    let missing = 5000u32.to_le_bytes();
    let mut ops = ops;
    ops.push(Op::put_xx(&missing, b"zz"));
    let mut out = Results::default();
    e.execute(&ops, &mut out);
    for i in 0..1000 {
        assert_eq!(out.status(i), Status::Ok, "op {i}");
    }
    assert_eq!(out.status(1000), Status::NotStored);
    let r = e.report();
    let p = r.stats.kind(OpKind::Put);
    let x = r.stats.kind(OpKind::PutXx);
    assert_eq!((p.ops, x.ops), (500, 501));
    // Few keys in a large index: each replace reads and writes its main bucket's line once.
    assert_eq!(
        (p.reads, p.writes, p.line_reads, p.line_writes),
        (500, 500, 500, 500)
    );
    assert_eq!((x.reads, x.writes), (501, 500));
    for (i, k) in keys.iter().enumerate() {
        let want: &[u8] = [b"ab".as_slice(), b"cd", b"efg", b"h"][i % 4];
        assert_eq!(e.get(k).unwrap().as_deref(), Some(want), "key {i}");
    }
    assert_eq!(e.get(&missing).unwrap(), None);
    assert_eq!(e.report().counts.kv_bytes, 250 * (6 + 6 + 7 + 5));
    e.check_invariants();
}

#[test]
fn replacing_an_inline_value_down_a_chain_reads_what_a_get_reads_and_writes_once() {
    // A tiny index, so most keys sit in chained buckets. A lone same-length PUT is rewritten
    // in place wherever the key is: it must read the buckets a GET of that key reads (main
    // bucket, then the chain down to the key) and write one line, and store the value.
    let mut e = engine(16, 0.01, 51);
    let keys: Vec<[u8; 4]> = (0..300_000u32).map(|i| i.to_le_bytes()).collect();
    for k in &keys {
        e.put(k, b"vv").unwrap();
    }
    assert!(e.counts().chained_buckets > 1000, "{:?}", e.counts());
    let mut deep = 0;
    for (i, k) in keys.iter().enumerate().step_by(37) {
        e.reset_stats();
        assert_eq!(e.get(k).unwrap().as_deref(), Some(&b"vv"[..]));
        let g = *e.report().stats.kind(OpKind::Get);
        e.reset_stats();
        let v = [b'a' + (i % 26) as u8, b'z'];
        e.put(k, &v).unwrap();
        let p = *e.report().stats.kind(OpKind::Put);
        assert_eq!((p.reads, p.line_reads), (g.reads, g.line_reads), "key {i}");
        assert_eq!((p.writes, p.line_writes), (1, 1), "key {i}");
        assert_eq!(e.get(k).unwrap().as_deref(), Some(&v[..]), "key {i}");
        deep += usize::from(g.reads > 1);
    }
    assert!(deep > 100, "only {deep} keys below a main bucket");
    e.check_invariants();
}

#[test]
fn redis_style_string_operations() {
    for mode in [ExecMode::Forward, ExecMode::Stall] {
        let mut e = engine(8, 0.5, 51);
        e.set_mode(mode);
        let one = 1i64.to_le_bytes();
        let big = 100i64.to_le_bytes();
        let half = 0.5f64.to_le_bytes();
        let mut out = Results::default();
        e.execute(
            &[
                Op::incr_by(b"n", &one),
                Op::incr_by(b"n", &big),
                Op::get(b"n"),
                Op::append(b"s", b"hello"),
                Op::append(b"s", b" world"),
                Op::get(b"s"),
                Op::incr_by(b"s", &one),
                Op::incr_by_float(b"f", &half),
                Op::incr_by_float(b"f", &half),
            ],
            &mut out,
        );
        assert_eq!(out.data(0), b"1");
        assert_eq!(out.data(1), b"101");
        assert_eq!(out.data(2), b"101");
        assert_eq!(out.data(3), &5u64.to_le_bytes());
        assert_eq!(out.data(4), &11u64.to_le_bytes());
        assert_eq!(out.data(5), b"hello world");
        assert_eq!(out.status(6), Status::Error(OpError::NotAnInteger));
        assert_eq!(out.data(8), b"1");
        // Appending past value_len_max fails and keeps the value.
        let chunk = vec![b'x'; 40 << 10];
        let mut out = Results::default();
        e.execute(
            &[
                Op::append(b"a", &chunk),
                Op::append(b"a", &chunk),
                Op::get(b"a"),
            ],
            &mut out,
        );
        assert_eq!(out.status(0), Status::Ok);
        assert_eq!(
            out.status(1),
            Status::Error(OpError::ValueTooLarge {
                len: 80 << 10,
                max: 64 << 10
            }),
            "{mode:?}"
        );
        assert_eq!(out.data(2).len(), 40 << 10);
        e.check_invariants();
    }
}

#[test]
fn the_wide_build_runs_where_the_cpu_has_it_and_can_be_turned_off() {
    #[cfg(target_arch = "x86_64")]
    let cpu = std::arch::is_x86_feature_detected!("avx2")
        && std::arch::is_x86_feature_detected!("bmi1")
        && std::arch::is_x86_feature_detected!("bmi2")
        && std::arch::is_x86_feature_detected!("lzcnt")
        && std::arch::is_x86_feature_detected!("popcnt");
    #[cfg(not(target_arch = "x86_64"))]
    let cpu = false;
    let mut e = engine(8, 0.5, 51);
    assert_eq!(e.wide_code(), cpu);
    // Both builds store and find the same things (the model tests compare them at length).
    for wide in [true, false] {
        e.set_wide_code(wide);
        assert_eq!(e.wide_code(), wide && cpu);
        let k = format!("key-{wide}");
        e.put(k.as_bytes(), b"value").unwrap();
        assert_eq!(e.get(k.as_bytes()).unwrap().as_deref(), Some(&b"value"[..]));
    }
    assert_eq!(e.get(b"key-true").unwrap().as_deref(), Some(&b"value"[..]));
    e.check_invariants();
}

/// The empty key (Redis allows it) on every road of the pipeline: a window of GETs only, one of
/// GETs and PUTs, one with other operations (the reservation station, lone leaders and a
/// group), with the key inline-eligible sizes around it, in tables with and without records,
/// inline key-values or chains. It is always a record: an inline entry is found by its key's
/// last byte, which the empty key does not have.
#[test]
fn the_empty_key_is_a_key_on_every_road() {
    for (threshold, ratio) in [(51, 0.5), (0, 0.5), (51, 0.001)] {
        let mut e = engine(8, ratio, threshold);
        let mut out = Results::default();
        // Missing, in a table of plain inline keys only (no records: the GET fast paths).
        e.put(b"a", b"1").unwrap();
        e.execute(&[Op::get(b""), Op::get(b"a"), Op::get(b"")], &mut out);
        assert_eq!(out.status(0), Status::NotFound);
        assert_eq!(out.status(2), Status::NotFound);
        // Stored by a window of GETs and PUTs, read back by a window of GETs.
        e.execute(
            &[Op::put(b"", b"v0"), Op::get(b""), Op::put(b"b", b"2")],
            &mut out,
        );
        assert_eq!((out.status(1), out.data(1)), (Status::Ok, &b"v0"[..]));
        e.execute(&[Op::get(b"a"), Op::get(b"")], &mut out);
        assert_eq!((out.status(1), out.data(1)), (Status::Ok, &b"v0"[..]));
        assert_eq!(e.counts().inline_keys, if threshold > 0 { 2 } else { 0 });
        // The station: a group on the empty key (append, incr), a lone GET beside writes.
        let one = 1i64.to_le_bytes();
        e.execute(
            &[
                Op::put(b"", b"7"),
                Op::incr_by(b"", &one),
                Op::append(b"", b"0"),
                Op::get(b"a"),
                Op::delete(b"b"),
            ],
            &mut out,
        );
        assert_eq!(out.status(2), Status::Ok);
        assert_eq!(e.get(b"").unwrap().as_deref(), Some(&b"80"[..]));
        // An empty value under the empty key, then a deadline, then gone.
        e.put(b"", b"").unwrap();
        assert_eq!(e.get(b"").unwrap().as_deref(), Some(&b""[..]));
        e.set_now(1_000_000);
        let args = directkv_engine::expire_args(1_010_000, 0);
        e.execute(&[Op::expire(b"", &args), Op::ttl(b"")], &mut out);
        assert_eq!(out.status(0), Status::Ok);
        assert_eq!(e.counts().expiring_keys, 1);
        let mut keys = Vec::new();
        e.for_each(|k, _| keys.push(k.to_vec()));
        keys.sort();
        assert_eq!(keys, vec![b"".to_vec(), b"a".to_vec()]);
        assert_eq!(e.delete(b""), Ok(true));
        assert_eq!(e.get(b"").unwrap(), None);
        assert_eq!(e.delete(b""), Ok(false));
        e.check_invariants();
    }
}

/// After a server's log failed it runs only the reads of a batch (`execute_reads_only`): the
/// writes are answered with the error and change nothing, the reads see the store, a memcached
/// get without a touch counts as a read, one with a touch as a write.
#[test]
fn execute_reads_only_answers_writes_with_the_error_and_changes_nothing() {
    let mut e = engine(16, 0.5, 64);
    let mut r = Results::default();
    e.execute(&[Op::put(b"k1", b"v1")], &mut r);
    let err = OpError::NotLogged("test");
    let touch = 0u64.to_le_bytes();
    let ops = [
        Op::get(b"k1"),
        Op::put(b"k2", b"v2"),
        Op::delete(b"k1"),
        Op::mc_get(b"k1", b"", b""),
        Op::mc_get(b"k1", &touch, b""),
        Op::get(b"k1"),
    ];
    e.execute_reads_only(&ops, &mut r, err);
    assert_eq!(r.len(), ops.len());
    assert_eq!((r.status(0), r.data(0)), (Status::Ok, &b"v1"[..]));
    assert_eq!(r.status(1), Status::Error(err));
    assert_eq!(r.status(2), Status::Error(err));
    assert_eq!(r.status(3), Status::Ok, "a plain memcached get is a read");
    assert_eq!(
        r.status(4),
        Status::Error(err),
        "a get with a touch is a write"
    );
    assert_eq!((r.status(5), r.data(5)), (Status::Ok, &b"v1"[..]));
    e.execute(&[Op::get(b"k2"), Op::get(b"k1")], &mut r);
    assert_eq!(
        r.status(0),
        Status::NotFound,
        "the refused put stored nothing"
    );
    assert_eq!(
        r.status(1),
        Status::Ok,
        "the refused delete removed nothing"
    );
    // refuse_writes turns the writes of a batch that ran into the error.
    let ops = [Op::get(b"k1"), Op::put(b"k3", b"v3")];
    e.execute(&ops, &mut r);
    r.refuse_writes(&ops, err);
    assert_eq!(r.status(0), Status::Ok);
    assert_eq!(r.status(1), Status::Error(err));
}
