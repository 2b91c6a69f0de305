//! A counting global allocator: wraps `System` and counts, per thread, the calls made while that
//! thread has counting switched on, so the test harness's other threads (and an in-process
//! server's threads) cannot disturb the count.
//!
//! A test binary installs it once:
//!
//! ```ignore
//! #[global_allocator]
//! static ALLOCATOR: directkv_testkit::alloc::CountingAllocator =
//!     directkv_testkit::alloc::CountingAllocator;
//! ```
//!
//! and then measures closures with [`count`] or asserts with [`assert_no_alloc`]. Allocations
//! (`alloc`, `alloc_zeroed`, `realloc`) and frees are counted apart: a steady state that frees
//! what it allocated still allocates.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// What the system allocator was asked to do on one thread.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AllocCounts {
    /// `alloc`, `alloc_zeroed` and `realloc` calls.
    pub allocations: u64,
    /// `dealloc` calls.
    pub frees: u64,
}

impl AllocCounts {
    /// Every call made to the allocator.
    pub fn calls(&self) -> u64 {
        self.allocations + self.frees
    }
}

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
    static FREES: Cell<u64> = const { Cell::new(0) };
}

fn note(counter: &'static std::thread::LocalKey<Cell<u64>>) {
    // `try_with` because the allocator also runs while thread-locals are being torn down.
    if COUNTING.try_with(Cell::get).unwrap_or(false) {
        let _ = counter.try_with(|c| c.set(c.get() + 1));
    }
}

/// The allocator to install with `#[global_allocator]` in a test binary.
pub struct CountingAllocator;

// SAFETY: every method forwards to `System` with the caller's arguments unchanged, so the
// `GlobalAlloc` contract holds exactly as it does for `System`; counting touches only
// const-initialised thread-local cells (which do not allocate), never the memory handed out.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(&ALLOCATIONS);
        // SAFETY: forwarded unchanged; the caller upholds `alloc`'s contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(&ALLOCATIONS);
        // SAFETY: as in `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(&ALLOCATIONS);
        // SAFETY: `ptr` came from this allocator, which is `System`; the caller upholds the rest.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        note(&FREES);
        // SAFETY: `ptr` came from this allocator, which is `System`, with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

/// Counting on this thread from `start` to `stop`: for code that cannot be a closure, such as
/// a span of `.await`s on a current-thread runtime. Only one may run per thread at a time.
pub struct Counting(());

impl Counting {
    /// Zeroes this thread's counters and switches counting on.
    pub fn start() -> Counting {
        ALLOCATIONS.with(|c| c.set(0));
        FREES.with(|c| c.set(0));
        COUNTING.with(|on| on.set(true));
        Counting(())
    }

    /// Switches counting off and returns what was counted since `start`.
    pub fn stop(self) -> AllocCounts {
        COUNTING.with(|on| on.set(false));
        AllocCounts {
            allocations: ALLOCATIONS.with(Cell::get),
            frees: FREES.with(Cell::get),
        }
    }
}

/// Runs `f` with counting on for this thread and returns its result with what it asked of the
/// allocator. Meaningful only in a binary that installed [`CountingAllocator`].
pub fn count<R>(f: impl FnOnce() -> R) -> (R, AllocCounts) {
    let counting = Counting::start();
    let r = f();
    (r, counting.stop())
}

/// Panics, naming `what`, if `f` calls the allocator at all on this thread.
pub fn assert_no_alloc<R>(what: &str, f: impl FnOnce() -> R) -> R {
    let (r, counts) = count(f);
    assert_eq!(
        counts,
        AllocCounts::default(),
        "{what}: the system allocator was called"
    );
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[global_allocator]
    static ALLOCATOR: CountingAllocator = CountingAllocator;

    #[test]
    fn counts_this_threads_calls_only() {
        let (_, c) = count(|| drop(std::hint::black_box(vec![1u8; 10])));
        assert_eq!(
            c,
            AllocCounts {
                allocations: 1,
                frees: 1
            }
        );
        // Another thread allocating a thousand times while this one counts adds nothing.
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(2));
        let other = barrier.clone();
        let worker = std::thread::spawn(move || {
            other.wait();
            for _ in 0..1000 {
                drop(std::hint::black_box(vec![1u8; 10]));
            }
            other.wait();
        });
        let (_, c) = count(|| {
            barrier.wait();
            barrier.wait();
        });
        worker.join().unwrap();
        assert_eq!(c, AllocCounts::default());
        assert_no_alloc("nothing", || std::hint::black_box(1 + 1));
    }

    #[test]
    #[should_panic(expected = "boxing: the system allocator was called")]
    fn assert_no_alloc_names_what_allocated() {
        assert_no_alloc("boxing", || drop(std::hint::black_box(Box::new(7u64))));
    }
}
