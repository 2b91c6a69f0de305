//! SETRANGE and SETBIT as engine operations (`ops/range.rs`): alone and inside same-key groups
//! the pipeline runs with one lookup and a forwarded value, the limit checked before the value
//! is built, and all-or-nothing batches that include them.

use directkv_engine::{Engine, EngineConfig, Op, OpError, Results, Status};

fn engine(value_len_max: usize) -> Engine {
    let mut cfg = EngineConfig::with_memory(8 << 20);
    cfg.value_len_max = value_len_max;
    Engine::new(cfg).unwrap()
}

fn le(n: u64) -> [u8; 8] {
    n.to_le_bytes()
}

fn len(r: &Results, i: usize) -> u64 {
    u64::from_le_bytes(r.data(i).try_into().expect("8 bytes"))
}

#[test]
fn a_group_of_range_and_bit_writes_on_one_key_sees_each_other() {
    let mut e = engine(1 << 20);
    let (o0, o5, o1000) = (le(0), le(5), le(1000));
    let ops = [
        Op::put(b"k", b"abc"),
        Op::set_range(b"k", &o5, b"xy"),
        Op::set_bit(b"k", &o0, &[0]),
        Op::get(b"k"),
        Op::append(b"k", b"z"),
        Op::set_range(b"k", &o1000, b""),
        Op::set_range(b"missing", &o5, b""),
        Op::set_bit(b"k", &o1000, &[1]),
        Op::get(b"k"),
        Op::get(b"missing"),
    ];
    let mut r = Results::default();
    e.execute(&ops, &mut r);
    assert_eq!(len(&r, 1), 7);
    assert_eq!(r.data(2), [0]);
    assert_eq!(r.data(3), b"abc\0\0xy");
    // 'a' (0x61) has its first bit clear: SETBIT 0 0 changed nothing.
    assert_eq!(len(&r, 5), 8);
    assert_eq!(len(&r, 6), 0);
    assert_eq!(r.data(7), [0]);
    let v = r.data(8);
    assert_eq!(v.len(), 126);
    assert_eq!(&v[..8], b"abc\0\0xyz");
    assert_eq!(v[125], 0x80);
    assert_eq!(r.status(9), Status::NotFound);
}

#[test]
fn writes_past_the_value_limit_are_refused_before_the_value_is_built() {
    let mut e = engine(100);
    e.put(b"k", b"v").unwrap();
    let (o99, o100, big) = (le(99), le(100), le(u64::MAX));
    let (bit799, bit800) = (le(799), le(800));
    let ops = [
        Op::set_range(b"k", &o99, b"x"),
        Op::set_range(b"k", &o100, b"x"),
        Op::set_range(b"k", &big, b"x"),
        Op::set_bit(b"n", &bit800, &[1]),
        Op::set_bit(b"n", &bit799, &[1]),
        Op::set_bit(b"n", &big, &[1]),
    ];
    let mut r = Results::default();
    e.execute(&ops, &mut r);
    assert_eq!(len(&r, 0), 100);
    for i in [1, 2, 3, 5] {
        assert!(
            matches!(r.status(i), Status::Error(OpError::ValueTooLarge { .. })),
            "{i}: {:?}",
            r.status(i)
        );
    }
    assert_eq!(r.data(4), [0]);
    assert_eq!(e.get(b"k").unwrap().unwrap().len(), 100);
    assert_eq!(e.get(b"n").unwrap().unwrap().len(), 100);
}

#[test]
fn malformed_arguments_are_errors_not_panics() {
    let mut e = engine(1 << 20);
    let o1 = le(1);
    let ops = [
        Op::set_bit(b"k", &o1, &[2]),
        Op::set_bit(b"k", &o1, &[]),
        Op {
            arg: b"short",
            ..Op::set_range(b"k", &o1, b"x")
        },
    ];
    let mut r = Results::default();
    e.execute(&ops, &mut r);
    for i in 0..3 {
        assert!(matches!(r.status(i), Status::Error(_)), "{i}");
    }
    assert_eq!(e.get(b"k").unwrap(), None);
}

#[test]
fn atomic_batches_check_range_writes() {
    let mut e = engine(100);
    let (o5, o200) = (le(5), le(200));
    let mut r = Results::default();
    let ok = [Op::put(b"a", b"1"), Op::set_range(b"b", &o5, b"x")];
    assert_eq!(e.execute_atomic(&ok, &mut r), Ok(()));
    assert_eq!(e.get(b"b").unwrap().unwrap(), b"\0\0\0\0\0x");
    let refused = [Op::put(b"c", b"1"), Op::set_range(b"b", &o200, b"x")];
    assert!(matches!(
        e.execute_atomic(&refused, &mut r),
        Err(OpError::ValueTooLarge { .. })
    ));
    assert_eq!(e.get(b"c").unwrap(), None);
}
