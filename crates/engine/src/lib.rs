//! directkv's engine: the KV-Direct key-value processor in software, one per shard.
//!
//! ```text
//!   execute(batch of Op) ──> pipeline (hash, prefetch, reservation station, forward)
//!                               │
//!                               ▼
//!                            index::Table ── 64-byte buckets (inline key-values, pointers)
//!                               │                    │ chain / records
//!                               ▼                    ▼
//!                             Arena (one mmap) ── slab::SlabAllocator (power-of-two classes)
//!                            ops: atomic and vector functions by id (built-in and user)
//! ```
//!
//! Files, from the leaves (`hash.rs`, `simd.rs`: they call nothing in the crate) to the door:
//!
//! ```text
//!   hash.rs      the key hash and its bit partition: bucket, secondary hash, station slot, shard
//!   simd.rs      byte matching for the bucket search; CPU detection for the wide build
//!   error.rs op.rs ops/   errors; Op, Results; function ids (ops/ids.rs), built-in and user
//!                functions, element types
//!   apply.rs     what one operation does to one value (the file to edit to add an operation)
//!   evict.rs     eviction: Redis's policies over a CLOCK reference bit per main bucket
//!   expiry.rs    key expiry: the deadline operations, the lag histogram (deadlines live in
//!                record headers, index/record.rs; time enters by `Engine::set_now`)
//!   arena.rs slab/ index/   the one mapping; the allocator; the hash table (index/bucket.rs)
//!   pipeline/    batches: windows, the reservation station, the station-free roads, retiring
//!   atomic.rs    the all-or-nothing check of a batch (limits, then a trial allocation)
//!   config.rs stats.rs engine.rs   configuration and tuning; counters; `Engine`, the one door
//!   snapshot.rs  point-in-time images while batches run (copy before first write); fast load
//! ```
//!
//! Goals: about one memory access per GET and two per PUT for inline key-values; many cache
//! misses in flight per core; hot keys served by data forwarding; no system allocation on the
//! hot path; out of memory is an error that leaves the store unchanged.
//! Non-goals: I/O, async, protocols, threads (the server runs one engine per shard thread).

// The public API is what is re-exported below, plus five modules whose paths other crates use:
// `engine` (MEMORY_BYTES_MIN), `hash` (the key hash and its bit partition), `ops` (function ids,
// element types, user functions), `stats` (the counters) and `strings` (the number parsing the
// RESP server shares). Everything else is private to the crate.
mod apply;
mod arena;
mod atomic;
mod config;
pub mod engine;
mod error;
pub mod evict;
pub mod expiry;
pub mod hash;
mod index;
mod memcache;
mod op;
pub mod ops;
mod pipeline;
mod simd;
mod slab;
mod snapshot;
pub mod stats;
pub mod strings;

pub use config::{tune, EngineConfig, ExecMode, Limits, Tuning, RESULTS_BYTES_MAX_DEFAULT};
pub use engine::{Engine, EngineError, Report, MEMORY_BYTES_MAX, MEMORY_BYTES_MIN};
pub use error::OpError;
pub use evict::{EvictionPolicy, EVICTION_WATERMARK_DEFAULT, EVICTION_WATERMARK_MAX};
pub use hash::key_hash;
pub use index::record::NO_DEADLINE;
pub use index::TableCounts;
pub use memcache::parse_u64 as mc_parse_u64;
pub use op::{
    cond, expire_args, mc, parse_expire_args, Op, OpKind, OpResult, Results, Status, KEEP_DEADLINE,
    OP_KIND_COUNT,
};
pub use ops::{ElemType, FunctionKind, FunctionRegistry, UserFunction};
pub use slab::SlabStats;
pub use snapshot::{LoadCounts, SnapEntry, SnapPoint, SnapProgress, SnapshotBusy};
pub use stats::{KindCounters, Stats};
