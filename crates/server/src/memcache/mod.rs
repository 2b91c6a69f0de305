//! memcached's text and meta protocols (issue 21), served on a TCP port of their own
//! (`memcache_port`, default 11211, same bind address as the RESP port; no UDP). The codec is
//! `directkv_proto::memcache`; this folder only serves it.
//!
//! ```text
//!  memcache acceptor ──Incoming{Protocol::Memcache}──> shard i ──> conn::serve
//!  conn.rs   read; parse every complete request (codec); auth; refusals, swallows, closes
//!    └─ exec.rs  each request ──> engine ops (op::mc kinds) in one dispatch::Plan
//!                ──dispatch::execute (ShardCtx::execute, the one door; other shards over
//!                their queues)──> replies rendered in request order (noreply, meta q, mn)
//!       meta.rs    the answers of mg, ms, md, ma, me: status, return flags, value
//!       stats.rs   `stats`, `stats settings|items|slabs|conns`: from COUNTERS' atomics and
//!                  the shards' engine reports
//!       flush.rs   `flush_all [delay]`: now, or by a timer task that flushes through the door
//! ```
//!
//! Semantics: every item operation is one of the engine's memcache op kinds (`McGet`,
//! `McStore`, `McDelete`, `McArith`, `McTouch`), which keep memcached's 32-bit client flags and
//! 64-bit CAS unique per item; keys written over RESP are the same keys (no flags, and no CAS
//! until a `gets` gives them one). An exptime becomes the engine's absolute deadline here
//! (`exec::deadline`): 0 none, up to 30 days relative, beyond that a Unix time, negative
//! expired at once; RESP's TTL shows the same deadline.
//!
//! Authentication: with `requirepass` set, memcached 1.6's ASCII convention (`-Y`): the first
//! command must be `set <any key> <flags> <exptime> <n>\r\n<user> <password>\r\n` with user
//! `default`, answered `STORED`; anything else gets `CLIENT_ERROR unauthenticated` (and the
//! rest of what was read is dropped, as memcached does). See `conn.rs`.
//!
//! Protections, as the RESP port's: input is bounded by the codec's limits (a line over
//! `memcache_line_bytes_max` closes the connection, a value over `value_len_max` is swallowed
//! unbuffered), replies are written before more input is read and a client that does not read
//! them within `reply_write_timeout_secs` is dropped, every buffer counts towards
//! `maxmemory_clients`, and the connection is in the client registry (CLIENT LIST, KILL).
//!
//! Non-goals: UDP, the binary protocol, SASL, memcached's slab and LRU commands; `h`, `l` and
//! the stale-item flags of meta commands (docs/memcache.md says what is answered instead).

pub(crate) mod conn;
pub(crate) mod exec;
pub(crate) mod flush;
mod meta;
pub(crate) mod stats;

use std::net::TcpListener;

use crate::config::ServerConfig;

/// Binds memcached's port, if it is on; a port that is taken fails the start with an error
/// that names the setting.
pub(crate) fn bind(cfg: &ServerConfig) -> Result<Option<TcpListener>, String> {
    let Some(port) = cfg.memcache_port_effective() else {
        return Ok(None);
    };
    TcpListener::bind((cfg.bind.as_str(), port))
        .map(Some)
        .map_err(|e| {
            format!(
                "cannot bind the memcached port {}:{port}: {e} (set another with --memcache-port / memcache_port, or 0 to turn it off)",
                cfg.bind
            )
        })
}
