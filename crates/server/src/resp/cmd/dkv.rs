//! directkv's own operations over RESP. Values are little-endian vectors of fixed-width
//! elements; numbers travel as decimal text:
//!
//! ```text
//! DKV.VSET     key elem n1 n2 ...        store a vector                     -> OK
//! DKV.VGET     key elem                  read a vector                      -> [n1, n2, ...]
//! DKV.UPDATE   key func elem delta       scalar v = func(v, delta)          -> original number
//! DKV.UPDATEV  key func elem delta       every element e = func(e, delta)   -> original vector
//! DKV.UPDATEVV key func elem d1 d2 ...   element-wise with a vector         -> original vector
//! DKV.REDUCE   key func elem sigma       fold into a scalar                 -> number
//! DKV.FILTER   key func elem param       elements where func(e, param)      -> [numbers]
//! DKV.CAS      key expected new          compare-and-swap of the raw value  -> [1|0, current]
//! DKV.HELP                               these lines                        -> [lines]
//! ```
//! `count` and `count_nonzero` take and return a u64 count whatever `elem` is. A `DKV.` name
//! that is none of these is an unknown command, as in Redis.
//! `func` is a built-in name (add, sub, min, ..., sum, count, gt, ...) or a numeric function id;
//! `elem` is u8 u16 u32 u64 i8 i16 i32 i64 f32 f64.

use directkv_engine::ops::{builtin_by_name, ElemType, FunctionKind};
use directkv_engine::Op;
use directkv_proto::resp::Version;

use super::{arity, error, Planned};
use crate::resp::reply::{Pending, Recipe};

pub fn plan(p: &mut Pending, v: Version, name: &[u8], a: &[&[u8]]) -> Option<Planned> {
    if !name.starts_with(b"dkv.") {
        return None;
    }
    let n = a.len();
    Some(match (&name[4..], n) {
        (b"vset", 3..) => with_elem(p, v, a[2], |p, elem| {
            let bytes = encode_numbers(elem, &a[3..])?;
            let op = p.op(&Op::put(a[1], &bytes));
            p.recipes.push(Recipe::Ok { op });
            Ok(())
        }),
        (b"vget", 3) => with_elem(p, v, a[2], |p, elem| {
            let op = p.op(&Op::get(a[1]));
            p.recipes.push(Recipe::Numbers { op, elem });
            Ok(())
        }),
        (b"update", 5..) => func_op(p, v, "update", a),
        (b"updatev", 5..) => func_op(p, v, "updatev", a),
        (b"updatevv", 5..) => func_op(p, v, "updatevv", a),
        (b"reduce", 5..) => func_op(p, v, "reduce", a),
        (b"filter", 5..) => func_op(p, v, "filter", a),
        (b"cas", 4) => {
            let op = p.op(&Op::cas(a[1], a[2], a[3]));
            p.recipes.push(Recipe::Cas { op });
            Planned::Queued
        }
        (b"help", 1) => {
            super::help_lines(p, v, HELP);
            Planned::Queued
        }
        (b"vset" | b"vget" | b"update" | b"updatev" | b"updatevv" | b"reduce" | b"filter", _)
        | (b"cas" | b"help", _) => arity(p, v, name),
        // Not one of ours: the caller answers Redis's unknown-command text.
        _ => return None,
    })
}

/// DKV.HELP's lines, as Redis 7 writes a HELP reply (an array of status lines).
const HELP: &[&str] = &[
    "DKV.<command> key ... Commands are:",
    "DKV.VSET key elem n1 [n2 ...]",
    "    Store a vector of little-endian elements of type elem (u8 u16 u32 u64 i8 i16 i32 i64 f32 f64).",
    "DKV.VGET key elem",
    "    Read a value as a vector of elem.",
    "DKV.UPDATE key func elem delta",
    "    Scalar v = func(v, delta) (add sub mul min max and or xor swap sadd ssub ...); returns the original.",
    "DKV.UPDATEV key func elem delta",
    "    Every element e = func(e, delta); returns the original vector.",
    "DKV.UPDATEVV key func elem d1 [d2 ...]",
    "    Element-wise with a vector of the same length; returns the original vector.",
    "DKV.REDUCE key func elem sigma",
    "    Fold into a number from sigma (sum min max; count and count_nonzero start from a u64 count).",
    "DKV.FILTER key func elem param",
    "    The elements e where func(e, param) holds (eq ne lt le gt ge nonzero).",
    "DKV.CAS key expected new",
    "    Compare-and-swap of the raw value; returns [1|0, current].",
    "DKV.HELP",
    "    Print this help.",
];

fn with_elem(
    p: &mut Pending,
    v: Version,
    e: &[u8],
    f: impl FnOnce(&mut Pending, ElemType) -> Result<(), String>,
) -> Planned {
    let Some(elem) = std::str::from_utf8(e).ok().and_then(ElemType::parse) else {
        return error(
            p,
            v,
            "ERR unknown element type (u8 u16 u32 u64 i8 i16 i32 i64 f32 f64)",
        );
    };
    match f(p, elem) {
        Ok(()) => Planned::Queued,
        Err(msg) => error(p, v, &msg),
    }
}

fn func_op(p: &mut Pending, v: Version, which: &'static str, a: &[&[u8]]) -> Planned {
    let kind = match which {
        "reduce" => FunctionKind::Reduce,
        "filter" => FunctionKind::Filter,
        _ => FunctionKind::Update,
    };
    let fname = String::from_utf8_lossy(a[2]).to_ascii_lowercase();
    let Some(func) = builtin_by_name(kind, &fname).or_else(|| fname.parse::<u16>().ok()) else {
        return error(p, v, &format!("ERR unknown function '{fname}'"));
    };
    let counts = which == "reduce" && matches!(fname.as_str(), "count" | "count_nonzero");
    with_elem(p, v, a[3], |p, elem| {
        // A count's start and result are a number of elements, a u64 whatever the elements
        // are (SPEC section 1: reduce folds into a scalar; a count of u8 elements can pass 255).
        let arg = if counts {
            encode_numbers(ElemType::U64, &a[4..]).map_err(|_| {
                format!(
                    "ERR the start of count and count_nonzero is a u64 (a count), not '{}'",
                    String::from_utf8_lossy(a[4])
                )
            })?
        } else {
            encode_numbers(elem, &a[4..])?
        };
        let operand_width = if counts { ElemType::U64 } else { elem }.width();
        if which != "updatevv" && arg.len() != operand_width * if fname == "cas" { 2 } else { 1 } {
            return Err(format!(
                "ERR DKV.{} takes one operand",
                which.to_ascii_uppercase()
            ));
        }
        let op = match which {
            "update" => Op::update_s2s(a[1], func, elem, &arg),
            "updatev" => Op::update_s2v(a[1], func, elem, &arg),
            "updatevv" => Op::update_v2v(a[1], func, elem, &arg),
            "reduce" => Op::reduce(a[1], func, elem, &arg),
            _ => Op::filter(a[1], func, elem, &arg),
        };
        let op = p.op(&op);
        let recipe_elem = if counts { ElemType::U64 } else { elem };
        p.recipes.push(match which {
            "update" | "reduce" => Recipe::Number {
                op,
                elem: recipe_elem,
            },
            _ => Recipe::Numbers { op, elem },
        });
        Ok(())
    })
}

/// Decimal texts to little-endian elements.
pub fn encode_numbers(elem: ElemType, nums: &[&[u8]]) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(nums.len() * elem.width());
    for t in nums {
        let t = std::str::from_utf8(t).map_err(|_| "ERR value is not a number".to_string())?;
        let bad = || format!("ERR '{t}' is not a valid {}", elem.name());
        macro_rules! put {
            ($ty:ty) => {
                out.extend_from_slice(&t.parse::<$ty>().map_err(|_| bad())?.to_le_bytes())
            };
        }
        match elem {
            ElemType::U8 => put!(u8),
            ElemType::U16 => put!(u16),
            ElemType::U32 => put!(u32),
            ElemType::U64 => put!(u64),
            ElemType::I8 => put!(i8),
            ElemType::I16 => put!(i16),
            ElemType::I32 => put!(i32),
            ElemType::I64 => put!(i64),
            ElemType::F32 => put!(f32),
            ElemType::F64 => put!(f64),
        }
    }
    Ok(out)
}

/// One little-endian element as decimal text.
pub fn decode_number(elem: ElemType, b: &[u8]) -> String {
    macro_rules! get {
        ($ty:ty) => {
            <$ty>::from_le_bytes(b.try_into().expect("element width")).to_string()
        };
    }
    match elem {
        ElemType::U8 => get!(u8),
        ElemType::U16 => get!(u16),
        ElemType::U32 => get!(u32),
        ElemType::U64 => get!(u64),
        ElemType::I8 => get!(i8),
        ElemType::I16 => get!(i16),
        ElemType::I32 => get!(i32),
        ElemType::I64 => get!(i64),
        ElemType::F32 => get!(f32),
        ElemType::F64 => get!(f64),
    }
}
