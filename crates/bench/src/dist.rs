//! Key distributions: which key index each generated operation touches.
//!
//! What: `KeyGen` turns a `Distribution`, a key count and a seed into a deterministic stream of
//! key indices in `[0, keys)`. The workload layer maps an index to key bytes; this file knows
//! nothing about keys, operations or drivers.
//!
//! ```text
//!   seed ──> SmallRng ──u in [0,1)──> sampler ──index in [0, keys)──> workload
//!                                      ├─ Uniform   : rand's unbiased integer range
//!                                      ├─ Zipf      : exact head table + integral inversion of the tail
//!                                      └─ YcsbZipf  : Gray et al. over YCSB's 10^10 items, FNV-scrambled
//! ```
//!
//! Goals:
//! - Deterministic: the same (distribution, keys, seed) gives the same sequence, so two drivers
//!   (directkv, Redis, memcached) can be fed identical request streams. The generator is rand
//!   0.8's `SmallRng`, so sequences are stable for a given rand version, not across versions.
//! - Bounded: every index is `< keys`, by construction and by clamping, never by rejection loops.
//! - Cheap: set-up is O(1) in `keys` (at most a few thousand floating-point terms), and a sample
//!   costs one RNG draw plus at most two transcendental functions, so `fill` can pre-generate
//!   batches without dominating a benchmark.
//!
//! Non-goals: hot-set drift ("latest" distribution), key insertion during the run, ranges or scans,
//! and Zipf exponents for which the closed forms break down (see `Distribution::parse`).
//!
//! Plain Zipf: index `i` has probability proportional to `1/(i+1)^theta`, so the hottest keys are
//! the LOW indices. Gray et al.'s closed-form inversion ("Quickly generating billion-record
//! synthetic databases", the method YCSB uses) is exact only for ranks 0 and 1: it inverts a
//! continuous approximation of the CDF that starts at rank 2, which over-samples rank 2 by 17%
//! and rank 3 by 11% for n = 1000, theta = 0.99. Plain Zipf is meant to be the exact reference
//! distribution, so it keeps Gray's idea (invert a continuous approximation of the CDF) but only
//! for the tail: the first `HEAD_RANKS` ranks come from an exact cumulative table, and rank `k`
//! beyond them gets the mass `integral over [k+0.5, k+1.5] of x^-theta dx`, whose relative error
//! against `(k+1)^-theta` is about `theta(theta+1) / (24 (k+1)^2)`, below 1e-4 past the head.
//!
//! YCSB Zipf: a faithful copy of YCSB's ScrambledZipfianGenerator, distortion included, because
//! its purpose is to be comparable with published YCSB numbers (the KV-Direct paper among them).
//! YCSB draws a Gray et al. rank over ITEM_COUNT = 10^10 items (zeta constant 26.46902820178302
//! for theta 0.99, from `zeta` below for other thetas), then maps it to
//! `fnv1a64(rank) % keys`. The alternative, drawing the rank over `keys` items, would make the
//! hottest key's share depend on the key count; with YCSB's choice it is always 1/zeta(10^10)
//! (3.8% at theta 0.99), while ranks past `keys` fold onto the key space as a near-uniform
//! background. The heavy head keeps Zipf's shape (rank 0 is 2^theta times rank 1) but the hot
//! keys are scattered over the key space instead of clustered at index 0.

use rand::distributions::Distribution as _;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// The largest key count a `KeyGen` accepts. Indices pass through `f64` in the Zipf samplers,
/// which represents integers exactly only up to 2^53; 2^40 leaves room and is far beyond memory.
pub const KEYS_MAX: u64 = 1 << 40;

/// The Zipf exponent of the named distributions without an explicit `:theta`.
pub const THETA_DEFAULT: f64 = 0.99;

/// Ranks sampled from an exact cumulative table in plain Zipf; the rest come from integral inversion.
const HEAD_RANKS: usize = 64;

/// `zeta` sums terms one by one up to this `n` and uses Euler–Maclaurin above it. The exact sum
/// costs about 11 ns a term in release (200 M terms take 2.3 s), so it cannot serve n ~ 2^32.
const ZETA_EXACT_MAX: u64 = 1 << 16;

/// Euler–Maclaurin sums the first `ZETA_EM_HEAD - 1` terms exactly and approximates the rest;
/// with the correction terms up to the fifth derivative the remainder is below 1e-20 here.
const ZETA_EM_HEAD: u64 = 1024;

/// YCSB's ScrambledZipfianGenerator draws ranks over this many items (plus one: YCSB builds its
/// ZipfianGenerator over the inclusive range [0, ITEM_COUNT]).
const YCSB_ITEM_COUNT: u64 = 10_000_000_000;

/// The exponent for which YCSB hard-codes `YCSB_ZETAN` instead of computing zeta.
const YCSB_THETA: f64 = 0.99;

/// YCSB's precomputed zeta(10^10, 0.99).
const YCSB_ZETAN: f64 = 26.469_028_201_783_02;

/// A key popularity distribution.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Distribution {
    /// Every key equally likely.
    Uniform,
    /// Index `i` has probability proportional to `1/(i+1)^theta`; low indices are hot.
    Zipf { theta: f64 },
    /// YCSB's scrambled Zipfian: Zipf ranks over 10^10 items hashed onto the key space.
    YcsbZipf { theta: f64 },
}

impl Distribution {
    /// Parses "uniform", "zipf", "ycsb-zipf" (theta 0.99) or "zipf:THETA", "ycsb-zipf:THETA".
    /// Plain Zipf accepts any finite theta > 0; YCSB Zipf needs 0 < theta < 1 because Gray et
    /// al.'s closed form divides by `1 - theta`. Returns `None` for anything else.
    pub fn parse(s: &str) -> Option<Distribution> {
        let s = s.trim();
        let (name, theta) = match s.split_once(':') {
            Some((name, theta)) => (name, theta.trim().parse::<f64>().ok()?),
            None => (s, THETA_DEFAULT),
        };
        let dist = match name.trim().to_ascii_lowercase().as_str() {
            "uniform" if !s.contains(':') => Distribution::Uniform,
            "zipf" => Distribution::Zipf { theta },
            "ycsb-zipf" => Distribution::YcsbZipf { theta },
            _ => return None,
        };
        dist.is_valid().then_some(dist)
    }

    /// The name `parse` accepts back: "uniform", "zipf:0.99", "ycsb-zipf:0.99".
    pub fn name(&self) -> String {
        match self {
            Distribution::Uniform => "uniform".to_string(),
            Distribution::Zipf { theta } => format!("zipf:{theta}"),
            Distribution::YcsbZipf { theta } => format!("ycsb-zipf:{theta}"),
        }
    }

    fn is_valid(&self) -> bool {
        match *self {
            Distribution::Uniform => true,
            Distribution::Zipf { theta } => theta.is_finite() && theta > 0.0,
            Distribution::YcsbZipf { theta } => theta > 0.0 && theta < 1.0,
        }
    }
}

/// A deterministic stream of key indices in `[0, keys)`.
pub struct KeyGen {
    rng: SmallRng,
    sampler: Sampler,
}

enum Sampler {
    Uniform(rand::distributions::Uniform<u64>),
    /// Boxed: the head table makes it ten times the size of the other variants.
    Zipf(Box<ZipfExact>),
    YcsbZipf(YcsbScrambled),
}

impl KeyGen {
    /// Key indices in [0, keys). keys up to ~2^32.
    ///
    /// Panics if `keys` is 0 or above `KEYS_MAX`, or if `dist` has a theta `parse` would reject.
    pub fn new(dist: Distribution, keys: u64, seed: u64) -> KeyGen {
        assert!(keys >= 1, "KeyGen needs at least one key");
        assert!(keys <= KEYS_MAX, "keys {keys} above KEYS_MAX {KEYS_MAX}");
        assert!(dist.is_valid(), "invalid distribution parameters: {dist:?}");
        let sampler = match dist {
            Distribution::Uniform => Sampler::Uniform(rand::distributions::Uniform::new(0, keys)),
            Distribution::Zipf { theta } => Sampler::Zipf(Box::new(ZipfExact::new(keys, theta))),
            Distribution::YcsbZipf { theta } => Sampler::YcsbZipf(YcsbScrambled::new(keys, theta)),
        };
        KeyGen {
            rng: SmallRng::seed_from_u64(seed),
            sampler,
        }
    }

    /// The next key index, always `< keys`.
    #[inline]
    pub fn next_index(&mut self) -> u64 {
        match &self.sampler {
            Sampler::Uniform(uniform) => uniform.sample(&mut self.rng),
            Sampler::Zipf(zipf) => zipf.sample(&mut self.rng),
            Sampler::YcsbZipf(ycsb) => ycsb.sample(&mut self.rng),
        }
    }

    /// Fill `out` with indices (fast path for batches). Produces exactly the indices that
    /// `out.len()` calls of `next_index` would, with the distribution dispatch hoisted out of
    /// the loop.
    pub fn fill(&mut self, out: &mut [u64]) {
        let rng = &mut self.rng;
        match &self.sampler {
            Sampler::Uniform(uniform) => out.iter_mut().for_each(|o| *o = uniform.sample(rng)),
            Sampler::Zipf(zipf) => out.iter_mut().for_each(|o| *o = zipf.sample(rng)),
            Sampler::YcsbZipf(ycsb) => out.iter_mut().for_each(|o| *o = ycsb.sample(rng)),
        }
    }
}

/// Plain Zipf over `n` ranks: exact cumulative table for the head, integral inversion beyond.
///
/// Unnormalised masses: rank k < h has `(k+1)^-theta`; rank k >= h has the integral of
/// `x^-theta` over `[k+0.5, k+1.5]`. The tail therefore covers `[h+0.5, n+0.5]` contiguously and
/// the rank of a tail point `y` is `floor(y - 0.5)`.
struct ZipfExact {
    /// `head_cdf[k]` is the unnormalised mass of ranks `0..=k`, for `k < head_len`.
    head_cdf: [f64; HEAD_RANKS],
    head_len: usize,
    /// The head's total mass: `head_cdf[head_len - 1]`.
    head_mass: f64,
    /// Head plus tail mass; a uniform `u` is scaled by this.
    total_mass: f64,
    /// `1 - theta`, the exponent of the antiderivative of `x^-theta`.
    s: f64,
    /// The tail's lower edge `h + 0.5` and `tail_start^-s`.
    tail_start: f64,
    tail_start_pow_neg_s: f64,
    n: u64,
}

impl ZipfExact {
    fn new(n: u64, theta: f64) -> ZipfExact {
        let head_len = n.min(HEAD_RANKS as u64) as usize;
        let mut head_cdf = [0.0; HEAD_RANKS];
        let mut mass = 0.0;
        for (k, slot) in head_cdf.iter_mut().enumerate().take(head_len) {
            mass += ((k + 1) as f64).powf(-theta);
            *slot = mass;
        }
        let s = 1.0 - theta;
        let tail_start = head_len as f64 + 0.5;
        let tail_mass = power_integral(tail_start, n as f64 + 0.5, s);
        ZipfExact {
            head_cdf,
            head_len,
            head_mass: mass,
            total_mass: mass + tail_mass,
            s,
            tail_start,
            tail_start_pow_neg_s: tail_start.powf(-s),
            n,
        }
    }

    #[inline]
    fn sample(&self, rng: &mut SmallRng) -> u64 {
        let target = rng.gen::<f64>() * self.total_mass;
        if target < self.head_mass {
            // The first rank whose cumulative mass exceeds the target; the head check above
            // guarantees one exists.
            let rank = self.head_cdf[..self.head_len].partition_point(|&c| c <= target);
            return rank as u64;
        }
        // Solve integral(tail_start, y) of x^-theta dx = t for y:
        // y = tail_start * (1 + s t tail_start^-s)^(1/s), written with ln_1p so theta near 1
        // (s near 0) stays accurate and theta = 1 takes the logarithmic limit exactly.
        let t = (target - self.head_mass) * self.tail_start_pow_neg_s;
        let y = self.tail_start * ln_1p_scaled(t, self.s).exp();
        // Rounding can push y a hair past either end of the tail; clamp rather than retry.
        let rank = (y - 0.5).max(0.0) as u64;
        let rank = rank.clamp(self.head_len as u64, self.n - 1);
        debug_assert!(rank < self.n);
        rank
    }
}

/// YCSB's ScrambledZipfianGenerator: a Gray et al. Zipf rank over 10^10 + 1 items, hashed onto
/// `[0, keys)` with `fnv1a64(rank) % keys`.
struct YcsbScrambled {
    items: u64,
    zetan: f64,
    alpha: f64,
    eta: f64,
    /// `1 + 0.5^theta`: the unnormalised cumulative mass of ranks 0 and 1.
    zeta2: f64,
    keys: u64,
}

impl YcsbScrambled {
    fn new(keys: u64, theta: f64) -> YcsbScrambled {
        let items = YCSB_ITEM_COUNT + 1;
        // YCSB compares the constant exactly, so does this; any other theta computes zeta
        // (YCSB sums 10^10 terms here, Euler–Maclaurin gets the same value instantly).
        let zetan = if theta == YCSB_THETA {
            YCSB_ZETAN
        } else {
            zeta(items, theta)
        };
        let zeta2 = 1.0 + 0.5f64.powf(theta);
        let eta = (1.0 - (2.0 / items as f64).powf(1.0 - theta)) / (1.0 - zeta2 / zetan);
        YcsbScrambled {
            items,
            zetan,
            alpha: 1.0 / (1.0 - theta),
            eta,
            zeta2,
            keys,
        }
    }

    /// Gray et al.'s inversion, step for step as YCSB's `ZipfianGenerator.nextLong`.
    #[inline]
    fn rank(&self, u: f64) -> u64 {
        let uz = u * self.zetan;
        if uz < 1.0 {
            return 0;
        }
        if uz < self.zeta2 {
            return 1;
        }
        let rank = (self.items as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        // At u close to 1 the formula reaches `items` itself; YCSB can return it, we clamp.
        rank.min(self.items - 1)
    }

    #[inline]
    fn sample(&self, rng: &mut SmallRng) -> u64 {
        let rank = self.rank(rng.gen::<f64>());
        let index = ycsb_fnv1a64(rank) % self.keys;
        debug_assert!(index < self.keys);
        index
    }
}

/// YCSB's `fnvhash64`: FNV-1a over the eight little-endian bytes of `value`, then the absolute
/// value of the result read as a signed 64-bit integer.
fn ycsb_fnv1a64(value: u64) -> u64 {
    const FNV_OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
    const FNV_PRIME: u64 = 0x0100_0000_01b3;
    let hash = value
        .to_le_bytes()
        .iter()
        .fold(FNV_OFFSET_BASIS, |hash, &byte| {
            (hash ^ u64::from(byte)).wrapping_mul(FNV_PRIME)
        });
    (hash as i64).unsigned_abs()
}

/// The generalised harmonic number `zeta(n, theta) = sum over i in 1..=n of i^-theta`.
///
/// Exact term-by-term summation for `n <= ZETA_EXACT_MAX`; above it, the first
/// `ZETA_EM_HEAD - 1` terms are summed exactly and the rest by Euler–Maclaurin with the
/// Bernoulli corrections B2, B4 and B6. The test `zeta_euler_maclaurin_matches_exact_sum`
/// bounds its relative error against the exact sum at n = 1e6.
pub fn zeta(n: u64, theta: f64) -> f64 {
    if n <= ZETA_EXACT_MAX {
        zeta_exact(n, theta)
    } else {
        zeta_euler_maclaurin(n, theta)
    }
}

/// Sums smallest terms first, which keeps the rounding error near one ulp of the result.
fn zeta_exact(n: u64, theta: f64) -> f64 {
    (1..=n).rev().map(|i| (i as f64).powf(-theta)).sum()
}

/// Euler–Maclaurin: for f(x) = x^-theta and m <= n,
/// `sum_{i=m}^{n} f(i) = integral_m^n f + (f(m) + f(n))/2 + sum_k B_2k/(2k)! (f^(2k-1)(n) - f^(2k-1)(m)) + R`.
fn zeta_euler_maclaurin(n: u64, theta: f64) -> f64 {
    let m = ZETA_EM_HEAD;
    assert!(n >= m, "Euler–Maclaurin zeta needs n >= {m}, got {n}");
    let head = zeta_exact(m - 1, theta);
    let (mf, nf) = (m as f64, n as f64);
    let f = |x: f64| x.powf(-theta);
    // Odd derivatives of x^-theta: f'(x) = -theta x^(-theta-1), and each further pair of
    // derivatives multiplies by (theta + j)(theta + j + 1) x^-2.
    let d1 = |x: f64| -theta * x.powf(-theta - 1.0);
    let d3 = |x: f64| d1(x) * (theta + 1.0) * (theta + 2.0) / (x * x);
    let d5 = |x: f64| d3(x) * (theta + 3.0) * (theta + 4.0) / (x * x);
    let corrections =
        (d1(nf) - d1(mf)) / 12.0 - (d3(nf) - d3(mf)) / 720.0 + (d5(nf) - d5(mf)) / 30240.0;
    head + power_integral(mf, nf, 1.0 - theta) + (f(mf) + f(nf)) / 2.0 + corrections
}

/// `integral_a^b x^-theta dx` with `s = 1 - theta`, i.e. `(b^s - a^s) / s`, computed as
/// `a^s * expm1(s ln(b/a)) / s` so that it stays accurate as s approaches 0 (theta near 1) and
/// equals `ln(b/a)` at s = 0.
fn power_integral(a: f64, b: f64, s: f64) -> f64 {
    let log_ratio = (b / a).ln();
    if s == 0.0 {
        return log_ratio;
    }
    a.powf(s) * (s * log_ratio).exp_m1() / s
}

/// `ln(1 + s t) / s`, with its limit `t` at s = 0. For theta > 1 (s < 0) the argument can
/// touch zero only if `t` exceeds the mass of an infinite tail, which the callers rule out;
/// the clamp keeps rounding from producing NaN.
#[inline]
fn ln_1p_scaled(t: f64, s: f64) -> f64 {
    if s == 0.0 {
        return t;
    }
    (s * t).max(-1.0 + f64::EPSILON).ln_1p() / s
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLES: usize = 1_000_000;

    fn counts(dist: Distribution, keys: u64, seed: u64, samples: usize) -> Vec<u64> {
        let mut gen = KeyGen::new(dist, keys, seed);
        let mut out = vec![0u64; samples];
        gen.fill(&mut out);
        let mut counts = vec![0u64; keys as usize];
        for index in out {
            counts[index as usize] += 1;
        }
        counts
    }

    fn zipf_pmf(rank: u64, n: u64, theta: f64) -> f64 {
        ((rank + 1) as f64).powf(-theta) / zeta_exact(n, theta)
    }

    fn assert_close(what: &str, got: f64, want: f64, rel_tol: f64) {
        let rel = (got - want).abs() / want;
        assert!(
            rel <= rel_tol,
            "{what}: got {got}, want {want}, relative error {rel} > {rel_tol}"
        );
    }

    #[test]
    fn parse_and_name_round_trip() {
        assert_eq!(Distribution::parse("uniform"), Some(Distribution::Uniform));
        assert_eq!(
            Distribution::parse("zipf"),
            Some(Distribution::Zipf { theta: 0.99 })
        );
        assert_eq!(
            Distribution::parse("ycsb-zipf"),
            Some(Distribution::YcsbZipf { theta: 0.99 })
        );
        assert_eq!(
            Distribution::parse(" Zipf:0.9 "),
            Some(Distribution::Zipf { theta: 0.9 })
        );
        assert_eq!(
            Distribution::parse("zipf:1.2"),
            Some(Distribution::Zipf { theta: 1.2 })
        );
        for bad in [
            "",
            "zipf:",
            "zipf:x",
            "zipf:0",
            "zipf:-1",
            "zipf:nan",
            "zipf:inf",
            "ycsb-zipf:1",
            "ycsb-zipf:1.5",
            "uniform:0.5",
            "latest",
            "zipf:0.9:1",
        ] {
            assert_eq!(Distribution::parse(bad), None, "{bad:?} should not parse");
        }
        for dist in [
            Distribution::Uniform,
            Distribution::Zipf { theta: 0.99 },
            Distribution::Zipf { theta: 1.0 },
            Distribution::YcsbZipf { theta: 0.5 },
        ] {
            assert_eq!(Distribution::parse(&dist.name()), Some(dist));
        }
    }

    #[test]
    fn uniform_buckets_pass_chi_square() {
        let keys = 100u64;
        let counts = counts(Distribution::Uniform, keys, 7, SAMPLES);
        let expected = SAMPLES as f64 / keys as f64;
        let chi_square: f64 = counts
            .iter()
            .map(|&c| (c as f64 - expected).powi(2) / expected)
            .sum();
        // 99 degrees of freedom: mean 99, standard deviation 14; 200 is about seven sigma.
        assert!(chi_square < 200.0, "chi-square {chi_square}");
        assert!(
            chi_square > 40.0,
            "suspiciously even: chi-square {chi_square}"
        );
    }

    #[test]
    fn zipf_head_frequencies_match_exact_pmf() {
        let (keys, theta) = (1000u64, 0.99);
        let counts = counts(Distribution::Zipf { theta }, keys, 11, SAMPLES);
        for rank in [0u64, 1, 2, 9, 100] {
            let freq = counts[rank as usize] as f64 / SAMPLES as f64;
            assert_close(
                &format!("rank {rank}"),
                freq,
                zipf_pmf(rank, keys, theta),
                0.10,
            );
        }
        // Ranks spread over the head table and the integral tail sum to the exact CDF.
        for upto in [64u64, 65, 200, 999] {
            let freq = counts[..upto as usize].iter().sum::<u64>() as f64 / SAMPLES as f64;
            let want: f64 = (0..upto).map(|r| zipf_pmf(r, keys, theta)).sum();
            assert_close(&format!("cdf below {upto}"), freq, want, 0.01);
        }
    }

    #[test]
    fn zipf_sampler_masses_match_pmf_analytically() {
        // Without sampling noise: the sampler's own per-rank masses against the exact pmf.
        for (n, theta) in [(1000u64, 0.99), (1_000_000, 0.99), (5000, 1.0), (5000, 1.3)] {
            let zipf = ZipfExact::new(n, theta);
            let z = zeta_exact(n, theta);
            assert_close("total mass", zipf.total_mass, z, 1e-4);
            for rank in [0u64, 1, 2, 9, 63, 64, 65, 500, n - 1] {
                let mass = if (rank as usize) < HEAD_RANKS {
                    ((rank + 1) as f64).powf(-theta)
                } else {
                    power_integral(rank as f64 + 0.5, rank as f64 + 1.5, 1.0 - theta)
                };
                // Head ranks are exact up to the normalisation, which carries the tail's
                // midpoint-rule error (1.3e-6 relative at n = 1000, theta = 0.99).
                let rel_tol = if (rank as usize) < HEAD_RANKS {
                    1e-5
                } else {
                    1e-4
                };
                assert_close(
                    &format!("n {n} theta {theta} rank {rank}"),
                    mass / zipf.total_mass,
                    ((rank + 1) as f64).powf(-theta) / z,
                    rel_tol,
                );
            }
        }
    }

    #[test]
    fn zipf_top_ten_share_matches_theory_over_a_million_keys() {
        let (keys, theta) = (1_000_000u64, 0.99);
        let mut gen = KeyGen::new(Distribution::Zipf { theta }, keys, 3);
        let top10 = (0..SAMPLES).filter(|_| gen.next_index() < 10).count();
        let share = top10 as f64 / SAMPLES as f64;
        let want = zeta_exact(10, theta) / zeta(keys, theta);
        assert_close("top-10 share", share, want, 0.02);
    }

    #[test]
    fn zeta_euler_maclaurin_matches_exact_sum() {
        for theta in [0.5, 0.99, 1.0, 1.2] {
            let n = 1_000_000;
            let exact = zeta_exact(n, theta);
            let approx = zeta_euler_maclaurin(n, theta);
            assert_close(&format!("zeta(1e6, {theta})"), approx, exact, 1e-13);
        }
        assert_close(
            "zeta(1025, 0.99)",
            zeta_euler_maclaurin(1025, 0.99),
            zeta_exact(1025, 0.99),
            1e-14,
        );
        // YCSB's hard-coded constant is zeta(10^10, 0.99). Euler–Maclaurin gives
        // 26.46902820175148, 1.2e-12 below it: about what 10^10 sequential double additions
        // (how YCSB computed it) accumulate in rounding error.
        assert_close(
            "YCSB zetan",
            zeta(YCSB_ITEM_COUNT, YCSB_THETA),
            YCSB_ZETAN,
            1e-11,
        );
    }

    #[test]
    fn fnv_matches_reference_values() {
        // Computed independently (Python): FNV-1a 64 over the little-endian bytes, then the
        // absolute value as a signed integer. 0 and 1 hash to negative values, 4 and
        // 12345678901 to positive ones.
        assert_eq!(ycsb_fnv1a64(0), 0x5738_07cd_d7e5_c63b);
        assert_eq!(ycsb_fnv1a64(1), 0x7632_ced6_e2d5_105c);
        assert_eq!(ycsb_fnv1a64(4), 0x2cdc_dc0d_fc5d_1141);
        assert_eq!(ycsb_fnv1a64(12_345_678_901), 0x4eea_abc3_253b_9607);
    }

    #[test]
    fn ycsb_zipf_has_a_zipf_head_scattered_over_the_key_space() {
        let (keys, theta) = (100_000u64, 0.99);
        let counts = counts(Distribution::YcsbZipf { theta }, keys, 5, SAMPLES);
        let mut by_freq: Vec<(u64, u64)> = counts
            .iter()
            .enumerate()
            .map(|(index, &c)| (c, index as u64))
            .collect();
        by_freq.sort_unstable_by(|a, b| b.cmp(a));
        let freq = |i: usize| by_freq[i].0 as f64 / SAMPLES as f64;
        // Ranks 0 and 1 are exact in Gray's method: 1/zetan and 0.5^theta/zetan.
        assert_close("hottest key", freq(0), 1.0 / YCSB_ZETAN, 0.05);
        assert_close("second key", freq(1), 0.5f64.powf(theta) / YCSB_ZETAN, 0.05);
        // Same heavy-head shape as plain Zipf: the hottest key is 2^theta times the second.
        let plain = counts_sorted(Distribution::Zipf { theta }, keys);
        assert_close("ycsb top1/top2", freq(0) / freq(1), 2f64.powf(theta), 0.08);
        assert_close(
            "zipf top1/top2",
            plain[0] / plain[1],
            2f64.powf(theta),
            0.08,
        );
        // Hot keys are not clustered at low indices: of the ten hottest, few sit in the lowest
        // tenth of the key space (one expected), and they reach past the middle.
        let hot: Vec<u64> = by_freq[..10].iter().map(|&(_, index)| index).collect();
        let low = hot.iter().filter(|&&i| i < keys / 10).count();
        assert!(low <= 4, "hot indices clustered low: {hot:?}");
        assert!(
            hot.iter().any(|&i| i > keys / 2),
            "no hot index above the middle: {hot:?}"
        );
    }

    fn counts_sorted(dist: Distribution, keys: u64) -> Vec<f64> {
        let mut c: Vec<f64> = counts(dist, keys, 5, SAMPLES)
            .into_iter()
            .map(|c| c as f64)
            .collect();
        c.sort_unstable_by(|a, b| b.total_cmp(a));
        c
    }

    #[test]
    fn same_seed_same_sequence_and_fill_matches_next_index() {
        for dist in [
            Distribution::Uniform,
            Distribution::Zipf { theta: 0.99 },
            Distribution::YcsbZipf { theta: 0.99 },
        ] {
            let (mut a, mut b) = (
                KeyGen::new(dist, 1 << 20, 42),
                KeyGen::new(dist, 1 << 20, 42),
            );
            let from_next: Vec<u64> = (0..10_000).map(|_| a.next_index()).collect();
            let mut from_fill = vec![0u64; 10_000];
            b.fill(&mut from_fill);
            assert_eq!(from_next, from_fill, "{dist:?}");
            let mut c = KeyGen::new(dist, 1 << 20, 43);
            let other: Vec<u64> = (0..10_000).map(|_| c.next_index()).collect();
            assert_ne!(from_next, other, "{dist:?}: seeds 42 and 43 agree");
        }
    }

    #[test]
    fn every_index_is_below_keys() {
        let dists = [
            Distribution::Uniform,
            Distribution::Zipf { theta: 0.99 },
            Distribution::Zipf { theta: 0.2 },
            Distribution::Zipf { theta: 1.0 },
            Distribution::Zipf { theta: 3.0 },
            Distribution::YcsbZipf { theta: 0.99 },
            Distribution::YcsbZipf { theta: 0.3 },
        ];
        for dist in dists {
            for keys in [1u64, 2, 3, 63, 64, 65, 1000, (1 << 32) + 7, KEYS_MAX] {
                let mut gen = KeyGen::new(dist, keys, keys ^ 0x9e37);
                let mut out = vec![0u64; 20_000];
                gen.fill(&mut out);
                let max = out.iter().copied().max().unwrap();
                assert!(max < keys, "{dist:?} keys {keys}: index {max}");
            }
        }
        // The very top of the unit interval maps to the last rank, not past it.
        let zipf = ZipfExact::new(1000, 0.99);
        let mut rng = SmallRng::seed_from_u64(0);
        assert!((0..1000).all(|_| zipf.sample(&mut rng) < 1000));
        let ycsb = YcsbScrambled::new(10, 0.99);
        assert!(ycsb.rank(1.0 - f64::EPSILON) < ycsb.items);
    }

    #[test]
    fn set_up_is_fast_for_four_billion_keys() {
        let start = std::time::Instant::now();
        for dist in [
            Distribution::Zipf { theta: 0.99 },
            Distribution::YcsbZipf { theta: 0.8 },
        ] {
            let mut gen = KeyGen::new(dist, 1 << 32, 1);
            assert!(gen.next_index() < 1 << 32);
        }
        assert!(start.elapsed().as_millis() < 200, "{:?}", start.elapsed());
    }
}
