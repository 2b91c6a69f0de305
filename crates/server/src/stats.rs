//! The server's counters, and [`COUNTERS`]: the one table that lists them. INFO
//! (`resp/info.rs`) and Prometheus /metrics (`admin/metrics.rs`) both render from it, so a new
//! counter is one field here and one row in the table, and cannot appear in one and not the
//! other (a test over real sockets checks every row in both).
//!
//! ```text
//!  ServerStats (atomics, shared by every thread) ──┐
//!  engine Reports (asked from every shard)  ───────┼──> COUNTERS rows ──┬─> INFO  `name:value`
//!                                                  │   (section, names, │
//!                                                  │    help, kind,     └─> /metrics lines
//!                                                  │    reader)
//! ```
//!
//! Rows read either a server-wide atomic or an engine counter; the latter are one sum in INFO
//! and one sample per shard (and per operation kind) in /metrics. Values that are not counters
//! (versions, uptime, memory, keyspace, configuration) stay in the renderers.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use directkv_engine::stats::KindCounters;
use directkv_engine::Report;

/// Counters shared by all threads of a server.
#[derive(Debug, Default)]
pub(crate) struct ServerStats {
    pub(crate) connections: AtomicUsize,
    pub(crate) connections_total: AtomicU64,
    pub(crate) commands: AtomicU64,
    pub(crate) rejected_connections: AtomicU64,
    pub(crate) protocol_errors: AtomicU64,
    /// Native frames rejected by the decoder, skipped or fatal (issue 19 item 16).
    pub(crate) native_protocol_errors: AtomicU64,
    /// Bytes of unfinished RESP commands read by the parser: with resumed parsing each byte of
    /// a command arriving over many reads is read about once (issue 19 item 7).
    pub(crate) resp_incomplete_bytes_scanned: AtomicU64,
    /// Protocol-error log lines dropped by the rate limit (`log_limit.rs`).
    pub(crate) protocol_error_logs_suppressed: AtomicU64,
    /// RESP connections closed for a cross-protocol request (`POST` or `Host:`, issue 19).
    pub(crate) security_attacks: AtomicU64,
    /// Batches a connection's shard sent to another shard's queue (a client that is not
    /// shard-aware, or RESP): zero while every client routes by the shard map.
    pub(crate) forwarded_batches: AtomicU64,
    /// Operations in those batches.
    pub(crate) forwarded_ops: AtomicU64,
    /// Zero-timeout polls of the shards' busy pollers (added when a poller parks).
    pub(crate) busy_polls: AtomicU64,
    /// Times a shard's poller parked until the next request: after `busy_poll_us` without
    /// one, or after a back-off (its core was wanted) in which none came.
    pub(crate) busy_poll_sleeps: AtomicU64,
    /// Panics contained while serving a request (`shard/panics.rs`): each one a bug.
    pub(crate) panics: AtomicU64,
    pub(crate) ocsm: OcsmStats,
    /// The last sample of INFO's `instantaneous_ops_per_sec` (not a counter: no row).
    pub(crate) ops_sample: std::sync::Mutex<OpsSample>,
    /// Keys a RESP read command found (GET, MGET, EXISTS, STRLEN, GETSET, GETDEL, SET ... GET),
    /// as Redis counts `keyspace_hits`; added once per rendered batch (`resp/reply.rs`).
    pub(crate) keyspace_hits: AtomicU64,
    /// Keys those commands did not find (`keyspace_misses`).
    pub(crate) keyspace_misses: AtomicU64,
    /// `accept` calls that failed, most often for want of a file descriptor (`files.rs`).
    pub(crate) accept_errors: AtomicU64,
    /// Connections closed after `timeout` seconds without input (`accept::read_more`).
    pub(crate) idle_timeouts: AtomicU64,
    /// Atomic plans (multi-key writes, `shard/atomic.rs`) that spanned several shards.
    pub(crate) atomic_cross_shard: AtomicU64,
    /// Atomic plans refused whole: an argument over a limit, or out of memory (issue 19 item 9).
    pub(crate) atomic_refused: AtomicU64,
    /// Multi-key reads run again because a cross-shard atomic plan committed meanwhile.
    pub(crate) atomic_read_retries: AtomicU64,
    /// Live client connections and the bytes their buffers hold (`clients.rs`, issue 19).
    pub(crate) clients: crate::clients::Clients,
    /// Transactions run by EXEC (`resp/multi.rs`), whether or not a watched key stopped them.
    pub(crate) multi_exec: AtomicU64,
    /// Transactions EXEC discarded because a watched key changed (the null reply).
    pub(crate) multi_watch_aborted: AtomicU64,
    /// The settings CONFIG SET changes, and the SHUTDOWN request (`live.rs`, issue 20).
    pub(crate) live: crate::live::Live,
    /// Times a shard's poller stopped spinning because another thread wanted its core
    /// (`shard/busy_poll.rs`, issue 20 item 6).
    pub(crate) busy_poll_backoffs: AtomicU64,
    /// memcached's counters (`memcache/stats.rs`; rows `memcache_*` below).
    pub(crate) memcache: crate::memcache::stats::McCounters,
    /// The pending `flush_all <delay>` (`memcache/flush.rs`; not a counter).
    pub(crate) memcache_flush: crate::memcache::flush::FlushTimer,
    /// The persistence log's counters (`persistence/mod.rs`; rows in section Persistence).
    pub(crate) persist: crate::persistence::PersistStats,
    /// Snapshot progress and totals (`persistence/snapshot.rs`; rows `snapshot_*` below).
    pub(crate) snapshot: crate::persistence::snapshot::SnapshotCounters,
}

/// When INFO last sampled the command counter, its value then and the rate it computed.
#[derive(Debug, Default)]
pub(crate) struct OpsSample {
    pub(crate) at: Option<std::time::Instant>,
    pub(crate) commands: u64,
    pub(crate) rate: u64,
}

impl ServerStats {
    pub(crate) fn connection_opened(&self) {
        self.connections.fetch_add(1, Ordering::Relaxed);
        self.connections_total.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn connection_closed(&self) {
        self.connections.fetch_sub(1, Ordering::Relaxed);
    }
}

/// OCSM counters (all paths).
#[derive(Debug, Default)]
pub struct OcsmStats {
    pub datagrams: AtomicU64,
    pub messages: AtomicU64,
    /// Datagrams refused (answered with an error datagram, or dropped when too short).
    pub errors: AtomicU64,
    /// Bursts the batched path received (datagrams / bursts = mean burst size).
    pub bursts: AtomicU64,
    /// Segmented (GSO) sends of the batched paths, each several replies to one sender.
    pub segmented_sends: AtomicU64,
}

/// Prometheus metric type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Counter,
    Gauge,
}

impl Kind {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
        }
    }
}

/// Where a row's value comes from.
#[derive(Clone, Copy)]
pub(crate) enum Reader {
    /// A server-wide atomic.
    Server(fn(&ServerStats) -> u64),
    /// An engine counter of each shard: INFO shows the sum over the shards; /metrics one
    /// sample per shard, or per shard and operation kind when `per_kind` is given.
    Engine {
        total: fn(&Report) -> u64,
        per_kind: Option<fn(&KindCounters) -> u64>,
    },
}

/// One counter: its INFO section and field, its metric, and how to read it.
pub(crate) struct Counter {
    /// INFO section (`# Clients`, ...) the field is listed in.
    pub(crate) section: &'static str,
    /// INFO field name.
    pub(crate) info: &'static str,
    /// Prometheus metric name.
    pub(crate) metric: &'static str,
    pub(crate) kind: Kind,
    /// Prometheus HELP text.
    pub(crate) help: &'static str,
    pub(crate) read: Reader,
}

impl Counter {
    /// The INFO value: the atomic, or the sum over `reports`.
    pub(crate) fn info_value(&self, stats: &ServerStats, reports: &[Report]) -> u64 {
        match self.read {
            Reader::Server(read) => read(stats),
            Reader::Engine { total, .. } => reports.iter().map(total).sum(),
        }
    }
}

const fn server(
    section: &'static str,
    info: &'static str,
    metric: &'static str,
    kind: Kind,
    help: &'static str,
    read: fn(&ServerStats) -> u64,
) -> Counter {
    Counter {
        section,
        info,
        metric,
        kind,
        help,
        read: Reader::Server(read),
    }
}

/// Every counter, in INFO order within each section.
pub(crate) const COUNTERS: &[Counter] = &[
    server(
        "Clients",
        "connected_clients",
        "directkv_connections",
        Kind::Gauge,
        "Open client connections.",
        |s| s.connections.load(Ordering::Relaxed) as u64,
    ),
    server(
        "Clients",
        "total_connections_received",
        "directkv_connections_received_total",
        Kind::Counter,
        "Client connections accepted since start-up.",
        |s| s.connections_total.load(Ordering::Relaxed),
    ),
    server(
        "Clients",
        "rejected_connections",
        "directkv_rejected_connections_total",
        Kind::Counter,
        "Client connections refused at connections_max.",
        |s| s.rejected_connections.load(Ordering::Relaxed),
    ),
    server(
        "Stats",
        "total_commands_processed",
        "directkv_commands_total",
        Kind::Counter,
        "RESP commands processed.",
        |s| s.commands.load(Ordering::Relaxed),
    ),
    Counter {
        section: "Stats",
        info: "engine_ops",
        metric: "directkv_engine_ops_total",
        kind: Kind::Counter,
        help: "Engine operations by kind.",
        read: Reader::Engine {
            total: |r| r.stats.total().ops,
            per_kind: Some(|c| c.ops),
        },
    },
    Counter {
        section: "Stats",
        info: "engine_forwarded_ops",
        metric: "directkv_engine_forwarded_total",
        kind: Kind::Counter,
        help: "Operations served by data forwarding.",
        read: Reader::Engine {
            total: |r| r.stats.forwarded,
            per_kind: None,
        },
    },
    Counter {
        section: "Stats",
        info: "engine_memory_accesses",
        metric: "directkv_engine_memory_accesses_total",
        kind: Kind::Counter,
        help: "Buckets and records read or written, by kind.",
        read: Reader::Engine {
            total: |r| r.stats.total().accesses(),
            per_kind: Some(|c| c.accesses()),
        },
    },
    server(
        "Stats",
        "protocol_errors",
        "directkv_protocol_errors_total",
        Kind::Counter,
        "Connections closed for malformed input.",
        |s| s.protocol_errors.load(Ordering::Relaxed),
    ),
    server(
        "Stats",
        "native_protocol_errors",
        "directkv_native_protocol_errors_total",
        Kind::Counter,
        "Native frames rejected as malformed (answered with an error frame, skipped or closing).",
        |s| s.native_protocol_errors.load(Ordering::Relaxed),
    ),
    server(
        "Stats",
        "resp_incomplete_bytes_scanned",
        "directkv_resp_incomplete_bytes_scanned_total",
        Kind::Counter,
        "Bytes of unfinished RESP commands read by the parser (about once each: parsing resumes where it stopped).",
        |s| s.resp_incomplete_bytes_scanned.load(Ordering::Relaxed),
    ),
    server(
        "Stats",
        "protocol_error_logs_suppressed",
        "directkv_protocol_error_logs_suppressed_total",
        Kind::Counter,
        "Protocol-error log lines not written because of the rate limit.",
        |s| s.protocol_error_logs_suppressed.load(Ordering::Relaxed),
    ),
    server(
        "Stats",
        "security_attacks",
        "directkv_security_attacks_total",
        Kind::Counter,
        "RESP connections closed for an HTTP request line or header (POST, Host:).",
        |s| s.security_attacks.load(Ordering::Relaxed),
    ),
    server(
        "Stats",
        "panics",
        "directkv_panics_total",
        Kind::Counter,
        "Panics contained while serving a request (each ended only its connection, datagram or batch; each is a bug).",
        |s| s.panics.load(Ordering::Relaxed),
    ),
    server(
        "Forwarding",
        "forwarded_batches",
        "directkv_forwarded_batches_total",
        Kind::Counter,
        "Batches sent to another shard's thread (cross-shard hops).",
        |s| s.forwarded_batches.load(Ordering::Relaxed),
    ),
    server(
        "Forwarding",
        "forwarded_ops",
        "directkv_forwarded_ops_total",
        Kind::Counter,
        "Operations in batches sent to another shard's thread.",
        |s| s.forwarded_ops.load(Ordering::Relaxed),
    ),
    server(
        "OCSM",
        "ocsm_datagrams",
        "directkv_ocsm_datagrams_total",
        Kind::Counter,
        "OCSM datagrams received.",
        |s| s.ocsm.datagrams.load(Ordering::Relaxed),
    ),
    server(
        "OCSM",
        "ocsm_messages",
        "directkv_ocsm_messages_total",
        Kind::Counter,
        "OCSM messages executed.",
        |s| s.ocsm.messages.load(Ordering::Relaxed),
    ),
    server(
        "OCSM",
        "ocsm_errors",
        "directkv_ocsm_errors_total",
        Kind::Counter,
        "OCSM datagrams refused.",
        |s| s.ocsm.errors.load(Ordering::Relaxed),
    ),
    server(
        "OCSM",
        "ocsm_bursts",
        "directkv_ocsm_bursts_total",
        Kind::Counter,
        "recvmmsg bursts (batched path).",
        |s| s.ocsm.bursts.load(Ordering::Relaxed),
    ),
    server(
        "OCSM",
        "ocsm_segmented_sends",
        "directkv_ocsm_segmented_sends_total",
        Kind::Counter,
        "Segmented (UDP GSO) sends of several replies to one sender (batched paths).",
        |s| s.ocsm.segmented_sends.load(Ordering::Relaxed),
    ),
    server(
        "Busy polling",
        "busy_polls",
        "directkv_busy_polls_total",
        Kind::Counter,
        "Zero-timeout socket polls of the shards' busy pollers (counted when a poller parks).",
        |s| s.busy_polls.load(Ordering::Relaxed),
    ),
    server(
        "Busy polling",
        "busy_poll_sleeps",
        "directkv_busy_poll_sleeps_total",
        Kind::Counter,
        "Times a shard stopped busy polling until its next request (after busy_poll_us without one, or after a back-off).",
        |s| s.busy_poll_sleeps.load(Ordering::Relaxed),
    ),
    server(
        "Stats",
        "keyspace_hits",
        "directkv_keyspace_hits_total",
        Kind::Counter,
        "Keys found by RESP read commands (GET, MGET, EXISTS, STRLEN, GETSET, GETDEL, SET ... GET), as Redis counts them.",
        |s| s.keyspace_hits.load(Ordering::Relaxed),
    ),
    server(
        "Stats",
        "keyspace_misses",
        "directkv_keyspace_misses_total",
        Kind::Counter,
        "Keys not found by RESP read commands, as Redis counts them.",
        |s| s.keyspace_misses.load(Ordering::Relaxed),
    ),
    server(
        "Clients",
        "accept_errors",
        "directkv_accept_errors_total",
        Kind::Counter,
        "Failed accepts of client connections, most often for want of a file descriptor (RLIMIT_NOFILE).",
        |s| s.accept_errors.load(Ordering::Relaxed),
    ),
    server(
        "Clients",
        "idle_timeouts",
        "directkv_idle_timeouts_total",
        Kind::Counter,
        "Client connections closed after `timeout` seconds without input.",
        |s| s.idle_timeouts.load(Ordering::Relaxed),
    ),
    server(
        "Stats",
        "atomic_cross_shard",
        "directkv_atomic_cross_shard_total",
        Kind::Counter,
        "Multi-key writes run all or nothing across several shards.",
        |s| s.atomic_cross_shard.load(Ordering::Relaxed),
    ),
    server(
        "Stats",
        "atomic_refused",
        "directkv_atomic_refused_total",
        Kind::Counter,
        "Multi-key writes refused whole (an argument over a limit, or out of memory).",
        |s| s.atomic_refused.load(Ordering::Relaxed),
    ),
    server(
        "Stats",
        "atomic_read_retries",
        "directkv_atomic_read_retries_total",
        Kind::Counter,
        "Multi-key reads run again because a cross-shard write committed meanwhile.",
        |s| s.atomic_read_retries.load(Ordering::Relaxed),
    ),
    server(
        "Clients",
        "client_buffer_bytes",
        "directkv_client_buffer_bytes",
        Kind::Gauge,
        "Bytes all client connections' buffers hold (input, replies, results), as checked against maxmemory_clients.",
        |s| s.clients.bytes() as u64,
    ),
    server(
        "Clients",
        "client_buffer_bytes_peak",
        "directkv_client_buffer_bytes_peak",
        Kind::Gauge,
        "The highest client_buffer_bytes since start-up.",
        |s| s.clients.bytes_peak() as u64,
    ),
    server(
        "Clients",
        "evicted_clients",
        "directkv_evicted_clients_total",
        Kind::Counter,
        "Client connections closed because all clients' buffers passed maxmemory_clients (largest first).",
        |s| s.clients.evicted(),
    ),
    lag_row(
        "expired_keys",
        "directkv_expired_keys_total",
        "Keys removed because their deadline passed, lazily (an operation found them) or by the sweep.",
        |r| r.stats.expired_keys,
    ),
    Counter {
        section: "Stats",
        info: "expiring_keys",
        metric: "directkv_expiring_keys",
        kind: Kind::Gauge,
        help: "Keys with a deadline (INFO keyspace's expires=).",
        read: Reader::Engine {
            total: |r| r.counts.expiring_keys,
            per_kind: None,
        },
    },
    lag_row(
        "expired_lag_lt_16ms",
        "directkv_expired_lag_lt_16ms_total",
        "Expired keys reclaimed less than 16 ms after their deadline (with expired_keys, a cumulative histogram of the expiry lag).",
        |r| r.stats.expiry_lag.count_below_ms(16),
    ),
    lag_row(
        "expired_lag_lt_128ms",
        "directkv_expired_lag_lt_128ms_total",
        "Expired keys reclaimed less than 128 ms after their deadline (with expired_keys, a cumulative histogram of the expiry lag).",
        |r| r.stats.expiry_lag.count_below_ms(128),
    ),
    lag_row(
        "expired_lag_lt_1024ms",
        "directkv_expired_lag_lt_1024ms_total",
        "Expired keys reclaimed less than 1024 ms after their deadline (with expired_keys, a cumulative histogram of the expiry lag).",
        |r| r.stats.expiry_lag.count_below_ms(1024),
    ),
    lag_row(
        "expired_lag_lt_8192ms",
        "directkv_expired_lag_lt_8192ms_total",
        "Expired keys reclaimed less than 8192 ms after their deadline (with expired_keys, a cumulative histogram of the expiry lag).",
        |r| r.stats.expiry_lag.count_below_ms(8192),
    ),
    server(
        "Stats",
        "multi_exec",
        "directkv_multi_exec_total",
        Kind::Counter,
        "Transactions (MULTI ... EXEC) run, whether or not a watched key stopped them.",
        |s| s.multi_exec.load(Ordering::Relaxed),
    ),
    server(
        "Stats",
        "multi_watch_aborted",
        "directkv_multi_watch_aborted_total",
        Kind::Counter,
        "Transactions EXEC did not run because a watched key changed (the null reply).",
        |s| s.multi_watch_aborted.load(Ordering::Relaxed),
    ),
    server(
        "Busy polling",
        "busy_poll_backoffs",
        "directkv_busy_poll_backoffs_total",
        Kind::Counter,
        "Times a shard stopped busy polling because another thread wanted its core (it then sleeps in epoll for a back-off).",
        |s| s.busy_poll_backoffs.load(Ordering::Relaxed),
    ),
    Counter {
        section: "Stats",
        info: "evicted_keys",
        metric: "directkv_evicted_keys_total",
        kind: Kind::Counter,
        help: "Keys evicted to make room under maxmemory_policy (Redis's evicted_keys).",
        read: Reader::Engine {
            total: |r| r.stats.evicted_keys,
            per_kind: None,
        },
    },
    server(
        "Stats",
        "memcache_curr_connections",
        "directkv_memcache_connections",
        Kind::Gauge,
        "Open connections on the memcached port.",
        |s| s.memcache.get(crate::memcache::stats::C::CurrConnections),
    ),
    server(
        "Stats",
        "memcache_total_connections",
        "directkv_memcache_connections_received_total",
        Kind::Counter,
        "Connections accepted on the memcached port since start-up.",
        |s| s.memcache.get(crate::memcache::stats::C::TotalConnections),
    ),
    server(
        "Stats",
        "memcache_cmd_get",
        "directkv_memcache_cmd_get_total",
        Kind::Counter,
        "Keys asked for by memcached retrieval commands (get, gets, gat, gats, mg), as memcached's cmd_get.",
        |s| s.memcache.get(crate::memcache::stats::C::CmdGet),
    ),
    server(
        "Stats",
        "memcache_cmd_set",
        "directkv_memcache_cmd_set_total",
        Kind::Counter,
        "memcached storage commands (set, add, replace, append, prepend, cas, ms).",
        |s| s.memcache.get(crate::memcache::stats::C::CmdSet),
    ),
    server(
        "Stats",
        "memcache_cmd_flush",
        "directkv_memcache_cmd_flush_total",
        Kind::Counter,
        "memcached flush_all commands.",
        |s| s.memcache.get(crate::memcache::stats::C::CmdFlush),
    ),
    server(
        "Stats",
        "memcache_cmd_touch",
        "directkv_memcache_cmd_touch_total",
        Kind::Counter,
        "memcached touch commands and keys of gat/gats.",
        |s| s.memcache.get(crate::memcache::stats::C::CmdTouch),
    ),
    server(
        "Stats",
        "memcache_cmd_meta",
        "directkv_memcache_cmd_meta_total",
        Kind::Counter,
        "memcached me (meta debug) commands: what memcached 1.6.18 counts in cmd_meta.",
        |s| s.memcache.get(crate::memcache::stats::C::CmdMeta),
    ),
    server(
        "Stats",
        "memcache_get_hits",
        "directkv_memcache_get_hits_total",
        Kind::Counter,
        "Keys memcached retrievals found.",
        |s| s.memcache.get(crate::memcache::stats::C::GetHits),
    ),
    server(
        "Stats",
        "memcache_get_misses",
        "directkv_memcache_get_misses_total",
        Kind::Counter,
        "Keys memcached retrievals did not find.",
        |s| s.memcache.get(crate::memcache::stats::C::GetMisses),
    ),
    server(
        "Stats",
        "memcache_delete_misses",
        "directkv_memcache_delete_misses_total",
        Kind::Counter,
        "memcached deletes of a missing key.",
        |s| s.memcache.get(crate::memcache::stats::C::DeleteMisses),
    ),
    server(
        "Stats",
        "memcache_delete_hits",
        "directkv_memcache_delete_hits_total",
        Kind::Counter,
        "memcached deletes that removed a key.",
        |s| s.memcache.get(crate::memcache::stats::C::DeleteHits),
    ),
    server(
        "Stats",
        "memcache_incr_misses",
        "directkv_memcache_incr_misses_total",
        Kind::Counter,
        "memcached incr of a missing key.",
        |s| s.memcache.get(crate::memcache::stats::C::IncrMisses),
    ),
    server(
        "Stats",
        "memcache_incr_hits",
        "directkv_memcache_incr_hits_total",
        Kind::Counter,
        "memcached incr that changed a key.",
        |s| s.memcache.get(crate::memcache::stats::C::IncrHits),
    ),
    server(
        "Stats",
        "memcache_decr_misses",
        "directkv_memcache_decr_misses_total",
        Kind::Counter,
        "memcached decr of a missing key.",
        |s| s.memcache.get(crate::memcache::stats::C::DecrMisses),
    ),
    server(
        "Stats",
        "memcache_decr_hits",
        "directkv_memcache_decr_hits_total",
        Kind::Counter,
        "memcached decr that changed a key.",
        |s| s.memcache.get(crate::memcache::stats::C::DecrHits),
    ),
    server(
        "Stats",
        "memcache_cas_misses",
        "directkv_memcache_cas_misses_total",
        Kind::Counter,
        "memcached cas of a missing key.",
        |s| s.memcache.get(crate::memcache::stats::C::CasMisses),
    ),
    server(
        "Stats",
        "memcache_cas_hits",
        "directkv_memcache_cas_hits_total",
        Kind::Counter,
        "memcached cas that stored.",
        |s| s.memcache.get(crate::memcache::stats::C::CasHits),
    ),
    server(
        "Stats",
        "memcache_cas_badval",
        "directkv_memcache_cas_badval_total",
        Kind::Counter,
        "memcached cas (and ms C) refused because the CAS unique had changed.",
        |s| s.memcache.get(crate::memcache::stats::C::CasBadval),
    ),
    server(
        "Stats",
        "memcache_touch_hits",
        "directkv_memcache_touch_hits_total",
        Kind::Counter,
        "memcached touch and gat of a present key.",
        |s| s.memcache.get(crate::memcache::stats::C::TouchHits),
    ),
    server(
        "Stats",
        "memcache_touch_misses",
        "directkv_memcache_touch_misses_total",
        Kind::Counter,
        "memcached touch and gat of a missing key.",
        |s| s.memcache.get(crate::memcache::stats::C::TouchMisses),
    ),
    server(
        "Stats",
        "memcache_store_too_large",
        "directkv_memcache_store_too_large_total",
        Kind::Counter,
        "memcached stores refused as larger than value_len_max.",
        |s| s.memcache.get(crate::memcache::stats::C::StoreTooLarge),
    ),
    server(
        "Stats",
        "memcache_store_no_memory",
        "directkv_memcache_store_no_memory_total",
        Kind::Counter,
        "memcached stores refused for want of memory.",
        |s| s.memcache.get(crate::memcache::stats::C::StoreNoMemory),
    ),
    server(
        "Stats",
        "memcache_auth_cmds",
        "directkv_memcache_auth_cmds_total",
        Kind::Counter,
        "memcached logins tried (the ASCII auth convention's set).",
        |s| s.memcache.get(crate::memcache::stats::C::AuthCmds),
    ),
    server(
        "Stats",
        "memcache_auth_errors",
        "directkv_memcache_auth_errors_total",
        Kind::Counter,
        "memcached logins refused, and commands refused before a login.",
        |s| s.memcache.get(crate::memcache::stats::C::AuthErrors),
    ),
    server(
        "Stats",
        "memcache_total_items",
        "directkv_memcache_items_stored_total",
        Kind::Counter,
        "Items stored by memcached commands since start-up (memcached's total_items).",
        |s| s.memcache.get(crate::memcache::stats::C::TotalItems),
    ),
    server(
        "Stats",
        "memcache_refused",
        "directkv_memcache_refused_total",
        Kind::Counter,
        "memcached requests answered with an error line by the codec (ERROR, CLIENT_ERROR ...).",
        |s| s.memcache.get(crate::memcache::stats::C::Refused),
    ),
    server(
        "Stats",
        "memcache_line_too_long",
        "directkv_memcache_line_too_long_total",
        Kind::Counter,
        "memcached connections closed for a command line over memcache_line_bytes_max (or get_line_bytes_max).",
        |s| s.memcache.get(crate::memcache::stats::C::LineTooLong),
    ),
    server(
        "Persistence",
        "aof_records",
        "directkv_aof_records_total",
        Kind::Counter,
        "Records appended to the shards' logs (one per batch that wrote).",
        |s| s.persist.records.load(Ordering::Relaxed),
    ),
    server(
        "Persistence",
        "aof_written_bytes",
        "directkv_aof_written_bytes_total",
        Kind::Counter,
        "Bytes written to the shards' logs.",
        |s| s.persist.log_bytes.load(Ordering::Relaxed),
    ),
    server(
        "Persistence",
        "aof_writes",
        "directkv_aof_writes_total",
        Kind::Counter,
        "Writes of the shards' logs (a copy into the mapped log file, or a write(2)).",
        |s| s.persist.writes.load(Ordering::Relaxed),
    ),
    server(
        "Persistence",
        "aof_fsyncs",
        "directkv_aof_fsyncs_total",
        Kind::Counter,
        "fdatasync calls of the log sync thread.",
        |s| s.persist.fsyncs.load(Ordering::Relaxed),
    ),
    server(
        "Persistence",
        "aof_fsync_us",
        "directkv_aof_fsync_microseconds_total",
        Kind::Counter,
        "Microseconds the log sync thread spent in fdatasync.",
        |s| s.persist.fsync_us_total.load(Ordering::Relaxed),
    ),
    fsync_row(
        "aof_fsync_lt_250us",
        "directkv_aof_fsync_lt_250us_total",
        "fdatasyncs of the logs that took less than 250 us (with aof_fsyncs, a cumulative histogram).",
        0,
    ),
    fsync_row(
        "aof_fsync_lt_1ms",
        "directkv_aof_fsync_lt_1ms_total",
        "fdatasyncs of the logs that took less than 1 ms (with aof_fsyncs, a cumulative histogram).",
        1,
    ),
    fsync_row(
        "aof_fsync_lt_4ms",
        "directkv_aof_fsync_lt_4ms_total",
        "fdatasyncs of the logs that took less than 4 ms (with aof_fsyncs, a cumulative histogram).",
        2,
    ),
    fsync_row(
        "aof_fsync_lt_16ms",
        "directkv_aof_fsync_lt_16ms_total",
        "fdatasyncs of the logs that took less than 16 ms (with aof_fsyncs, a cumulative histogram).",
        3,
    ),
    fsync_row(
        "aof_fsync_lt_64ms",
        "directkv_aof_fsync_lt_64ms_total",
        "fdatasyncs of the logs that took less than 64 ms (with aof_fsyncs, a cumulative histogram).",
        4,
    ),
    server(
        "Persistence",
        "aof_durable_waits",
        "directkv_aof_durable_waits_total",
        Kind::Counter,
        "Times replies waited for a sync round (appendfsync always).",
        |s| s.persist.durable_waits.load(Ordering::Relaxed),
    ),
    server(
        "Persistence",
        "snapshot_in_progress",
        "directkv_snapshot_in_progress",
        Kind::Gauge,
        "Shards taking a snapshot now (BGSAVE, SAVE or automatic).",
        |s| s.snapshot.in_progress.load(Ordering::Relaxed),
    ),
    server(
        "Persistence",
        "snapshot_buckets_done",
        "directkv_snapshot_buckets_done",
        Kind::Gauge,
        "Main index buckets the running snapshots have written.",
        |s| s.snapshot.buckets_done.load(Ordering::Relaxed),
    ),
    server(
        "Persistence",
        "snapshot_buckets_total",
        "directkv_snapshot_buckets",
        Kind::Gauge,
        "Main index buckets the running snapshots will write in all.",
        |s| s.snapshot.buckets_total.load(Ordering::Relaxed),
    ),
    server(
        "Persistence",
        "snapshots_done",
        "directkv_snapshots_done_total",
        Kind::Counter,
        "Shard snapshots written and named by the manifest since start-up.",
        |s| s.snapshot.done.load(Ordering::Relaxed),
    ),
    server(
        "Persistence",
        "snapshots_failed",
        "directkv_snapshots_failed_total",
        Kind::Counter,
        "Shard snapshots given up (an error, or FLUSHALL) since start-up.",
        |s| s.snapshot.failed.load(Ordering::Relaxed),
    ),
    server(
        "Persistence",
        "snapshots_auto",
        "directkv_snapshots_auto_total",
        Kind::Counter,
        "Shard snapshots taken because the log passed auto_snapshot_log_bytes.",
        |s| s.snapshot.auto.load(Ordering::Relaxed),
    ),
    server(
        "Persistence",
        "snapshot_bytes",
        "directkv_snapshot_bytes_total",
        Kind::Counter,
        "Bytes of snapshot files written since start-up.",
        |s| s.snapshot.bytes.load(Ordering::Relaxed),
    ),
    server(
        "Persistence",
        "snapshot_extra_bytes_peak",
        "directkv_snapshot_extra_bytes_peak",
        Kind::Gauge,
        "Most memory a snapshot held besides the store (bucket copies, bitmap), bytes.",
        |s| s.snapshot.extra_bytes_peak.load(Ordering::Relaxed),
    ),
    server(
        "Persistence",
        "snapshot_work_us",
        "directkv_snapshot_work_microseconds_total",
        Kind::Counter,
        "CPU time snapshots took: the log's rotation and the image's steps on the shard's thread, its fdatasync, microseconds.",
        |s| s.snapshot.work_us.load(Ordering::Relaxed),
    ),
    server(
        "Persistence",
        "aof_sync_rounds",
        "directkv_aof_sync_rounds_total",
        Kind::Counter,
        "Sync rounds of the log sync thread (each one fdatasync per log with new records).",
        |s| s.persist.sync_rounds.load(Ordering::Relaxed),
    ),
    server(
        "Persistence",
        "aof_sync_round_asks",
        "directkv_aof_sync_round_asks_total",
        Kind::Counter,
        "Waits for durability the sync rounds answered (per aof_sync_rounds: the batches one round grouped).",
        |s| s.persist.sync_round_asks.load(Ordering::Relaxed),
    ),
    server(
        "Persistence",
        "aof_group_commit_waits",
        "directkv_aof_group_commit_waits_total",
        Kind::Counter,
        "Sync rounds that waited for more batches before they began (group_commit_delay_us).",
        |s| s.persist.group_commit_waits.load(Ordering::Relaxed),
    ),
    server(
        "Persistence",
        "aof_group_commit_timeouts",
        "directkv_aof_group_commit_timeouts_total",
        Kind::Counter,
        "Of aof_group_commit_waits, those that began at the delay's limit with fewer batches than expected.",
        |s| s.persist.group_commit_timeouts.load(Ordering::Relaxed),
    ),
    server(
        "Persistence",
        "aof_group_commit_wait_us",
        "directkv_aof_group_commit_wait_microseconds_total",
        Kind::Counter,
        "Microseconds sync rounds waited for more batches before they began.",
        |s| s.persist.group_commit_wait_us.load(Ordering::Relaxed),
    ),
    server(
        "Persistence",
        "aof_repairs",
        "directkv_aof_repairs_total",
        Kind::Counter,
        "Times the store accepted writes again after a log failure (every shard wrote a new snapshot and log).",
        |s| s.persist.repairs.load(Ordering::Relaxed),
    ),
];

/// A row of the key expiry counters (an engine counter in INFO's Stats section).
/// A row of the fsync latency histogram: bucket `b` of `persistence::FSYNC_BUCKETS_US`.
const fn fsync_row(
    info: &'static str,
    metric: &'static str,
    help: &'static str,
    b: usize,
) -> Counter {
    const READ: [fn(&ServerStats) -> u64; 5] = [
        |s| s.persist.fsync_below[0].load(Ordering::Relaxed),
        |s| s.persist.fsync_below[1].load(Ordering::Relaxed),
        |s| s.persist.fsync_below[2].load(Ordering::Relaxed),
        |s| s.persist.fsync_below[3].load(Ordering::Relaxed),
        |s| s.persist.fsync_below[4].load(Ordering::Relaxed),
    ];
    server("Persistence", info, metric, Kind::Counter, help, READ[b])
}

const fn lag_row(
    info: &'static str,
    metric: &'static str,
    help: &'static str,
    total: fn(&Report) -> u64,
) -> Counter {
    Counter {
        section: "Stats",
        info,
        metric,
        kind: Kind::Counter,
        help,
        read: Reader::Engine {
            total,
            per_kind: None,
        },
    }
}

/// The rows of INFO section `section`, in order.
pub(crate) fn section(section: &'static str) -> impl Iterator<Item = &'static Counter> {
    COUNTERS.iter().filter(move |c| c.section == section)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_metrics_are_prefixed() {
        for (i, a) in COUNTERS.iter().enumerate() {
            assert!(a.metric.starts_with("directkv_"), "{}", a.metric);
            assert_eq!(
                a.kind == Kind::Counter,
                a.metric.ends_with("_total"),
                "{}",
                a.metric
            );
            for b in &COUNTERS[i + 1..] {
                assert!(a.info != b.info && a.metric != b.metric, "{}", a.info);
            }
        }
    }

    /// INFO over RESP from a running server.
    fn info_over_resp(addr: std::net::SocketAddr) -> String {
        use std::io::{Read, Write};
        let mut c = std::net::TcpStream::connect(addr).unwrap();
        c.set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .unwrap();
        c.write_all(b"*1\r\n$4\r\nINFO\r\n").unwrap();
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            let n = c.read(&mut chunk).unwrap();
            assert!(n > 0, "the server closed before the INFO reply ended");
            buf.extend_from_slice(&chunk[..n]);
            // A bulk string: `$len\r\n` then len bytes and `\r\n`.
            if let Some(eol) = buf.windows(2).position(|w| w == b"\r\n") {
                let len: usize = std::str::from_utf8(&buf[1..eol]).unwrap().parse().unwrap();
                if buf.len() >= eol + 2 + len + 2 {
                    return String::from_utf8(buf[eol + 2..eol + 2 + len].to_vec()).unwrap();
                }
            }
        }
    }

    /// /metrics over HTTP from a running server.
    fn metrics_over_http(addr: std::net::SocketAddr) -> String {
        use std::io::{Read, Write};
        let mut h = std::net::TcpStream::connect(addr).unwrap();
        h.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let mut text = String::new();
        h.read_to_string(&mut text).unwrap();
        assert!(text.starts_with("HTTP/1.1 200 OK"), "{text}");
        text
    }

    #[test]
    fn every_counter_appears_in_info_and_in_metrics() {
        let srv = crate::Server::start(crate::ServerConfig {
            port: 0,
            metrics_port: Some(0),
            shards: 2,
            memory_bytes: 32 << 20,
            appendonly: false,
            ..crate::ServerConfig::default()
        })
        .expect("server starts");
        let info = info_over_resp(srv.addr());
        let metrics = metrics_over_http(srv.metrics_addr().unwrap());
        for c in COUNTERS {
            let field = format!("\r\n{}:", c.info);
            assert!(info.contains(&field), "INFO lacks {}:\n{info}", c.info);
            let help = format!("# HELP {} {}\n", c.metric, c.help);
            let kind = format!("# TYPE {} {}\n", c.metric, c.kind.name());
            assert!(metrics.contains(&help), "/metrics lacks {help}{metrics}");
            assert!(metrics.contains(&kind), "/metrics lacks {kind}{metrics}");
            let sample = metrics.lines().any(|l| {
                l.strip_prefix(c.metric)
                    .is_some_and(|rest| rest.starts_with(' ') || rest.starts_with('{'))
            });
            assert!(sample, "/metrics has no sample of {}:\n{metrics}", c.metric);
        }
        srv.stop();
    }
}
