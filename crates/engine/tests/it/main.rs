//! The integration tests of this crate as one binary (`tests/it`), one module per former
//! `tests/NAME.rs`. In this commit each module is included by `#[path]` so that its own
//! `mod common;` still resolves, and every file is moved unchanged; the next commit shares
//! the helpers from here.

#[path = "atomic.rs"]
mod atomic;
#[path = "basic.rs"]
mod basic;
#[path = "expiry.rs"]
mod expiry;
#[path = "model.rs"]
mod model;
#[path = "no_alloc.rs"]
mod no_alloc;
#[path = "range_ops.rs"]
mod range_ops;
#[path = "results_budget.rs"]
mod results_budget;
