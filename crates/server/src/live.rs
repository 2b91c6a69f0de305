//! The settings that change while the server runs (CONFIG SET, issue 20 item 3), and the
//! SHUTDOWN request. Everything else in `ServerConfig` is fixed at start: it sized memory,
//! bound sockets or built the engines.
//!
//! ```text
//!  Server::start ── set_from(cfg) ──> Live (in ServerStats, shared by every thread)
//!  CONFIG SET ─────── store ────────>   timeout_secs, connections_max, maxmemory_clients,
//!                                       reply_write_timeout_secs: relaxed atomics, read
//!                                       where each is checked (accept.rs, clients.rs, conns)
//!                                       maxmemory_policy: an index into EvictionPolicy::ALL,
//!                                       handed to the engine before each batch
//!                                       requirepass: a mutex + a change counter; connections
//!                                       load the counter once per read and copy the password
//!                                       only when it moved
//!                                       appendfsync, group_commit_delay_us: read by the
//!                                       replies and the log sync thread
//!                                       auto_snapshot_log_bytes, auto_snapshot_cpu_percent:
//!                                       read by each shard's snapshot task at its checks
//!  SHUTDOWN ───────── request ──────>   shutdown: Server::run_until_signal wakes and stops
//! ```
//!
//! A changed password applies to new logins: a connection that was already allowed in (it
//! logged in, or it opened while there was no password) stays in, as in Redis.
//!
//! Non-goals: settings the engines hold (`value_len_max`, `results_bytes_max`, memory): they
//! would need every shard to rebuild its engine; listeners (`port`, `bind`).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};

use directkv_engine::EvictionPolicy;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

use crate::config::{AppendFsync, ServerConfig};

/// The settings CONFIG SET may change, and the shutdown request.
#[derive(Debug)]
pub(crate) struct Live {
    timeout_secs: AtomicU64,
    connections_max: AtomicUsize,
    maxmemory_clients: AtomicUsize,
    reply_write_timeout_secs: AtomicU64,
    requirepass: Mutex<Option<Arc<str>>>,
    /// Bumped on every change of `requirepass`.
    password_changes: AtomicU64,
    shutdown_requested: AtomicBool,
    shutdown: Notify,
    /// Seconds since the Unix epoch when the server started (LASTSAVE's answer while there is
    /// no persistence, as Redis answers its start time before a first save).
    started_unix_secs: AtomicU64,
    /// `maxmemory_policy`, as its index in `EvictionPolicy::ALL`.
    maxmemory_policy: AtomicU8,
    /// `appendfsync`, as its index in `AppendFsync::ALL` (read by every reply under
    /// persistence and by the log sync thread).
    appendfsync: AtomicU8,
    /// `group_commit_delay_us` (read by the log sync thread before each round under `always`).
    group_commit_delay_us: AtomicU64,
    /// `auto_snapshot_log_bytes` and `auto_snapshot_cpu_percent` (read by the shards' snapshot
    /// tasks at each check).
    auto_snapshot_log_bytes: AtomicU64,
    auto_snapshot_cpu_percent: AtomicU64,
}

impl Default for Live {
    fn default() -> Self {
        let live = Live {
            timeout_secs: AtomicU64::new(0),
            connections_max: AtomicUsize::new(0),
            maxmemory_clients: AtomicUsize::new(0),
            reply_write_timeout_secs: AtomicU64::new(0),
            requirepass: Mutex::new(None),
            password_changes: AtomicU64::new(0),
            shutdown_requested: AtomicBool::new(false),
            shutdown: Notify::new(),
            started_unix_secs: AtomicU64::new(unix_secs()),
            maxmemory_policy: AtomicU8::new(0),
            appendfsync: AtomicU8::new(0),
            group_commit_delay_us: AtomicU64::new(0),
            auto_snapshot_log_bytes: AtomicU64::new(0),
            auto_snapshot_cpu_percent: AtomicU64::new(0),
        };
        live.set_from(&ServerConfig::default());
        live
    }
}

/// Seconds since the Unix epoch.
pub(crate) fn unix_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl Live {
    /// Takes the starting values from the configuration.
    pub(crate) fn set_from(&self, cfg: &ServerConfig) {
        self.set_timeout_secs(cfg.timeout);
        self.set_connections_max(cfg.connections_max);
        self.set_maxmemory_clients(cfg.maxmemory_clients);
        self.set_reply_write_timeout_secs(cfg.reply_write_timeout_secs);
        self.set_requirepass(cfg.requirepass.as_deref());
        self.set_maxmemory_policy(cfg.eviction_policy().unwrap_or_default());
        self.set_appendfsync(cfg.append_fsync().unwrap_or(AppendFsync::Everysec));
        self.set_group_commit_delay_us(cfg.group_commit_delay_us);
        self.set_auto_snapshot_log_bytes(cfg.auto_snapshot_log_bytes as u64);
        self.set_auto_snapshot_cpu_percent(cfg.auto_snapshot_cpu_percent);
    }

    /// A shard snapshots itself when its log passes this many bytes (0: never on its own).
    pub(crate) fn auto_snapshot_log_bytes(&self) -> u64 {
        self.auto_snapshot_log_bytes.load(Ordering::Relaxed)
    }

    pub(crate) fn set_auto_snapshot_log_bytes(&self, bytes: u64) {
        self.auto_snapshot_log_bytes.store(bytes, Ordering::Relaxed);
    }

    /// The most of a shard's time its automatic snapshots take, in percent (0: no limit).
    pub(crate) fn auto_snapshot_cpu_percent(&self) -> u32 {
        self.auto_snapshot_cpu_percent.load(Ordering::Relaxed) as u32
    }

    pub(crate) fn set_auto_snapshot_cpu_percent(&self, percent: u32) {
        self.auto_snapshot_cpu_percent
            .store(u64::from(percent), Ordering::Relaxed);
    }

    /// How long a sync round under `always` may wait for the batches the last round answered
    /// (`persistence::Store::sync_loop`), microseconds.
    #[inline]
    pub(crate) fn group_commit_delay_us(&self) -> u64 {
        self.group_commit_delay_us.load(Ordering::Relaxed)
    }

    pub(crate) fn set_group_commit_delay_us(&self, us: u64) {
        self.group_commit_delay_us.store(us, Ordering::Relaxed);
    }

    /// Redis's `appendfsync`: when a write's reply may leave against its log record.
    #[inline]
    pub(crate) fn appendfsync(&self) -> AppendFsync {
        AppendFsync::ALL[usize::from(self.appendfsync.load(Ordering::Relaxed))]
    }

    pub(crate) fn set_appendfsync(&self, p: AppendFsync) {
        let i = AppendFsync::ALL
            .iter()
            .position(|&q| q == p)
            .expect("every policy is in ALL");
        self.appendfsync.store(i as u8, Ordering::Relaxed);
    }

    /// Redis's `maxmemory-policy`, which every shard hands its engine before each batch.
    #[inline]
    pub(crate) fn maxmemory_policy(&self) -> EvictionPolicy {
        let i = usize::from(self.maxmemory_policy.load(Ordering::Relaxed));
        EvictionPolicy::ALL[i]
    }

    pub(crate) fn set_maxmemory_policy(&self, policy: EvictionPolicy) {
        let i = EvictionPolicy::ALL
            .iter()
            .position(|&p| p == policy)
            .expect("every policy is in ALL");
        self.maxmemory_policy.store(i as u8, Ordering::Relaxed);
    }

    /// Redis's `timeout`: seconds a client may stay silent (0 = for ever).
    pub(crate) fn timeout_secs(&self) -> u64 {
        self.timeout_secs.load(Ordering::Relaxed)
    }

    pub(crate) fn set_timeout_secs(&self, secs: u64) {
        self.timeout_secs.store(secs, Ordering::Relaxed);
    }

    /// `connections_max` (Redis's `maxclients`).
    pub(crate) fn connections_max(&self) -> usize {
        self.connections_max.load(Ordering::Relaxed)
    }

    pub(crate) fn set_connections_max(&self, n: usize) {
        self.connections_max.store(n, Ordering::Relaxed);
    }

    /// `maxmemory_clients` (0 = no cap).
    pub(crate) fn maxmemory_clients(&self) -> usize {
        self.maxmemory_clients.load(Ordering::Relaxed)
    }

    pub(crate) fn set_maxmemory_clients(&self, bytes: usize) {
        self.maxmemory_clients.store(bytes, Ordering::Relaxed);
    }

    /// `reply_write_timeout_secs`, for connections opened from now on.
    pub(crate) fn reply_write_timeout_secs(&self) -> u64 {
        self.reply_write_timeout_secs.load(Ordering::Relaxed)
    }

    pub(crate) fn set_reply_write_timeout_secs(&self, secs: u64) {
        self.reply_write_timeout_secs.store(secs, Ordering::Relaxed);
    }

    /// The password now (None: none).
    pub(crate) fn requirepass(&self) -> Option<Arc<str>> {
        self.requirepass
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Sets the password (None or "" removes it).
    pub(crate) fn set_requirepass(&self, pass: Option<&str>) {
        let pass = pass.filter(|p| !p.is_empty()).map(Arc::from);
        *self.requirepass.lock().unwrap_or_else(|e| e.into_inner()) = pass;
        self.password_changes.fetch_add(1, Ordering::Release);
    }

    /// The password, if it changed since `*seen` (a connection's last look), else None.
    #[inline]
    pub(crate) fn requirepass_if_changed(&self, seen: &mut u64) -> Option<Option<Arc<str>>> {
        let now = self.password_changes.load(Ordering::Acquire);
        if now == *seen {
            return None;
        }
        *seen = now;
        Some(self.requirepass())
    }

    /// Asks the server to stop (SHUTDOWN).
    pub(crate) fn request_shutdown(&self) {
        self.shutdown_requested.store(true, Ordering::Relaxed);
        self.shutdown.notify_waiters();
        self.shutdown.notify_one();
    }

    pub(crate) fn shutdown_requested(&self) -> bool {
        self.shutdown_requested.load(Ordering::Relaxed)
    }

    /// Completes once SHUTDOWN was asked.
    pub(crate) async fn shutdown(&self) {
        while !self.shutdown_requested() {
            self.shutdown.notified().await;
        }
    }

    /// LASTSAVE: the start time (nothing is ever saved yet).
    pub(crate) fn started_unix_secs(&self) -> u64 {
        self.started_unix_secs.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_change_is_seen_once_per_change() {
        let live = Live::default();
        let mut seen = 0;
        assert_eq!(live.requirepass_if_changed(&mut seen), Some(None));
        assert_eq!(live.requirepass_if_changed(&mut seen), None);
        live.set_requirepass(Some("pw"));
        assert_eq!(
            live.requirepass_if_changed(&mut seen).unwrap().as_deref(),
            Some("pw")
        );
        assert_eq!(live.requirepass_if_changed(&mut seen), None);
        live.set_requirepass(Some(""));
        assert_eq!(live.requirepass_if_changed(&mut seen), Some(None));
    }
}
