//! Server settings: every limit has a name and a default; all of them can be set in a TOML file
//! (`directkv serve --config file.toml`) and the common ones by flags.
//!
//! The file's format (issue 19 item 14): a key is the flag's name without its dashes
//! (`--metrics-port` is `metrics_port`; `metrics-port` is accepted too), and takes the flag's
//! units: sizes are bytes or a number with K, M, G or T (`memory = "1G"`, powers of 1024),
//! times are numbers of the unit their name says (`reply_write_timeout_secs = 30`,
//! `busy_poll_us = 100`; `timeout` is seconds, as in Redis). The keys of older files
//! (`memory_bytes`, `expected_kv_bytes`, `target_utilization`) are still accepted, as aliases
//! of `memory`, `kv_size` and `utilization`. A key the server does not know is refused with
//! its name and the known key it is closest to. `docs/directkv.example.toml` lists every key
//! with its default, and a test keeps it complete.
//!
//! Datagrams and the password: native UDP and OCSM carry no password (a datagram has no
//! connection to hold an AUTH), so with `requirepass` set they would let anyone who can reach
//! the port read and write every key. Both are therefore on by default only on a loopback
//! address without a password (`udp`/`ocsm` left unset); with a password they are off unless
//! turned on explicitly AND acknowledged with `udp_insecure`, and `validate` refuses the
//! explicit request without the acknowledgement. An empty `requirepass` is refused: it is no
//! password.

use serde::{Deserialize, Serialize};

/// Where persistence keeps its files by default (`dir`), relative to the working directory.
pub const DIR_DEFAULT: &str = "./directkv-data";
/// Default `auto_snapshot_log_bytes`: 64 MiB, Redis's `auto-aof-rewrite-min-size`.
pub const AUTO_SNAPSHOT_LOG_BYTES_DEFAULT: usize = 64 << 20;
/// Default `auto_snapshot_cpu_percent` (measured: BENCHMARKS.md "Session 21").
pub const AUTO_SNAPSHOT_CPU_PERCENT_DEFAULT: u32 = 1;
/// Default `group_commit_delay_us` (measured: BENCHMARKS.md "Group commit delay (issue 22)").
pub const GROUP_COMMIT_DELAY_US_DEFAULT: u64 = 500;
/// Largest `group_commit_delay_us`: 100 ms, a tenth of `everysec`'s interval (a longer hold
/// would make `always` answer slower than `everysec` syncs).
pub const GROUP_COMMIT_DELAY_US_MAX: u64 = 100_000;

/// When a write's reply may leave, against its log record (`appendfsync`, Redis's names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendFsync {
    /// After the record is durable: one fdatasync per group of batches.
    Always,
    /// After the record is written; an fdatasync every second.
    Everysec,
    /// After the record is written; the kernel flushes when it likes.
    No,
}

impl AppendFsync {
    pub const ALL: [AppendFsync; 3] = [AppendFsync::Always, AppendFsync::Everysec, AppendFsync::No];

    pub fn name(self) -> &'static str {
        match self {
            AppendFsync::Always => "always",
            AppendFsync::Everysec => "everysec",
            AppendFsync::No => "no",
        }
    }

    pub fn from_name(s: &str) -> Option<AppendFsync> {
        AppendFsync::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(s))
    }
}

/// Largest value accepted from clients by default (SPEC: 1 MiB).
pub const VALUE_LEN_MAX_DEFAULT: usize = 1 << 20;
pub const KEY_LEN_MAX_DEFAULT: usize = 250;
pub const CONNECTIONS_MAX_DEFAULT: usize = 10_000;
/// Bytes a connection may have buffered but not yet parsed (a command larger than this closes
/// the connection with a protocol error).
pub const CONN_INPUT_BYTES_MAX_DEFAULT: usize = 64 << 20;
/// Reply bytes a connection buffers before it writes them out; batches shrink so that their
/// replies stay near this. A connection whose values suddenly grow can still buffer one batch
/// of up to `commands_per_batch_max` replies (each at most `value_len_max`) once.
pub const CONN_OUTPUT_BYTES_MAX_DEFAULT: usize = 4 << 20;
/// Commands parsed from one read before they are executed as one batch.
pub const COMMANDS_PER_BATCH_MAX_DEFAULT: usize = 1024;
/// Arguments of one RESP command.
pub const ARGS_MAX_DEFAULT: usize = 1 << 20;
/// Jobs queued to a shard from other shards before senders wait.
pub const SHARD_QUEUE_LEN_DEFAULT: usize = 1024;
/// OCSM over UDP (seed 004): default port.
pub const OCSM_PORT_DEFAULT: u16 = 7071;
/// Datagrams the batched OCSM paths receive with one `recvmmsg` and runs as one engine batch.
pub const OCSM_BURST_DATAGRAMS_MAX_DEFAULT: usize = 64;
/// Receive buffer asked for the OCSM socket (SO_RCVBUF; the kernel caps it at
/// `net.core.rmem_max`): deep enough to ride out a few milliseconds without being scheduled at
/// the seed's 45-message datagrams (4 MiB holds about 1400 of them).
pub const OCSM_RECV_BUFFER_BYTES_DEFAULT: usize = 4 << 20;
/// Seconds a client may take to read its replies before it is disconnected.
pub const REPLY_WRITE_TIMEOUT_SECS_DEFAULT: u64 = 30;
/// Microseconds a shard keeps polling its sockets without blocking after the last request it
/// read, at most: polling also stops while another thread wants the shard's core (adaptive,
/// `shard/busy_poll.rs`; see `ServerConfig::busy_poll_us`).
pub const BUSY_POLL_US_DEFAULT: u64 = 100;
/// The longest busy-poll window accepted (one second).
pub const BUSY_POLL_US_MAX: u64 = 1_000_000;
/// Main buckets of a shard's index that one step of the expiry sweep visits (with their
/// chains) between batches: about 256 cache lines, tens of microseconds, so a step delays the
/// requests behind it by little, while a pass of a 1 GiB shard (8 M buckets at the default
/// index ratio of 0.5) takes 32 K steps.
pub const EXPIRE_SWEEP_BUCKETS_DEFAULT: usize = 256;
/// The most buckets one sweep step may visit.
pub const EXPIRE_SWEEP_BUCKETS_MAX: usize = 1 << 20;
/// Milliseconds a shard rests after a full pass of its expiry sweep before it starts the next
/// (a shard without keys that have a deadline does not sweep at all). Redis's active expiry
/// runs 10 times a second (`hz 10`).
pub const EXPIRE_SWEEP_INTERVAL_MS_DEFAULT: u64 = 100;
/// The longest rest accepted between sweep passes (one minute).
pub const EXPIRE_SWEEP_INTERVAL_MS_MAX: u64 = 60_000;
/// Seconds a client may stay silent before it is disconnected (0 = never; Redis's `timeout`).
pub const TIMEOUT_SECS_DEFAULT: u64 = 0;
/// Bytes all client buffers together (input, replies, per-connection results) may hold before
/// the largest clients are disconnected: 128 MiB. The soak test (issue 19) allows the whole
/// process 256 MiB over its arena; the index, threads, 10 000 idle connections and the
/// allocator's free lists take about 60-110 MiB of that (a 10-minute soak with this cap at 256 MiB
/// peaked at 567.5 MiB for a 256 MiB arena), so clients get half. One request at the reply
/// bound (`results_bytes_max`, 64 MiB) holds its results and their encoding, about 128 MiB
/// together, and reaches this cap on its own: a client that asks that much in one request
/// while others hold buffers is the one disconnected (native reads are answered in 1 MiB
/// steps and stay far below it). Raise both together for such clients. Like
/// Redis's `maxmemory-clients` (whose default is off), but on by default: directkv's arena is
/// fixed, so client buffers are the one part of its memory that clients control.
pub const MAXMEMORY_CLIENTS_DEFAULT: usize = 128 << 20;
/// Reply data one request's batch may produce on one shard (the engine's default, 64 MiB: 64
/// values of the default `value_len_max`); operations past it are refused with
/// `ReplyTooLarge` (RESP: one `-ERR` for the command) and, if they are writes, not applied.
pub const RESULTS_BYTES_MAX_DEFAULT: usize = directkv_engine::RESULTS_BYTES_MAX_DEFAULT;
/// Commands a connection may queue between MULTI and EXEC (Redis has no such limit; a client
/// that queues without end would hold memory until `maxmemory_clients` closed it).
pub const MULTI_COMMANDS_MAX_DEFAULT: usize = 100_000;
/// Bytes of queued arguments a connection may hold between MULTI and EXEC (16 bytes counted
/// per argument on top of its own): as much as one request may be (`conn_input_bytes_max`).
pub const MULTI_BYTES_MAX_DEFAULT: usize = 64 << 20;
/// Keys one connection may WATCH at once.
pub const WATCH_KEYS_MAX_DEFAULT: usize = 10_000;
/// Whether shards pre-fault their hash index at start-up (issue 20 item 6: a fresh 1 GiB
/// shard otherwise serves its first random inserts at a fraction of its rate).
pub const PREFAULT_INDEX_DEFAULT: bool = true;
/// Main buckets of a shard's hash index one step of SCAN, KEYS or RANDOMKEY visits at most
/// (`shard/scan.rs`): 64 Ki buckets are 4 MiB of index, read in about a millisecond, which
/// is how long a step may delay the shard's other requests. A SCAN call takes as many steps
/// as it needs for COUNT keys (a sparse 1 GiB shard, about 6 M buckets, is about 90 steps),
/// and the shard serves its other requests between them.
pub const SCAN_STEP_BUCKETS_DEFAULT: usize = 1 << 16;
/// The most buckets a scan step may be given.
pub const SCAN_STEP_BUCKETS_MAX: usize = 1 << 24;
/// The longest KEYS or SCAN MATCH pattern accepted: a match costs up to the pattern's length
/// times the key's per key, so the pattern is bounded like the key (twice `key_len_max`'s
/// default with every byte escaped, and room for stars).
pub const MATCH_PATTERN_BYTES_MAX_DEFAULT: usize = 1024;
/// memcached's port (issue 21): the text and meta protocols on a TCP port of their own, on
/// the RESP port's bind address (0 turns it off). While `port` is 0 (tests), this default
/// also becomes 0 (an ephemeral port), so servers started side by side never take 11211.
pub const MEMCACHE_PORT_DEFAULT: u16 = 11211;

/// `Serialize`: CONFIG GET shows every setting through it (`resp/cmd/config_cmd.rs`).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    pub bind: String,
    pub port: u16,
    /// Port of Prometheus metrics over HTTP (`GET /metrics`; 0 = any free port); None, or
    /// `metrics = false`, turns them off.
    pub metrics_port: Option<u16>,
    /// Shard threads (0 = one per core).
    pub shards: usize,
    /// Total arena bytes, split evenly over the shards (key `memory`, like the flag).
    #[serde(rename = "memory", alias = "memory_bytes", deserialize_with = "size")]
    pub memory_bytes: usize,
    pub requirepass: Option<String>,
    /// Native protocol over UDP on `port`: None = on only on a loopback address without
    /// `requirepass` (see the module comment); Some(true) with a password needs `udp_insecure`.
    pub udp: Option<bool>,
    /// OCSM over UDP on `ocsm_port`, with the same rule as `udp` (`ocsm_port = None` also turns
    /// it off).
    pub ocsm: Option<bool>,
    /// The operator's acknowledgement that native UDP and OCSM, turned on with `udp`/`ocsm`,
    /// serve unauthenticated datagrams although `requirepass` is set.
    pub udp_insecure: bool,
    pub key_len_max: usize,
    #[serde(deserialize_with = "size")]
    pub value_len_max: usize,
    pub connections_max: usize,
    #[serde(deserialize_with = "size")]
    pub conn_input_bytes_max: usize,
    #[serde(deserialize_with = "size")]
    pub conn_output_bytes_max: usize,
    pub commands_per_batch_max: usize,
    pub args_max: usize,
    pub shard_queue_len: usize,
    pub reply_write_timeout_secs: u64,
    /// After reading a request, a shard keeps polling its sockets without sleeping for this
    /// many microseconds (yielding the core to any other runnable thread between polls), so
    /// that the next request is picked up without a wake-up: on this kind of VM a sleeping
    /// thread costs tens of microseconds per round trip. 0 turns it off (block in epoll as
    /// soon as there is nothing to do). An idle shard sleeps once the window has passed.
    /// Adaptive (issue 20): a shard also stops polling, and sleeps in epoll for a back-off,
    /// as soon as another thread wants its core, so a co-located client keeps its CPU.
    pub busy_poll_us: u64,
    /// OCSM UDP port (None turns OCSM off; 0 = any free port). While `port` is 0 (tests), the
    /// default 7071 also becomes 0, so servers started side by side never collide.
    pub ocsm_port: Option<u16>,
    /// `plain` (recv_from/send_to per datagram), `batched` (recvmmsg/sendmmsg bursts on their
    /// own thread) or `batched-shard` (the same bursts inside shard 0's thread).
    pub ocsm_path: crate::ocsm::OcsmPath,
    /// Datagrams per burst on the batched paths.
    pub ocsm_burst_datagrams_max: usize,
    /// SO_RCVBUF of the OCSM socket (0 = the system default).
    #[serde(deserialize_with = "size")]
    pub ocsm_recv_buffer_bytes: usize,
    /// Largest OCSM datagram accepted (default: the UDP payload of a 1514-byte frame).
    #[serde(deserialize_with = "size")]
    pub ocsm_datagram_bytes_max: usize,
    /// Expected key + value bytes and target memory utilization, for the engine's tuning
    /// (keys `kv_size` and `utilization`, like the flags).
    #[serde(
        rename = "kv_size",
        alias = "expected_kv_bytes",
        deserialize_with = "size"
    )]
    pub expected_kv_bytes: usize,
    #[serde(rename = "utilization", alias = "target_utilization")]
    pub target_utilization: f64,
    /// Seconds a client connection may send nothing before it is closed (0 = never). A
    /// connection whose replies are being written is governed by `reply_write_timeout_secs`.
    pub timeout: u64,
    /// Whether `/metrics` is served on `metrics_port` (false turns it off).
    pub metrics: bool,
    /// Bytes all client buffers together may hold (see `MAXMEMORY_CLIENTS_DEFAULT`); past it
    /// the clients holding the most are disconnected first. 0 = no limit.
    #[serde(deserialize_with = "size")]
    pub maxmemory_clients: usize,
    /// Reply data of one request's batch per shard (see `RESULTS_BYTES_MAX_DEFAULT`), at most
    /// 4 GiB - 1; raised to `value_len_max` if below it, so one value always fits.
    #[serde(deserialize_with = "size")]
    pub results_bytes_max: usize,
    /// Main buckets one step of a shard's expiry sweep visits between batches (see
    /// `EXPIRE_SWEEP_BUCKETS_DEFAULT`), 1..=1048576.
    pub expire_sweep_buckets: usize,
    /// Milliseconds between a shard's full passes of its expiry sweep (see
    /// `EXPIRE_SWEEP_INTERVAL_MS_DEFAULT`), 1..=60000.
    pub expire_sweep_interval_ms: u64,
    /// Commands queued by one connection between MULTI and EXEC (see
    /// `MULTI_COMMANDS_MAX_DEFAULT`); past it the command is refused and EXEC aborts.
    pub multi_commands_max: usize,
    /// Bytes of arguments queued by one connection between MULTI and EXEC (see
    /// `MULTI_BYTES_MAX_DEFAULT`); past it the command is refused and EXEC aborts.
    #[serde(deserialize_with = "size")]
    pub multi_bytes_max: usize,
    /// Keys one connection may WATCH at once; past it WATCH answers an error.
    pub watch_keys_max: usize,
    /// Fault each shard's hash index in at start-up on a low-priority background thread
    /// (`shard/prefault.rs`), so the first requests do not pay for first-touch page faults;
    /// the index is then resident from the start.
    pub prefault_index: bool,
    /// Redis's `maxmemory-policy`: what goes when a shard's arena runs short (`noeviction`,
    /// `allkeys-lru`, `allkeys-random`, `volatile-lru`, `volatile-ttl`, `volatile-random`;
    /// the engine's `evict.rs`). CONFIG SET changes it live.
    pub maxmemory_policy: String,
    /// Share of a shard's arena that eviction keeps free in its slab region (see
    /// `directkv_engine::EVICTION_WATERMARK_DEFAULT`), 0..=0.5.
    pub eviction_watermark: f64,
    /// Main buckets one step of SCAN, KEYS or RANDOMKEY visits on a shard (see
    /// `SCAN_STEP_BUCKETS_DEFAULT`), 1..=16777216.
    pub scan_step_buckets: usize,
    /// Longest pattern of KEYS and SCAN ... MATCH (see `MATCH_PATTERN_BYTES_MAX_DEFAULT`);
    /// a longer one is refused with an error.
    #[serde(deserialize_with = "size")]
    pub match_pattern_bytes_max: usize,
    /// memcached's text and meta protocols on this TCP port (see `MEMCACHE_PORT_DEFAULT`;
    /// 0 = off). Values are bounded by `value_len_max`, keys by memcached's 250 bytes.
    pub memcache_port: u16,
    /// Longest memcached command line before its `\n`, bytes; a longer one closes the
    /// connection without a reply, as memcached does (default 2048, memcached's).
    #[serde(deserialize_with = "size")]
    pub memcache_line_bytes_max: usize,
    /// Longest memcached `get`/`gets`/`gat`/`gats` line, bytes (closes the connection too;
    /// default 1 MiB: memcached has no limit).
    #[serde(deserialize_with = "size")]
    pub memcache_get_line_bytes_max: usize,
    /// Most keys in one memcached retrieval command; more are refused with
    /// `CLIENT_ERROR too many keys in one get` (default 65536: memcached has no limit).
    pub memcache_get_keys_max: usize,
    /// Persistence (issue 22; docs/persistence.md): the directory of the shards' logs,
    /// snapshots, MANIFEST and LOCK (default `./directkv-data`, created if missing).
    pub dir: std::path::PathBuf,
    /// Log every batch that writes and recover the store from `dir` at start (default yes;
    /// Redis's `appendonly`). With `no` nothing is written to `dir` and a restart is empty.
    pub appendonly: bool,
    /// When a write's reply may leave (Redis's `appendfsync`): `always` after its log record
    /// is durable (fdatasync, one per group of batches), `everysec` (default) after it is
    /// written, with an fdatasync every second, `no` after it is written. CONFIG SET changes
    /// it live.
    pub appendfsync: String,
    /// A shard snapshots itself when its log has passed this many bytes and is at least as
    /// large as its last snapshot file (then the log before the snapshot is removed: the log
    /// does not grow for ever). Redis's `auto-aof-rewrite-min-size` with
    /// `auto-aof-rewrite-percentage 100`; default 64 MiB; 0 = off; CONFIG SET changes it live
    /// (docs/persistence.md "Snapshots").
    #[serde(deserialize_with = "size")]
    pub auto_snapshot_log_bytes: usize,
    /// The most of a shard's time its automatic snapshots take, in percent: after a snapshot
    /// whose steps took the shard W, the next automatic one waits until W x 100 / percent has
    /// passed since that one began (its log grows meanwhile). A snapshot runs on the shard's own
    /// thread, so at a high write rate the log's size alone would have it snapshot again and
    /// again. A log grown to 4 times the size rule's bytes ends the wait. Default 1; 0 = no
    /// limit; BGSAVE and SAVE are not limited; CONFIG SET changes it live
    /// (docs/persistence.md "Automatic snapshots").
    pub auto_snapshot_cpu_percent: u32,
    /// Under `appendfsync always`, how long after a sync round ends the next one may wait for
    /// the connections that round answered to come back with their next batches, so that one
    /// fdatasync covers them all (microseconds; default 500, at most 100000; 0 = a round begins
    /// as soon as a reply waits). A round waits only while fewer batches wait than the last
    /// round answered plus those that arrived during it, so a lone client never waits.
    /// CONFIG SET changes it live (docs/persistence.md "Group commit delay").
    pub group_commit_delay_us: u64,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            bind: "127.0.0.1".into(),
            port: 7070,
            metrics_port: Some(7072),
            shards: 0,
            memory_bytes: 1 << 30,
            requirepass: None,
            udp: None,
            ocsm: None,
            udp_insecure: false,
            key_len_max: KEY_LEN_MAX_DEFAULT,
            value_len_max: VALUE_LEN_MAX_DEFAULT,
            connections_max: CONNECTIONS_MAX_DEFAULT,
            conn_input_bytes_max: CONN_INPUT_BYTES_MAX_DEFAULT,
            conn_output_bytes_max: CONN_OUTPUT_BYTES_MAX_DEFAULT,
            commands_per_batch_max: COMMANDS_PER_BATCH_MAX_DEFAULT,
            args_max: ARGS_MAX_DEFAULT,
            shard_queue_len: SHARD_QUEUE_LEN_DEFAULT,
            reply_write_timeout_secs: REPLY_WRITE_TIMEOUT_SECS_DEFAULT,
            busy_poll_us: BUSY_POLL_US_DEFAULT,
            ocsm_port: Some(OCSM_PORT_DEFAULT),
            ocsm_path: crate::ocsm::OcsmPath::Plain,
            ocsm_burst_datagrams_max: OCSM_BURST_DATAGRAMS_MAX_DEFAULT,
            ocsm_recv_buffer_bytes: OCSM_RECV_BUFFER_BYTES_DEFAULT,
            ocsm_datagram_bytes_max: directkv_proto::ocsm::DATAGRAM_BYTES_MAX_DEFAULT,
            expected_kv_bytes: 32,
            target_utilization: 0.5,
            timeout: TIMEOUT_SECS_DEFAULT,
            metrics: true,
            maxmemory_clients: MAXMEMORY_CLIENTS_DEFAULT,
            results_bytes_max: RESULTS_BYTES_MAX_DEFAULT,
            expire_sweep_buckets: EXPIRE_SWEEP_BUCKETS_DEFAULT,
            expire_sweep_interval_ms: EXPIRE_SWEEP_INTERVAL_MS_DEFAULT,
            multi_commands_max: MULTI_COMMANDS_MAX_DEFAULT,
            multi_bytes_max: MULTI_BYTES_MAX_DEFAULT,
            watch_keys_max: WATCH_KEYS_MAX_DEFAULT,
            prefault_index: PREFAULT_INDEX_DEFAULT,
            maxmemory_policy: directkv_engine::EvictionPolicy::NoEviction
                .name()
                .to_string(),
            eviction_watermark: directkv_engine::EVICTION_WATERMARK_DEFAULT,
            scan_step_buckets: SCAN_STEP_BUCKETS_DEFAULT,
            match_pattern_bytes_max: MATCH_PATTERN_BYTES_MAX_DEFAULT,
            memcache_port: MEMCACHE_PORT_DEFAULT,
            memcache_line_bytes_max: directkv_proto::memcache::LINE_BYTES_MAX_DEFAULT,
            memcache_get_line_bytes_max: directkv_proto::memcache::GET_LINE_BYTES_MAX_DEFAULT,
            memcache_get_keys_max: directkv_proto::memcache::GET_KEYS_MAX_DEFAULT,
            dir: DIR_DEFAULT.into(),
            appendonly: true,
            appendfsync: AppendFsync::Everysec.name().to_string(),
            auto_snapshot_log_bytes: AUTO_SNAPSHOT_LOG_BYTES_DEFAULT,
            auto_snapshot_cpu_percent: AUTO_SNAPSHOT_CPU_PERCENT_DEFAULT,
            group_commit_delay_us: GROUP_COMMIT_DELAY_US_DEFAULT,
        }
    }
}

impl ServerConfig {
    /// Reads a configuration file's text (see the module comment for its format).
    pub fn from_toml(text: &str) -> Result<ServerConfig, String> {
        let table: toml::Table = toml::from_str(text).map_err(|e| e.to_string())?;
        let mut dashed = false;
        for key in table.keys() {
            let name = key.replace('-', "_");
            dashed |= name != *key;
            if !ServerConfig::keys().contains(&name.as_str()) && !is_old_key(&name) {
                return Err(unknown_key(key));
            }
        }
        if !dashed {
            // Straight from the text, so that a bad value's error shows its line.
            return toml::from_str(text).map_err(|e| e.to_string());
        }
        let table: toml::Table = table
            .into_iter()
            .map(|(k, v)| (k.replace('-', "_"), v))
            .collect();
        toml::Value::Table(table)
            .try_into()
            .map_err(|e: toml::de::Error| e.to_string())
    }

    /// Every key of the configuration file (the older spellings in `OLD_KEYS` aside).
    pub fn keys() -> &'static [&'static str] {
        static KEYS: std::sync::OnceLock<Vec<&'static str>> = std::sync::OnceLock::new();
        KEYS.get_or_init(|| {
            let mut fields: &'static [&'static str] = &[];
            let _ = ServerConfig::deserialize(FieldNames(&mut fields));
            // Serde lists the aliases too.
            fields.iter().copied().filter(|k| !is_old_key(k)).collect()
        })
    }

    /// Refuses settings that are unsafe or cannot work.
    pub fn validate(&self) -> Result<(), String> {
        if self.requirepass.as_deref() == Some("") {
            return Err(
                "refusing an empty requirepass: an empty password is no password (set a non-empty one, or leave requirepass out on a loopback address)"
                    .into(),
            );
        }
        if self.requirepass.is_some() && !self.udp_insecure {
            for (name, on) in [("udp", self.udp), ("ocsm", self.ocsm)] {
                if on == Some(true) {
                    return Err(format!(
                        "refusing {name} = true (--{name} yes) with requirepass: its datagrams carry no password, so anyone reaching the port could read and write every key; add udp_insecure = true (--udp-insecure) to serve them anyway"
                    ));
                }
            }
        }
        if !self.bind_is_loopback() && self.requirepass.is_none() {
            return Err(format!(
                "refusing to bind {} without --requirepass: only loopback addresses may run without a password",
                self.bind
            ));
        }
        if self.key_len_max == 0 || self.key_len_max > 255 {
            return Err(format!("key_len_max {} not in 1..=255", self.key_len_max));
        }
        if self.commands_per_batch_max == 0
            || self.connections_max == 0
            || self.shard_queue_len == 0
        {
            return Err(
                "commands_per_batch_max, connections_max and shard_queue_len must be positive"
                    .into(),
            );
        }
        if self.ocsm_burst_datagrams_max == 0 || self.ocsm_burst_datagrams_max > 1024 {
            return Err(format!(
                "ocsm_burst_datagrams_max {} not in 1..=1024",
                self.ocsm_burst_datagrams_max
            ));
        }
        if self.expected_kv_bytes == 0 {
            return Err("kv_size must be at least 1".into());
        }
        if !(self.target_utilization > 0.0 && self.target_utilization < 1.0) {
            return Err(format!(
                "utilization must be in (0, 1), got {}",
                self.target_utilization
            ));
        }
        if self.busy_poll_us > BUSY_POLL_US_MAX {
            return Err(format!(
                "busy_poll_us {} not in 0..={BUSY_POLL_US_MAX}",
                self.busy_poll_us
            ));
        }
        let dmax = self.ocsm_datagram_bytes_max;
        if !(directkv_proto::ocsm::HEADER_BYTES + 32..=directkv_proto::ocsm::DATAGRAM_BYTES_MAX_UDP)
            .contains(&dmax)
        {
            return Err(format!("ocsm_datagram_bytes_max {dmax} not in 38..=65507"));
        }
        if self.results_bytes_max == 0 || self.results_bytes_max > u32::MAX as usize {
            return Err(format!(
                "results_bytes_max {} not in 1..=4294967295",
                self.results_bytes_max
            ));
        }
        if !(1..=EXPIRE_SWEEP_BUCKETS_MAX).contains(&self.expire_sweep_buckets) {
            return Err(format!(
                "expire_sweep_buckets {} not in 1..={EXPIRE_SWEEP_BUCKETS_MAX}",
                self.expire_sweep_buckets
            ));
        }
        if !(1..=EXPIRE_SWEEP_INTERVAL_MS_MAX).contains(&self.expire_sweep_interval_ms) {
            return Err(format!(
                "expire_sweep_interval_ms {} not in 1..={EXPIRE_SWEEP_INTERVAL_MS_MAX}",
                self.expire_sweep_interval_ms
            ));
        }
        if self.eviction_policy().is_none() {
            return Err(format!(
                "maxmemory_policy {:?} is not one of {}",
                self.maxmemory_policy,
                directkv_engine::EvictionPolicy::ALL
                    .map(|p| p.name())
                    .join(", ")
            ));
        }
        let wmax = directkv_engine::EVICTION_WATERMARK_MAX;
        if !(0.0..=wmax).contains(&self.eviction_watermark) {
            return Err(format!(
                "eviction_watermark {} not in 0..={wmax}",
                self.eviction_watermark
            ));
        }
        if !(1..=SCAN_STEP_BUCKETS_MAX).contains(&self.scan_step_buckets) {
            return Err(format!(
                "scan_step_buckets {} not in 1..={SCAN_STEP_BUCKETS_MAX}",
                self.scan_step_buckets
            ));
        }
        if self.memcache_line_bytes_max < 64 || self.memcache_get_line_bytes_max < 64 {
            return Err(
                "memcache_line_bytes_max and memcache_get_line_bytes_max must be at least 64"
                    .into(),
            );
        }
        if self.append_fsync().is_none() {
            return Err(format!(
                "appendfsync {:?} is not one of always, everysec, no",
                self.appendfsync
            ));
        }
        if self.appendonly && self.dir.as_os_str().is_empty() {
            return Err("dir must not be empty with appendonly yes".into());
        }
        if self.memcache_get_keys_max == 0 {
            return Err("memcache_get_keys_max must be at least 1".into());
        }
        if self.auto_snapshot_cpu_percent > 100 {
            return Err(format!(
                "auto_snapshot_cpu_percent {} not in 0..=100",
                self.auto_snapshot_cpu_percent
            ));
        }
        if self.group_commit_delay_us > GROUP_COMMIT_DELAY_US_MAX {
            return Err(format!(
                "group_commit_delay_us {} not in 0..={GROUP_COMMIT_DELAY_US_MAX}",
                self.group_commit_delay_us
            ));
        }
        Ok(())
    }

    /// The fsync policy `appendfsync` names, if it names one.
    pub fn append_fsync(&self) -> Option<AppendFsync> {
        AppendFsync::from_name(&self.appendfsync)
    }

    /// The eviction policy `maxmemory_policy` names, if it names one.
    pub fn eviction_policy(&self) -> Option<directkv_engine::EvictionPolicy> {
        directkv_engine::EvictionPolicy::from_name(&self.maxmemory_policy)
    }

    pub(crate) fn bind_is_loopback(&self) -> bool {
        matches!(self.bind.as_str(), "127.0.0.1" | "localhost" | "::1")
            || self.bind.starts_with("127.")
    }

    /// Whether an unauthenticated datagram protocol switched `on` is served: as asked, or when
    /// unset, only on a loopback address without a password (see the module comment).
    fn datagrams_served(&self, on: Option<bool>) -> bool {
        on.unwrap_or(self.bind_is_loopback() && self.requirepass.is_none())
    }

    /// Whether native UDP is served on `port` (see `udp`).
    pub fn udp_enabled(&self) -> bool {
        self.datagrams_served(self.udp)
    }

    /// The OCSM port to bind, if any (see `ocsm` and `ocsm_port`).
    pub fn ocsm_port_effective(&self) -> Option<u16> {
        if !self.datagrams_served(self.ocsm) {
            return None;
        }
        match self.ocsm_port {
            Some(OCSM_PORT_DEFAULT) if self.port == 0 => Some(0),
            p => p,
        }
    }

    /// The memcached port to bind, if any (see `memcache_port`).
    pub fn memcache_port_effective(&self) -> Option<u16> {
        match self.memcache_port {
            0 => None,
            MEMCACHE_PORT_DEFAULT if self.port == 0 => Some(0),
            p => Some(p),
        }
    }

    /// The memcached codec's limits, from the settings above.
    pub fn memcache_limits(&self) -> directkv_proto::memcache::MemcacheLimits {
        directkv_proto::memcache::MemcacheLimits {
            value_bytes_max: self.value_len_max,
            line_bytes_max: self.memcache_line_bytes_max,
            get_line_bytes_max: self.memcache_get_line_bytes_max,
            get_keys_max: self.memcache_get_keys_max,
        }
    }

    pub fn shard_count(&self) -> usize {
        if self.shards > 0 {
            self.shards
        } else {
            default_shards(
                std::thread::available_parallelism()
                    .map(|n| n.get())
                    .unwrap_or(1),
            )
        }
    }
}

/// Shards when none are asked for: one per core but one, which is left to the clients and the
/// kernel's network work (at least one shard). An unpipelined request costs the kernel more
/// than the engine (about 5 of 6.5 us of server CPU on the 2-core development machine), and a
/// RESP connection sends its keys of other shards over a cross-thread hop that costs two
/// wake-ups. Measured co-located (issue 20 item 6, `bench compare --depth 1 --connections 50
/// --co-located`, three rounds, BENCHMARKS.md "Default shard count"): with two shards on two
/// cores directkv answered 0.68x redis-server's requests at 14.3 us of CPU per request, with one
/// 1.10x at 6.6 us.
pub fn default_shards(cores: usize) -> usize {
    cores.saturating_sub(1).max(1)
}

/// Keys of older configuration files, still accepted, and the key each now is.
pub const OLD_KEYS: &[(&str, &str)] = &[
    ("memory_bytes", "memory"),
    ("expected_kv_bytes", "kv_size"),
    ("target_utilization", "utilization"),
];

fn is_old_key(name: &str) -> bool {
    OLD_KEYS.iter().any(|(old, _)| *old == name)
}

/// The error for an unknown key: its name, and the known key it is closest to if it looks
/// like a misspelling of one.
fn unknown_key(key: &str) -> String {
    let name = key.replace('-', "_");
    let closest = ServerConfig::keys()
        .iter()
        .map(|k| (edit_distance(&name, k), *k))
        .min();
    let hint = match closest {
        Some((d, k)) if d <= 2 || (name.len() >= 4 && k.contains(name.as_str())) => {
            format!(" (did you mean `{k}`?)")
        }
        _ => String::new(),
    };
    format!(
        "unknown key `{key}` in the configuration file{hint}; docs/directkv.example.toml lists every key"
    )
}

/// Levenshtein distance between two short ASCII names.
fn edit_distance(a: &str, b: &str) -> usize {
    let b = b.as_bytes();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.bytes().enumerate() {
        let mut diag = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let next = (row[j + 1] + 1)
                .min(row[j] + 1)
                .min(diag + usize::from(ca != *cb));
            diag = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

/// A size: bytes, or a number with K, M, G or T (powers of 1024; "KB", "KiB" and lower case
/// too), as `--memory` takes it: "1G", "512M", "1.5G", "4096". The flags' parser too.
pub fn parse_size(s: &str) -> Result<usize, String> {
    let err = || format!("not a size: {s:?} (give bytes, or a number with K, M, G or T: \"64M\")");
    let t = s.trim().to_ascii_uppercase();
    let t = t
        .strip_suffix("IB")
        .or_else(|| t.strip_suffix('B'))
        .unwrap_or(&t);
    let (num, shift) = match t.as_bytes().last() {
        Some(b'K') => (&t[..t.len() - 1], 10),
        Some(b'M') => (&t[..t.len() - 1], 20),
        Some(b'G') => (&t[..t.len() - 1], 30),
        Some(b'T') => (&t[..t.len() - 1], 40),
        _ => (t, 0),
    };
    let num = num.trim();
    if let Ok(n) = num.parse::<u64>() {
        return n
            .checked_mul(1 << shift)
            .and_then(|b| usize::try_from(b).ok())
            .ok_or_else(err);
    }
    // A fraction ("1.5G"): digits and one dot only, so "inf", "-1" and "1e9" stay errors.
    if num.is_empty() || !num.bytes().all(|c| c.is_ascii_digit() || c == b'.') {
        return Err(err());
    }
    let n: f64 = num.parse().map_err(|_| err())?;
    let bytes = n * (1u64 << shift) as f64;
    if bytes >= usize::MAX as f64 {
        return Err(err());
    }
    Ok(bytes as usize)
}

/// Deserializes a size: an integer of bytes or a string `parse_size` reads.
fn size<'de, D: serde::Deserializer<'de>>(d: D) -> Result<usize, D::Error> {
    struct Size;
    impl serde::de::Visitor<'_> for Size {
        type Value = usize;

        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a size: bytes, or a string such as \"64M\" or \"1G\"")
        }

        fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<usize, E> {
            usize::try_from(n).map_err(E::custom)
        }

        fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<usize, E> {
            usize::try_from(n).map_err(|_| E::custom(format!("not a size: {n}")))
        }

        fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<usize, E> {
            parse_size(s).map_err(E::custom)
        }
    }
    d.deserialize_any(Size)
}

/// A deserializer that only records the field names a struct asks for (serde hands them to
/// `deserialize_struct`), which is how `ServerConfig::keys` lists the file's keys.
struct FieldNames<'a>(&'a mut &'static [&'static str]);

impl<'de> serde::Deserializer<'de> for FieldNames<'_> {
    type Error = serde::de::value::Error;

    fn deserialize_any<V: serde::de::Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
        Err(serde::de::Error::custom("only field names are read"))
    }

    fn deserialize_struct<V: serde::de::Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value, Self::Error> {
        *self.0 = fields;
        Err(serde::de::Error::custom("only field names are read"))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toml_overrides_defaults_and_rejects_unknown_keys() {
        assert_eq!(
            [1, 2, 3, 16].map(default_shards),
            [1, 1, 2, 15],
            "one shard per core but one, at least one"
        );
        let c = ServerConfig::from_toml("port = 9000\nshards = 3\nrequirepass = \"pw\"\n").unwrap();
        assert_eq!(
            (c.port, c.shards, c.requirepass.as_deref()),
            (9000, 3, Some("pw"))
        );
        assert_eq!(c.value_len_max, VALUE_LEN_MAX_DEFAULT);
        assert_eq!(c.busy_poll_us, BUSY_POLL_US_DEFAULT);
        let off = ServerConfig::from_toml("busy_poll_us = 0\n").unwrap();
        assert_eq!(off.busy_poll_us, 0);
        assert!(off.validate().is_ok());
        assert!(ServerConfig::from_toml("prot = 1").is_err());
    }

    #[test]
    fn non_loopback_needs_a_password() {
        let mut c = ServerConfig {
            bind: "0.0.0.0".into(),
            ..Default::default()
        };
        assert!(c.validate().unwrap_err().contains("requirepass"));
        c.requirepass = Some("x".into());
        assert!(c.validate().is_ok());
        assert!(ServerConfig::default().validate().is_ok());
    }

    #[test]
    fn datagrams_follow_the_bind_and_the_password() {
        let open = ServerConfig::default();
        assert!(open.udp_enabled() && open.ocsm_port_effective().is_some());
        let pw = ServerConfig {
            requirepass: Some("pw".into()),
            ..Default::default()
        };
        assert!(!pw.udp_enabled() && pw.ocsm_port_effective().is_none());
        for (udp, ocsm) in [(Some(true), None), (None, Some(true))] {
            let mut asked = ServerConfig {
                udp,
                ocsm,
                ..pw.clone()
            };
            assert!(asked.validate().unwrap_err().contains("--udp-insecure"));
            asked.udp_insecure = true;
            assert!(asked.validate().is_ok());
            assert_eq!(asked.udp_enabled(), udp.is_some());
            assert_eq!(asked.ocsm_port_effective().is_some(), ocsm.is_some());
        }
        let exposed = ServerConfig {
            bind: "0.0.0.0".into(),
            ..pw.clone()
        };
        assert!(!exposed.udp_enabled() && exposed.ocsm_port_effective().is_none());
        let off = ServerConfig {
            udp: Some(false),
            ocsm: Some(false),
            ..Default::default()
        };
        assert!(!off.udp_enabled() && off.ocsm_port_effective().is_none());
        let c = ServerConfig::from_toml("udp = false\nocsm = true\nudp_insecure = true\n").unwrap();
        assert_eq!(
            (c.udp, c.ocsm, c.udp_insecure),
            (Some(false), Some(true), true)
        );
    }

    #[test]
    fn client_memory_limits_have_defaults_and_toml_keys() {
        let d = ServerConfig::default();
        assert_eq!(d.maxmemory_clients, MAXMEMORY_CLIENTS_DEFAULT);
        assert_eq!(d.results_bytes_max, RESULTS_BYTES_MAX_DEFAULT);
        let c = ServerConfig::from_toml("maxmemory_clients = 0\nresults_bytes_max = 2097152\n")
            .unwrap();
        assert_eq!((c.maxmemory_clients, c.results_bytes_max), (0, 2 << 20));
        assert!(c.validate().is_ok());
        let small = ServerConfig {
            results_bytes_max: 0,
            ..Default::default()
        };
        assert!(small.validate().unwrap_err().contains("results_bytes_max"));
    }

    #[test]
    fn an_empty_password_is_no_password() {
        let c = ServerConfig::from_toml("requirepass = \"\"\n").unwrap();
        assert!(c.validate().unwrap_err().contains("empty"));
    }

    /// The shipped example, docs/directkv.example.toml.
    const EXAMPLE: &str = include_str!("../../../docs/directkv.example.toml");

    #[test]
    fn the_example_lists_every_key_with_its_default() {
        let parsed = ServerConfig::from_toml(EXAMPLE).unwrap();
        assert_eq!(
            format!("{parsed:?}"),
            format!("{:?}", ServerConfig::default()),
            "the example's values must be the defaults"
        );
        for key in ServerConfig::keys() {
            let set = EXAMPLE.lines().find(|l| {
                let l = l.strip_prefix("# ").unwrap_or(l);
                l.strip_prefix(key)
                    .is_some_and(|rest| rest.starts_with(" = "))
            });
            let line = set.unwrap_or_else(|| {
                panic!("docs/directkv.example.toml has no line for `{key}`: add `{key} = DEFAULT` with a comment above it")
            });
            // A commented-out setting (one without a default value) must be a valid example.
            if let Some(example) = line.strip_prefix("# ") {
                ServerConfig::from_toml(example).unwrap();
            }
        }
    }

    #[test]
    fn keys_are_the_flags_names_with_their_units() {
        let keys = ServerConfig::keys();
        for k in [
            "memory",
            "kv_size",
            "utilization",
            "metrics_port",
            "timeout",
            "metrics",
        ] {
            assert!(keys.contains(&k), "{k} missing from {keys:?}");
        }
        let c = ServerConfig::from_toml(
            "memory = \"8M\"\nkv-size = 64\nvalue_len_max = \"1.5K\"\nmetrics-port = 9\nmetrics = false\n",
        )
        .unwrap();
        assert_eq!(
            (c.memory_bytes, c.expected_kv_bytes, c.value_len_max),
            (8 << 20, 64, 1536)
        );
        assert_eq!((c.metrics_port, c.metrics), (Some(9), false));
        let old = ServerConfig::from_toml(
            "memory_bytes = 8388608\nexpected_kv_bytes = 64\ntarget_utilization = 0.25\n",
        )
        .unwrap();
        assert_eq!(
            (
                old.memory_bytes,
                old.expected_kv_bytes,
                old.target_utilization
            ),
            (8 << 20, 64, 0.25)
        );
        let err = ServerConfig::from_toml("memory = \"8X\"\n").unwrap_err();
        assert!(
            err.contains("not a size") && err.contains("memory"),
            "{err}"
        );
        let err = ServerConfig::from_toml("memory = -1\n").unwrap_err();
        assert!(err.contains("not a size"), "{err}");
        let both = ServerConfig::from_toml("memory = 1\nmemory_bytes = 2\n");
        assert!(both.is_err(), "{both:?}");
        let bad = ServerConfig::from_toml("utilization = 1.5\n").unwrap();
        assert!(bad.validate().unwrap_err().contains("utilization"));
    }

    #[test]
    fn unknown_keys_are_refused_with_the_closest_known_one() {
        for (typo, meant) in [
            ("memroy", "memory"),
            ("metric_port", "metrics_port"),
            ("conections-max", "connections_max"),
            ("input_bytes_max", "conn_input_bytes_max"),
        ] {
            let err = ServerConfig::from_toml(&format!("{typo} = 1\n")).unwrap_err();
            assert!(
                err.contains(&format!("`{typo}`")) && err.contains(&format!("`{meant}`")),
                "{typo}: {err}"
            );
        }
        let err = ServerConfig::from_toml("colour = 1\n").unwrap_err();
        assert!(
            err.contains("`colour`") && !err.contains("did you mean"),
            "{err}"
        );
    }

    #[test]
    fn sizes_read_like_the_flags() {
        for (text, bytes) in [
            ("4096", 4096),
            ("64K", 64 << 10),
            ("64kb", 64 << 10),
            ("256M", 256 << 20),
            ("1GiB", 1 << 30),
            ("1.5G", 3 << 29),
            (" 2T ", 2 << 40),
        ] {
            assert_eq!(parse_size(text), Ok(bytes), "{text}");
        }
        for bad in ["", "G", "-1", "1e9", "inf", "1.2.3M", "12Q", "99999999999T"] {
            assert!(parse_size(bad).is_err(), "{bad:?}");
        }
    }
}
