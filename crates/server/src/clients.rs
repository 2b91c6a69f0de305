//! The registry of live client connections, and the server-wide cap on the memory their
//! buffers hold together (`maxmemory_clients`, like Redis's `maxmemory-clients`; issue 19 item
//! 4): input not yet parsed, replies not yet written, and the results of the operations being
//! answered. Past the cap, the connections holding the most are asked to close, largest first,
//! until the rest fit; each one is logged (WARN, rate-limited) and counted (`evicted_clients`).
//!
//! ```text
//!  connection task (shard k)                         Clients (one per server, in ServerStats)
//!   buffers grow or shrink ──ClientHandle::account──> total += change  (relaxed atomics, only
//!     by at least REPORT_STEP_BYTES                     when the change is that large)
//!                                                     total > cap ──> lock `live`, sort by
//!   select! { serve, stop, handle.closing() } <──────── bytes, notify the largest to close
//!   handle dropped on close ─────────────────────────> removed from `live`, total -= its bytes
//! ```
//!
//! Cost on the fast path: `account` compares the connection's buffer capacities with the
//! figure it last reported, once per batch of commands and per read; it touches the shared
//! atomics only when they moved by `REPORT_STEP_BYTES`, which a connection of small requests
//! never does after its first report. The map's mutex is taken at connect, at close and when
//! the cap is passed, never per command. So the total is exact to `REPORT_STEP_BYTES` per
//! connection.
//!
//! The registry is also what CLIENT LIST and CLIENT KILL (issue 20) will read and signal: each
//! entry has an id, the peer address, its shard, its bytes and a way to ask it to close.
//!
//! Non-goals: bounding one request (that is `results_bytes_max`, checked by the engine) or one
//! connection (`conn_input_bytes_max`, `conn_output_bytes_max`); memory the kernel holds in
//! socket buffers.

use std::cell::Cell;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use tokio::sync::Notify;

use crate::log_limit::{LogLimit, Verdict};
use crate::stats::ServerStats;

/// A connection reports its buffer bytes to the registry when they moved by at least this
/// much since its last report (the read size: a connection of small requests never does).
pub(crate) const REPORT_STEP_BYTES: usize = crate::accept::READ_CHUNK_BYTES;
/// Eviction log lines per second, at most (the rest are counted, not logged).
const EVICTION_LOG_LINES_PER_SEC_MAX: u32 = 10;

/// Every live client connection, and the bytes their buffers hold together.
#[derive(Debug, Default)]
pub(crate) struct Clients {
    next_id: AtomicU64,
    /// Buffer bytes of every live connection, as last reported.
    total: AtomicUsize,
    /// The highest `total` seen since start-up.
    peak: AtomicUsize,
    /// Connections closed because the total passed `maxmemory_clients`.
    evicted: AtomicU64,
    live: Mutex<HashMap<u64, Arc<Entry>>>,
}

/// One connection as the registry (and later CLIENT LIST/KILL) sees it.
#[derive(Debug)]
pub(crate) struct Entry {
    pub(crate) id: u64,
    pub(crate) peer: Option<SocketAddr>,
    pub(crate) shard: usize,
    /// Its buffer bytes, as last reported.
    bytes: AtomicUsize,
    /// Asked to close (by eviction); its bytes no longer count when choosing whom to evict.
    closing: AtomicBool,
    close: Notify,
}

impl Entry {
    /// Asks the connection to close at its next await point.
    pub(crate) fn close(&self) {
        self.closing.store(true, Ordering::Relaxed);
        self.close.notify_one();
    }
}

impl Clients {
    /// Buffer bytes of all live connections.
    pub(crate) fn bytes(&self) -> usize {
        self.total.load(Ordering::Relaxed)
    }

    pub(crate) fn bytes_peak(&self) -> usize {
        self.peak.load(Ordering::Relaxed)
    }

    pub(crate) fn evicted(&self) -> u64 {
        self.evicted.load(Ordering::Relaxed)
    }

    fn live(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<Entry>>> {
        self.live.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Asks the connections holding the most to close until the others fit `cap`.
    #[cold]
    fn evict(&self, cap: usize) {
        let live = self.live();
        let mut total = self.total.load(Ordering::Relaxed);
        let mut open: Vec<&Arc<Entry>> = Vec::with_capacity(live.len());
        for e in live.values() {
            if e.closing.load(Ordering::Relaxed) {
                total = total.saturating_sub(e.bytes.load(Ordering::Relaxed));
            } else {
                open.push(e);
            }
        }
        open.sort_unstable_by_key(|e| std::cmp::Reverse(e.bytes.load(Ordering::Relaxed)));
        for e in open {
            if total <= cap {
                break;
            }
            let bytes = e.bytes.load(Ordering::Relaxed);
            e.close();
            total = total.saturating_sub(bytes);
            self.evicted.fetch_add(1, Ordering::Relaxed);
            log_eviction(e, bytes, cap);
        }
    }
}

fn log_eviction(e: &Entry, bytes: usize, cap: usize) {
    static LOG: LogLimit = LogLimit::new(EVICTION_LOG_LINES_PER_SEC_MAX);
    static START: OnceLock<Instant> = OnceLock::new();
    let now = START.get_or_init(Instant::now).elapsed().as_secs();
    if let Verdict::Log { suppressed_before } = LOG.admit(now) {
        tracing::warn!(
            client = e.id,
            peer = ?e.peer,
            shard = e.shard,
            bytes,
            maxmemory_clients = cap,
            suppressed_before,
            "client buffers passed maxmemory_clients: closing the client holding the most"
        );
    }
}

/// A connection's handle on the registry: its entry, and what it last reported. Dropping it
/// removes the entry.
pub(crate) struct ClientHandle {
    stats: Arc<ServerStats>,
    entry: Arc<Entry>,
    reported: Cell<usize>,
    /// `maxmemory_clients` (0: no cap).
    cap: usize,
}

impl ClientHandle {
    /// Registers a new connection.
    pub(crate) fn register(
        stats: &Arc<ServerStats>,
        peer: Option<SocketAddr>,
        shard: usize,
        cap: usize,
    ) -> ClientHandle {
        let clients = &stats.clients;
        let id = clients.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let entry = Arc::new(Entry {
            id,
            peer,
            shard,
            bytes: AtomicUsize::new(0),
            closing: AtomicBool::new(false),
            close: Notify::new(),
        });
        clients.live().insert(id, entry.clone());
        ClientHandle {
            stats: stats.clone(),
            entry,
            reported: Cell::new(0),
            cap,
        }
    }

    /// The connection's buffers now hold `bytes`: reported when that moved by
    /// `REPORT_STEP_BYTES` or more, and checked against the cap when it grew.
    #[inline]
    pub(crate) fn account(&self, bytes: usize) {
        let last = self.reported.get();
        if bytes.abs_diff(last) < REPORT_STEP_BYTES {
            return;
        }
        self.report(bytes, last);
    }

    #[inline(never)]
    fn report(&self, bytes: usize, last: usize) {
        let clients = &self.stats.clients;
        self.reported.set(bytes);
        self.entry.bytes.store(bytes, Ordering::Relaxed);
        if bytes < last {
            clients.total.fetch_sub(last - bytes, Ordering::Relaxed);
            return;
        }
        let total = clients.total.fetch_add(bytes - last, Ordering::Relaxed) + (bytes - last);
        clients.peak.fetch_max(total, Ordering::Relaxed);
        if self.cap != 0 && total > self.cap {
            clients.evict(self.cap);
        }
    }

    /// Completes when the registry asks this connection to close.
    pub(crate) async fn closing(&self) {
        self.entry.close.notified().await
    }
}

impl Drop for ClientHandle {
    fn drop(&mut self) {
        let clients = &self.stats.clients;
        clients
            .total
            .fetch_sub(self.reported.get(), Ordering::Relaxed);
        clients.live().remove(&self.entry.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_largest_client_is_asked_to_close_first_until_the_rest_fit() {
        let stats = Arc::new(ServerStats::default());
        let cap = 10 * REPORT_STEP_BYTES;
        let small = ClientHandle::register(&stats, None, 0, cap);
        let medium = ClientHandle::register(&stats, None, 0, cap);
        let large = ClientHandle::register(&stats, None, 1, cap);
        small.account(REPORT_STEP_BYTES);
        medium.account(4 * REPORT_STEP_BYTES);
        large.account(5 * REPORT_STEP_BYTES);
        assert_eq!(stats.clients.evicted(), 0);
        // Past the cap: only the largest has to go for the others to fit.
        large.account(7 * REPORT_STEP_BYTES);
        assert_eq!(stats.clients.evicted(), 1);
        assert!(large.entry.closing.load(Ordering::Relaxed));
        assert!(!medium.entry.closing.load(Ordering::Relaxed));
        assert!(!small.entry.closing.load(Ordering::Relaxed));
        assert_eq!(stats.clients.bytes_peak(), 12 * REPORT_STEP_BYTES);
        drop(large);
        assert_eq!(stats.clients.bytes(), 5 * REPORT_STEP_BYTES);
        // Small changes are not reported; shrinking is.
        medium.account(4 * REPORT_STEP_BYTES + 100);
        assert_eq!(stats.clients.bytes(), 5 * REPORT_STEP_BYTES);
        medium.account(0);
        assert_eq!(stats.clients.bytes(), REPORT_STEP_BYTES);
        drop((small, medium));
        assert_eq!(stats.clients.bytes(), 0);
        assert!(stats.clients.live().is_empty());
    }
}
