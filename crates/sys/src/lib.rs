//! directkv's one home for `unsafe` system calls outside the engine: every libc call the server
//! (and the benchmarks) make, behind a safe function whose contract is written down once.
//!
//! ```text
//!   server ──┐                     ┌── cpu.rs      pinning, nice, clock tick, page size, free memory
//!   bench  ──┼── safe functions ───┼── socket.rs   buffer sizes, UDP GRO / GSO options
//!   tests  ──┘                     ├── mmsg.rs     recvmmsg (GRO split) / sendmmsg (GSO groups)
//!                                  ├── process/    child servers (spawn, ready, stop by PID),
//!                                  │               SIGTERM, /proc CPU time and RSS, euid
//!                                  ├── epoll.rs    a bare epoll set (the loopback probe)
//!                                  ├── mapping.rs  an anonymous, huge-page-advised mapping
//!                                  └── files.rs    RLIMIT_NOFILE, EMFILE / ENFILE
//! ```
//!
//! Goals: every `unsafe` block has a `// SAFETY:` comment (denied otherwise), the callers hold
//! no `unsafe` system calls at all, and a refusal by the kernel is an ordinary return value
//! (`bool`, `io::Result`) because every caller treats these calls as best effort or reports the
//! error. Callers: the server (its open-file limit, pinning its shards, OCSM's socket buffers and batched paths);
//! the benchmarks (`bench ocsm`'s generator: buffer growth, GRO and GSO options,
//! `send_connected`, the `MmsgRecv` drain, pinning, nice; `bench compare` and `bench ocsm`:
//! their servers as `process::ServerProcess`, CPU time and RSS; `bench loopback`: epoll and
//! pinning; `bench probe`: the mapping, free memory); the server's redis-server differential
//! test (`process::ServerProcess::redis`).
//!
//! Non-goals: portability beyond Linux (the UDP offloads and `sched_setaffinity` are
//! Linux-only), a general-purpose wrapper of libc: only what directkv calls lives here.

#![deny(clippy::undocumented_unsafe_blocks)]

pub mod cpu;
pub mod epoll;
pub mod files;
pub mod mapping;
pub mod mmsg;
pub mod process;
pub mod socket;

/// A socket's file descriptor (the raw fd of a `std` or `tokio` socket).
pub type Fd = std::os::fd::RawFd;
