//! A server over the network: `directkv bench run` (one running target) and
//! `directkv bench compare` (directkv, redis-server and memcached started here, side by side).
//!
//! ```text
//!   run.rs / compare.rs ── WorkloadSpec (workload.rs) ──> OpStream per connection
//!        │                                                   │ [BenchOp; depth]
//!        └──> runner.rs: closed or open loop over `connections` drivers ──> RunStats
//!                           driver/{native,resp,memcache}.rs: one batch on one wire
//! ```
//!
//! Goals: the same operations in the same batches for every target (deterministic streams),
//! latency from the intended send time in open loop, one load-generator core. Non-goals: result
//! rendering (`report/`), starting servers (`directkv_sys::process`), the OCSM datagram benchmark
//! (`ocsm/`).

pub mod compare;
pub mod driver;
pub mod run;
pub mod runner;
pub mod workload;
