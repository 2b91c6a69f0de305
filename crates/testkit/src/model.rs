//! The reference model: SPEC section 1 applied one operation at a time to a `HashMap`, written
//! without the engine's code. The engine's property tests (`crates/engine/tests/it/model.rs`) and
//! the `engine_model` fuzz target both compare the engine with it.
//!
//! It covers unsigned element types, update functions add/sub/xor/max/swap, reduce sum/count and
//! filter eq/gt, and the Redis string operations APPEND, INCRBY (`IncrBy`, an i64 LE operand on
//! a decimal text) and INCRBYFLOAT (`IncrByFloat`, an f64 LE operand on a float text), whose
//! number parsing is written here from Redis' rules (string2ll, strtold without hex or long
//! double range); any other valid function id panics here, so the generators never produce one.
//! Errors (limits, unknown function, wrong kind, widths, length mismatch) are predicted in the
//! engine's documented order: key limits, value limit, function kind, the stored value's width,
//! then the operand's.

use std::collections::HashMap;

use directkv_engine::ops::{
    FN_ADD, FN_COUNT, FN_EQ, FN_GT, FN_MAX, FN_SUB, FN_SUM, FN_SWAP, FN_XOR,
};
use directkv_engine::{ElemType, Op, OpError, OpKind, Status};

pub type Store = HashMap<Vec<u8>, Vec<u8>>;

/// An operation that owns its bytes.
#[derive(Clone)]
pub struct OwnedOp {
    pub kind: OpKind,
    pub key: Vec<u8>,
    pub arg: Vec<u8>,
    pub arg2: Vec<u8>,
    pub func: u16,
    pub elem: ElemType,
    pub no_return: bool,
}

impl OwnedOp {
    pub fn new(kind: OpKind, key: impl Into<Vec<u8>>) -> OwnedOp {
        OwnedOp {
            kind,
            key: key.into(),
            arg: vec![],
            arg2: vec![],
            func: 0,
            elem: ElemType::U8,
            no_return: false,
        }
    }

    /// Sets the function, element type and operand.
    pub fn with(mut self, func: u16, elem: ElemType, arg: Vec<u8>) -> OwnedOp {
        self.func = func;
        self.elem = elem;
        self.arg = arg;
        self
    }

    pub fn as_op(&self) -> Op<'_> {
        Op {
            kind: self.kind,
            key: &self.key,
            arg: &self.arg,
            arg2: &self.arg2,
            func: self.func,
            elem: self.elem,
            no_return: self.no_return,
        }
    }
}

/// Short bytes in full, long ones as length and prefix, so failure messages stay readable.
#[derive(PartialEq)]
pub struct Bytes<'a>(pub &'a [u8]);

impl std::fmt::Debug for Bytes<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0.len() <= 16 {
            write!(f, "{:?}", self.0)
        } else {
            write!(f, "{} bytes {:?}..", self.0.len(), &self.0[..8])
        }
    }
}

impl std::fmt::Debug for OwnedOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}(key {:?}", self.kind, Bytes(&self.key))?;
        if !matches!(self.kind, OpKind::Get | OpKind::Delete) {
            write!(f, ", arg {:?}", Bytes(&self.arg))?;
        }
        if self.kind == OpKind::Cas {
            write!(f, ", arg2 {:?}", Bytes(&self.arg2))?;
        }
        if self.kind as u8 >= OpKind::UpdateS2S as u8 {
            write!(f, ", func {}, {:?}", self.func, self.elem)?;
        }
        if self.no_return {
            write!(f, ", no_return")?;
        }
        write!(f, ")")
    }
}

/// Texts the counters meet: integers at i64's edges, floats, and texts Redis refuses as either.
/// The engine's model test and the `engine_model` fuzz target put them as values, so that
/// INCRBY and INCRBYFLOAT meet every case the model's parsers tell apart.
pub const NUM_TEXTS: &[&str] = &[
    "0",
    "1",
    "-1",
    "42",
    "9223372036854775807",
    "-9223372036854775808",
    "9223372036854775808",
    "1.5",
    "-0.25",
    "1e3",
    "inf",
    "nan",
    "01",
    "-0",
    "+1",
    " 1",
    "",
    "abc",
];

/// The limits the model checks, as the engine under test is configured.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub key_len_max: usize,
    pub value_len_max: usize,
}

/// What an operation does to the stored value.
#[derive(Clone, Debug, PartialEq)]
pub enum Eff {
    Keep,
    Set(Vec<u8>),
    Delete,
}

#[derive(Debug)]
pub struct Outcome {
    pub status: Status,
    pub reply: Vec<u8>,
    pub eff: Eff,
}

type Applied = Result<(Status, Vec<u8>, Eff), OpError>;

/// The outcome of `op` on a key whose value is `cur` (None = missing).
pub fn apply(cur: Option<&[u8]>, op: &OwnedOp, limits: Limits) -> Outcome {
    match apply_inner(cur, op, limits) {
        Ok((status, mut reply, eff)) => {
            if op.no_return {
                reply.clear();
            }
            Outcome { status, reply, eff }
        }
        Err(e) => Outcome {
            status: Status::Error(e),
            reply: vec![],
            eff: Eff::Keep,
        },
    }
}

fn apply_inner(cur: Option<&[u8]>, op: &OwnedOp, limits: Limits) -> Applied {
    // The empty key is a key like any other, as in Redis.
    if op.key.len() > limits.key_len_max {
        return Err(OpError::KeyTooLong {
            len: op.key.len(),
            max: limits.key_len_max,
        });
    }
    let value_len_max = limits.value_len_max;
    let value_len = match op.kind {
        OpKind::Put | OpKind::PutNx | OpKind::PutXx => op.arg.len(),
        OpKind::Cas => op.arg2.len(),
        _ => 0,
    };
    if value_len > value_len_max {
        return Err(OpError::ValueTooLarge {
            len: value_len,
            max: value_len_max,
        });
    }
    let set = || Eff::Set(op.arg.clone());
    Ok(match (op.kind, cur) {
        (OpKind::Get, Some(v)) => (Status::Ok, v.to_vec(), Eff::Keep),
        (OpKind::Put, _) | (OpKind::PutNx, None) | (OpKind::PutXx, Some(_)) => {
            (Status::Ok, vec![], set())
        }
        (OpKind::PutNx | OpKind::PutXx, _) => (Status::NotStored, vec![], Eff::Keep),
        (OpKind::Delete, Some(_)) => (Status::Ok, vec![], Eff::Delete),
        (OpKind::Append | OpKind::IncrBy | OpKind::IncrByFloat, _) => {
            string_op(cur, op, value_len_max)?
        }
        (OpKind::SetRange | OpKind::SetBit, _) => range_op(cur, op, value_len_max)?,
        (OpKind::Cas, _) => {
            let current = cur.unwrap_or(&[]).to_vec();
            if cur.map_or(op.arg.is_empty(), |v| v == op.arg) {
                (Status::Ok, current, Eff::Set(op.arg2.clone()))
            } else {
                (Status::CasMismatch, current, Eff::Keep)
            }
        }
        (OpKind::UpdateS2S, _) => {
            resolve(op.func, Kind::Update)?;
            let w = width(op.elem);
            scalar(op.arg.len(), w)?;
            let c = cur.map_or_else(|| vec![0; w], <[u8]>::to_vec);
            scalar(c.len(), w)?;
            let new = map(op.func, w, &c, &op.arg);
            (Status::Ok, c, Eff::Set(new))
        }
        (_, None) => (Status::NotFound, vec![], Eff::Keep),
        (_, Some(c)) => vector(c, op)?,
    })
}

fn vector(c: &[u8], op: &OwnedOp) -> Applied {
    let w = width(op.elem);
    let want = match op.kind {
        OpKind::Reduce => Kind::Reduce,
        OpKind::Filter => Kind::Filter,
        _ => Kind::Update,
    };
    resolve(op.func, want)?;
    elems(c.len(), w)?;
    Ok(match op.kind {
        OpKind::UpdateS2V => {
            scalar(op.arg.len(), w)?;
            (
                Status::Ok,
                c.to_vec(),
                Eff::Set(map(op.func, w, c, &op.arg)),
            )
        }
        OpKind::UpdateV2V => {
            elems(op.arg.len(), w)?;
            if op.arg.len() != c.len() {
                return Err(OpError::LengthMismatch {
                    operand: op.arg.len(),
                    value: c.len(),
                });
            }
            (
                Status::Ok,
                c.to_vec(),
                Eff::Set(map(op.func, w, c, &op.arg)),
            )
        }
        OpKind::Reduce if op.func == FN_COUNT => {
            scalar(op.arg.len(), 8)?;
            let n = load(&op.arg).wrapping_add((c.len() / w) as u64);
            (Status::Ok, n.to_le_bytes().to_vec(), Eff::Keep)
        }
        OpKind::Reduce => {
            assert_eq!(
                op.func, FN_SUM,
                "the model has no reduce function {}",
                op.func
            );
            scalar(op.arg.len(), w)?;
            let sum = c
                .chunks_exact(w)
                .fold(load(&op.arg), |acc, e| acc.wrapping_add(load(e)) & mask(w));
            (Status::Ok, sum.to_le_bytes()[..w].to_vec(), Eff::Keep)
        }
        OpKind::Filter => {
            scalar(op.arg.len(), w)?;
            let p = load(&op.arg);
            let keep = |e: u64| match op.func {
                FN_EQ => e == p,
                FN_GT => e > p,
                f => panic!("the model has no filter function {f}"),
            };
            let kept = c
                .chunks_exact(w)
                .filter(|e| keep(load(e)))
                .flatten()
                .copied()
                .collect();
            (Status::Ok, kept, Eff::Keep)
        }
        k => unreachable!("{k:?} is not a vector operation"),
    })
}

/// SETRANGE and SETBIT (`arg`: the offset, u64 LE): the length the result needs is checked
/// against `value_len_max` first (the engine refuses before building it), then the arguments;
/// the value grows with zero bytes. SETRANGE of nothing changes nothing and replies the current
/// length (0 for a missing key, which stays missing); SETBIT replies the old bit.
fn range_op(cur: Option<&[u8]>, op: &OwnedOp, value_len_max: usize) -> Applied {
    let Ok(off) = <[u8; 8]>::try_from(&op.arg[..]).map(u64::from_le_bytes) else {
        return Err(OpError::WrongWidth {
            len: op.arg.len(),
            width: 8,
        });
    };
    let setrange = op.kind == OpKind::SetRange;
    let need = if setrange {
        if op.arg2.is_empty() {
            0
        } else {
            off.saturating_add(op.arg2.len() as u64)
        }
    } else {
        off / 8 + 1
    };
    let need = usize::try_from(need).unwrap_or(usize::MAX);
    if need > value_len_max {
        return Err(OpError::ValueTooLarge {
            len: need,
            max: value_len_max,
        });
    }
    let mut v = cur.unwrap_or(&[]).to_vec();
    if setrange {
        if op.arg2.is_empty() {
            return Ok((
                Status::Ok,
                (v.len() as u64).to_le_bytes().to_vec(),
                Eff::Keep,
            ));
        }
        let off = off as usize;
        if v.len() < off + op.arg2.len() {
            v.resize(off + op.arg2.len(), 0);
        }
        v[off..off + op.arg2.len()].copy_from_slice(&op.arg2);
        return Ok((
            Status::Ok,
            (v.len() as u64).to_le_bytes().to_vec(),
            Eff::Set(v),
        ));
    }
    if op.arg2.len() != 1 || op.arg2[0] > 1 {
        return Err(OpError::UserFunction(
            "SETBIT's bit must be one byte, 0 or 1",
        ));
    }
    let byte = (off / 8) as usize;
    if v.len() <= byte {
        v.resize(byte + 1, 0);
    }
    let mask = 0x80u8 >> (off % 8);
    let old = u8::from(v[byte] & mask != 0);
    if op.arg2[0] == 1 {
        v[byte] |= mask;
    } else {
        v[byte] &= !mask;
    }
    Ok((Status::Ok, vec![old], Eff::Set(v)))
}

/// APPEND, INCRBY and INCRBYFLOAT: a missing key is "" (APPEND) or 0; the new value is
/// stored and replied (APPEND replies its length as u64 LE). Only APPEND can make a value longer
/// than `value_len_max`, which fails and stores nothing.
fn string_op(cur: Option<&[u8]>, op: &OwnedOp, value_len_max: usize) -> Applied {
    let new = match op.kind {
        OpKind::Append => {
            let mut v = cur.unwrap_or(&[]).to_vec();
            v.extend_from_slice(&op.arg);
            if v.len() > value_len_max {
                return Err(OpError::ValueTooLarge {
                    len: v.len(),
                    max: value_len_max,
                });
            }
            let len = (v.len() as u64).to_le_bytes().to_vec();
            return Ok((Status::Ok, len, Eff::Set(v)));
        }
        OpKind::IncrBy => {
            scalar(op.arg.len(), 8)?;
            let d = i64::from_le_bytes(op.arg[..].try_into().expect("8 bytes"));
            let v = match cur {
                None => 0,
                Some(c) => redis_i64(c).ok_or(OpError::NotAnInteger)?,
            };
            v.checked_add(d).ok_or(OpError::Overflow)?.to_string()
        }
        _ => {
            scalar(op.arg.len(), 8)?;
            let d = f64::from_le_bytes(op.arg[..].try_into().expect("8 bytes"));
            let v = match cur {
                None => 0.0,
                Some(c) => redis_f64(c).ok_or(OpError::NotAFloat)?,
            };
            let sum = v + d;
            if !sum.is_finite() {
                return Err(OpError::NanOrInfinity);
            }
            // Rust's shortest text that reads back to the same double, as SPEC's INCRBYFLOAT.
            sum.to_string()
        }
    };
    Ok((
        Status::Ok,
        new.clone().into_bytes(),
        Eff::Set(new.into_bytes()),
    ))
}

/// A decimal i64 as Redis' string2ll reads it: optional '-', digits without a leading zero
/// (a lone "0" is fine, "-0" is not), no '+', no spaces, within i64.
pub fn redis_i64(t: &[u8]) -> Option<i64> {
    let s = std::str::from_utf8(t).ok()?;
    let digits = s.strip_prefix('-').unwrap_or(s);
    let canonical = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'))
        && s != "-0";
    if !canonical {
        return None;
    }
    s.parse().ok()
}

/// A float as Redis' INCRBYFLOAT reads a stored value or an operand (strtold over the whole
/// text): no leading or trailing space, at most 5119 bytes, NaN refused, and a numeral too large
/// for an f64 refused, but the words "inf"/"infinity" read as infinities.
pub fn redis_f64(t: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(t).ok()?;
    if s.is_empty() || s.len() > 5119 || s.trim() != s {
        return None;
    }
    let v: f64 = s.parse().ok()?;
    let word = !s.bytes().any(|b| b.is_ascii_digit());
    (v.is_finite() || (v.is_infinite() && word)).then_some(v)
}

#[derive(PartialEq)]
enum Kind {
    Update,
    Reduce,
    Filter,
}

fn resolve(func: u16, want: Kind) -> Result<(), OpError> {
    let kind = match func {
        0..=12 => Kind::Update,
        32..=36 => Kind::Reduce,
        64..=70 => Kind::Filter,
        _ => return Err(OpError::UnknownFunction(func)),
    };
    if kind != want {
        return Err(OpError::WrongFunctionKind(func));
    }
    Ok(())
}

fn width(e: ElemType) -> usize {
    match e {
        ElemType::U8 => 1,
        ElemType::U16 => 2,
        ElemType::U32 => 4,
        ElemType::U64 => 8,
        other => panic!("the model covers unsigned element types only, not {other:?}"),
    }
}

fn elems(len: usize, width: usize) -> Result<(), OpError> {
    if !len.is_multiple_of(width) {
        return Err(OpError::WrongWidth { len, width });
    }
    Ok(())
}

fn scalar(len: usize, width: usize) -> Result<(), OpError> {
    if len != width {
        return Err(OpError::WrongWidth { len, width });
    }
    Ok(())
}

fn load(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a[..b.len()].copy_from_slice(b);
    u64::from_le_bytes(a)
}

fn mask(w: usize) -> u64 {
    if w == 8 {
        u64::MAX
    } else {
        (1u64 << (8 * w)) - 1
    }
}

/// Element-wise update; `deltas` is one element (broadcast) or one per element.
fn map(func: u16, w: usize, cur: &[u8], deltas: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(cur.len());
    for (i, c) in cur.chunks_exact(w).enumerate() {
        let d = load(if deltas.len() == w {
            deltas
        } else {
            &deltas[i * w..(i + 1) * w]
        });
        let a = load(c);
        let r = match func {
            FN_ADD => a.wrapping_add(d),
            FN_SUB => a.wrapping_sub(d),
            FN_XOR => a ^ d,
            FN_MAX => a.max(d),
            FN_SWAP => d,
            f => panic!("the model has no update function {f}"),
        };
        out.extend_from_slice(&(r & mask(w)).to_le_bytes()[..w]);
    }
    out
}

/// Applies an effect to the store.
pub fn store(m: &mut Store, key: &[u8], eff: Eff) {
    match eff {
        Eff::Keep => {}
        Eff::Set(v) => {
            m.insert(key.to_vec(), v);
        }
        Eff::Delete => {
            m.remove(key);
        }
    }
}

/// The model with key expiry (issue 20 item 1): a value and its deadline per key, and the
/// batch's `now`. Redis 7's rules, written here without the engine's code: a key whose deadline
/// is at or before `now` is absent for every operation; a plain put (and PUT NX/XX) clears the
/// deadline, `PutExpire` with `KEEP_DEADLINE` keeps it, every other write keeps it; a deadline
/// set at or before `now` deletes the key.
pub type TimedStore = HashMap<Vec<u8>, (Vec<u8>, u64)>;

/// The outcome of `op` at time `now` on the key's entry in `store`, applied to it.
pub fn apply_timed(store: &mut TimedStore, op: &OwnedOp, now: u64, limits: Limits) -> Outcome {
    use directkv_engine::{cond, parse_expire_args, KEEP_DEADLINE, NO_DEADLINE};
    let live = |d: u64| d == NO_DEADLINE || d > now;
    let entry = store.get(&op.key).filter(|(_, d)| live(*d)).cloned();
    if entry.is_none() {
        store.remove(&op.key);
    }
    let cur = entry.as_ref().map(|(v, _)| &v[..]);
    let dl = entry.as_ref().map_or(NO_DEADLINE, |e| e.1);
    let bad = Outcome {
        status: Status::Error(OpError::BadDeadline),
        reply: vec![],
        eff: Eff::Keep,
    };
    let out = |status, reply: Vec<u8>| Outcome {
        status,
        reply: if op.no_return { vec![] } else { reply },
        eff: Eff::Keep,
    };
    let key_ok = !op.key.is_empty() && op.key.len() <= limits.key_len_max;
    // (outcome, the deadline to store with a Set or a kept value)
    let (o, new_dl) = match op.kind {
        OpKind::PutExpire | OpKind::Expire | OpKind::Persist | OpKind::Ttl | OpKind::GetEx
            if key_ok =>
        {
            match op.kind {
                OpKind::PutExpire => {
                    let Some((d, c)) = parse_expire_args(&op.arg2) else {
                        return bad;
                    };
                    if op.arg.len() > limits.value_len_max {
                        return Outcome {
                            status: Status::Error(OpError::ValueTooLarge {
                                len: op.arg.len(),
                                max: limits.value_len_max,
                            }),
                            ..bad
                        };
                    }
                    if (c & cond::NX != 0 && cur.is_some()) || (c & cond::XX != 0 && cur.is_none())
                    {
                        (out(Status::NotStored, vec![]), dl)
                    } else {
                        let d = match d {
                            KEEP_DEADLINE if cur.is_some() => dl,
                            KEEP_DEADLINE => NO_DEADLINE,
                            d => d,
                        };
                        let eff = if !live(d) {
                            Eff::Delete
                        } else {
                            Eff::Set(op.arg.clone())
                        };
                        (
                            Outcome {
                                eff,
                                ..out(Status::Ok, vec![])
                            },
                            d,
                        )
                    }
                }
                OpKind::Expire => {
                    let Some((d, c)) = parse_expire_args(&op.arg) else {
                        return bad;
                    };
                    match cur {
                        None => (out(Status::NotFound, vec![]), dl),
                        Some(v) => {
                            let has = dl != NO_DEADLINE;
                            let nx = c & cond::NX != 0;
                            let xx = c & cond::XX != 0;
                            let gt = c & cond::GT != 0;
                            let lt = c & cond::LT != 0;
                            let ok = if has {
                                !nx && (!gt || d > dl) && (!lt || d < dl)
                            } else {
                                !xx && !gt
                            };
                            if !ok {
                                (out(Status::NotStored, vec![]), dl)
                            } else if !live(d) {
                                (
                                    Outcome {
                                        eff: Eff::Delete,
                                        ..out(Status::Ok, vec![])
                                    },
                                    dl,
                                )
                            } else {
                                (
                                    Outcome {
                                        eff: Eff::Set(v.to_vec()),
                                        ..out(Status::Ok, vec![])
                                    },
                                    d,
                                )
                            }
                        }
                    }
                }
                OpKind::Persist => match cur {
                    None => (out(Status::NotFound, vec![]), dl),
                    Some(_) if dl == NO_DEADLINE => (out(Status::NotStored, vec![]), dl),
                    Some(_) => (out(Status::Ok, vec![]), NO_DEADLINE),
                },
                OpKind::Ttl => match cur {
                    None => (out(Status::NotFound, vec![]), dl),
                    Some(_) => {
                        let left = if dl == NO_DEADLINE { 0 } else { dl - now };
                        let mut r = dl.to_le_bytes().to_vec();
                        r.extend_from_slice(&left.to_le_bytes());
                        (out(Status::Ok, r), dl)
                    }
                },
                _ => {
                    if !(op.arg.is_empty() || op.arg.len() == 8) {
                        return bad;
                    }
                    match cur {
                        None => (out(Status::NotFound, vec![]), dl),
                        Some(v) if op.arg.is_empty() => (out(Status::Ok, v.to_vec()), dl),
                        Some(v) => {
                            let d = u64::from_le_bytes(op.arg[..8].try_into().expect("8"));
                            if !live(d) {
                                (
                                    Outcome {
                                        eff: Eff::Delete,
                                        ..out(Status::Ok, v.to_vec())
                                    },
                                    dl,
                                )
                            } else {
                                (out(Status::Ok, v.to_vec()), d)
                            }
                        }
                    }
                }
            }
        }
        // A put that stores clears the deadline (Redis's SET); one that stores nothing (NX on a
        // live key, XX on a missing one) leaves the key, deadline included, as it was.
        OpKind::Put | OpKind::PutNx | OpKind::PutXx => {
            let o = apply(cur, op, limits);
            let d = if matches!(o.eff, Eff::Set(_)) {
                NO_DEADLINE
            } else {
                dl
            };
            (o, d)
        }
        _ => (apply(cur, op, limits), dl),
    };
    match &o.eff {
        Eff::Keep => {
            if let Some((v, _)) = entry {
                store.insert(op.key.clone(), (v, new_dl));
            }
        }
        Eff::Set(v) => {
            store.insert(op.key.clone(), (v.clone(), new_dl));
        }
        Eff::Delete => {
            store.remove(&op.key);
        }
    }
    o
}
