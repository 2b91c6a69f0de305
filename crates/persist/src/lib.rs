//! directkv's persistence files (issue 22): what is on the disk and how it is written and read
//! back. The server's data path (appending at `ShardCtx::execute`, snapshots as a shard task,
//! recovery at start) is built on these and lives in the server; this crate does no
//! threading and knows no protocol. `docs/persistence.md` has the byte layouts.
//!
//! ```text
//!   DIR/                                   (--dir)
//!     LOCK                  lock.rs        flock'ed by the one process that owns DIR
//!     MANIFEST              manifest.rs    shard count; per shard its snapshot and log files
//!     snap-SSSS-GGGGGGGGGG.dkvs snapshot.rs one shard's image at an Lsn: checksummed blocks
//!     log-SSSS-GGGGGGGGGG.dkvl  log.rs      one shard's records after that Lsn, one per batch
//!                               batch.rs    a record's payload: the batch's writes and `now`
//!   fs.rs     every write, fsync, rename and truncation goes through `dyn Fs` (tests: FaultFs)
//!   check.rs  `directkv check DIR [--repair]`: each file's state; truncate damaged tails
//!   image.rs  an engine's image into a snapshot file while it serves (steps), and loaded back
//!   bin/persist-cost.rs  what the log and snapshots cost on this machine (docs/persistence.md)
//! ```
//!
//! **The durability argument.** The engine is deterministic given its ops and `now`, so a
//! shard's store is its snapshot plus the replay, in order, of every batch after it. Each
//! executed batch with a write becomes one log record (its write ops and its `now`,
//! deadlines absolute), appended before its replies leave; a group of batches is written by
//! one write(2) (or one copy into the mapped file: `log::Mapped`) and, under `always`, made durable by one fdatasync before any of their
//! replies leave. So:
//!
//! | appendfsync | a reply leaves after            | kill -9 loses | power loss loses         |
//! |-------------|---------------------------------|---------------|--------------------------|
//! | `no`        | write(2) (page cache)           | nothing acked | what the kernel had not flushed (~30 s) |
//! | `everysec`  | write(2); fdatasync each second | nothing acked | about the last second    |
//! | `always`    | write(2) + fdatasync            | nothing acked | nothing acked            |
//!
//! A crash mid-write leaves at most a torn last record, which recovery truncates (it was
//! never acknowledged: its write or sync did not return); any other damage is refused with the
//! file and offset. Once a write or fsync fails the log writer refuses all later writes (the
//! kernel may have dropped the dirty pages, so a retry could acknowledge lost data): the
//! server answers writes with an error and keeps serving reads. The manifest is replaced
//! atomically (temp file, fsync, rename, directory fsync), so a crash at any step leaves the
//! old or the new one; files are made durable, names included, before a manifest names them.
//!
//! Non-goals here: deciding when to snapshot or sync, threads, the server's flags.

pub mod batch;
pub mod check;
pub mod fs;
pub mod image;
pub mod lock;
pub mod log;
pub mod manifest;
pub mod snapshot;
