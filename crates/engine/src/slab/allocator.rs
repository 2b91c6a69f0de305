//! `SlabAllocator`: the per-class pools plus the split and lazy-merge logic tying them together.
//! See the module comment in `mod.rs` for the design.

use super::pool::ClassPool;
use super::{
    class_size_bytes, SlabConfig, SlabStats, CLASS_COUNT_MAX, SLAB_ADDR_UNITS_MAX,
    SLAB_HOT_CACHE_LEN_MAX, SLAB_UNIT_BYTES,
};
use std::fmt;

/// Buddy allocator of one shard's slab region, addresses in 32-byte units.
pub struct SlabAllocator {
    cfg: SlabConfig,
    /// One entry per class `0..=top_class`, all sized at construction.
    classes: Vec<ClassPool>,
    free_units: u64,
    allocated_units: u64,
    /// Whether a free happened since the last merge; without one a merge cannot join anything.
    freed_since_merge: bool,
    /// Counters only; the per-class arrays are filled in by `stats`.
    counters: SlabStats,
}

impl SlabAllocator {
    /// Builds the allocator with the whole region free, carved into top-class blocks and smaller
    /// blocks for the remainder. Panics on a nonsensical configuration.
    pub fn new(cfg: SlabConfig) -> SlabAllocator {
        assert!(
            usize::from(cfg.top_class) < CLASS_COUNT_MAX,
            "top_class {} must be below {CLASS_COUNT_MAX}",
            cfg.top_class
        );
        assert!(cfg.units >= 1, "slab region must not be empty");
        assert!(
            u64::from(cfg.base_unit) + u64::from(cfg.units) <= SLAB_ADDR_UNITS_MAX,
            "slab region must end within {SLAB_ADDR_UNITS_MAX} units"
        );
        assert!(
            (1..=SLAB_HOT_CACHE_LEN_MAX).contains(&cfg.hot_cache_len),
            "hot_cache_len {} must be in 1..={SLAB_HOT_CACHE_LEN_MAX}",
            cfg.hot_cache_len
        );
        assert!(
            (1..=cfg.hot_cache_len).contains(&cfg.batch_len),
            "batch_len {} must be in 1..=hot_cache_len",
            cfg.batch_len
        );
        let classes = (0..=cfg.top_class)
            .map(|class| ClassPool::new(cfg.hot_cache_len, (cfg.units >> class) as usize))
            .collect();
        let mut slab = SlabAllocator {
            cfg,
            classes,
            free_units: 0,
            allocated_units: 0,
            freed_since_merge: false,
            counters: SlabStats::default(),
        };
        slab.carve_region();
        slab
    }

    /// Frees every block at once: the allocator is as `new` left it, counters included (the
    /// owner forgets every address it holds, `Table::clear`). Costs one push per top-class
    /// block of the region; the pools keep their reserved capacity, so nothing allocates.
    pub fn reset(&mut self) {
        for pool in &mut self.classes {
            pool.clear();
        }
        self.free_units = 0;
        self.allocated_units = 0;
        self.freed_since_merge = false;
        self.counters = SlabStats::default();
        self.carve_region();
    }

    /// Fills the pools with the initial free blocks: top-class blocks from offset 0, then the
    /// remainder as at most one block per smaller class, largest first so each is aligned.
    fn carve_region(&mut self) {
        let top = usize::from(self.cfg.top_class);
        let units = self.cfg.units;
        let top_blocks = units >> top;
        let mut offset = top_blocks << top;
        for class in (0..top).rev() {
            if units & (1 << class) != 0 {
                self.classes[class].push_pool(offset);
                offset += 1 << class;
            }
        }
        debug_assert_eq!(offset, units);
        // Pushed highest first so that pops hand out low addresses first.
        for index in (0..top_blocks).rev() {
            self.classes[top].push_pool(index << top);
        }
        self.free_units = u64::from(units);
    }

    /// Allocates a block of `class` (at most the top class) and returns its first unit, or `None`
    /// when no block that large is free even after merging.
    pub fn alloc(&mut self, class: u8) -> Option<u32> {
        assert!(class <= self.cfg.top_class, "class {class} above top class");
        let class = usize::from(class);
        let mut found = self.take(class);
        if found.is_none() && self.merge_can_help(class) {
            self.merge_all();
            found = self.take(class);
        }
        let Some(offset) = found else {
            self.counters.alloc_failures += 1;
            return None;
        };
        let units = 1u64 << class;
        self.free_units -= units;
        self.allocated_units += units;
        self.counters.allocs += 1;
        Some(self.cfg.base_unit + offset)
    }

    /// Returns a block obtained from `alloc(class)` with the same class.
    pub fn free(&mut self, addr: u32, class: u8) {
        debug_assert!(class <= self.cfg.top_class, "class {class} above top class");
        debug_assert!(
            addr >= self.cfg.base_unit,
            "address {addr} below the region"
        );
        let offset = addr - self.cfg.base_unit;
        let class = usize::from(class);
        debug_assert!(
            u64::from(offset) + (1u64 << class) <= u64::from(self.cfg.units),
            "block {addr} of class {class} runs past the region"
        );
        debug_assert_eq!(
            offset % (1 << class),
            0,
            "block {addr} not aligned to its class"
        );
        let batch_len = self.cfg.batch_len;
        let pool = &mut self.classes[class];
        if pool.hot_is_full() {
            pool.spill(batch_len);
            self.counters.spills += 1;
        }
        pool.push_hot(offset);
        let units = 1u64 << class;
        self.free_units += units;
        self.allocated_units -= units;
        self.freed_since_merge = true;
        self.counters.frees += 1;
    }

    /// Total bytes free over all classes, hot caches and pools.
    pub fn free_bytes(&self) -> u64 {
        self.free_units * SLAB_UNIT_BYTES as u64
    }

    /// Total bytes handed out and not yet freed.
    pub fn allocated_bytes(&self) -> u64 {
        self.allocated_units * SLAB_UNIT_BYTES as u64
    }

    /// A snapshot of the counters and per-class free block counts.
    pub fn stats(&self) -> SlabStats {
        let mut stats = self.counters.clone();
        for (class, pool) in self.classes.iter().enumerate() {
            stats.free_blocks[class] = pool.free_len() as u64;
            stats.hot_blocks[class] = pool.hot_len() as u64;
        }
        stats
    }

    /// One attempt without merging: the hot cache, a refill from the pool, then a split.
    fn take(&mut self, class: usize) -> Option<u32> {
        let batch_len = self.cfg.batch_len;
        let pool = &mut self.classes[class];
        if let Some(offset) = pool.pop_hot() {
            return Some(offset);
        }
        if pool.refill(batch_len) {
            self.counters.refills += 1;
            return pool.pop_hot();
        }
        self.split_from_larger(class)
    }

    /// Takes one block of the smallest larger class that has any and halves it down to `class`,
    /// leaving each upper half in the pool of its class. Returns the lowest piece.
    fn split_from_larger(&mut self, class: usize) -> Option<u32> {
        let top = usize::from(self.cfg.top_class);
        let donor = (class + 1..=top).find(|&donor| self.classes[donor].free_len() > 0)?;
        let offset = self.classes[donor].pop_any()?;
        for half in (class..donor).rev() {
            self.classes[half].push_pool(offset + (1 << half));
            self.counters.splits += 1;
        }
        Some(offset)
    }

    /// A merge can only produce a block of `class` if something was freed since the last merge
    /// (a merged state has no free buddy pairs and splits create none) and enough units are free.
    fn merge_can_help(&self, class: usize) -> bool {
        self.freed_since_merge && self.free_units >= 1u64 << class
    }

    /// Lazy bulk merge over all classes, smallest first so joined blocks can join again above.
    fn merge_all(&mut self) {
        let top = usize::from(self.cfg.top_class);
        for class in 0..top {
            self.counters.merged_blocks += self.merge_class(class);
        }
        self.classes[top].drain_hot();
        self.freed_since_merge = false;
        self.counters.merges += 1;
    }

    /// Moves class `class`'s hot cache into its pool, sorts the pool and moves every buddy pair
    /// `(a, a + size)` with `a` aligned to twice the size into the next class's pool, compacting
    /// the rest in place. Returns the number of pairs joined.
    fn merge_class(&mut self, class: usize) -> u64 {
        let (lower, upper) = self.classes.split_at_mut(class + 1);
        let current = &mut lower[class];
        let next = &mut upper[0];
        current.drain_hot();
        let pool = current.pool_mut();
        pool.sort_unstable();
        let size = 1u32 << class;
        let pair_mask = (size << 1) - 1;
        let (mut read, mut write, mut joined) = (0, 0, 0);
        while read < pool.len() {
            let offset = pool[read];
            debug_assert!(
                read + 1 == pool.len() || pool[read + 1] > offset,
                "duplicate free"
            );
            let buddy_free = read + 1 < pool.len() && pool[read + 1] == offset + size;
            if offset & pair_mask == 0 && buddy_free {
                next.push_pool(offset);
                joined += 1;
                read += 2;
            } else {
                pool[write] = offset;
                write += 1;
                read += 1;
            }
        }
        pool.truncate(write);
        joined
    }

    /// Test support: panics unless every free block is in range, aligned and disjoint from every
    /// other, the byte accounting adds up and no pool ever reallocated. Allocates; not for the
    /// hot path.
    #[doc(hidden)]
    pub fn check_invariants(&self) {
        let units = u64::from(self.cfg.units);
        let mut blocks: Vec<(u64, u64)> = Vec::new();
        for (class, pool) in self.classes.iter().enumerate() {
            assert!(pool.capacity_unchanged(), "class {class} pool reallocated");
            for offset in pool.free_offsets() {
                let (start, len) = (u64::from(offset), 1u64 << class);
                assert_eq!(
                    start % len,
                    0,
                    "free block {start} misaligned for class {class}"
                );
                assert!(
                    start + len <= units,
                    "free block {start} of class {class} out of range"
                );
                blocks.push((start, len));
            }
        }
        blocks.sort_unstable();
        for pair in blocks.windows(2) {
            let ((start, len), (next_start, _)) = (pair[0], pair[1]);
            assert!(
                start + len <= next_start,
                "free blocks at {start} and {next_start} overlap"
            );
        }
        let free_units: u64 = blocks.iter().map(|&(_, len)| len).sum();
        assert_eq!(free_units, self.free_units, "free unit counter drifted");
        assert_eq!(
            self.free_units + self.allocated_units,
            units,
            "free + allocated != region"
        );
    }
}

impl fmt::Debug for SlabAllocator {
    /// Summary only: the pools can hold billions of entries.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SlabAllocator")
            .field("cfg", &self.cfg)
            .field("free_bytes", &self.free_bytes())
            .field("allocated_bytes", &self.allocated_bytes())
            .field("top_class_bytes", &class_size_bytes(self.cfg.top_class))
            .finish()
    }
}
