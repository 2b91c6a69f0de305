//! memcached's counters and its `stats` command.
//!
//! The counters are rows of `COUNTERS` (`crate::stats`, so INFO and /metrics show them as
//! `memcache_*`), kept in one array of atomics indexed by [`C`]. A connection tallies its
//! batch in a plain array ([`Tally`]) and adds it once per batch, not one atomic per request.
//!
//! `stats` answers memcached's general fields from those counters, the server's and the
//! shards' engine reports (`curr_items`, `bytes`, `evictions`); `stats settings` the settings
//! that have a meaning here; `stats items` and `stats slabs` what memcached answers when it
//! holds no item (directkv's slab classes are not memcached's, so none are listed); `stats
//! conns` nothing (its lines are per-connection internals); `stats detail` accepts on and off
//! and dumps nothing (no per-prefix statistics are kept). Unknown groups get `ERROR`, as in
//! memcached. `stats reset` zeroes what memcached 1.6.18 zeroes (every count: commands, hits,
//! misses, total_connections, total_items, evictions, reclaimed; not the gauges) by keeping
//! each count's value at the reset and subtracting it: INFO and /metrics keep the totals.

use std::sync::atomic::{AtomicU64, Ordering};

use directkv_proto::memcache::{write_stat, write_status, Keys, Status};

use crate::shard::{ask_all, Job, ShardCtx};

/// The memcached counters, in `stats` order. Each is a row of `crate::stats::COUNTERS`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(usize)]
pub(crate) enum C {
    /// Open connections on the memcached port (a gauge).
    CurrConnections,
    TotalConnections,
    CmdGet,
    CmdSet,
    CmdFlush,
    CmdTouch,
    CmdMeta,
    GetHits,
    GetMisses,
    DeleteMisses,
    DeleteHits,
    IncrMisses,
    IncrHits,
    DecrMisses,
    DecrHits,
    CasMisses,
    CasHits,
    CasBadval,
    TouchHits,
    TouchMisses,
    StoreTooLarge,
    StoreNoMemory,
    AuthCmds,
    AuthErrors,
    /// Items stored since start-up (memcached's `total_items`).
    TotalItems,
    /// Requests refused with an error line (`ERROR`, `CLIENT_ERROR ...`).
    Refused,
    /// Connections closed for a line over its limit.
    LineTooLong,
}

/// Number of counters in [`C`].
pub(crate) const COUNT: usize = C::LineTooLong as usize + 1;

/// The server-wide counters (a field of `ServerStats`).
#[derive(Debug, Default)]
pub(crate) struct McCounters {
    v: [AtomicU64; COUNT],
    /// Each counter's value at the last `stats reset` (what `stats` subtracts).
    base: [AtomicU64; COUNT],
    /// The shards' evicted and expired keys at the last `stats reset` (`evictions`,
    /// `reclaimed`).
    base_evictions: AtomicU64,
    base_reclaimed: AtomicU64,
}

impl McCounters {
    /// The total since start-up (INFO, /metrics).
    pub(crate) fn get(&self, c: C) -> u64 {
        self.v[c as usize].load(Ordering::Relaxed)
    }

    /// The count since the last `stats reset` (memcached's `stats`).
    fn since_reset(&self, c: C) -> u64 {
        self.get(c)
            .wrapping_sub(self.base[c as usize].load(Ordering::Relaxed))
    }

    /// `stats reset`: `stats` counts from now on; the totals INFO and /metrics show are
    /// left alone (they are Prometheus counters, which only grow). `curr_connections` is a
    /// gauge and has no base.
    fn reset(&self, evictions: u64, reclaimed: u64) {
        for (i, b) in self.base.iter().enumerate() {
            if i != C::CurrConnections as usize {
                b.store(self.v[i].load(Ordering::Relaxed), Ordering::Relaxed);
            }
        }
        self.base_evictions.store(evictions, Ordering::Relaxed);
        self.base_reclaimed.store(reclaimed, Ordering::Relaxed);
    }

    pub(crate) fn add(&self, c: C, n: u64) {
        self.v[c as usize].fetch_add(n, Ordering::Relaxed);
    }

    /// Adds a connection's tally and clears it.
    pub(crate) fn add_tally(&self, t: &mut Tally) {
        for (i, n) in t.0.iter_mut().enumerate() {
            if *n != 0 {
                self.v[i].fetch_add(*n, Ordering::Relaxed);
                *n = 0;
            }
        }
    }

    /// Counts an open connection until the guard is dropped.
    pub(crate) fn connection(&self) -> ConnGuard<'_> {
        self.add(C::CurrConnections, 1);
        self.add(C::TotalConnections, 1);
        ConnGuard(self)
    }
}

/// Decrements `curr_connections` when the connection ends, however it ends.
pub(crate) struct ConnGuard<'a>(&'a McCounters);

impl Drop for ConnGuard<'_> {
    fn drop(&mut self) {
        self.0.v[C::CurrConnections as usize].fetch_sub(1, Ordering::Relaxed);
    }
}

/// A connection's counts since its last batch.
#[derive(Debug, Default)]
pub(crate) struct Tally([u64; COUNT]);

impl Tally {
    #[inline]
    pub(crate) fn add(&mut self, c: C, n: u64) {
        self.0[c as usize] += n;
    }
}

/// The version memcached clients are told: the memcached release whose protocol this port
/// speaks (clients parse it as numbers); `stats` adds directkv's own.
pub(crate) const PROTOCOL_VERSION: &str = "1.6.18";

/// Answers `stats [group]`; `ERROR` for a group it does not know.
pub(crate) async fn stats(ctx: &ShardCtx, args: Keys<'_>, out: &mut Vec<u8>) {
    let mut words = args.iter();
    match (words.next(), words.next()) {
        (None, _) => general(ctx, out).await,
        (Some(b"settings"), None) => settings(ctx, out),
        (Some(b"items"), None) | (Some(b"conns"), None) => write_status(out, Status::End),
        (Some(b"slabs"), None) => {
            write_stat(out, "active_slabs", "0");
            write_stat(out, "total_malloced", "0");
            write_status(out, Status::End);
        }
        // Per-prefix statistics are not kept: on and off are accepted, a dump is empty.
        (Some(b"detail"), Some(b"on" | b"off")) if words.next().is_none() => {
            write_status(out, Status::Ok)
        }
        (Some(b"detail"), Some(b"dump")) if words.next().is_none() => {
            write_status(out, Status::End)
        }
        (Some(b"detail"), _) => {
            directkv_proto::memcache::write_client_error(out, "usage: stats detail on|off|dump")
        }
        (Some(b"reset"), None) => {
            let reports = ask_all(ctx, |reply| Job::Report { reply }).await;
            let (evictions, reclaimed) = engine_totals(&reports);
            ctx.stats.memcache.reset(evictions, reclaimed);
            write_status(out, Status::Reset);
        }
        _ => directkv_proto::memcache::write_error(
            out,
            directkv_proto::memcache::MemcacheError::UnknownCommand,
        ),
    }
}

/// One `STAT name value` line of a number.
fn n(out: &mut Vec<u8>, name: &str, v: u64) {
    write_stat(out, name, &v.to_string());
}

/// The shards' evicted and expired keys since start-up.
fn engine_totals(reports: &[directkv_engine::Report]) -> (u64, u64) {
    let evictions = reports.iter().map(|r| r.stats.evicted_keys).sum();
    let expired = reports.iter().map(|r| r.stats.expired_keys).sum();
    (evictions, expired)
}

/// `stats`: every count is since the last `stats reset` (as memcached's), but the gauges
/// (`curr_connections`, `curr_items`, `bytes`).
async fn general(ctx: &ShardCtx, out: &mut Vec<u8>) {
    let reports = ask_all(ctx, |reply| Job::Report { reply }).await;
    let m = &ctx.stats.memcache;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let items: u64 = reports.iter().map(|r| r.counts.keys).sum();
    let bytes: u64 = reports.iter().map(|r| r.counts.kv_bytes).sum();
    let (evictions, expired) = engine_totals(&reports);
    let evictions = evictions.wrapping_sub(m.base_evictions.load(Ordering::Relaxed));
    let expired = expired.wrapping_sub(m.base_reclaimed.load(Ordering::Relaxed));
    n(out, "pid", u64::from(std::process::id()));
    n(out, "uptime", ctx.started.elapsed().as_secs());
    n(out, "time", now);
    write_stat(out, "version", PROTOCOL_VERSION);
    write_stat(out, "directkv_version", env!("CARGO_PKG_VERSION"));
    write_stat(out, "pointer_size", &(usize::BITS).to_string());
    n(
        out,
        "max_connections",
        ctx.stats.live.connections_max() as u64,
    );
    n(out, "curr_connections", m.get(C::CurrConnections));
    n(out, "total_connections", m.since_reset(C::TotalConnections));
    n(
        out,
        "rejected_connections",
        ctx.stats.rejected_connections.load(Ordering::Relaxed),
    );
    for (name, c) in [
        ("cmd_get", C::CmdGet),
        ("cmd_set", C::CmdSet),
        ("cmd_flush", C::CmdFlush),
        ("cmd_touch", C::CmdTouch),
        ("cmd_meta", C::CmdMeta),
        ("get_hits", C::GetHits),
        ("get_misses", C::GetMisses),
    ] {
        n(out, name, m.since_reset(c));
    }
    // Expired and flushed items are gone before a get can see them (lazily reclaimed).
    n(out, "get_expired", 0);
    n(out, "get_flushed", 0);
    for (name, c) in [
        ("delete_misses", C::DeleteMisses),
        ("delete_hits", C::DeleteHits),
        ("incr_misses", C::IncrMisses),
        ("incr_hits", C::IncrHits),
        ("decr_misses", C::DecrMisses),
        ("decr_hits", C::DecrHits),
        ("cas_misses", C::CasMisses),
        ("cas_hits", C::CasHits),
        ("cas_badval", C::CasBadval),
        ("touch_hits", C::TouchHits),
        ("touch_misses", C::TouchMisses),
        ("store_too_large", C::StoreTooLarge),
        ("store_no_memory", C::StoreNoMemory),
        ("auth_cmds", C::AuthCmds),
        ("auth_errors", C::AuthErrors),
    ] {
        n(out, name, m.since_reset(c));
    }
    n(out, "limit_maxbytes", ctx.cfg.memory_bytes as u64);
    n(out, "accepting_conns", 1);
    n(out, "threads", ctx.shards() as u64);
    n(out, "curr_items", items);
    n(out, "total_items", m.since_reset(C::TotalItems));
    n(out, "expired_unfetched", 0);
    n(out, "evicted_unfetched", 0);
    n(out, "evictions", evictions);
    n(out, "reclaimed", expired);
    n(out, "bytes", bytes);
    write_status(out, Status::End);
}

fn settings(ctx: &ShardCtx, out: &mut Vec<u8>) {
    let cfg = &ctx.cfg;
    n(out, "maxbytes", cfg.memory_bytes as u64);
    n(out, "maxconns", ctx.stats.live.connections_max() as u64);
    n(out, "tcpport", u64::from(cfg.memcache_port));
    n(out, "udpport", 0);
    write_stat(out, "inter", &cfg.bind);
    n(out, "evictions", 1);
    n(out, "num_threads", ctx.shards() as u64);
    n(out, "cas_enabled", 1);
    n(out, "item_size_max", cfg.value_len_max as u64);
    n(out, "maxconns_fast", 1);
    write_stat(out, "binding_protocol", "ascii");
    n(
        out,
        "auth_enabled_ascii",
        u64::from(ctx.stats.live.requirepass().is_some()),
    );
    n(out, "auth_enabled_sasl", 0);
    n(out, "idle_timeout", ctx.stats.live.timeout_secs());
    n(
        out,
        "key_len_max",
        directkv_proto::memcache::KEY_BYTES_MAX as u64,
    );
    n(out, "line_bytes_max", cfg.memcache_line_bytes_max as u64);
    n(
        out,
        "get_line_bytes_max",
        cfg.memcache_get_line_bytes_max as u64,
    );
    n(out, "get_keys_max", cfg.memcache_get_keys_max as u64);
    write_status(out, Status::End);
}
