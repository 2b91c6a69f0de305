//! Typed element loops behind the built-in functions.
//!
//! What: the `Elem` trait, implemented for the ten element types by one macro, and generic loops
//! (`map`, `cas`, `fold`, `select`, `count_nonzero`) that take the per-element operation as a
//! closure. `builtin.rs` matches on (element type, function id) once per call and calls one of
//! these loops, so each combination compiles to its own straight loop with the operation inlined;
//! nothing is matched per element.
//!
//! ```text
//!   update_*  --match elem-->  T = u32  --match func-->  map::<u32>(.., u32::op_add)
//!                                                       for each 4-byte chunk: load, op, store
//! ```
//!
//! Goals: loops the compiler can unroll and vectorize over values up to 1 MiB; no allocation
//! beyond growing the caller's `out` to the result length.
//! Non-goals: validation. Callers have already checked that every slice is a whole number of
//! elements, that operand lengths match and that the function supports the type.

/// One element type: its little-endian encoding and the arithmetic the built-ins need.
/// Integer arithmetic wraps; float arithmetic is IEEE 754.
pub(crate) trait Elem: Copy + PartialEq + PartialOrd {
    /// Width in bytes; every slice given to `load` or `store` has exactly this length.
    const WIDTH: usize;
    const ZERO: Self;

    fn load(bytes: &[u8]) -> Self;
    fn store(self, bytes: &mut [u8]);

    fn op_add(self, other: Self) -> Self;
    fn op_sub(self, other: Self) -> Self;
    fn op_mul(self, other: Self) -> Self;
    /// Callers guarantee `other` is not an integer zero.
    fn op_div(self, other: Self) -> Self;
    fn op_min(self, other: Self) -> Self;
    fn op_max(self, other: Self) -> Self;
    fn op_sat_add(self, other: Self) -> Self;
    fn op_sat_sub(self, other: Self) -> Self;
    /// Bitwise operations act on the representation; the public API offers them for integers only.
    fn op_and(self, other: Self) -> Self;
    fn op_or(self, other: Self) -> Self;
    fn op_xor(self, other: Self) -> Self;
    /// Same bit pattern (so cas can match NaN and tells 0.0 from -0.0).
    fn same_bits(self, other: Self) -> bool;
    /// A divisor that integer division rejects; always false for floats.
    fn is_int_zero(self) -> bool;
}

macro_rules! impl_elem_int {
    ($($t:ty),*) => {$(
        impl Elem for $t {
            const WIDTH: usize = size_of::<$t>();
            const ZERO: Self = 0;
            #[inline(always)]
            fn load(bytes: &[u8]) -> Self {
                <$t>::from_le_bytes(bytes.try_into().expect("element slice has the element width"))
            }
            #[inline(always)]
            fn store(self, bytes: &mut [u8]) {
                bytes.copy_from_slice(&self.to_le_bytes());
            }
            #[inline(always)] fn op_add(self, o: Self) -> Self { self.wrapping_add(o) }
            #[inline(always)] fn op_sub(self, o: Self) -> Self { self.wrapping_sub(o) }
            #[inline(always)] fn op_mul(self, o: Self) -> Self { self.wrapping_mul(o) }
            #[inline(always)] fn op_div(self, o: Self) -> Self { self.wrapping_div(o) }
            #[inline(always)] fn op_min(self, o: Self) -> Self { Ord::min(self, o) }
            #[inline(always)] fn op_max(self, o: Self) -> Self { Ord::max(self, o) }
            #[inline(always)] fn op_sat_add(self, o: Self) -> Self { self.saturating_add(o) }
            #[inline(always)] fn op_sat_sub(self, o: Self) -> Self { self.saturating_sub(o) }
            #[inline(always)] fn op_and(self, o: Self) -> Self { self & o }
            #[inline(always)] fn op_or(self, o: Self) -> Self { self | o }
            #[inline(always)] fn op_xor(self, o: Self) -> Self { self ^ o }
            #[inline(always)] fn same_bits(self, o: Self) -> bool { self == o }
            #[inline(always)] fn is_int_zero(self) -> bool { self == 0 }
        }
    )*};
}

macro_rules! impl_elem_float {
    ($($t:ty),*) => {$(
        impl Elem for $t {
            const WIDTH: usize = size_of::<$t>();
            const ZERO: Self = 0.0;
            #[inline(always)]
            fn load(bytes: &[u8]) -> Self {
                <$t>::from_le_bytes(bytes.try_into().expect("element slice has the element width"))
            }
            #[inline(always)]
            fn store(self, bytes: &mut [u8]) {
                bytes.copy_from_slice(&self.to_le_bytes());
            }
            #[inline(always)] fn op_add(self, o: Self) -> Self { self + o }
            #[inline(always)] fn op_sub(self, o: Self) -> Self { self - o }
            #[inline(always)] fn op_mul(self, o: Self) -> Self { self * o }
            #[inline(always)] fn op_div(self, o: Self) -> Self { self / o }
            #[inline(always)] fn op_min(self, o: Self) -> Self { <$t>::min(self, o) }
            #[inline(always)] fn op_max(self, o: Self) -> Self { <$t>::max(self, o) }
            #[inline(always)] fn op_sat_add(self, o: Self) -> Self { self + o }
            #[inline(always)] fn op_sat_sub(self, o: Self) -> Self { self - o }
            #[inline(always)]
            fn op_and(self, o: Self) -> Self { <$t>::from_bits(self.to_bits() & o.to_bits()) }
            #[inline(always)]
            fn op_or(self, o: Self) -> Self { <$t>::from_bits(self.to_bits() | o.to_bits()) }
            #[inline(always)]
            fn op_xor(self, o: Self) -> Self { <$t>::from_bits(self.to_bits() ^ o.to_bits()) }
            #[inline(always)] fn same_bits(self, o: Self) -> bool { self.to_bits() == o.to_bits() }
            #[inline(always)] fn is_int_zero(self) -> bool { false }
        }
    )*};
}

impl_elem_int!(u8, u16, u32, u64, i8, i16, i32, i64);
impl_elem_float!(f32, f64);

/// The second operand of an element-wise update.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Operand<'a> {
    /// One element (cas: two) applied to every element of the value.
    Broadcast(&'a [u8]),
    /// One element per element of the value (cas: all expected elements, then all new ones).
    PerElem(&'a [u8]),
}

/// `out[i] = f(cur[i], operand[i])`. `out` is cleared and resized to `cur.len()`.
#[inline(always)]
pub(crate) fn map<T: Elem>(cur: &[u8], operand: Operand, out: &mut Vec<u8>, f: impl Fn(T, T) -> T) {
    // Scalars (counters, sequencers) are the hot case: no chunking machinery.
    if let (Operand::Broadcast(delta), true) = (operand, cur.len() == T::WIDTH) {
        let mut buf = [0u8; 8];
        f(T::load(cur), T::load(delta)).store(&mut buf[..T::WIDTH]);
        out.clear();
        out.extend_from_slice(&buf[..T::WIDTH]);
        return;
    }
    out.clear();
    out.resize(cur.len(), 0);
    let outs = out.chunks_exact_mut(T::WIDTH);
    match operand {
        Operand::Broadcast(delta) => {
            let d = T::load(delta);
            for (o, c) in outs.zip(cur.chunks_exact(T::WIDTH)) {
                f(T::load(c), d).store(o);
            }
        }
        Operand::PerElem(deltas) => {
            for ((o, c), d) in outs
                .zip(cur.chunks_exact(T::WIDTH))
                .zip(deltas.chunks_exact(T::WIDTH))
            {
                f(T::load(c), T::load(d)).store(o);
            }
        }
    }
}

/// Compare-and-swap per element: `out[i] = if cur[i] == expected[i] { new[i] } else { cur[i] }`,
/// comparing bit patterns. `out` is cleared and resized to `cur.len()`.
pub(crate) fn cas<T: Elem>(cur: &[u8], operand: Operand, out: &mut Vec<u8>) {
    out.clear();
    out.resize(cur.len(), 0);
    let elems = out
        .chunks_exact_mut(T::WIDTH)
        .zip(cur.chunks_exact(T::WIDTH));
    match operand {
        Operand::Broadcast(pair) => {
            let (expected, new) = pair.split_at(T::WIDTH);
            let (expected, new) = (T::load(expected), T::load(new));
            for (o, c) in elems {
                let c = T::load(c);
                let v = if c.same_bits(expected) { new } else { c };
                v.store(o);
            }
        }
        Operand::PerElem(pairs) => {
            let (expected, new) = pairs.split_at(cur.len());
            let operands = expected
                .chunks_exact(T::WIDTH)
                .zip(new.chunks_exact(T::WIDTH));
            for ((o, c), (e, n)) in elems.zip(operands) {
                let c = T::load(c);
                let v = if c.same_bits(T::load(e)) {
                    T::load(n)
                } else {
                    c
                };
                v.store(o);
            }
        }
    }
}

/// True if any element of `divisors` is an integer zero.
pub(crate) fn any_int_zero<T: Elem>(divisors: &[u8]) -> bool {
    divisors
        .chunks_exact(T::WIDTH)
        .any(|d| T::load(d).is_int_zero())
}

/// Fold the elements of `cur` into `sigma` with `f`.
#[inline(always)]
pub(crate) fn fold<T: Elem>(cur: &[u8], sigma: T, f: impl Fn(T, T) -> T) -> T {
    cur.chunks_exact(T::WIDTH)
        .fold(sigma, |acc, c| f(acc, T::load(c)))
}

/// Number of elements that are not zero (NaN counts as nonzero, -0.0 as zero).
pub(crate) fn count_nonzero<T: Elem>(cur: &[u8]) -> u64 {
    let nonzero = cur
        .chunks_exact(T::WIDTH)
        .filter(|c| T::load(c) != T::ZERO)
        .count();
    nonzero as u64
}

/// Append to `out` every element of `cur` for which `keep` holds, in order.
#[inline(always)]
pub(crate) fn select<T: Elem>(cur: &[u8], out: &mut Vec<u8>, keep: impl Fn(T) -> bool) {
    // Branch-free: every element is copied to the next free slot, and the slot only advances when
    // the element is kept. Whether an element passes is data-dependent, so a branch per element
    // would be mispredicted often; this costs a store instead and ran 5-8x faster on random data
    // with half the elements kept.
    let start = out.len();
    out.resize(start + cur.len(), 0);
    let dst = &mut out[start..];
    let mut kept_len = 0;
    for c in cur.chunks_exact(T::WIDTH) {
        // kept_len <= bytes read so far, so the slot is always inside `dst`.
        dst[kept_len..kept_len + T::WIDTH].copy_from_slice(c);
        kept_len += T::WIDTH * usize::from(keep(T::load(c)));
    }
    out.truncate(start + kept_len);
}
