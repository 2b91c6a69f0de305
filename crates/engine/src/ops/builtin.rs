//! The five value operations that apply any function, built-in (by the ids of `ids.rs`) or user.
//!
//! What: `update_scalar2scalar`, `update_scalar2vector`, `update_vector2vector`, `reduce`
//! and `filter`, which compute a new value or a result from a value's bytes. They do not touch
//! the store: the caller reads the value, calls one of these with a reusable `out` buffer, and
//! writes `out` back (or sends it) only on `Ok`.
//!
//! ```text
//!   public fn:  resolve id (built-in or registry) -> check widths -> match elem -> match func
//!                                                                 -> kernel loop over elements
//! ```
//!
//! Goals: every length is checked before any work (a value or operand that is not a whole number
//! of elements is `WrongWidth`, never truncated); one dispatch per call into a monomorphized loop
//! (see `kernel.rs`); no allocation on success beyond `out` growing to the result's length, so a
//! caller that reserves `out` once never allocates.
//! Non-goals: atomicity and storage (the engine's job), user functions with two-element deltas.

use super::elem::{ElemType, ELEM_WIDTH_MAX};
use super::ids::*;
use super::kernel::{self, Elem, Operand};
use super::registry::{FunctionRegistry, UserFunction};
use crate::error::OpError;

/// Width in bytes of the sigma and result of `count` and `count_nonzero`.
pub const COUNT_WIDTH: usize = size_of::<u64>();

/// A function id resolved to what will run it.
enum Resolved<'r> {
    Builtin(u16),
    User(&'r dyn UserFunction),
}

fn resolve(reg: &FunctionRegistry, func: u16, want: FunctionKind) -> Result<Resolved<'_>, OpError> {
    let (kind, resolved) = if func >= USER_FUNCTION_ID_MIN {
        let f = reg.get(func).ok_or(OpError::UnknownFunction(func))?;
        (f.kind(), Resolved::User(f.as_ref()))
    } else {
        let kind = builtin_kind(func).ok_or(OpError::UnknownFunction(func))?;
        (kind, Resolved::Builtin(func))
    };
    if kind != want {
        return Err(OpError::WrongFunctionKind(func));
    }
    Ok(resolved)
}

/// `len` must be a whole number of `width`-byte elements (zero elements allowed).
fn check_elems(len: usize, width: usize) -> Result<(), OpError> {
    if !len.is_multiple_of(width) {
        return Err(OpError::WrongWidth { len, width });
    }
    Ok(())
}

/// `len` must be exactly one `width`-byte scalar.
fn check_scalar(len: usize, width: usize) -> Result<(), OpError> {
    if len != width {
        return Err(OpError::WrongWidth { len, width });
    }
    Ok(())
}

/// Run `$body` with `$T` bound to the Rust type of element type `$elem`.
macro_rules! with_elem_type {
    ($elem:expr, $T:ident => $body:expr) => {
        match $elem {
            ElemType::U8 => {
                type $T = u8;
                $body
            }
            ElemType::U16 => {
                type $T = u16;
                $body
            }
            ElemType::U32 => {
                type $T = u32;
                $body
            }
            ElemType::U64 => {
                type $T = u64;
                $body
            }
            ElemType::I8 => {
                type $T = i8;
                $body
            }
            ElemType::I16 => {
                type $T = i16;
                $body
            }
            ElemType::I32 => {
                type $T = i32;
                $body
            }
            ElemType::I64 => {
                type $T = i64;
                $body
            }
            ElemType::F32 => {
                type $T = f32;
                $body
            }
            ElemType::F64 => {
                type $T = f64;
                $body
            }
        }
    };
}

/// `v = fn(v, delta)` for a scalar. `cur` None means the key is missing: start from zero of the
/// element's width. `delta` must be exactly `elem.width()` bytes (for `FN_CAS`: `2 * width`,
/// `expected ++ new`). `cur`, when Some, must be exactly `width` bytes.
pub fn update_scalar2scalar(
    reg: &FunctionRegistry,
    func: u16,
    elem: ElemType,
    cur: Option<&[u8]>,
    delta: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), OpError> {
    const ZERO: [u8; ELEM_WIDTH_MAX] = [0; ELEM_WIDTH_MAX];
    let resolved = resolve(reg, func, FunctionKind::Update)?;
    let width = elem.width();
    check_scalar(delta.len(), delta_elems(func) * width)?;
    let cur = cur.unwrap_or(&ZERO[..width]);
    check_scalar(cur.len(), width)?;
    update(resolved, elem, cur, Operand::Broadcast(delta), out)
}

/// Every element `e` of `cur` (length a multiple of width, may be 0) becomes `fn(e, delta)`;
/// `delta` is one element (two for cas: `expected ++ new`).
pub fn update_scalar2vector(
    reg: &FunctionRegistry,
    func: u16,
    elem: ElemType,
    cur: &[u8],
    delta: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), OpError> {
    let resolved = resolve(reg, func, FunctionKind::Update)?;
    let width = elem.width();
    check_elems(cur.len(), width)?;
    check_scalar(delta.len(), delta_elems(func) * width)?;
    update(resolved, elem, cur, Operand::Broadcast(delta), out)
}

/// Element-wise with a vector of deltas of the same length as `cur` (`LengthMismatch` otherwise).
/// For `FN_CAS`, `deltas` is the expected vector followed by the new vector (twice the length).
pub fn update_vector2vector(
    reg: &FunctionRegistry,
    func: u16,
    elem: ElemType,
    cur: &[u8],
    deltas: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), OpError> {
    let resolved = resolve(reg, func, FunctionKind::Update)?;
    let width = elem.width();
    check_elems(cur.len(), width)?;
    check_elems(deltas.len(), width)?;
    if deltas.len() != delta_elems(func) * cur.len() {
        return Err(OpError::LengthMismatch {
            operand: deltas.len(),
            value: cur.len(),
        });
    }
    update(resolved, elem, cur, Operand::PerElem(deltas), out)
}

/// The part of every update after validation: `cur` and `operand` have checked lengths.
fn update(
    resolved: Resolved<'_>,
    elem: ElemType,
    cur: &[u8],
    operand: Operand<'_>,
    out: &mut Vec<u8>,
) -> Result<(), OpError> {
    match resolved {
        Resolved::Builtin(func) => {
            with_elem_type!(elem, T => update_builtin::<T>(func, elem, cur, operand, out))
        }
        Resolved::User(f) => update_user(f, elem, cur, operand, out),
    }
}

fn update_builtin<T: Elem>(
    func: u16,
    elem: ElemType,
    cur: &[u8],
    operand: Operand<'_>,
    out: &mut Vec<u8>,
) -> Result<(), OpError> {
    match func {
        FN_ADD => kernel::map(cur, operand, out, T::op_add),
        FN_SUB => kernel::map(cur, operand, out, T::op_sub),
        FN_MUL => kernel::map(cur, operand, out, T::op_mul),
        FN_MIN => kernel::map(cur, operand, out, T::op_min),
        FN_MAX => kernel::map(cur, operand, out, T::op_max),
        FN_AND | FN_OR | FN_XOR if elem.is_float() => {
            return Err(OpError::UnsupportedType {
                func,
                elem: elem.name(),
            });
        }
        FN_AND => kernel::map(cur, operand, out, T::op_and),
        FN_OR => kernel::map(cur, operand, out, T::op_or),
        FN_XOR => kernel::map(cur, operand, out, T::op_xor),
        FN_SWAP => kernel::map(cur, operand, out, |_, delta: T| delta),
        FN_CAS => kernel::cas::<T>(cur, operand, out),
        FN_SAT_ADD => kernel::map(cur, operand, out, T::op_sat_add),
        FN_SAT_SUB => kernel::map(cur, operand, out, T::op_sat_sub),
        FN_DIV => {
            let (Operand::Broadcast(divisors) | Operand::PerElem(divisors)) = operand;
            if kernel::any_int_zero::<T>(divisors) {
                return Err(OpError::DivisionByZero);
            }
            kernel::map(cur, operand, out, T::op_div);
        }
        // `resolve` only lets update ids through; anything else is a bug, reported, not a panic.
        _ => return Err(OpError::WrongFunctionKind(func)),
    }
    Ok(())
}

fn update_user(
    f: &dyn UserFunction,
    elem: ElemType,
    cur: &[u8],
    operand: Operand<'_>,
    out: &mut Vec<u8>,
) -> Result<(), OpError> {
    let width = elem.width();
    out.clear();
    out.resize(cur.len(), 0);
    let elems = out.chunks_exact_mut(width).zip(cur.chunks_exact(width));
    match operand {
        Operand::Broadcast(delta) => {
            for (o, c) in elems {
                f.update(elem, c, delta, o)?;
            }
        }
        Operand::PerElem(deltas) => {
            for ((o, c), d) in elems.zip(deltas.chunks_exact(width)) {
                f.update(elem, c, d, o)?;
            }
        }
    }
    Ok(())
}

/// Fold the vector into a scalar starting from `sigma`. sum/min/max: sigma and result are one
/// element wide (wrapping sum for ints). count/count_nonzero: sigma and result are u64 LE
/// (8 bytes) regardless of `elem`; result = sigma + count (wrapping). A user reduce folds into a
/// copy of `sigma` of whatever length it was sent.
pub fn reduce(
    reg: &FunctionRegistry,
    func: u16,
    elem: ElemType,
    cur: &[u8],
    sigma: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), OpError> {
    let resolved = resolve(reg, func, FunctionKind::Reduce)?;
    let width = elem.width();
    check_elems(cur.len(), width)?;
    match resolved {
        Resolved::Builtin(func @ (FN_COUNT | FN_COUNT_NONZERO)) => {
            check_scalar(sigma.len(), COUNT_WIDTH)?;
            let sigma = u64::from_le_bytes(sigma.try_into().expect("checked to be 8 bytes"));
            let count = if func == FN_COUNT {
                (cur.len() / width) as u64
            } else {
                with_elem_type!(elem, T => kernel::count_nonzero::<T>(cur))
            };
            out.clear();
            out.extend_from_slice(&sigma.wrapping_add(count).to_le_bytes());
            Ok(())
        }
        Resolved::Builtin(func) => {
            check_scalar(sigma.len(), width)?;
            with_elem_type!(elem, T => reduce_builtin::<T>(func, cur, sigma, out))
        }
        Resolved::User(f) => {
            // The accumulator is `out` itself, starting as sigma; its width is the function's
            // business (a product of u8 may well want a u64 accumulator).
            out.clear();
            out.extend_from_slice(sigma);
            for e in cur.chunks_exact(width) {
                f.reduce(elem, out, e)?;
            }
            Ok(())
        }
    }
}

fn reduce_builtin<T: Elem>(
    func: u16,
    cur: &[u8],
    sigma: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), OpError> {
    let sigma = T::load(sigma);
    let result = match func {
        FN_SUM => kernel::fold(cur, sigma, T::op_add),
        FN_RMIN => kernel::fold(cur, sigma, T::op_min),
        FN_RMAX => kernel::fold(cur, sigma, T::op_max),
        _ => return Err(OpError::WrongFunctionKind(func)),
    };
    out.clear();
    out.resize(T::WIDTH, 0);
    result.store(out);
    Ok(())
}

/// Append to `out` the elements `e` (raw bytes, in order) for which `fn(e, param)` holds.
/// `param` is one element; nonzero ignores it but it must still be 0 or `width` bytes.
/// `out` is cleared first. A user filter receives `param` as sent, unchecked.
pub fn filter(
    reg: &FunctionRegistry,
    func: u16,
    elem: ElemType,
    cur: &[u8],
    param: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), OpError> {
    let resolved = resolve(reg, func, FunctionKind::Filter)?;
    let width = elem.width();
    check_elems(cur.len(), width)?;
    out.clear();
    match resolved {
        Resolved::Builtin(FN_NONZERO) => {
            if !param.is_empty() {
                check_scalar(param.len(), width)?;
            }
            with_elem_type!(elem, T => kernel::select(cur, out, |e: T| e != T::ZERO));
            Ok(())
        }
        Resolved::Builtin(func) => {
            check_scalar(param.len(), width)?;
            with_elem_type!(elem, T => filter_builtin::<T>(func, cur, param, out))
        }
        Resolved::User(f) => {
            for e in cur.chunks_exact(width) {
                if f.filter(elem, e, param)? {
                    out.extend_from_slice(e);
                }
            }
            Ok(())
        }
    }
}

/// Comparisons follow IEEE 754 for floats: NaN matches only `ne`, and 0.0 equals -0.0.
fn filter_builtin<T: Elem>(
    func: u16,
    cur: &[u8],
    param: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), OpError> {
    let p = T::load(param);
    match func {
        FN_EQ => kernel::select(cur, out, |e: T| e == p),
        FN_NE => kernel::select(cur, out, |e: T| e != p),
        FN_LT => kernel::select(cur, out, |e: T| e < p),
        FN_LE => kernel::select(cur, out, |e: T| e <= p),
        FN_GT => kernel::select(cur, out, |e: T| e > p),
        FN_GE => kernel::select(cur, out, |e: T| e >= p),
        _ => return Err(OpError::WrongFunctionKind(func)),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// Encode small integers as elements of `elem` (converted to float for f32/f64).
    fn enc(elem: ElemType, vals: &[i64]) -> Vec<u8> {
        let mut bytes = Vec::new();
        for &v in vals {
            match elem {
                ElemType::U8 => bytes.extend((v as u8).to_le_bytes()),
                ElemType::U16 => bytes.extend((v as u16).to_le_bytes()),
                ElemType::U32 => bytes.extend((v as u32).to_le_bytes()),
                ElemType::U64 => bytes.extend((v as u64).to_le_bytes()),
                ElemType::I8 => bytes.extend((v as i8).to_le_bytes()),
                ElemType::I16 => bytes.extend((v as i16).to_le_bytes()),
                ElemType::I32 => bytes.extend((v as i32).to_le_bytes()),
                ElemType::I64 => bytes.extend(v.to_le_bytes()),
                ElemType::F32 => bytes.extend((v as f32).to_le_bytes()),
                ElemType::F64 => bytes.extend((v as f64).to_le_bytes()),
            }
        }
        bytes
    }

    /// Decode elements of `elem` as i64 (the inverse of `enc` for the values the tests use).
    fn dec(elem: ElemType, bytes: &[u8]) -> Vec<i64> {
        assert_eq!(bytes.len() % elem.width(), 0);
        bytes
            .chunks_exact(elem.width())
            .map(|c| match elem {
                ElemType::U8 => i64::from(c[0]),
                ElemType::U16 => i64::from(u16::from_le_bytes(c.try_into().unwrap())),
                ElemType::U32 => i64::from(u32::from_le_bytes(c.try_into().unwrap())),
                ElemType::U64 => u64::from_le_bytes(c.try_into().unwrap()) as i64,
                ElemType::I8 => i64::from(c[0] as i8),
                ElemType::I16 => i64::from(i16::from_le_bytes(c.try_into().unwrap())),
                ElemType::I32 => i64::from(i32::from_le_bytes(c.try_into().unwrap())),
                ElemType::I64 => i64::from_le_bytes(c.try_into().unwrap()),
                ElemType::F32 => f32::from_le_bytes(c.try_into().unwrap()) as i64,
                ElemType::F64 => f64::from_le_bytes(c.try_into().unwrap()) as i64,
            })
            .collect()
    }

    fn f32s(vals: &[f32]) -> Vec<u8> {
        vals.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    fn f64s(vals: &[f64]) -> Vec<u8> {
        vals.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    fn s2s(
        func: u16,
        elem: ElemType,
        cur: Option<&[u8]>,
        delta: &[u8],
    ) -> Result<Vec<u8>, OpError> {
        let mut out = Vec::new();
        update_scalar2scalar(&FunctionRegistry::new(), func, elem, cur, delta, &mut out)
            .map(|()| out)
    }

    fn s2v(func: u16, elem: ElemType, cur: &[u8], delta: &[u8]) -> Result<Vec<u8>, OpError> {
        let mut out = Vec::new();
        update_scalar2vector(&FunctionRegistry::new(), func, elem, cur, delta, &mut out)
            .map(|()| out)
    }

    fn v2v(func: u16, elem: ElemType, cur: &[u8], deltas: &[u8]) -> Result<Vec<u8>, OpError> {
        let mut out = Vec::new();
        update_vector2vector(&FunctionRegistry::new(), func, elem, cur, deltas, &mut out)
            .map(|()| out)
    }

    fn red(func: u16, elem: ElemType, cur: &[u8], sigma: &[u8]) -> Result<Vec<u8>, OpError> {
        let mut out = Vec::new();
        reduce(&FunctionRegistry::new(), func, elem, cur, sigma, &mut out).map(|()| out)
    }

    fn filt(func: u16, elem: ElemType, cur: &[u8], param: &[u8]) -> Result<Vec<u8>, OpError> {
        let mut out = Vec::new();
        filter(&FunctionRegistry::new(), func, elem, cur, param, &mut out).map(|()| out)
    }

    /// (func, 6 op 3, [6, 12, 3] op 3, [6, 12, 3] op [3, 5, 1]); the values fit every type.
    const UPDATE_TABLE: [(u16, i64, [i64; 3], [i64; 3]); 12] = [
        (FN_ADD, 9, [9, 15, 6], [9, 17, 4]),
        (FN_SUB, 3, [3, 9, 0], [3, 7, 2]),
        (FN_MUL, 18, [18, 36, 9], [18, 60, 3]),
        (FN_MIN, 3, [3, 3, 3], [3, 5, 1]),
        (FN_MAX, 6, [6, 12, 3], [6, 12, 3]),
        (FN_AND, 2, [2, 0, 3], [2, 4, 1]),
        (FN_OR, 7, [7, 15, 3], [7, 13, 3]),
        (FN_XOR, 5, [5, 15, 0], [5, 9, 2]),
        (FN_SWAP, 3, [3, 3, 3], [3, 5, 1]),
        (FN_SAT_ADD, 9, [9, 15, 6], [9, 17, 4]),
        (FN_SAT_SUB, 3, [3, 9, 0], [3, 7, 2]),
        (FN_DIV, 2, [2, 4, 1], [2, 2, 3]),
    ];

    #[test]
    fn every_update_function_on_every_type() {
        for elem in ElemType::ALL {
            let (six, three) = (enc(elem, &[6]), enc(elem, &[3]));
            let (cur, deltas) = (enc(elem, &[6, 12, 3]), enc(elem, &[3, 5, 1]));
            for (func, scalar, broadcast, elementwise) in UPDATE_TABLE {
                let ctx = format!("{} {}", builtin_name(func).unwrap(), elem.name());
                if elem.is_float() && matches!(func, FN_AND | FN_OR | FN_XOR) {
                    let unsupported = Err(OpError::UnsupportedType {
                        func,
                        elem: elem.name(),
                    });
                    assert_eq!(s2s(func, elem, Some(&six), &three), unsupported, "{ctx}");
                    assert_eq!(s2v(func, elem, &cur, &three), unsupported, "{ctx}");
                    assert_eq!(v2v(func, elem, &cur, &deltas), unsupported, "{ctx}");
                    continue;
                }
                let got = s2s(func, elem, Some(&six), &three).unwrap();
                assert_eq!(dec(elem, &got), [scalar], "{ctx}");
                let got = s2v(func, elem, &cur, &three).unwrap();
                assert_eq!(dec(elem, &got), broadcast, "{ctx}");
                let got = v2v(func, elem, &cur, &deltas).unwrap();
                assert_eq!(dec(elem, &got), elementwise, "{ctx}");
            }
        }
    }

    #[test]
    fn missing_key_starts_from_zero() {
        for elem in ElemType::ALL {
            let got = s2s(FN_ADD, elem, None, &enc(elem, &[5])).unwrap();
            assert_eq!(dec(elem, &got), [5], "{}", elem.name());
        }
        assert_eq!(s2s(FN_SUB, ElemType::U8, None, &[5]).unwrap(), [251]);
        assert_eq!(
            s2s(FN_SUB, ElemType::I16, None, &5i16.to_le_bytes()).unwrap(),
            (-5i16).to_le_bytes()
        );
    }

    #[test]
    fn empty_vectors_stay_empty() {
        for elem in ElemType::ALL {
            let one = enc(elem, &[1]);
            assert_eq!(s2v(FN_ADD, elem, &[], &one).unwrap(), Vec::<u8>::new());
            assert_eq!(v2v(FN_ADD, elem, &[], &[]).unwrap(), Vec::<u8>::new());
            assert_eq!(filt(FN_EQ, elem, &[], &one).unwrap(), Vec::<u8>::new());
            assert_eq!(red(FN_SUM, elem, &[], &one).unwrap(), one);
        }
    }

    #[test]
    fn integer_arithmetic_wraps() {
        assert_eq!(s2s(FN_ADD, ElemType::U8, Some(&[250]), &[10]).unwrap(), [4]);
        assert_eq!(
            s2s(FN_ADD, ElemType::I8, Some(&[127]), &[1]).unwrap(),
            [0x80]
        );
        assert_eq!(
            s2s(FN_SUB, ElemType::U32, Some(&[0; 4]), &1u32.to_le_bytes()).unwrap(),
            u32::MAX.to_le_bytes()
        );
        let max = u64::MAX.to_le_bytes();
        assert_eq!(
            s2s(FN_MUL, ElemType::U64, Some(&max), &2u64.to_le_bytes()).unwrap(),
            (u64::MAX - 1).to_le_bytes()
        );
        let min = i32::MIN.to_le_bytes();
        assert_eq!(
            s2s(FN_SUB, ElemType::I32, Some(&min), &1i32.to_le_bytes()).unwrap(),
            i32::MAX.to_le_bytes()
        );
        let min = i64::MIN.to_le_bytes();
        assert_eq!(
            s2s(FN_DIV, ElemType::I64, Some(&min), &(-1i64).to_le_bytes()).unwrap(),
            min
        );
        assert_eq!(
            s2s(
                FN_MUL,
                ElemType::U16,
                Some(&300u16.to_le_bytes()),
                &300u16.to_le_bytes()
            )
            .unwrap(),
            24464u16.to_le_bytes()
        );
    }

    #[test]
    fn saturating_bounds() {
        assert_eq!(
            s2s(FN_SAT_ADD, ElemType::U8, Some(&[250]), &[10]).unwrap(),
            [255]
        );
        assert_eq!(
            s2s(FN_SAT_SUB, ElemType::U8, Some(&[3]), &[5]).unwrap(),
            [0]
        );
        assert_eq!(
            s2s(FN_SAT_ADD, ElemType::I8, Some(&[120]), &[10]).unwrap(),
            [127]
        );
        assert_eq!(
            s2s(
                FN_SAT_SUB,
                ElemType::I8,
                Some(&(-120i8).to_le_bytes()),
                &[10]
            )
            .unwrap(),
            (-128i8).to_le_bytes()
        );
        let got = s2v(
            FN_SAT_ADD,
            ElemType::U64,
            &[u64::MAX.to_le_bytes(), 5u64.to_le_bytes()].concat(),
            &u64::MAX.to_le_bytes(),
        );
        assert_eq!(got.unwrap(), [u64::MAX.to_le_bytes(); 2].concat());
        let got = s2s(
            FN_SAT_SUB,
            ElemType::I64,
            Some(&i64::MIN.to_le_bytes()),
            &1i64.to_le_bytes(),
        );
        assert_eq!(got.unwrap(), i64::MIN.to_le_bytes());
        let got = v2v(
            FN_SAT_ADD,
            ElemType::I16,
            &enc(ElemType::I16, &[32000, -32000]),
            &enc(ElemType::I16, &[1000, -1000]),
        );
        assert_eq!(dec(ElemType::I16, &got.unwrap()), [32767, -32768]);
        // Floats have no saturation: sat_add and sat_sub are plain IEEE add and sub.
        assert_eq!(
            s2s(
                FN_SAT_ADD,
                ElemType::F64,
                Some(&f64s(&[1.5])),
                &f64s(&[2.25])
            )
            .unwrap(),
            f64s(&[3.75])
        );
        assert_eq!(
            s2s(
                FN_SAT_SUB,
                ElemType::F32,
                Some(&f32s(&[1.5])),
                &f32s(&[2.25])
            )
            .unwrap(),
            f32s(&[-0.75])
        );
    }

    #[test]
    fn signed_min_max_compare_as_signed() {
        let i8s = |v: &[i64]| enc(ElemType::I8, v);
        assert_eq!(
            s2s(FN_MIN, ElemType::I8, Some(&i8s(&[-5])), &i8s(&[3])).unwrap(),
            i8s(&[-5])
        );
        assert_eq!(
            s2s(FN_MAX, ElemType::I8, Some(&i8s(&[-128])), &i8s(&[127])).unwrap(),
            i8s(&[127])
        );
        assert_eq!(
            s2v(FN_MAX, ElemType::I8, &i8s(&[-128, -1, 5]), &i8s(&[-2])).unwrap(),
            i8s(&[-2, -1, 5])
        );
        // The same byte 0xfb is 251 as u8, so min picks the other operand.
        assert_eq!(s2s(FN_MIN, ElemType::U8, Some(&[0xfb]), &[3]).unwrap(), [3]);
        let i64s = |v: &[i64]| enc(ElemType::I64, v);
        assert_eq!(
            v2v(
                FN_MIN,
                ElemType::I64,
                &i64s(&[i64::MIN, 7]),
                &i64s(&[0, -7])
            )
            .unwrap(),
            i64s(&[i64::MIN, -7])
        );
    }

    #[test]
    fn float_min_max_and_division() {
        let got = s2v(
            FN_MIN,
            ElemType::F64,
            &f64s(&[f64::NAN, 5.0]),
            &f64s(&[1.0]),
        )
        .unwrap();
        assert_eq!(got, f64s(&[1.0, 1.0]));
        let got = s2s(
            FN_MAX,
            ElemType::F64,
            Some(&f64s(&[1.0])),
            &f64s(&[f64::NAN]),
        )
        .unwrap();
        assert_eq!(got, f64s(&[1.0]));
        let got = v2v(
            FN_MIN,
            ElemType::F32,
            &f32s(&[-0.5, 9.0]),
            &f32s(&[2.5, -9.5]),
        )
        .unwrap();
        assert_eq!(got, f32s(&[-0.5, -9.5]));
        let got = v2v(
            FN_DIV,
            ElemType::F32,
            &f32s(&[1.0, -1.0, 3.0]),
            &f32s(&[0.0, 0.0, 2.0]),
        )
        .unwrap();
        assert_eq!(got, f32s(&[f32::INFINITY, f32::NEG_INFINITY, 1.5]));
        let got = s2s(FN_DIV, ElemType::F64, Some(&f64s(&[0.0])), &f64s(&[0.0])).unwrap();
        assert!(f64::from_le_bytes(got.try_into().unwrap()).is_nan());
    }

    #[test]
    fn integer_division_by_zero_is_an_error() {
        for elem in ElemType::ALL.into_iter().filter(|e| !e.is_float()) {
            let zero = enc(elem, &[0]);
            let err = Err(OpError::DivisionByZero);
            assert_eq!(
                s2s(FN_DIV, elem, Some(&enc(elem, &[7])), &zero),
                err,
                "{}",
                elem.name()
            );
            assert_eq!(s2s(FN_DIV, elem, None, &zero), err, "{}", elem.name());
            assert_eq!(
                s2v(FN_DIV, elem, &enc(elem, &[7, 8]), &zero),
                err,
                "{}",
                elem.name()
            );
            assert_eq!(s2v(FN_DIV, elem, &[], &zero), err, "{}", elem.name());
            assert_eq!(
                v2v(FN_DIV, elem, &enc(elem, &[7, 8, 9]), &enc(elem, &[1, 0, 3])),
                err,
                "{}",
                elem.name()
            );
        }
    }

    #[test]
    fn wrong_width_is_an_error() {
        let ww = |len, width| Err(OpError::WrongWidth { len, width });
        // Scalars must be exactly one element (cas: two).
        assert_eq!(
            s2s(FN_ADD, ElemType::U32, Some(&[0; 4]), &[1, 0, 0]),
            ww(3, 4)
        );
        assert_eq!(
            s2s(FN_ADD, ElemType::U32, Some(&[0; 8]), &[1, 0, 0, 0]),
            ww(8, 4)
        );
        assert_eq!(
            s2s(FN_ADD, ElemType::U32, Some(&[0; 3]), &[1, 0, 0, 0]),
            ww(3, 4)
        );
        assert_eq!(s2s(FN_CAS, ElemType::U16, Some(&[0; 2]), &[0; 2]), ww(2, 4));
        assert_eq!(s2v(FN_ADD, ElemType::U64, &[0; 16], &[0; 4]), ww(4, 8));
        assert_eq!(s2v(FN_CAS, ElemType::U64, &[0; 16], &[0; 8]), ww(8, 16));
        // Vectors must be whole elements.
        assert_eq!(s2v(FN_ADD, ElemType::U32, &[0; 7], &[0; 4]), ww(7, 4));
        assert_eq!(v2v(FN_ADD, ElemType::I16, &[0; 5], &[0; 5]), ww(5, 2));
        assert_eq!(v2v(FN_ADD, ElemType::I16, &[0; 4], &[0; 3]), ww(3, 2));
        assert_eq!(red(FN_SUM, ElemType::F64, &[0; 12], &[0; 8]), ww(12, 8));
        assert_eq!(red(FN_SUM, ElemType::F64, &[0; 16], &[0; 4]), ww(4, 8));
        assert_eq!(red(FN_COUNT, ElemType::U8, &[0; 3], &[0; 4]), ww(4, 8));
        assert_eq!(
            red(FN_COUNT_NONZERO, ElemType::U32, &[0; 6], &[0; 8]),
            ww(6, 4)
        );
        assert_eq!(filt(FN_EQ, ElemType::I32, &[0; 10], &[0; 4]), ww(10, 4));
        assert_eq!(filt(FN_EQ, ElemType::I32, &[0; 8], &[]), ww(0, 4));
        assert_eq!(filt(FN_NONZERO, ElemType::I32, &[0; 8], &[0; 2]), ww(2, 4));
    }

    #[test]
    fn length_mismatch_is_an_error() {
        let cur = enc(ElemType::U32, &[1, 2, 3]);
        let mismatch = |operand, value| Err(OpError::LengthMismatch { operand, value });
        assert_eq!(
            v2v(FN_ADD, ElemType::U32, &cur, &enc(ElemType::U32, &[1, 2])),
            mismatch(8, 12)
        );
        assert_eq!(
            v2v(
                FN_ADD,
                ElemType::U32,
                &cur,
                &enc(ElemType::U32, &[1, 2, 3, 4])
            ),
            mismatch(16, 12)
        );
        assert_eq!(
            v2v(FN_ADD, ElemType::U32, &[], &enc(ElemType::U32, &[1])),
            mismatch(4, 0)
        );
        // cas takes expected ++ new, twice the value's length.
        assert_eq!(v2v(FN_CAS, ElemType::U32, &cur, &cur), mismatch(12, 12));
    }

    #[test]
    fn scalar_cas_hit_and_miss() {
        let u64s = |v: &[i64]| enc(ElemType::U64, v);
        assert_eq!(
            s2s(FN_CAS, ElemType::U64, Some(&u64s(&[7])), &u64s(&[7, 9])).unwrap(),
            u64s(&[9])
        );
        assert_eq!(
            s2s(FN_CAS, ElemType::U64, Some(&u64s(&[8])), &u64s(&[7, 9])).unwrap(),
            u64s(&[8])
        );
        // A missing key is zero, so cas(0 -> 1) creates it, like a lock acquire.
        assert_eq!(
            s2s(FN_CAS, ElemType::U64, None, &u64s(&[0, 1])).unwrap(),
            u64s(&[1])
        );
        assert_eq!(
            s2s(FN_CAS, ElemType::U64, None, &u64s(&[5, 1])).unwrap(),
            u64s(&[0])
        );
        // Floats compare bit patterns: NaN can be swapped, -0.0 is not 0.0.
        let nan = f64s(&[f64::NAN]);
        assert_eq!(
            s2s(FN_CAS, ElemType::F64, Some(&nan), &f64s(&[f64::NAN, 2.0])).unwrap(),
            f64s(&[2.0])
        );
        let neg_zero = f32s(&[-0.0]);
        assert_eq!(
            s2s(FN_CAS, ElemType::F32, Some(&neg_zero), &f32s(&[0.0, 2.0])).unwrap(),
            neg_zero
        );
    }

    #[test]
    fn vector_cas() {
        for elem in ElemType::ALL {
            let cur = enc(elem, &[6, 12, 6]);
            let got = s2v(FN_CAS, elem, &cur, &enc(elem, &[6, 9])).unwrap();
            assert_eq!(dec(elem, &got), [9, 12, 9], "{}", elem.name());
            let got = v2v(FN_CAS, elem, &cur, &enc(elem, &[6, 0, 5, 1, 2, 3])).unwrap();
            assert_eq!(dec(elem, &got), [1, 12, 6], "{}", elem.name());
        }
    }

    #[test]
    fn reduce_every_type() {
        for elem in ElemType::ALL {
            let cur = enc(elem, &[4, 1, 0, 7, 2]);
            let name = elem.name();
            assert_eq!(
                dec(elem, &red(FN_SUM, elem, &cur, &enc(elem, &[3])).unwrap()),
                [17],
                "{name}"
            );
            assert_eq!(
                dec(elem, &red(FN_RMIN, elem, &cur, &enc(elem, &[3])).unwrap()),
                [0],
                "{name}"
            );
            assert_eq!(
                dec(elem, &red(FN_RMAX, elem, &cur, &enc(elem, &[3])).unwrap()),
                [7],
                "{name}"
            );
            assert_eq!(
                dec(elem, &red(FN_RMAX, elem, &cur, &enc(elem, &[10])).unwrap()),
                [10],
                "{name}"
            );
            let sigma = 5u64.to_le_bytes();
            assert_eq!(
                red(FN_COUNT, elem, &cur, &sigma).unwrap(),
                10u64.to_le_bytes(),
                "{name}"
            );
            assert_eq!(
                red(FN_COUNT_NONZERO, elem, &cur, &sigma).unwrap(),
                9u64.to_le_bytes(),
                "{name}"
            );
            assert_eq!(red(FN_COUNT, elem, &[], &sigma).unwrap(), sigma, "{name}");
        }
    }

    #[test]
    fn reduce_edge_cases() {
        assert_eq!(red(FN_SUM, ElemType::U8, &[200, 100], &[0]).unwrap(), [44]);
        assert_eq!(
            red(
                FN_SUM,
                ElemType::I8,
                &enc(ElemType::I8, &[-100, -100]),
                &[0]
            )
            .unwrap(),
            [56]
        );
        let i16s = |v: &[i64]| enc(ElemType::I16, v);
        assert_eq!(
            red(FN_RMIN, ElemType::I16, &i16s(&[-3, 5, -300]), &i16s(&[0])).unwrap(),
            i16s(&[-300])
        );
        assert_eq!(
            red(FN_SUM, ElemType::F64, &f64s(&[0.5, 0.25]), &f64s(&[1.0])).unwrap(),
            f64s(&[1.75])
        );
        assert_eq!(
            red(
                FN_RMIN,
                ElemType::F32,
                &f32s(&[f32::NAN, 2.5]),
                &f32s(&[9.0])
            )
            .unwrap(),
            f32s(&[2.5])
        );
        let cur = f64s(&[-0.0, f64::NAN, 1.0, 0.0]);
        assert_eq!(
            red(FN_COUNT_NONZERO, ElemType::F64, &cur, &[0; 8]).unwrap(),
            2u64.to_le_bytes()
        );
        assert_eq!(
            red(FN_COUNT, ElemType::U8, &[1, 2], &u64::MAX.to_le_bytes()).unwrap(),
            1u64.to_le_bytes()
        );
    }

    /// (func, elements of [1, 5, 3, 0, 5] that pass with param 3).
    const FILTER_TABLE: [(u16, &[i64]); 7] = [
        (FN_EQ, &[3]),
        (FN_NE, &[1, 5, 0, 5]),
        (FN_LT, &[1, 0]),
        (FN_LE, &[1, 3, 0]),
        (FN_GT, &[5, 5]),
        (FN_GE, &[5, 3, 5]),
        (FN_NONZERO, &[1, 5, 3, 5]),
    ];

    #[test]
    fn filters_every_type() {
        for elem in ElemType::ALL {
            let cur = enc(elem, &[1, 5, 3, 0, 5]);
            for (func, expected) in FILTER_TABLE {
                let got = filt(func, elem, &cur, &enc(elem, &[3])).unwrap();
                assert_eq!(
                    got,
                    enc(elem, expected),
                    "{} {}",
                    builtin_name(func).unwrap(),
                    elem.name()
                );
            }
            let got = filt(FN_NONZERO, elem, &cur, &[]).unwrap();
            assert_eq!(got, enc(elem, &[1, 5, 3, 5]), "{}", elem.name());
        }
        let i32s = |v: &[i64]| enc(ElemType::I32, v);
        assert_eq!(
            filt(FN_LT, ElemType::I32, &i32s(&[-2, 0, 2]), &i32s(&[0])).unwrap(),
            i32s(&[-2])
        );
        assert_eq!(filt(FN_GT, ElemType::U8, &[0xfe, 1], &[2]).unwrap(), [0xfe]);
    }

    #[test]
    fn float_filters_follow_ieee() {
        let cur = f32s(&[f32::NAN, -0.0, 1.0]);
        assert_eq!(
            filt(FN_EQ, ElemType::F32, &cur, &f32s(&[0.0])).unwrap(),
            f32s(&[-0.0])
        );
        assert_eq!(
            filt(FN_LT, ElemType::F32, &cur, &f32s(&[2.0])).unwrap(),
            f32s(&[-0.0, 1.0])
        );
        assert_eq!(
            filt(FN_GE, ElemType::F32, &cur, &f32s(&[f32::NAN])).unwrap(),
            Vec::<u8>::new()
        );
        let got = filt(FN_NE, ElemType::F32, &cur, &f32s(&[0.0])).unwrap();
        assert_eq!(got.len(), 8);
        assert!(f32::from_le_bytes(got[..4].try_into().unwrap()).is_nan());
        assert_eq!(got[4..], f32s(&[1.0]));
        assert_eq!(filt(FN_NONZERO, ElemType::F32, &cur, &[]).unwrap(), got);
    }

    /// Update: `min(cur + delta, 100)` on u32.
    struct ClampTo100;

    impl UserFunction for ClampTo100 {
        fn name(&self) -> &str {
            "clamp_to_100"
        }
        fn kind(&self) -> FunctionKind {
            FunctionKind::Update
        }
        fn update(
            &self,
            elem: ElemType,
            cur: &[u8],
            delta: &[u8],
            out: &mut [u8],
        ) -> Result<(), OpError> {
            if elem != ElemType::U32 {
                return Err(OpError::UserFunction("clamp_to_100 takes u32"));
            }
            let cur = u32::from_le_bytes(cur.try_into().unwrap());
            let delta = u32::from_le_bytes(delta.try_into().unwrap());
            out.copy_from_slice(&cur.saturating_add(delta).min(100).to_le_bytes());
            Ok(())
        }
    }

    /// Reduce: product of unsigned elements into a u64 accumulator.
    struct Product;

    impl UserFunction for Product {
        fn name(&self) -> &str {
            "product"
        }
        fn kind(&self) -> FunctionKind {
            FunctionKind::Reduce
        }
        fn reduce(&self, _elem: ElemType, acc: &mut [u8], e: &[u8]) -> Result<(), OpError> {
            let acc_bytes: &mut [u8; 8] = acc
                .try_into()
                .map_err(|_| OpError::UserFunction("product needs a u64 sigma"))?;
            let mut e_bytes = [0u8; 8];
            e_bytes[..e.len()].copy_from_slice(e);
            let product = u64::from_le_bytes(*acc_bytes).wrapping_mul(u64::from_le_bytes(e_bytes));
            *acc_bytes = product.to_le_bytes();
            Ok(())
        }
    }

    /// Filter: even integers (the lowest byte comes first in little-endian).
    struct IsEven;

    impl UserFunction for IsEven {
        fn name(&self) -> &str {
            "is_even"
        }
        fn kind(&self) -> FunctionKind {
            FunctionKind::Filter
        }
        fn filter(&self, _elem: ElemType, e: &[u8], _param: &[u8]) -> Result<bool, OpError> {
            Ok(e[0].is_multiple_of(2))
        }
    }

    const CLAMP: u16 = USER_FUNCTION_ID_MIN;
    const PRODUCT: u16 = USER_FUNCTION_ID_MIN + 1;
    const IS_EVEN: u16 = 4000;

    fn user_registry() -> FunctionRegistry {
        let mut reg = FunctionRegistry::new();
        reg.register(CLAMP, Arc::new(ClampTo100)).unwrap();
        reg.register(PRODUCT, Arc::new(Product)).unwrap();
        reg.register(IS_EVEN, Arc::new(IsEven)).unwrap();
        reg
    }

    #[test]
    fn user_functions_through_every_operation() {
        let reg = user_registry();
        let u32s = |v: &[i64]| enc(ElemType::U32, v);
        let mut out = Vec::new();
        update_scalar2scalar(
            &reg,
            CLAMP,
            ElemType::U32,
            Some(&u32s(&[95])),
            &u32s(&[10]),
            &mut out,
        )
        .unwrap();
        assert_eq!(out, u32s(&[100]));
        update_scalar2scalar(&reg, CLAMP, ElemType::U32, None, &u32s(&[7]), &mut out).unwrap();
        assert_eq!(out, u32s(&[7]));
        update_scalar2vector(
            &reg,
            CLAMP,
            ElemType::U32,
            &u32s(&[50, 99, 0]),
            &u32s(&[10]),
            &mut out,
        )
        .unwrap();
        assert_eq!(out, u32s(&[60, 100, 10]));
        update_vector2vector(
            &reg,
            CLAMP,
            ElemType::U32,
            &u32s(&[50, 99, 0]),
            &u32s(&[60, 0, 100]),
            &mut out,
        )
        .unwrap();
        assert_eq!(out, u32s(&[100, 99, 100]));
        reduce(
            &reg,
            PRODUCT,
            ElemType::U8,
            &[2, 3, 4],
            &1u64.to_le_bytes(),
            &mut out,
        )
        .unwrap();
        assert_eq!(out, 24u64.to_le_bytes());
        reduce(
            &reg,
            PRODUCT,
            ElemType::U16,
            &enc(ElemType::U16, &[1000, 1000]),
            &2u64.to_le_bytes(),
            &mut out,
        )
        .unwrap();
        assert_eq!(out, 2_000_000u64.to_le_bytes());
        let u16s = |v: &[i64]| enc(ElemType::U16, v);
        filter(
            &reg,
            IS_EVEN,
            ElemType::U16,
            &u16s(&[1, 2, 3, 4, 256]),
            &[],
            &mut out,
        )
        .unwrap();
        assert_eq!(out, u16s(&[2, 4, 256]));
    }

    #[test]
    fn user_function_errors_and_widths() {
        let reg = user_registry();
        let mut out = Vec::new();
        let err = update_scalar2vector(&reg, CLAMP, ElemType::U8, &[1, 2], &[3], &mut out);
        assert_eq!(err, Err(OpError::UserFunction("clamp_to_100 takes u32")));
        let err = reduce(&reg, PRODUCT, ElemType::U8, &[2], &[1], &mut out);
        assert_eq!(err, Err(OpError::UserFunction("product needs a u64 sigma")));
        // The engine checks element widths before a user function sees any bytes.
        let err =
            update_scalar2scalar(&reg, CLAMP, ElemType::U32, Some(&[0; 4]), &[0; 8], &mut out);
        assert_eq!(err, Err(OpError::WrongWidth { len: 8, width: 4 }));
        let err = filter(&reg, IS_EVEN, ElemType::U16, &[0; 3], &[], &mut out);
        assert_eq!(err, Err(OpError::WrongWidth { len: 3, width: 2 }));
    }

    #[test]
    fn unknown_function_ids() {
        let reg = user_registry();
        let mut out = Vec::new();
        for id in [13, 31, 37, 63, 71, USER_FUNCTION_ID_MIN - 1, 2000, u16::MAX] {
            let unknown = Err(OpError::UnknownFunction(id));
            assert_eq!(
                update_scalar2scalar(&reg, id, ElemType::U8, None, &[1], &mut out),
                unknown
            );
            assert_eq!(
                update_scalar2vector(&reg, id, ElemType::U8, &[1], &[1], &mut out),
                unknown
            );
            assert_eq!(
                update_vector2vector(&reg, id, ElemType::U8, &[1], &[1], &mut out),
                unknown
            );
            assert_eq!(
                reduce(&reg, id, ElemType::U8, &[1], &[1], &mut out),
                unknown
            );
            assert_eq!(
                filter(&reg, id, ElemType::U8, &[1], &[1], &mut out),
                unknown
            );
        }
    }

    #[test]
    fn wrong_function_kind() {
        let reg = user_registry();
        let mut out = Vec::new();
        for id in [FN_SUM, FN_COUNT, FN_EQ, FN_NONZERO, PRODUCT, IS_EVEN] {
            let wrong = Err(OpError::WrongFunctionKind(id));
            assert_eq!(
                update_scalar2scalar(&reg, id, ElemType::U8, None, &[1], &mut out),
                wrong
            );
            assert_eq!(
                update_scalar2vector(&reg, id, ElemType::U8, &[1], &[1], &mut out),
                wrong
            );
            assert_eq!(
                update_vector2vector(&reg, id, ElemType::U8, &[1], &[1], &mut out),
                wrong
            );
        }
        for id in [FN_ADD, FN_CAS, FN_EQ, CLAMP, IS_EVEN] {
            assert_eq!(
                reduce(&reg, id, ElemType::U8, &[1], &[1], &mut out),
                Err(OpError::WrongFunctionKind(id))
            );
        }
        for id in [FN_ADD, FN_SUM, CLAMP, PRODUCT] {
            assert_eq!(
                filter(&reg, id, ElemType::U8, &[1], &[1], &mut out),
                Err(OpError::WrongFunctionKind(id))
            );
        }
    }

    #[test]
    fn out_is_cleared_and_reused_without_reallocating() {
        let reg = user_registry();
        let cur = enc(ElemType::U32, &[7; 256]);
        let mut out = Vec::with_capacity(2 * cur.len());
        out.extend_from_slice(b"left over from a previous call");
        let (ptr, capacity) = (out.as_ptr(), out.capacity());
        let four = 4u32.to_le_bytes();
        update_scalar2scalar(&reg, FN_ADD, ElemType::U32, Some(&four), &four, &mut out).unwrap();
        assert_eq!(out, 8u32.to_le_bytes());
        update_scalar2vector(&reg, FN_MUL, ElemType::U32, &cur, &four, &mut out).unwrap();
        assert_eq!(out, enc(ElemType::U32, &[28; 256]));
        update_vector2vector(&reg, FN_SUB, ElemType::U32, &cur, &cur, &mut out).unwrap();
        assert_eq!(out, vec![0; cur.len()]);
        update_vector2vector(&reg, CLAMP, ElemType::U32, &cur, &cur, &mut out).unwrap();
        assert_eq!(out, enc(ElemType::U32, &[14; 256]));
        reduce(&reg, FN_SUM, ElemType::U32, &cur, &four, &mut out).unwrap();
        assert_eq!(out, (7u32 * 256 + 4).to_le_bytes());
        filter(&reg, FN_EQ, ElemType::U32, &cur, &four, &mut out).unwrap();
        assert!(out.is_empty());
        filter(&reg, FN_NONZERO, ElemType::U32, &cur, &[], &mut out).unwrap();
        assert_eq!(out, cur);
        assert_eq!((out.as_ptr(), out.capacity()), (ptr, capacity));
    }

    #[test]
    fn one_mib_vectors() {
        let len: usize = 1 << 20;
        let cur: Vec<u8> = (0..(len / 4) as u32).flat_map(u32::to_le_bytes).collect();
        let got = s2v(FN_ADD, ElemType::U32, &cur, &1u32.to_le_bytes()).unwrap();
        assert_eq!(got.len(), len);
        assert_eq!(got[..8], [1, 0, 0, 0, 2, 0, 0, 0]);
        assert_eq!(got[len - 4..], (len as u32 / 4).to_le_bytes());
        let got = v2v(FN_XOR, ElemType::U32, &cur, &cur).unwrap();
        assert!(got.iter().all(|b| *b == 0));
        let n = (len / 4) as u64;
        assert_eq!(red(FN_SUM, ElemType::U64, &cur, &[0; 8]).unwrap().len(), 8);
        assert_eq!(
            red(FN_COUNT_NONZERO, ElemType::U32, &cur, &[0; 8]).unwrap(),
            (n - 1).to_le_bytes()
        );
        assert_eq!(
            filt(FN_GE, ElemType::U32, &cur, &(n as u32 - 2).to_le_bytes())
                .unwrap()
                .len(),
            8
        );
    }
}
