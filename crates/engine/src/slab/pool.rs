//! The free blocks of one size class: a small hot cache (the software form of the seed's NIC-side
//! double-ended stack) in front of a pool reserved for the worst case at construction.
//!
//! Entries are unit offsets from the region base; the class is implied by which `ClassPool` holds
//! them. Both stacks pop from their top. A spill moves the oldest hot entries (the bottom) to the
//! pool, so recently freed blocks, likely still in the CPU cache, are handed out first.

pub(super) struct ClassPool {
    /// Hot cache slots; `hot[..hot_len]` are free blocks, top at `hot_len - 1`.
    hot: Box<[u32]>,
    hot_len: usize,
    /// Free blocks not in the hot cache; never grows past the capacity reserved in `new`.
    pool: Vec<u32>,
    /// `pool.capacity()` right after construction, to prove it never reallocated.
    pool_capacity: usize,
}

impl ClassPool {
    /// `blocks_max` is how many blocks of this class fit in the region, the most that can ever be
    /// free at once. Reserving it is virtual memory only until entries are pushed.
    pub(super) fn new(hot_cache_len: usize, blocks_max: usize) -> ClassPool {
        let pool = Vec::with_capacity(blocks_max);
        let pool_capacity = pool.capacity();
        ClassPool {
            hot: vec![0; hot_cache_len].into_boxed_slice(),
            hot_len: 0,
            pool,
            pool_capacity,
        }
    }

    pub(super) fn free_len(&self) -> usize {
        self.hot_len + self.pool.len()
    }

    pub(super) fn hot_len(&self) -> usize {
        self.hot_len
    }

    pub(super) fn hot_is_full(&self) -> bool {
        self.hot_len == self.hot.len()
    }

    pub(super) fn pop_hot(&mut self) -> Option<u32> {
        if self.hot_len == 0 {
            return None;
        }
        self.hot_len -= 1;
        Some(self.hot[self.hot_len])
    }

    /// The caller spills first when the cache is full.
    pub(super) fn push_hot(&mut self, offset: u32) {
        assert!(self.hot_len < self.hot.len(), "hot cache overflow");
        self.hot[self.hot_len] = offset;
        self.hot_len += 1;
    }

    /// Pushes into the pool. Running past the reserved capacity would mean more free blocks than
    /// fit in the region, which only a double free can cause; panic rather than reallocate.
    pub(super) fn push_pool(&mut self, offset: u32) {
        assert!(
            self.pool.len() < self.pool_capacity,
            "slab pool overflow: double free?"
        );
        self.pool.push(offset);
    }

    /// Takes one block from anywhere in this class, pool first so the hot cache stays warm.
    pub(super) fn pop_any(&mut self) -> Option<u32> {
        self.pool.pop().or_else(|| self.pop_hot())
    }

    /// Moves up to `batch_len` entries from the pool top into the empty hot cache, keeping their
    /// order. Returns whether anything moved.
    pub(super) fn refill(&mut self, batch_len: usize) -> bool {
        debug_assert_eq!(self.hot_len, 0);
        let moved = batch_len.min(self.pool.len()).min(self.hot.len());
        let from = self.pool.len() - moved;
        self.hot[..moved].copy_from_slice(&self.pool[from..]);
        self.pool.truncate(from);
        self.hot_len = moved;
        moved > 0
    }

    /// Moves the `batch_len` oldest hot entries (the bottom of the stack) to the pool.
    pub(super) fn spill(&mut self, batch_len: usize) {
        let moved = batch_len.min(self.hot_len);
        for index in 0..moved {
            self.push_pool(self.hot[index]);
        }
        self.hot.copy_within(moved..self.hot_len, 0);
        self.hot_len -= moved;
    }

    /// Forgets every free block (`SlabAllocator::reset` carves the region again).
    pub(super) fn clear(&mut self) {
        self.hot_len = 0;
        self.pool.clear();
    }

    /// Moves the whole hot cache into the pool, before a merge.
    pub(super) fn drain_hot(&mut self) {
        self.spill(self.hot_len);
    }

    /// The pool, for merging in place. Callers may reorder and shrink it, never grow it.
    pub(super) fn pool_mut(&mut self) -> &mut Vec<u32> {
        &mut self.pool
    }

    /// Every free offset of this class, hot cache and pool.
    pub(super) fn free_offsets(&self) -> impl Iterator<Item = u32> + '_ {
        self.hot[..self.hot_len]
            .iter()
            .chain(self.pool.iter())
            .copied()
    }

    pub(super) fn capacity_unchanged(&self) -> bool {
        self.pool.capacity() == self.pool_capacity
    }
}
