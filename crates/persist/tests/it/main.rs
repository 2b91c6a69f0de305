//! directkv-persist's integration tests, as one test binary: one module per test file (a binary
//! per file costs a link each).
//!
//! The modules' tests run side by side on the harness's threads, so each works in a directory
//! of its own (`common::TestDir`, named by test and process id, removed when the test ends).
//! Run one file's tests with `cargo test --profile ci -p directkv-persist --test it NAME::`.

mod common;

mod batch_replay;
mod crash_model;
mod hostile;
mod image;
mod log_bit_flips;
mod log_faults;
mod log_torn_tails;
mod manifest_crash;
mod scan_ahead;
mod snapshot_files;
