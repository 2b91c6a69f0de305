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
//! The registry is also what CLIENT LIST, CLIENT INFO and CLIENT KILL (issue 20 item 3,
//! `resp/cmd/client.rs`) read and signal: each entry has an id, the addresses and descriptor
//! of its socket, its shard, its bytes, a way to ask it to close, and what its connection last
//! published about itself (name, library, last command and when, buffer lengths, protocol).
//! A RESP connection publishes once per batch of commands, under the entry's own mutex, which
//! only CLIENT LIST and CLIENT INFO take besides it; native connections publish nothing, so
//! their line shows their age as idle time and no command. CLIENT NO-EVICT ON exempts an entry
//! from `maxmemory_clients` eviction (Redis's `e` flag).
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
    sweeper_started: AtomicBool,
}

/// How often the idle sweeper looks (see `Clients::start_idle_sweeper`).
const IDLE_SWEEP_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

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
    /// The server's end of the socket (CLIENT LIST `laddr`).
    pub(crate) local: Option<SocketAddr>,
    /// The socket's file descriptor (CLIENT LIST `fd`).
    pub(crate) fd: i32,
    pub(crate) created: Instant,
    /// CLIENT NO-EVICT ON: never closed by `maxmemory_clients`.
    pub(crate) no_evict: AtomicBool,
    /// Milliseconds from `created` to its last request (read by the idle sweeper).
    active_ms: AtomicU64,
    /// What the connection last published (see the module comment).
    info: Mutex<Published>,
}

/// The longest command name CLIENT LIST shows (`container|subcommand`); longer ones are cut.
pub(crate) const CMD_BYTES_MAX: usize = 72;

/// What a connection tells the registry about itself.
#[derive(Debug, Clone)]
pub(crate) struct Published {
    pub(crate) name: Option<Vec<u8>>,
    pub(crate) lib_name: Vec<u8>,
    pub(crate) lib_ver: Vec<u8>,
    /// When it last ran a command (its creation until then).
    pub(crate) last_at: Instant,
    pub(crate) cmd: [u8; CMD_BYTES_MAX],
    pub(crate) cmd_len: usize,
    /// Bytes of input read but not yet run, and the room left in the input buffer.
    pub(crate) qbuf: usize,
    pub(crate) qbuf_free: usize,
    /// Reply bytes not yet written.
    pub(crate) omem: usize,
    /// Every buffer's capacity together (input, replies, results).
    pub(crate) tot_mem: usize,
    /// RESP version (0 for the native protocol).
    pub(crate) resp: u8,
}

impl Published {
    fn new(now: Instant) -> Published {
        Published {
            name: None,
            lib_name: Vec::new(),
            lib_ver: Vec::new(),
            last_at: now,
            cmd: [0; CMD_BYTES_MAX],
            cmd_len: 0,
            qbuf: 0,
            qbuf_free: 0,
            omem: 0,
            tot_mem: 0,
            resp: 0,
        }
    }

    /// The last command's name, `NULL` before the first (as Redis shows it).
    pub(crate) fn cmd(&self) -> &[u8] {
        if self.cmd_len == 0 {
            b"NULL"
        } else {
            &self.cmd[..self.cmd_len]
        }
    }
}

/// The socket of a new connection.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Socket {
    pub(crate) peer: Option<SocketAddr>,
    pub(crate) local: Option<SocketAddr>,
    pub(crate) fd: i32,
}

impl Entry {
    /// Asks the connection to close at its next await point.
    pub(crate) fn close(&self) {
        self.closing.store(true, Ordering::Relaxed);
        self.close.notify_one();
    }

    /// Notes a request now (for the idle sweeper: one clock read and one relaxed store).
    #[inline]
    pub(crate) fn touch(&self) {
        let ms = self.created.elapsed().as_millis() as u64;
        self.active_ms.store(ms, Ordering::Relaxed);
    }

    /// Whether it was asked to close.
    pub(crate) fn is_closing(&self) -> bool {
        self.closing.load(Ordering::Relaxed)
    }

    /// A copy of what the connection last published.
    pub(crate) fn published(&self) -> Published {
        self.info.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Changes what the connection publishes (its own commands: SETNAME, SETINFO, and the
    /// per-batch activity).
    pub(crate) fn publish(&self, change: impl FnOnce(&mut Published)) {
        change(&mut self.info.lock().unwrap_or_else(|e| e.into_inner()));
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

    /// Every live connection, by id (CLIENT LIST and KILL).
    pub(crate) fn snapshot(&self) -> Vec<Arc<Entry>> {
        let mut all: Vec<Arc<Entry>> = self.live().values().cloned().collect();
        all.sort_unstable_by_key(|e| e.id);
        all
    }

    /// Starts, once per server, the thread that closes clients idle past a `timeout` set by
    /// CONFIG SET: a connection already waiting for input when the value changed waits under
    /// the old one (`accept::read_more` reads it per read), so this sweep, once a second like
    /// Redis's client cron, closes the ones the new value says are idle. It ends with the
    /// server (it holds only a weak reference).
    pub(crate) fn start_idle_sweeper(stats: &Arc<ServerStats>) {
        if stats.clients.sweeper_started.swap(true, Ordering::Relaxed) {
            return;
        }
        let weak = Arc::downgrade(stats);
        let spawned = std::thread::Builder::new()
            .name("idle-sweeper".into())
            .spawn(move || loop {
                std::thread::sleep(IDLE_SWEEP_INTERVAL);
                let Some(stats) = weak.upgrade() else {
                    return;
                };
                let timeout = stats.live.timeout_secs();
                if timeout == 0 {
                    continue;
                }
                for e in stats.clients.snapshot() {
                    let idle_ms = (e.created.elapsed().as_millis() as u64)
                        .saturating_sub(e.active_ms.load(Ordering::Relaxed));
                    if !e.is_closing() && idle_ms >= timeout * 1000 {
                        e.close();
                        stats.idle_timeouts.fetch_add(1, Ordering::Relaxed);
                        tracing::debug!(client = e.id, "idle client closed (timeout)");
                    }
                }
            });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "cannot start the idle sweeper: CONFIG SET timeout applies only to each client's next read");
        }
    }

    /// CONFIG RESETSTAT: the eviction count starts again from zero, as Redis's
    /// `evicted_clients` does.
    pub(crate) fn reset_stats(&self) {
        self.evicted.store(0, Ordering::Relaxed);
    }

    /// Asks the connections holding the most to close until the others fit `cap`.
    #[cold]
    fn evict(&self, cap: usize) {
        let live = self.live();
        let mut total = self.total.load(Ordering::Relaxed);
        let mut open: Vec<&Arc<Entry>> = Vec::with_capacity(live.len());
        // Clients already closing, and no-evict ones (as in Redis), do not count.
        for e in live.values() {
            if e.closing.load(Ordering::Relaxed) || e.no_evict.load(Ordering::Relaxed) {
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
}

impl ClientHandle {
    /// Registers a new connection.
    pub(crate) fn register(stats: &Arc<ServerStats>, socket: Socket, shard: usize) -> ClientHandle {
        let clients = &stats.clients;
        let id = clients.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let now = Instant::now();
        let entry = Arc::new(Entry {
            id,
            peer: socket.peer,
            shard,
            bytes: AtomicUsize::new(0),
            closing: AtomicBool::new(false),
            close: Notify::new(),
            local: socket.local,
            fd: socket.fd,
            created: now,
            no_evict: AtomicBool::new(false),
            active_ms: AtomicU64::new(0),
            info: Mutex::new(Published::new(now)),
        });
        clients.live().insert(id, entry.clone());
        ClientHandle {
            stats: stats.clone(),
            entry,
            reported: Cell::new(0),
        }
    }

    /// The connection's registry entry.
    pub(crate) fn entry(&self) -> &Arc<Entry> {
        &self.entry
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
        // Read live: CONFIG SET maxmemory-clients applies at the next report.
        let cap = self.stats.live.maxmemory_clients();
        if cap != 0 && total > cap {
            clients.evict(cap);
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
        stats.live.set_maxmemory_clients(cap);
        let socket = Socket {
            peer: None,
            local: None,
            fd: -1,
        };
        let small = ClientHandle::register(&stats, socket, 0);
        let medium = ClientHandle::register(&stats, socket, 0);
        let large = ClientHandle::register(&stats, socket, 1);
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

#[cfg(test)]
mod no_evict_tests {
    use super::*;

    #[test]
    fn a_no_evict_client_is_passed_over() {
        let stats = Arc::new(ServerStats::default());
        stats.live.set_maxmemory_clients(4 * REPORT_STEP_BYTES);
        let socket = Socket {
            peer: None,
            local: None,
            fd: -1,
        };
        let big = ClientHandle::register(&stats, socket, 0);
        let small = ClientHandle::register(&stats, socket, 0);
        big.entry().no_evict.store(true, Ordering::Relaxed);
        // As in Redis, a no-evict client's memory does not count toward the cap: only the
        // other's growth past it evicts, and it is the other that goes.
        big.account(8 * REPORT_STEP_BYTES);
        assert!(!big.entry().is_closing());
        small.account(3 * REPORT_STEP_BYTES);
        assert!(!small.entry().is_closing());
        small.account(5 * REPORT_STEP_BYTES);
        assert!(!big.entry().is_closing());
        assert!(small.entry().is_closing());
        assert_eq!(stats.clients.snapshot().len(), 2);
    }
}
