//! directkv's Rust client: async (tokio) and blocking, batched, shard-aware, over the native
//! protocol (docs/protocol.md), using the same sans-IO codec as the server (`directkv-proto`).
//!
//! ```text
//!   let mut c = Client::connect("127.0.0.1:7070", ClientConfig::default()).await?;
//!   c.put(b"k", b"v").await?;
//!   let mut b = c.batch();
//!   let i = b.get(b"k");
//!   b.add_u64(b"ctr", 1);
//!   let replies = b.execute().await?;          // replies.get(i) == Reply::Ok(b"v")
//!
//!   Client ──HELLO──> server: limits + shard map
//!          ──one connection per shard (own port, or ATTACH on the main port)──> shard threads
//!   batch ──split by xxh3-64(key) shard──> REQUEST frames per shard, sent concurrently
//!         <──RESPONSE frames (MORE-split)── results placed back in the order added
//! ```
//!
//! Goals: every operation of SPEC section 1 (plus no-return variants and helpers such as
//! `add_u64`); batches that respect the server's announced limits; time-outs, reconnect and
//! typed errors (`ClientError`); a hot path cheap enough to drive millions of operations per
//! second from one core (reused buffers, no allocation per operation beyond what the caller
//! keeps).
//! Non-goals: RESP (use any Redis client), the native protocol over UDP, connection pools
//! shared between tasks.
//!
//! Layout: `client.rs` the async client and its retry policy; `keyspace.rs` deadlines, exists,
//! type and scan; `batch.rs` staging and the batch builder; `round.rs` one shard's frames on its connection; `conn.rs` connection handshake;
//! `reply.rs` typed results; `blocking.rs` the blocking wrapper; `config.rs` settings;
//! `error.rs` errors; `ocsm` the OCSM (seed 004) client over UDP.

mod batch;
mod blocking;
mod client;
mod config;
mod conn;
mod error;
mod keyspace;
pub mod ocsm;
mod reply;
mod round;

pub use batch::Batch;
pub use blocking::{BlockingBatch, BlockingClient, BlockingScan};
pub use client::{CasOutcome, Client};
pub use config::{
    ClientConfig, BATCH_OPS_MAX_DEFAULT, CLIENT_NAME_DEFAULT, CONNECT_TIMEOUT_DEFAULT,
    READ_BUFFER_BYTES_DEFAULT, REQUEST_TIMEOUT_DEFAULT,
};
pub use error::{ClientError, OpError, TimeoutKind};
pub use keyspace::{deadline_after, Scan, Ttl};
pub use reply::{OwnedReply, Replies, Reply};

/// Function ids, element types, status codes and raw operations, from the protocol crate.
pub use directkv_proto::native::{
    cond, func, status, ElemCode, NativeLimits, NativeOp, ScanReply, ShardMap, KEEP_DEADLINE,
};
