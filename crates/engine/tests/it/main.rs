//! The engine's integration tests, as one test binary: one module per test file. A binary per file
//! cost one link each, and those links were most of CI's time (issue 20).
//!
//! The modules' tests run side by side on the harness's threads of this one process, so none may
//! depend on process-wide state: servers listen on ephemeral ports, files are named by test and
//! process id. A test that watches the whole process (an allocator that counts every thread, the
//! process's memory or its threads' CPU time, its limits or environment) stays a binary of its own
//! in `tests/`.
//!
//! The binary's allocator is testkit's `CountingAllocator`: it counts only on a thread that
//! switches counting on (`no_alloc`), so the tests running beside it on other threads neither
//! disturb the count nor pay more than a thread-local check per allocation. A moved file that
//! installed its own `#[global_allocator]` of that kind drops it (one per binary).
//!
//! Proptest keeps the seeds of past failures in `tests/proptest-regressions/NAME.txt` (its default
//! place for a module of a binary whose root is `main.rs`): move a file's seeds there with it.
//!
//! To add a test file: `git mv tests/NAME.rs tests/it/` and add `mod NAME;` below (alphabetical
//! order). Run one file's tests with `cargo test --release -p directkv-engine --test it NAME::`.

#[global_allocator]
static ALLOCATOR: directkv_testkit::alloc::CountingAllocator =
    directkv_testkit::alloc::CountingAllocator;

mod atomic;
mod basic;
mod clear;
mod evict;
mod expiry;
mod mc;
mod model;
mod no_alloc;
mod range_ops;
mod results_budget;
mod snapshot;
