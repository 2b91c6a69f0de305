//! RESP (Redis serialization protocol, versions 2 and 3) on the server's TCP port.
//!
//! ```text
//!  conn.rs   the read / plan / execute / write loop of one connection, with its budgets
//!  cmd/      one file per command family: arguments -> operations + a reply recipe
//!  reply.rs  the batch being planned (Pending) and the rendering of its replies
//!  info.rs   the INFO text (its counters come from `stats::COUNTERS`)
//!  multi.rs  transactions: MULTI EXEC DISCARD WATCH UNWATCH
//! ```
//!
//! The codec (parsing, the reply writer, error texts) is `directkv_proto::resp`, shared with
//! the client; this folder only maps commands onto engine operations and back.

pub(crate) mod cmd;
pub(crate) mod conn;
pub(crate) mod info;
pub(crate) mod multi;
pub(crate) mod reply;
