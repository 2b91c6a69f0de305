//! The server's integration tests, as one test binary: one module per test file. A binary per file
//! cost one link each, and those links were most of CI's time (issue 20).
//!
//! The modules' tests run side by side on the harness's threads of this one process, so none may
//! depend on process-wide state: servers listen on ephemeral ports, files are named by test and
//! process id. A test that watches the whole process (an allocator that counts every thread, the
//! process's memory or its threads' CPU time, its limits or environment) stays a binary of its own
//! in `tests/` (`backpressure.rs`, `busy_poll.rs`, `hostile_flood.rs` and `resp_bits.rs`, which say
//! why).
//!
//! To add a test file: `git mv tests/NAME.rs tests/it/` and add `mod NAME;` below (alphabetical
//! order), and in the file write `use crate::common;` where it had `mod common;` (and
//! `use crate::differential;` where it had `mod differential;`). Run one file's tests with
//! `cargo test --release -p directkv-server --test it NAME::`.

mod common;
mod differential;

mod admin_client;
mod admin_command;
mod admin_config;
mod commands_doc;
mod eviction;
mod hostile_admin;
mod hostile_atomic;
mod hostile_auth;
mod hostile_fd;
mod hostile_help;
mod hostile_memory;
mod hostile_panic;
mod hostile_parse;
mod hostile_preauth;
mod info_metrics;
mod memcache_auth;
mod memcache_client;
mod memcache_differential;
mod memcache_gen;
mod memcache_hostile;
mod memcache_meta;
mod memcache_soak;
mod memcache_text;
mod native;
mod native_empty_key;
mod ocsm;
mod persist_group_commit;
mod persist_recover;
mod persist_snapshot;
mod persist_write;
mod protocol_mirrors;
mod redis_differential;
mod redis_differential_bits;
mod redis_differential_concurrent;
mod redis_differential_empty_key;
mod redis_differential_keyspace;
mod redis_differential_multi;
mod redis_differential_scan;
mod redis_differential_scripted;
mod resp_expiry;
mod resp_flush;
mod resp_keyspace;
mod resp_memory;
mod resp_multi;
mod resp_multi_barriers;
mod resp_scan;
mod resp_server;
mod resp_strings;
mod udp;
