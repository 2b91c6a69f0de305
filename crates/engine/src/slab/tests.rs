//! Unit tests for the slab allocator, including a randomized run against a model that tracks
//! live blocks in a `BTreeMap` to prove no two allocations overlap.

use super::*;
use std::collections::BTreeMap;

fn config(base_unit: u32, units: u32, top_class: u8) -> SlabConfig {
    SlabConfig {
        base_unit,
        units,
        top_class,
        hot_cache_len: SLAB_HOT_CACHE_LEN_DEFAULT,
        batch_len: SLAB_BATCH_LEN_DEFAULT,
    }
}

fn region_bytes(cfg: &SlabConfig) -> u64 {
    u64::from(cfg.units) * SLAB_UNIT_BYTES as u64
}

/// Fixed-seed xorshift64, so the randomized test is deterministic.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound
    }
}

/// Live allocations keyed by first unit, valued by end unit (exclusive), plus a list for picking
/// a random victim.
#[derive(Default)]
struct Model {
    intervals: BTreeMap<u32, u32>,
    live: Vec<(u32, u8)>,
    live_units: u64,
}

impl Model {
    /// Records a new allocation after checking it lies in the region, is aligned and overlaps
    /// no live allocation.
    fn insert(&mut self, cfg: &SlabConfig, addr: u32, class: u8) {
        let end = addr + (1 << class);
        assert!(
            addr >= cfg.base_unit && end <= cfg.base_unit + cfg.units,
            "out of region"
        );
        assert_eq!((addr - cfg.base_unit) % (1 << class), 0, "misaligned");
        if let Some((&start, &prev_end)) = self.intervals.range(..=addr).next_back() {
            assert!(prev_end <= addr, "{addr} overlaps live block at {start}");
        }
        if let Some((&next_start, _)) = self.intervals.range(addr..).next() {
            assert!(
                end <= next_start,
                "{addr}..{end} overlaps live block at {next_start}"
            );
        }
        self.intervals.insert(addr, end);
        self.live.push((addr, class));
        self.live_units += 1 << class;
    }

    fn remove(&mut self, index: usize) -> (u32, u8) {
        let (addr, class) = self.live.swap_remove(index);
        assert_eq!(self.intervals.remove(&addr), Some(addr + (1 << class)));
        self.live_units -= 1 << class;
        (addr, class)
    }
}

fn assert_accounting(slab: &SlabAllocator, cfg: &SlabConfig, model: &Model) {
    let live_bytes = model.live_units * SLAB_UNIT_BYTES as u64;
    assert_eq!(slab.allocated_bytes(), live_bytes);
    assert_eq!(slab.free_bytes(), region_bytes(cfg) - live_bytes);
}

#[test]
fn class_for_size_boundaries() {
    assert_eq!(class_for_size(1, 16), Some(0));
    assert_eq!(class_for_size(32, 16), Some(0));
    assert_eq!(class_for_size(33, 16), Some(1));
    assert_eq!(class_for_size(64, 16), Some(1));
    assert_eq!(class_for_size(65, 16), Some(2));
    assert_eq!(class_for_size(512, 16), Some(4));
    assert_eq!(class_for_size(2 << 20, 16), Some(16));
    assert_eq!(class_for_size((2 << 20) + 1, 16), None);
    assert_eq!(class_for_size(33, 0), None);
    assert_eq!(class_for_size(usize::MAX, 21), None);
    assert_eq!(class_size_bytes(0), 32);
    assert_eq!(class_size_bytes(16), 2 << 20);
    for class in 0..CLASS_COUNT_MAX as u8 {
        let size = class_size_bytes(class);
        assert_eq!(class_for_size(size, class), Some(class));
        assert_eq!(class_for_size(size + 1, class), None);
    }
}

#[test]
fn fill_class_zero_then_merge_back_to_top() {
    let cfg = config(1 << 10, 1 << 12, 6);
    let mut slab = SlabAllocator::new(cfg);
    let mut addrs = Vec::new();
    while let Some(addr) = slab.alloc(0) {
        addrs.push(addr);
    }
    assert_eq!(addrs.len(), cfg.units as usize);
    assert_eq!(slab.free_bytes(), 0);
    assert_eq!(slab.allocated_bytes(), region_bytes(&cfg));
    addrs.sort_unstable();
    addrs.dedup();
    assert_eq!(
        addrs.len(),
        cfg.units as usize,
        "an address was handed out twice"
    );
    assert_eq!(addrs[0], cfg.base_unit);
    slab.check_invariants();

    for &addr in &addrs {
        slab.free(addr, 0);
    }
    slab.check_invariants();
    assert_eq!(slab.free_bytes(), region_bytes(&cfg));
    let merges_before = slab.stats().merges;
    let top = slab
        .alloc(cfg.top_class)
        .expect("merging must rebuild a top-class block");
    assert_eq!((top - cfg.base_unit) % (1 << cfg.top_class), 0);
    let stats = slab.stats();
    assert_eq!(stats.merges, merges_before + 1);
    assert!(stats.merged_blocks >= u64::from(cfg.units) - 64);
    // Everything merged back: every other top-class block is free again.
    assert_eq!(stats.free_blocks[6], u64::from(cfg.units >> 6) - 1);
    assert_eq!(stats.free_blocks[..6].iter().sum::<u64>(), 0);
    slab.check_invariants();
}

#[test]
fn alternating_classes_do_not_overlap() {
    let cfg = config(0, 1 << 12, 8);
    let mut slab = SlabAllocator::new(cfg);
    let mut model = Model::default();
    let classes = [0u8, 3, 1, 8, 2, 5, 0, 7];
    let mut round = 0;
    while let Some(addr) = slab.alloc(classes[round % classes.len()]) {
        model.insert(&cfg, addr, classes[round % classes.len()]);
        round += 1;
    }
    assert!(round > 20);
    assert_accounting(&slab, &cfg, &model);
    slab.check_invariants();
    // Free every other block and allocate the same classes again into the holes.
    for index in (0..model.live.len()).rev().step_by(2) {
        let (addr, class) = model.remove(index);
        slab.free(addr, class);
    }
    slab.check_invariants();
    for class in classes {
        if let Some(addr) = slab.alloc(class) {
            model.insert(&cfg, addr, class);
        }
    }
    assert_accounting(&slab, &cfg, &model);
    slab.check_invariants();
    assert!(slab.stats().splits > 0);
}

#[test]
fn out_of_memory_returns_none_and_stays_consistent() {
    let cfg = config(64, 256, 4);
    let mut slab = SlabAllocator::new(cfg);
    let mut model = Model::default();
    for _ in 0..(256 >> 4) {
        let addr = slab.alloc(4).expect("region holds 16 top-class blocks");
        model.insert(&cfg, addr, 4);
    }
    assert_eq!(slab.alloc(0), None);
    assert_eq!(slab.alloc(4), None);
    let stats = slab.stats();
    assert_eq!(stats.alloc_failures, 2);
    assert_eq!(stats.allocs, 16);
    assert_accounting(&slab, &cfg, &model);
    slab.check_invariants();

    // Free one block, carve it into class-0 blocks; a class-1 request must then fail cleanly.
    let (addr, class) = model.remove(0);
    slab.free(addr, class);
    for _ in 0..16 {
        let addr = slab.alloc(0).expect("the freed block holds 16 units");
        model.insert(&cfg, addr, 0);
    }
    assert_eq!(slab.alloc(1), None);
    assert_eq!(slab.alloc(0), None);
    assert_eq!(slab.stats().alloc_failures, 4);
    assert_accounting(&slab, &cfg, &model);
    slab.check_invariants();
    // A fragmented free state: 8 units free but never two buddies, so class 1 fails after merge.
    for index in (0..model.live.len()).rev() {
        let (addr, class) = model.live[index];
        if class == 0 && (addr - cfg.base_unit).is_multiple_of(2) {
            model.remove(index);
            slab.free(addr, class);
        }
    }
    assert_eq!(slab.free_bytes(), 8 * 32);
    assert_eq!(slab.alloc(1), None);
    assert_accounting(&slab, &cfg, &model);
    slab.check_invariants();
}

#[test]
fn remainder_region_loses_no_space() {
    // 3 top-class blocks of 64 units plus 37 = 32 + 4 + 1 units.
    let units = 3 * 64 + 37;
    let cfg = config(4096, units, 6);
    let mut slab = SlabAllocator::new(cfg);
    let stats = slab.stats();
    assert_eq!(stats.free_blocks[6], 3);
    assert_eq!(stats.free_blocks[5], 1);
    assert_eq!(stats.free_blocks[2], 1);
    assert_eq!(stats.free_blocks[0], 1);
    assert_eq!(slab.free_bytes(), u64::from(units) * 32);
    slab.check_invariants();

    let mut addrs = Vec::new();
    while let Some(addr) = slab.alloc(0) {
        addrs.push(addr);
    }
    assert_eq!(addrs.len(), units as usize);
    for &addr in &addrs {
        slab.free(addr, 0);
    }
    // After merging, the same shape comes back: 3 top blocks and the remainder pieces.
    let mut model = Model::default();
    while let Some(addr) = slab.alloc(6) {
        model.insert(&cfg, addr, 6);
    }
    assert_eq!(model.live.len(), 3);
    let stats = slab.stats();
    assert_eq!(stats.free_blocks[5], 1);
    assert_eq!(stats.free_blocks[2], 1);
    assert_eq!(stats.free_blocks[0], 1);
    assert_accounting(&slab, &cfg, &model);
    slab.check_invariants();
}

#[test]
fn hot_cache_refills_and_spills_in_batches() {
    let cfg = SlabConfig {
        base_unit: 0,
        units: 1 << 10,
        top_class: 3,
        hot_cache_len: 8,
        batch_len: 4,
    };
    let mut slab = SlabAllocator::new(cfg);
    let addrs: Vec<u32> = (0..100).map(|_| slab.alloc(0).unwrap()).collect();
    for &addr in &addrs {
        slab.free(addr, 0);
    }
    let stats = slab.stats();
    assert!(stats.hot_blocks[0] <= 8);
    assert!(stats.spills >= (100 - 8) / 4);
    assert!(stats.refills > 0);
    // LIFO reuse: the last freed block comes back first.
    assert_eq!(slab.alloc(0), Some(addrs[99]));
    slab.check_invariants();
}

#[test]
#[should_panic(expected = "top_class")]
fn rejects_top_class_out_of_range() {
    SlabAllocator::new(config(0, 1024, CLASS_COUNT_MAX as u8));
}

#[test]
#[should_panic(expected = "batch_len")]
fn rejects_batch_larger_than_hot_cache() {
    let mut cfg = config(0, 1024, 4);
    cfg.batch_len = cfg.hot_cache_len + 1;
    SlabAllocator::new(cfg);
}

/// Picks a class with a bias that changes by phase, so the run moves between small-heavy and
/// large-heavy workloads and exercises splitting, merging and failure.
fn random_class(rng: &mut XorShift, phase: u64, top_class: u8) -> u8 {
    let top = u64::from(top_class);
    match phase % 3 {
        0 => (rng.next().trailing_zeros() as u64).min(top) as u8,
        1 => rng.below(top + 1) as u8,
        _ => (top - (rng.next().trailing_zeros() as u64).min(top)) as u8,
    }
}

#[test]
fn randomized_against_model() {
    let cfg = SlabConfig {
        base_unit: 1 << 20,
        units: 5000, // not a multiple of the 256-unit top class
        top_class: 8,
        hot_cache_len: 16,
        batch_len: 8,
    };
    let mut slab = SlabAllocator::new(cfg);
    let mut model = Model::default();
    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
    let ops = 100_000u64;
    for op in 0..ops {
        // Phases alternate between filling (memory pressure, failures) and draining.
        let phase = op / 5_000;
        let alloc_percent = if phase % 2 == 0 { 60 } else { 40 };
        let want_alloc = model.live.is_empty() || rng.below(100) < alloc_percent;
        if want_alloc {
            let class = random_class(&mut rng, phase, cfg.top_class);
            match slab.alloc(class) {
                Some(addr) => model.insert(&cfg, addr, class),
                None => {
                    // A failure is only allowed once merging left nothing of `class` or above.
                    let stats = slab.stats();
                    let larger: u64 = stats.free_blocks[usize::from(class)..].iter().sum();
                    assert_eq!(larger, 0, "op {op}: class {class} failed with blocks free");
                }
            }
        } else {
            let index = rng.below(model.live.len() as u64) as usize;
            let (addr, class) = model.remove(index);
            slab.free(addr, class);
        }
        assert_accounting(&slab, &cfg, &model);
        if op % 2_000 == 0 {
            slab.check_invariants();
        }
    }
    let stats = slab.stats();
    assert!(stats.splits > 0 && stats.merges > 0 && stats.alloc_failures > 0);
    assert!(stats.refills > 0 && stats.spills > 0);

    // Free everything: the region must merge back to its initial shape.
    while !model.live.is_empty() {
        let (addr, class) = model.remove(model.live.len() - 1);
        slab.free(addr, class);
    }
    slab.check_invariants();
    let mut top_blocks = 0;
    while let Some(addr) = slab.alloc(cfg.top_class) {
        model.insert(&cfg, addr, cfg.top_class);
        top_blocks += 1;
    }
    assert_eq!(top_blocks, cfg.units >> cfg.top_class);
    slab.check_invariants();
}
