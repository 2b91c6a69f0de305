//! directkv's benchmarks, one folder per `directkv bench` subcommand family:
//!
//! ```text
//!   machine/   what the machine gives, with no store at all:
//!                probe.rs     random line reads per second (`bench probe`)
//!                loopback.rs  an echo pair over loopback TCP, a reference (`bench loopback`)
//!   engine/    one engine in-process, no network (`bench engine`)
//!   net/       a server over the network: `bench run` (run.rs) and `bench compare`
//!                (compare.rs) on workloads, drivers per protocol and the runner
//!   ocsm/      OCSM over UDP (`bench ocsm`): open-loop generator, rate ladder, chart
//!   report/    what net runs print: tables, CSV, charts, the progress bar
//!   soak/      every issue 19 attack at once against one server, with well-behaved clients
//!                measuring latency and lost writes (`bench soak`, scripts/soak.sh)
//!   evict.rs   eviction hit ratio against an exact LRU (bin evict-hit-ratio)
//!   expiry.rs  the expiry-lag target of issue 20 (`bench expiry`): deadlines under YCSB-B
//!   dist.rs    key distributions, shared by engine/ and net/
//! ```
//!
//! System calls (pinning, nice, socket options, recvmmsg/sendmmsg, epoll, mmap) and the servers
//! as child processes (`ServerProcess`, `/proc` readings) come from `directkv_sys`, the
//! workspace's one module of unsafe system calls: this crate holds no `libc` call of its own.
//!
//! Goals: each subcommand's code in one place, with the numbers it is judged against (the line
//! read probe, the loopback echo reference, the peers redis-server and memcached) measured by the
//! same crate. Non-goals: the command line itself (flags, help text, output format of each
//! subcommand), which lives in `crates/cli`.

// Every unsafe block says why it is sound (issue 18; the workspace lint will cover this too).
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod dist;
pub mod engine;
pub mod evict;
pub mod expiry;
pub mod machine;
pub mod net;
pub mod ocsm;
pub mod report;
pub mod soak;
