//! `directkv bench engine`: one engine driven in-process, with no network, so that the data
//! path is measured against the machine's line-read limit and nothing else.
//!
//! ```text
//!   run.rs    load keys, then batches of GET / PUT / atomic / vector ops through
//!             Engine::execute: ops/s, accesses and lines per op, and the line-read probe
//!             over the same arena size
//!   sweep.rs  --sweep-utilization: accesses per GET and PUT as the store fills;
//!             --fill-max: the highest memory utilization before out of memory
//! ```
//!
//! Goals: deterministic key streams (generated before timing), medians over runs, the engine's
//! own counters for accesses per operation. Non-goals: protocols, sockets, threads (one engine,
//! one thread; `net/` measures servers).

pub mod run;
pub mod sweep;
