//! directkv's one home for `unsafe` system calls outside the engine: every libc call the server
//! (and the benchmarks) make, behind a safe function whose contract is written down once.
//!
//! ```text
//!   server ──┐                     ┌── cpu.rs      pinning, nice, clock tick, page size
//!   bench  ──┴── safe functions ───┼── socket.rs   buffer sizes, UDP GRO / GSO options
//!                                  ├── mmsg.rs     recvmmsg (GRO split) / sendmmsg (GSO groups)
//!                                  ├── process.rs  SIGTERM to a child, CPU time of a process, euid
//!                                  ├── epoll.rs    a bare epoll set (the loopback probe)
//!                                  └── mapping.rs  an anonymous, huge-page-advised mapping
//! ```
//!
//! Goals: every `unsafe` block has a `// SAFETY:` comment (denied otherwise), the callers hold
//! no `unsafe` at all, and a refusal by the kernel is an ordinary return value (`bool`,
//! `io::Result`) because every caller treats these calls as best effort or reports the error.
//! Callers: the server (pinning its shards, OCSM's socket buffers and batched paths). The
//! benchmark crate's own copies map onto it one for one: `ocsm/gen.rs` (buffer growth, GRO and
//! GSO options, `send_all`, the `recvmmsg` drain, pinning, nice), `ocsm/server.rs` and
//! `servers.rs` (SIGTERM, CPU time, euid), `loopback.rs` (epoll), `probe.rs` (the mapping,
//! free memory and page size; its timed raw-pointer loops stay there, they are not calls).
//!
//! Non-goals: portability beyond Linux (the UDP offloads and `sched_setaffinity` are
//! Linux-only), a general-purpose wrapper of libc: only what directkv calls lives here.

#![deny(clippy::undocumented_unsafe_blocks)]

pub mod cpu;
pub mod epoll;
pub mod mapping;
pub mod mmsg;
pub mod process;
pub mod socket;

/// A socket's file descriptor (the raw fd of a `std` or `tokio` socket).
pub type Fd = std::os::fd::RawFd;
