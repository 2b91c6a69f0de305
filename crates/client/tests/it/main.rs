//! The integration tests of this crate as one binary (`tests/it`), one module per former
//! `tests/NAME.rs`. In this commit each module is included by `#[path]` so that its own
//! `mod common;` still resolves, and every file is moved unchanged; the next commit shares
//! the helpers from here.

#[path = "batches.rs"]
mod batches;
#[path = "blocking.rs"]
mod blocking;
#[path = "connection.rs"]
mod connection;
#[path = "no_alloc.rs"]
mod no_alloc;
#[path = "ocsm.rs"]
mod ocsm;
#[path = "ops.rs"]
mod ops;
