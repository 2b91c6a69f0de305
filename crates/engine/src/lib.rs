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
//! Goals: about one memory access per GET and two per PUT for inline key-values; many cache
//! misses in flight per core; hot keys served by data forwarding; no system allocation on the
//! hot path; out of memory is an error that leaves the store unchanged.
//! Non-goals: I/O, async, protocols, threads (the server runs one engine per shard thread).

pub mod arena;
pub mod config;
pub mod engine;
pub mod error;
pub mod index;
pub mod op;
pub mod ops;
pub mod pipeline;
pub mod slab;
pub mod stats;
pub mod strings;

pub use config::{tune, EngineConfig, ExecMode, Tuning};
pub use engine::{Engine, EngineError, Report};
pub use error::OpError;
pub use op::{Op, OpKind, Results, Status};
pub use ops::{ElemType, FunctionKind, FunctionRegistry, UserFunction};
pub use pipeline::key_hash;
