//! Byte matching for the bucket search, and CPU detection for the pipeline's wide build. A leaf:
//! it knows nothing of buckets or the pipeline.
//!
//! ```text
//!   ByteMatch::bytes_equal(64 bytes, b) -> u64 mask, bit p set where byte p == b
//!     Baseline   four SSE2 16-byte compares (part of x86-64), or plain code elsewhere
//!     Avx2       two 32-byte compares; a value is proof the CPU has x86-64-v3
//! ```
//!
//! The pipeline is compiled twice, generic over the matcher: with [`Baseline`] for every CPU and,
//! under `#[target_feature]`, with [`Avx2`] for CPUs where [`wide_cpu`] holds. The matcher's type
//! is how the code inside knows which build it is in ([`ByteMatch::WIDE`]).
//!
//! Goals: the search's inner compare is one or two instructions per 16/32 bytes, with no runtime
//! feature test on the hot path. Non-goals: other architectures' vector units (they take the
//! plain loop).

/// How a bucket search compares one byte against all 64 bytes of a bucket: bit p of the result
/// is set when byte p equals `b`. [`Baseline`] works on every CPU; [`Avx2`] is two 32-byte
/// compares where the CPU has AVX2, and only code compiled for AVX2 (the pipeline's wide
/// build) can make one.
pub trait ByteMatch: Copy {
    /// Code using this matcher may run x86-64-v3 instructions (AVX2, BMI1/2, LZCNT, POPCNT):
    /// true only for [`Avx2`], whose values exist only in the pipeline's wide build, which
    /// runs where the CPU has them all.
    const WIDE: bool = false;
    fn bytes_equal(self, bytes: &[u8; 64], b: u8) -> u64;
}

/// SSE2 (part of x86-64) or plain code elsewhere.
#[derive(Clone, Copy, Debug)]
pub struct Baseline;

impl ByteMatch for Baseline {
    #[inline(always)]
    fn bytes_equal(self, bytes: &[u8; 64], b: u8) -> u64 {
        #[cfg(target_arch = "x86_64")]
        {
            use core::arch::x86_64::{
                __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_set1_epi8,
            };
            let p = bytes.as_ptr().cast::<__m128i>();
            let mut m = 0u64;
            // SAFETY: SSE2 is part of x86_64; the four 16-byte loads cover exactly the 64 bytes.
            // (Buckets are 64-byte aligned, so these unaligned loads are aligned in practice.)
            unsafe {
                let needle = _mm_set1_epi8(b as i8);
                for i in 0..4 {
                    let eq = _mm_cmpeq_epi8(_mm_loadu_si128(p.add(i)), needle);
                    m |= u64::from(_mm_movemask_epi8(eq) as u16) << (16 * i);
                }
            }
            m
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            bytes
                .iter()
                .enumerate()
                .fold(0u64, |m, (i, &x)| m | (u64::from(x == b) << i))
        }
    }
}

/// Proof that the CPU has AVX2 (a value exists only where it does).
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy, Debug)]
pub struct Avx2(());

#[cfg(target_arch = "x86_64")]
impl Avx2 {
    /// `Some` where the CPU has AVX2 and the rest of x86-64-v3 that the wide build uses
    /// (see [`ByteMatch::WIDE`]).
    #[cfg(test)]
    pub fn detect() -> Option<Avx2> {
        wide_cpu().then_some(Avx2(()))
    }

    /// # Safety
    /// The CPU must have AVX2, BMI1, BMI2, LZCNT and POPCNT (e.g. the caller is compiled with
    /// them as target features).
    #[inline(always)]
    pub unsafe fn new_unchecked() -> Avx2 {
        Avx2(())
    }
}

#[cfg(target_arch = "x86_64")]
impl ByteMatch for Avx2 {
    const WIDE: bool = true;
    #[inline(always)]
    fn bytes_equal(self, bytes: &[u8; 64], b: u8) -> u64 {
        // SAFETY: an Avx2 value exists only where the CPU has AVX2.
        unsafe { avx2_bytes_equal(bytes, b) }
    }
}

/// Inlined into callers compiled for AVX2 (the pipeline's wide build); a call elsewhere.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn avx2_bytes_equal(bytes: &[u8; 64], b: u8) -> u64 {
    use core::arch::x86_64::{
        __m256i, _mm256_cmpeq_epi8, _mm256_loadu_si256, _mm256_movemask_epi8, _mm256_set1_epi8,
    };
    let p = bytes.as_ptr().cast::<__m256i>();
    let needle = _mm256_set1_epi8(b as i8);
    // SAFETY: the two 32-byte loads cover exactly the 64 bytes.
    let (lo, hi) = unsafe { (_mm256_loadu_si256(p), _mm256_loadu_si256(p.add(1))) };
    let lo = _mm256_movemask_epi8(_mm256_cmpeq_epi8(lo, needle)) as u32;
    let hi = _mm256_movemask_epi8(_mm256_cmpeq_epi8(hi, needle)) as u32;
    u64::from(lo) | (u64::from(hi) << 32)
}

/// Whether this CPU has everything the pipeline's wide build uses (AVX2, BMI1/2, LZCNT,
/// POPCNT): the engine checks it once, at construction.
pub(crate) fn wide_cpu() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("bmi1")
            && std::arch::is_x86_feature_detected!("bmi2")
            && std::arch::is_x86_feature_detected!("lzcnt")
            && std::arch::is_x86_feature_detected!("popcnt")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matchers_agree_on_every_byte_position() {
        let mut bytes = [0u8; 64];
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = (i % 7) as u8;
        }
        for b in 0..8u8 {
            let expect = bytes
                .iter()
                .enumerate()
                .fold(0u64, |m, (i, &x)| m | (u64::from(x == b) << i));
            assert_eq!(Baseline.bytes_equal(&bytes, b), expect);
            #[cfg(target_arch = "x86_64")]
            if let Some(avx2) = Avx2::detect() {
                assert_eq!(avx2.bytes_equal(&bytes, b), expect);
            }
        }
    }
}
