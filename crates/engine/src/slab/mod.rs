//! Slab allocator: hands out power-of-two blocks of one shard's slab region (seed 002, "Slab
//! Memory Allocator").
//!
//! The allocator manages addresses only; it never reads or writes arena memory. Addresses are
//! `u32` counts of 32-byte units (`SLAB_UNIT_BYTES`), so the hash index's 31-bit pointers cover
//! 64 GiB. A block of class `c` is `32 << c` bytes and starts at a unit offset from the region base
//! that is a multiple of `1 << c`. This buddy alignment is what lets lazy merging find the buddy of
//! a free block by arithmetic alone, without an allocation bitmap.
//!
//! Goals: O(1) amortized `alloc` and `free`; no system allocation after `new`; no space lost to
//! a region size that is not a multiple of the top class; out of memory is `None` and leaves the
//! allocator consistent.
//!
//! Non-goals: thread safety (one allocator per shard thread); eager coalescing; knowing which
//! blocks are allocated (the caller owns that, so a double free is a caller bug that only
//! `check_invariants` detects).
//!
//! ```text
//!                 alloc(c) pops        free(c) pushes
//!                           \            /
//!                            v          v
//!  class c    +--------------------------+  refill batch   +-------------------------------+
//!             | hot cache (fixed array,  | <-------------- | pool: Vec<u32> of offsets,    |
//!             | LIFO, e.g. 64 entries)   | --------------> | capacity units >> c reserved  |
//!             +--------------------------+  spill batch    | in new(), so pushes never grow|
//!                                           (hot full)     +-------------------------------+
//!                                                             ^                   |
//!                                        split: a block of c+1|                   | merge: sort the
//!                                        gives one block of c |                   | pool, join
//!                                        to the caller, its   |                   | (a, a + 2^c) with
//!                                        upper half to pool c |                   v a % 2^(c+1) == 0
//!  class c+1  +--------------------------+                 +-------------------------------+
//!             | hot cache                | <-------------> | pool                          |
//!             +--------------------------+                 +-------------------------------+
//!                 ...                                          ...
//!  top class      at start-up the whole region is here, any remainder in smaller classes
//! ```
//!
//! `alloc(c)` tries, in order: the hot cache of `c`; a batch refill of it from pool `c`; splitting
//! one block of the smallest larger class that has any, pushing the unused halves into the pools
//! of the classes in between. Only when all of those fail does it merge: every class from 0
//! upward moves its hot cache into its pool, sorts the pool in place (`sort_unstable` does not
//! allocate), moves buddy pairs into the next class's pool and compacts the rest. Then it retries
//! once. The merge is skipped when nothing was freed since the last one (a merged state has no
//! free buddy pairs, and splitting never creates any) or when fewer bytes are free than requested,
//! so repeated out-of-memory failures stay cheap.

mod allocator;
mod pool;
#[cfg(test)]
mod tests;

pub use allocator::SlabAllocator;

/// Bytes in one address unit; class 0 blocks are one unit.
pub const SLAB_UNIT_BYTES: usize = 32;
/// Number of classes the allocator can be configured with (class 21 = 64 MiB).
pub const CLASS_COUNT_MAX: usize = 22;
/// Suggested hot cache entries per class (`SlabConfig::hot_cache_len`).
pub const SLAB_HOT_CACHE_LEN_DEFAULT: usize = 64;
/// Suggested refill and spill batch (`SlabConfig::batch_len`).
pub const SLAB_BATCH_LEN_DEFAULT: usize = 32;
/// Largest accepted `SlabConfig::hot_cache_len`; the cache is scanned nowhere, but it is copied on
/// every spill, so it has to stay small.
pub const SLAB_HOT_CACHE_LEN_MAX: usize = 4096;
/// Exclusive end of the address space: 31-bit pointers in 32-byte units cover 64 GiB.
pub const SLAB_ADDR_UNITS_MAX: u64 = 1 << 31;

/// Smallest class whose size holds `bytes`, or `None` if that is larger than `top_class`.
/// `bytes` is expected to be at least 1; 0 maps to class 0.
pub fn class_for_size(bytes: usize, top_class: u8) -> Option<u8> {
    let units = bytes.div_ceil(SLAB_UNIT_BYTES);
    let class = if units <= 1 {
        0
    } else {
        usize::BITS - (units - 1).leading_zeros()
    };
    if class <= u32::from(top_class) {
        Some(class as u8)
    } else {
        None
    }
}

/// Size in bytes of a block of `class`: `32 << class`.
pub const fn class_size_bytes(class: u8) -> usize {
    SLAB_UNIT_BYTES << class
}

/// Where the slab region is and how the per-class caches behave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlabConfig {
    /// First unit of the region. Blocks are aligned relative to it; align it to the top class
    /// size if absolute alignment matters to the caller.
    pub base_unit: u32,
    /// Region length in units (at least 1); need not be a multiple of the top class size.
    pub units: u32,
    /// Largest class handed out; below `CLASS_COUNT_MAX`.
    pub top_class: u8,
    /// Hot cache entries per class, `1..=SLAB_HOT_CACHE_LEN_MAX`; also the spill watermark.
    pub hot_cache_len: usize,
    /// Entries moved per refill or spill, `1..=hot_cache_len`.
    pub batch_len: usize,
}

/// Counters and per-class free block counts, a snapshot taken by `SlabAllocator::stats`.
#[derive(Debug, Clone, Default)]
pub struct SlabStats {
    /// Free blocks per class, hot cache plus pool.
    pub free_blocks: [u64; CLASS_COUNT_MAX],
    /// Free blocks per class sitting in the hot cache.
    pub hot_blocks: [u64; CLASS_COUNT_MAX],
    /// Successful allocations.
    pub allocs: u64,
    /// Frees.
    pub frees: u64,
    /// Halvings: splitting one class-5 block down to class 2 counts 3.
    pub splits: u64,
    /// Bulk merge passes run.
    pub merges: u64,
    /// Buddy pairs joined into a block of the next class, over all merge passes.
    pub merged_blocks: u64,
    /// Batches moved from a pool into its hot cache.
    pub refills: u64,
    /// Batches moved from a hot cache into its pool.
    pub spills: u64,
    /// Allocations that returned `None`.
    pub alloc_failures: u64,
}
