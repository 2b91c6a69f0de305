//! The integration tests of this crate as one binary (`tests/it`), one module per former
//! `tests/NAME.rs`. In this commit each module is included by `#[path]` so that its own
//! `mod common;` still resolves, and every file is moved unchanged; the next commit shares
//! the helpers from here.

#[path = "bench_alloc.rs"]
mod bench_alloc;
#[path = "bench_echo_reference.rs"]
mod bench_echo_reference;
#[path = "bench_engine.rs"]
mod bench_engine;
#[path = "bench_net.rs"]
mod bench_net;
#[path = "bench_run_defaults.rs"]
mod bench_run_defaults;
#[path = "bench_soak.rs"]
mod bench_soak;
#[path = "clients.rs"]
mod clients;
#[path = "clients_jvm.rs"]
mod clients_jvm;
#[path = "config_file.rs"]
mod config_file;
#[path = "hostile_fd.rs"]
mod hostile_fd;
#[path = "serve_refusals.rs"]
mod serve_refusals;
