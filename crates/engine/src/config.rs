//! Engine configuration, its named limits, and the automatic choice of hash index ratio and
//! inline threshold (seed 002, "hash index ratio" and "inline threshold").
//!
//! The tuner models the table analytically: keys land in main buckets as a Poisson process;
//! a bucket holds `cap` key-values (10 pointer slots, or 10 / slots-per-inline-kv); overflow goes
//! to chained 64-byte buckets taken from the slab region, as do non-inline records. For a target
//! memory utilization it picks, per storage choice (inline or not), the largest hash index ratio
//! whose expected slab demand still fits, then keeps the choice with the fewest expected memory
//! accesses per GET. A larger ratio means shorter chains (fewer accesses) but less room for
//! chains and records, which is the trade-off the seed plots.

use crate::index::bucket::{INLINE_BYTES_MAX, SLOTS};
use crate::index::record;
use crate::slab::class_size_bytes;

pub const KEY_LEN_MAX_DEFAULT: usize = 250;
pub const VALUE_LEN_MAX_DEFAULT: usize = 1 << 20;
/// Default `results_bytes_max`: reply bytes one batch may produce (64 MiB, 64 values of the
/// default `value_len_max`). An operation whose reply data would pass it gets
/// `OpError::ReplyTooLarge` instead; the limit also keeps every result offset within `u32`.
pub const RESULTS_BYTES_MAX_DEFAULT: usize = 64 << 20;
pub const WINDOW_DEFAULT: usize = 256;
pub const WINDOW_MAX: usize = 4096;
pub const EXPECTED_KV_BYTES_DEFAULT: usize = 32;
pub const TARGET_UTILIZATION_DEFAULT: f64 = 0.5;
/// Slab demand is planned to use at most this share of the slab region (fragmentation margin).
const SLAB_PLAN_SHARE: f64 = 0.95;
/// When planning for capacity, accept this share of the best capacity for a larger index.
const CAPACITY_SHARE: f64 = 0.985;

/// How operations on the same key inside a window are handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExecMode {
    /// Reservation station with data forwarding (the design).
    Forward,
    /// Stall the pipeline at every key conflict (for measurement only).
    Stall,
}

/// Limits checked where operations enter the engine.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub key_len_max: usize,
    pub value_len_max: usize,
    /// Reply bytes of one batch (see `RESULTS_BYTES_MAX_DEFAULT`).
    pub results_bytes_max: usize,
}

#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Arena bytes (index + slab), at most 64 GiB.
    pub memory_bytes: usize,
    /// Share of the arena used by the hash index; chosen by `tune` when None.
    pub hash_index_ratio: Option<f64>,
    /// Key-values with key + value bytes below this are stored inline; chosen when None.
    pub inline_threshold: Option<usize>,
    /// Expected key + value bytes, for tuning.
    pub expected_kv_bytes: usize,
    /// Memory utilization the store should reach, for tuning.
    pub target_utilization: f64,
    pub key_len_max: usize,
    pub value_len_max: usize,
    /// Reply bytes one batch may produce, at least `value_len_max` and at most `u32::MAX`.
    pub results_bytes_max: usize,
    /// Operations in flight in the pipeline.
    pub window: usize,
    pub mode: ExecMode,
    /// Touch every page at start-up so measurements do not include page faults.
    pub prefault: bool,
    /// What goes when the slab region runs short (`crate::evict`; Redis's `maxmemory-policy`).
    pub eviction_policy: crate::evict::EvictionPolicy,
    /// Share of the arena's bytes eviction keeps free in the slab region
    /// (`EVICTION_WATERMARK_DEFAULT`, at most `EVICTION_WATERMARK_MAX`).
    pub eviction_watermark: f64,
}

impl EngineConfig {
    pub fn with_memory(memory_bytes: usize) -> EngineConfig {
        EngineConfig {
            memory_bytes,
            hash_index_ratio: None,
            inline_threshold: None,
            expected_kv_bytes: EXPECTED_KV_BYTES_DEFAULT,
            target_utilization: TARGET_UTILIZATION_DEFAULT,
            key_len_max: KEY_LEN_MAX_DEFAULT,
            value_len_max: VALUE_LEN_MAX_DEFAULT,
            results_bytes_max: RESULTS_BYTES_MAX_DEFAULT,
            window: WINDOW_DEFAULT,
            mode: ExecMode::Forward,
            prefault: false,
            eviction_policy: crate::evict::EvictionPolicy::NoEviction,
            eviction_watermark: crate::evict::EVICTION_WATERMARK_DEFAULT,
        }
    }
}

/// The tuner's choice and what it expects.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tuning {
    pub hash_index_ratio: f64,
    pub inline_threshold: usize,
    pub inline: bool,
    /// Expected memory accesses of a GET hit at the target utilization.
    pub expected_accesses_per_get: f64,
    /// Whether the target utilization is expected to fit at all.
    pub feasible: bool,
}

/// Expected (chained buckets per main bucket, mean extra bucket reads per stored key) when keys
/// arrive as Poisson(lambda) per main bucket and each bucket holds `cap` of them.
fn chain_model(lambda: f64, cap: usize) -> (f64, f64) {
    let mut chains = 0.0;
    let mut depth_sum = 0.0;
    let k_max = (lambda + 12.0 * lambda.sqrt() + 40.0) as usize;
    let mut p = (-lambda).exp(); // P(k = 0)
    for k in 0..=k_max {
        if k > 0 {
            p *= lambda / k as f64;
        }
        let over = k.saturating_sub(cap);
        chains += p * over.div_ceil(cap) as f64;
        // The i-th key of a bucket (0-based) sits in chain position i / cap.
        let depth: usize = (0..k).map(|i| i / cap).sum();
        depth_sum += p * depth as f64;
    }
    (
        chains,
        if lambda > 0.0 {
            depth_sum / lambda
        } else {
            0.0
        },
    )
}

/// Bytes per key-value of the storage choice, outside the index (records), and bucket capacity.
fn storage(kv_bytes: usize, inline: bool) -> (f64, usize) {
    if inline {
        // Inline key-values are packed byte by byte.
        (0.0, INLINE_BYTES_MAX / kv_bytes)
    } else {
        let klen = kv_bytes / 2;
        let l = record::layout(klen.max(1), kv_bytes - klen.min(kv_bytes), 16, false, false)
            .expect("kv size fits a slab class");
        (class_size_bytes(l.class) as f64, SLOTS)
    }
}

/// Expected slab bytes needed for `keys` keys at ratio r.
fn slab_demand(memory: f64, r: f64, keys: f64, rec_bytes: f64, cap: usize) -> f64 {
    let buckets = (r * memory / 64.0).max(1.0);
    let (chains, _) = chain_model(keys / buckets, cap);
    buckets * chains * 64.0 + keys * rec_bytes
}

/// Largest utilization that fits at ratio r (binary search over the key count).
pub fn capacity_utilization(memory: usize, kv_bytes: usize, r: f64, inline: bool) -> f64 {
    let m = memory as f64;
    let (rec, cap) = storage(kv_bytes, inline);
    let (mut lo, mut hi) = (0.0f64, m / kv_bytes as f64);
    for _ in 0..50 {
        let mid = (lo + hi) / 2.0;
        let fits = slab_demand(m, r, mid, rec, cap) <= (1.0 - r) * m * SLAB_PLAN_SHARE
            && (!inline || mid * kv_bytes as f64 <= r * m * 50.0 / 64.0 + (1.0 - r) * m);
        if fits {
            lo = mid
        } else {
            hi = mid
        }
    }
    lo * kv_bytes as f64 / m
}

fn best_ratio(memory: usize, kv_bytes: usize, target: f64, inline: bool) -> Option<(f64, f64)> {
    let m = memory as f64;
    let keys = target * m / kv_bytes as f64;
    let (rec, cap) = storage(kv_bytes, inline);
    let mut best = None;
    for step in 1..100 {
        let r = step as f64 / 100.0;
        if slab_demand(m, r, keys, rec, cap) <= (1.0 - r) * m * SLAB_PLAN_SHARE {
            let buckets = r * m / 64.0;
            let (_, depth) = chain_model(keys / buckets, cap);
            let accesses = 1.0 + depth + if inline { 0.0 } else { 1.0 };
            best = Some((r, accesses));
        }
    }
    best
}

/// Chooses hash index ratio and inline threshold for key-values of about `kv_bytes` at
/// `target_utilization` of `memory` bytes.
pub fn tune(memory: usize, kv_bytes: usize, target_utilization: f64) -> Tuning {
    let kv_bytes = kv_bytes.clamp(1, 1 << 20);
    let can_inline = kv_bytes <= INLINE_BYTES_MAX;
    let mut options = Vec::new();
    for inline in [true, false] {
        if inline && !can_inline {
            continue;
        }
        if let Some((r, acc)) = best_ratio(memory, kv_bytes, target_utilization, inline) {
            options.push((acc, r, inline));
        }
    }
    let threshold_for = |inline: bool| {
        if inline {
            // Up to the next multiple of 5 bytes, so sizes a little above the expected one
            // stay inline too.
            (kv_bytes.div_ceil(5) * 5 + 1).min(INLINE_BYTES_MAX + 1)
        } else {
            kv_bytes.min(INLINE_BYTES_MAX + 1)
        }
    };
    if let Some(&(acc, r, inline)) = options.iter().min_by(|a, b| a.0.total_cmp(&b.0)) {
        return Tuning {
            hash_index_ratio: r,
            inline_threshold: threshold_for(inline),
            inline,
            expected_accesses_per_get: acc,
            feasible: true,
        };
    }
    // The target does not fit: plan for capacity. Capacity keeps creeping up as the index
    // shrinks (chains fill more evenly) while lookups get much longer, so take the largest
    // index whose capacity is within CAPACITY_SHARE of the best.
    let mut curve = Vec::new();
    for inline in [true, false] {
        if inline && !can_inline {
            continue;
        }
        for step in 1..100 {
            let r = step as f64 / 100.0;
            curve.push((capacity_utilization(memory, kv_bytes, r, inline), r, inline));
        }
    }
    let top = curve.iter().map(|c| c.0).fold(0.0, f64::max);
    let best = curve
        .iter()
        .filter(|c| c.0 >= CAPACITY_SHARE * top)
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .copied()
        .unwrap_or((0.0, 0.5, false));
    Tuning {
        hash_index_ratio: best.1,
        inline_threshold: threshold_for(best.2),
        inline: best.2,
        expected_accesses_per_get: f64::NAN,
        feasible: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_kvs_are_inlined_with_a_large_index_at_half_utilization() {
        let t = tune(2 << 30, 10, 0.5);
        assert!(t.feasible && t.inline, "{t:?}");
        assert!(t.hash_index_ratio > 0.6, "{t:?}");
        assert!(t.expected_accesses_per_get < 1.1, "{t:?}");
        assert_eq!(t.inline_threshold, 11);
    }

    #[test]
    fn large_kvs_go_to_the_slab() {
        let t = tune(2 << 30, 254, 0.5);
        assert!(t.feasible && !t.inline, "{t:?}");
        assert!(t.hash_index_ratio < 0.5, "{t:?}");
    }

    #[test]
    fn higher_utilization_means_smaller_index() {
        let a = tune(1 << 30, 10, 0.3);
        let b = tune(1 << 30, 10, 0.7);
        assert!(a.hash_index_ratio > b.hash_index_ratio, "{a:?} {b:?}");
    }

    #[test]
    fn impossible_target_plans_for_capacity() {
        let t = tune(1 << 30, 10, 0.99);
        assert!(!t.feasible);
        assert!(capacity_utilization(1 << 30, 10, t.hash_index_ratio, t.inline) > 0.7);
    }
}
