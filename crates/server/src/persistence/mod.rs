//! Persistence in the server (issue 22; the files are `directkv-persist`'s, docs/persistence.md):
//! each shard appends one record per batch that wrote to its own log, from its own thread, and
//! one sync thread makes the logs durable (with helpers that sync a round's other logs at the
//! same time: `fanout.rs`); recovery at start (`recover.rs`) rebuilds each
//! shard's engine from its snapshot and log before the shards start.
//!
//! ```text
//!   shard i:  ShardCtx::execute ─ engine ─> ShardLog::record ── append + store ───> log-i
//!                                     (a copy into the mapped file: `directkv_persist::log`)
//!                                             (written_lsn[i])                         │
//!   sync thread:  each second (everysec), or when a reply waits (always):  fdatasync ──┘
//!                                             (durable_lsn[i], round done)
//!                 first in a round, a snapshot's log rotation: the old log synced whole,
//!                 the new one's header, the manifest naming it (`Store::complete_rotation`)
//!   a connection's replies (accept::flush): Store::durable().await first under `always`
//! ```
//!
//! **Why the shard writes and a thread syncs** (issue 22 asks to pick by measurement:
//! docs/persistence.md "Who writes the log", `log-thread-cost`): on this 2-core machine the log
//! costs 2.7 us of CPU per batch when the shard writes it (one write(2) of ~800 bytes, ~0.9-1.9
//! us) against 3.6-4.2 us through a log thread, whose grouped writes save less than the wake-ups
//! of a thread that sleeps between batches cost (~10 us per hand-off to a sleeping thread).
//! fdatasync is different: 0.1-4 ms of waiting that must not stall a shard, so it is the one
//! step on a thread of its own, and it groups: one fdatasync covers every record written
//! before it started, whichever connection or shard wrote it (group commit).
//!
//! **When a reply may leave.** A batch's record is written (stored in the file's page cache)
//! inside
//! `ShardCtx::execute`, before `execute` returns, so under `no` and `everysec` every reply of
//! every protocol leaves after its record is in the file (kill -9 cannot lose it). Under
//! `always`, a connection waits in `accept::flush` for a sync round that started after its
//! batches were written: [`Store::durable`] asks for a round and waits for it. The wait
//! covers every shard's log, so a write forwarded to another shard, or run there inside an
//! atomic plan or a MULTI, is covered too. A sync that fails answers the waiters with an error
//! and the connection is closed without its replies (none of them is acknowledged).
//!
//! **Group commit delay** (`group_commit_delay_us`). Rounds run back to back, so without a
//! delay the batches that arrive during one round form the next: with several pipelining
//! connections they split into groups that alternate, each round carrying a fraction of them.
//! Under `always`, a round that is asked for may therefore wait, before it begins, until as
//! many asks are in as the last round answered plus those that arrived during it (the
//! connections it answered come back within a round trip), or until `group_commit_delay_us`
//! after the last round ended, whichever is first ([`Grouping`]). A lone client asks for
//! exactly one round per batch and the last round answered one ask, so it never waits; a
//! connection that stopped asking costs the next round the delay once, and the round after
//! expects one fewer. The prior art is PostgreSQL's `commit_delay`/`commit_siblings` and
//! MySQL's `binlog_group_commit_sync_delay`/`binlog_group_commit_sync_no_delay_count`; here
//! the count to wait for is learnt from the last round instead of configured. The delay
//! changes only when a round begins: a reply still leaves only after a round that began after
//! its writes. The sync thread sleeps until the ask that completes the group (or the delay's
//! end), not until the first ask, and an ask notifies it after releasing the lock: with the
//! shard and the sync thread on one core, waking it at the first ask and from under the lock
//! cost about four context switches per round (`log-sync` went from ~8 to ~3.5 sleeps per
//! round, the shard's preemptions from ~5 to ~2).
//!
//! ```text
//!   round k ──fdatasync──┤ answers A1 A2          round k+1 ──fdatasync──┤
//!   asks:   B1 B2 (during round k) │ A1 A2 come back ─┘ (4 in = 2 answered + 2 during k)
//! ```
//!
//! **Failures.** A failed write(2) or fdatasync fails the store (the kernel may have dropped
//! the pages: retrying the same write or sync could acknowledge lost data): the batch whose
//! record was not written answers its writes with `OpError::NotLogged` (RESP `MISCONF`), and
//! from then on every shard refuses writes and serves reads (`Engine::execute_reads_only`).
//!
//! **Repair** (as Redis accepts writes again once its AOF write or BGSAVE succeeds). The
//! files of a failed store cannot be trusted to continue (a record missing, a torn tail, pages
//! the kernel dropped), but the memory can: every shard, every `LOG_REPAIR_INTERVAL` while
//! the store is failed (and at once on BGSAVE), writes a snapshot of its engine into new files
//! and starts a new log (`snapshot::begin` in repair mode), and its manifest entry becomes
//! that snapshot and that log alone; the old files are removed. Once every shard has done so
//! after the last failure, the store accepts writes again ([`Store::repaired`]). No record is
//! missing from the new files: writes were refused while the store was failed. The batch
//! whose record failed ran in memory and was answered with errors; the repair keeps its
//! writes (as Redis keeps a command whose AOF write failed after it ran).

mod fanout;
pub(crate) mod info;
pub(crate) mod recover;
pub(crate) mod snapshot;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use directkv_persist::fs::{Fs, FsFile};
use directkv_persist::lock::DirLock;
use directkv_persist::log::{LogError, LogWriter, Lsn};
use directkv_persist::manifest::Manifest;
use tokio::sync::watch;

use crate::config::AppendFsync;

/// How often `everysec` syncs.
pub const EVERYSEC_INTERVAL: Duration = Duration::from_secs(1);

/// Upper bounds (µs) of the fsync latency histogram's buckets (INFO `aof_fsync_lt_*`, metric
/// `directkv_aof_fsync_lt_*`); the last bucket is everything slower.
pub const FSYNC_BUCKETS_US: [u64; 5] = [250, 1_000, 4_000, 16_000, 64_000];

/// Counters of the log and its syncs (rows in `stats::COUNTERS`, section Persistence).
#[derive(Debug, Default)]
pub(crate) struct PersistStats {
    /// Records appended to the shards' logs.
    pub(crate) records: AtomicU64,
    /// Bytes written to the shards' logs (framed records).
    pub(crate) log_bytes: AtomicU64,
    /// Writes of the shards' logs (`LogWriter::write_out`: a copy into the mapped file, or a
    /// write(2)).
    pub(crate) writes: AtomicU64,
    /// fdatasync calls of the sync thread, and how long they took.
    pub(crate) fsyncs: AtomicU64,
    pub(crate) fsync_us_total: AtomicU64,
    /// Cumulative: fsyncs under each of `FSYNC_BUCKETS_US`.
    pub(crate) fsync_below: [AtomicU64; FSYNC_BUCKETS_US.len()],
    /// Times a reply waited for a sync round under `always`.
    pub(crate) durable_waits: AtomicU64,
    /// Sync rounds run, and the asks (replies waiting, SAVE, log rotations) they answered:
    /// their ratio is the batches one round grouped.
    pub(crate) sync_rounds: AtomicU64,
    pub(crate) sync_round_asks: AtomicU64,
    /// Times the store accepted writes again after a failure (every shard repaired its files).
    pub(crate) repairs: AtomicU64,
    /// Rounds that waited for more asks before they began (`group_commit_delay_us`), those
    /// whose wait ended at the limit, and the microseconds they waited in all.
    pub(crate) group_commit_waits: AtomicU64,
    pub(crate) group_commit_timeouts: AtomicU64,
    pub(crate) group_commit_wait_us: AtomicU64,
}

impl PersistStats {
    pub(crate) fn fsync_took(&self, took: Duration) {
        let us = took.as_micros() as u64;
        self.fsyncs.fetch_add(1, Ordering::Relaxed);
        self.fsync_us_total.fetch_add(us, Ordering::Relaxed);
        for (b, below) in FSYNC_BUCKETS_US.iter().zip(&self.fsync_below) {
            if us < *b {
                below.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// One shard's log as the sync thread sees it.
struct ShardSync {
    /// The last Lsn whose record is in the file (set by the shard after each write).
    written: AtomicU64,
    /// The last Lsn the sync thread made durable.
    durable: AtomicU64,
    /// A handle on the shard's current log file (`LogWriter::sync_handle`), swapped when a
    /// snapshot starts a new log, and that rotation until it is durable. Held by the sync
    /// thread while it waits for the disk.
    file: Mutex<SyncFile>,
    /// A rotation handed over by the shard (`Store::rotate`) and not yet taken into `file`:
    /// a lock held for a moment only, so the shard never waits for an fdatasync in progress.
    incoming: Mutex<Option<(Box<dyn FsFile>, Rotation)>>,
    /// A rotation handed over and not yet completed (read without taking `file`).
    rotating: AtomicBool,
}

/// What the sync thread syncs for one shard.
#[derive(Default)]
struct SyncFile {
    current: Option<Box<dyn FsFile>>,
    rotation: Option<Rotation>,
}

/// A log rotation (a snapshot's first step, `snapshot::begin`) whose waits for the disk are
/// still to do: the shard writes to the new log already, and before any of its records
/// counts as durable the old log is synced whole, the new one's header synced, and a
/// manifest naming the new log stored (`Store::complete_rotation`).
pub(crate) struct Rotation {
    /// The old log's file, synced whole first (no hole in the chain after a power loss).
    pub(crate) old: Box<dyn FsFile>,
    /// The new log's file and name: its header synced, then named by the manifest.
    pub(crate) new: Box<dyn FsFile>,
    pub(crate) new_log: String,
}

/// Sync rounds asked for and done.
#[derive(Debug)]
struct Rounds {
    requested: u64,
    done: u64,
    stop: bool,
    /// The sync thread sleeps until `requested` reaches this (`u64::MAX`: it is not waiting
    /// for asks), so that only the ask it waits for pays a wake-up: under `always` with a
    /// group commit delay, the ask that completes the group, not the first one.
    wake_at: u64,
    /// When the first ask not yet taken by a round was made (the group commit delay's
    /// accounting: how long a round's first batch waited for the others).
    first_ask: Option<Instant>,
}

impl Default for Rounds {
    fn default() -> Self {
        Rounds {
            requested: 0,
            done: 0,
            stop: false,
            wake_at: u64::MAX,
            first_ask: None,
        }
    }
}

/// The group commit delay's bookkeeping, kept by the sync thread: how many asks the next
/// round waits for, learnt from the last round (see the module comment). Pure, so that its
/// rule is tested without a clock or a disk.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Grouping {
    /// `requested` when the last round began: the asks it answered end there.
    began: u64,
    /// The count of asks (`requested`) the next round waits for: those made by the end of the
    /// last round, plus as many as it answered.
    expect: u64,
    /// When the last round ended.
    ended: Option<Instant>,
}

impl Grouping {
    /// The round that began at `target` asks ended at `now`, when `requested` asks had been
    /// made. Returns the asks it answered.
    pub(crate) fn round_ended(&mut self, target: u64, requested: u64, now: Instant) -> u64 {
        let answered = target.saturating_sub(self.began);
        self.began = self.began.max(target);
        self.expect = requested.saturating_add(answered);
        self.ended = Some(now);
        answered
    }

    /// With `requested` asks made, until when the next round waits for more under `delay`:
    /// `None` to begin now (no delay, enough asks in, or no round yet).
    pub(crate) fn hold_until(&self, requested: u64, delay: Duration) -> Option<Instant> {
        if delay.is_zero() || requested >= self.expect {
            return None;
        }
        self.ended.map(|t| t + delay)
    }

    /// The count of asks `hold_until` waits for.
    pub(crate) fn expect(&self) -> u64 {
        self.expect
    }
}

/// The store's shared state: the directory (locked), its manifest, the fsync policy, every
/// shard's log positions and the sync thread's rounds.
pub(crate) struct Store {
    pub(crate) dir: PathBuf,
    pub(crate) fs: Arc<dyn Fs>,
    /// The manifest as last stored (snapshots update it: `snapshot.rs`); held by an update
    /// through its fsyncs, which serializes updates.
    pub(crate) manifest: Mutex<Manifest>,
    /// A copy of `manifest` for a shard's thread, whose lock is held for a copy only
    /// (`manifest_view`): a shard beginning a snapshot never waits for another's update.
    manifest_view: Mutex<Manifest>,
    _lock: DirLock,
    shards: Vec<ShardSync>,
    rounds: Mutex<Rounds>,
    /// Wakes the sync thread: a round was asked for, the policy changed, or stop.
    work: Condvar,
    /// Rounds done, and whether the store failed, for async waiters.
    done_tx: watch::Sender<(u64, bool)>,
    /// Whether the store is failed (bit 0: set by a write or sync failure until every shard
    /// has repaired its files after the last failure, `repaired`) and its incidents so far
    /// (the bits above: times it went from accepting writes to failed), in one word so that a
    /// connection's reply gate reads both at once (`accept::ReplyGate`). Changed under
    /// `failure`'s lock.
    state: AtomicU64,
    /// The cause of the incident, while failed (its first failure's).
    failure: Mutex<Option<String>>,
    /// Calls of `fail` so far (changed under `failure`'s lock): a repair counts when it began
    /// after the last.
    fail_calls: AtomicU64,
    /// Per shard: `fail_calls` when its last successful repair began.
    repaired_at: Vec<AtomicU64>,
    /// Held by the shard repairing now: one at a time, so that the disk needs room for one
    /// shard's image beside the old files, whose removal then makes room for the next.
    repair_turn: AtomicBool,
    /// The server's counters: the log's are `stats.persist` (rows in `stats::COUNTERS`).
    pub(crate) stats: Arc<crate::stats::ServerStats>,
    /// Snapshot rounds and requests (`snapshot.rs`).
    pub(crate) snapshots: snapshot::Snapshots,
    /// The sync thread's and its helpers' waits so far (their voluntary context switches,
    /// published after each wait for asks or a job and each fdatasync): each ends in a
    /// wake-up that may take the core from a shard on it. A shard's busy poller discounts
    /// them from the preemptions it reads as its core being wanted (`shard::busy_poll`).
    pub(crate) sync_thread_waits: Arc<AtomicU64>,
    /// The helpers that sync other shards' logs while the sync thread syncs one (`fanout.rs`):
    /// one per shard after the first.
    fanout: fanout::Fanout,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("dir", &self.dir).finish()
    }
}

impl Store {
    /// The store over `dir` (locked by `lock`), whose shards' logs are `logs` (positioned after
    /// their last records: recovery's), with `manifest` as stored.
    pub(crate) fn new(
        dir: PathBuf,
        fs: Arc<dyn Fs>,
        lock: DirLock,
        manifest: Manifest,
        logs: &[LogWriter],
        stats: Arc<crate::stats::ServerStats>,
    ) -> Result<Arc<Store>, String> {
        let mut shards = Vec::with_capacity(logs.len());
        for log in logs {
            let file = log.sync_handle().map_err(|e| e.to_string())?;
            let last = log.next_lsn() - 1;
            shards.push(ShardSync {
                written: AtomicU64::new(last),
                durable: AtomicU64::new(last),
                file: Mutex::new(SyncFile {
                    current: Some(file),
                    rotation: None,
                }),
                incoming: Mutex::new(None),
                rotating: AtomicBool::new(false),
            });
        }
        let (done_tx, _) = watch::channel((0, false));
        Ok(Arc::new(Store {
            dir,
            fs,
            manifest_view: Mutex::new(manifest.clone()),
            manifest: Mutex::new(manifest),
            _lock: lock,
            shards,
            rounds: Mutex::new(Rounds::default()),
            work: Condvar::new(),
            done_tx,
            state: AtomicU64::new(0),
            failure: Mutex::new(None),
            fail_calls: AtomicU64::new(0),
            repaired_at: logs.iter().map(|_| AtomicU64::new(0)).collect(),
            repair_turn: AtomicBool::new(false),
            stats,
            snapshots: snapshot::Snapshots::new(logs.len()),
            sync_thread_waits: Arc::new(AtomicU64::new(0)),
            fanout: fanout::Fanout::new(logs.len().saturating_sub(1)),
        }))
    }

    /// The manifest as last stored, without waiting for an update in progress.
    pub(crate) fn manifest_view(&self) -> Manifest {
        self.manifest_view
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// `m` was stored: the copy `manifest_view` gives follows (call holding `manifest`).
    pub(crate) fn manifest_stored(&self, m: &Manifest) {
        *self.manifest_view.lock().unwrap_or_else(|e| e.into_inner()) = m.clone();
    }

    /// The fsync policy now (CONFIG SET appendfsync changes it: `live.rs`).
    #[inline]
    pub(crate) fn policy(&self) -> AppendFsync {
        self.stats.live.appendfsync()
    }

    /// Why the store refuses writes, if it does.
    pub(crate) fn failure(&self) -> Option<String> {
        if !self.is_failed() {
            return None;
        }
        self.failure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Fails the store: every shard refuses writes from its next batch on, until each has
    /// repaired its files (`repaired`).
    pub(crate) fn fail(&self, cause: String) {
        let mut f = self.failure.lock().unwrap_or_else(|e| e.into_inner());
        if f.is_none() {
            tracing::error!(dir = %self.dir.display(), %cause, "persistence failed: writes are refused (MISCONF), reads are served; every shard writes a new snapshot and log until the disk takes them (the first after a second), then writes are accepted again");
            *f = Some(cause);
            // One more incident, failed.
            let incidents = self.state.load(Ordering::Relaxed) >> 1;
            self.state
                .store(((incidents + 1) << 1) | 1, Ordering::Release);
        }
        self.fail_calls.fetch_add(1, Ordering::Relaxed);
        self.done_tx.send_modify(|d| d.1 = true);
    }

    /// Whether the store failed (writes refused until it is repaired).
    #[inline]
    pub(crate) fn is_failed(&self) -> bool {
        self.state.load(Ordering::Acquire) & 1 == 1
    }

    /// The incident the store is failed in (counted from 1), or `None` when it accepts
    /// writes: two equal answers mean it stayed failed in between.
    #[inline]
    pub(crate) fn failed_incident(&self) -> Option<u64> {
        let state = self.state.load(Ordering::Acquire);
        (state & 1 == 1).then_some(state >> 1)
    }

    /// When the store is failed: the mark a repair of a shard beginning now carries
    /// (`repaired`). `None` when it accepts writes.
    pub(crate) fn repair_mark(&self) -> Option<u64> {
        let _f = self.failure.lock().unwrap_or_else(|e| e.into_inner());
        self.is_failed()
            .then(|| self.fail_calls.load(Ordering::Relaxed))
    }

    /// Whether shard `shard` has yet to repair its files since the store's last failure.
    pub(crate) fn needs_repair(&self, shard: usize) -> bool {
        let _f = self.failure.lock().unwrap_or_else(|e| e.into_inner());
        self.is_failed()
            && self.repaired_at[shard].load(Ordering::Relaxed)
                < self.fail_calls.load(Ordering::Relaxed)
    }

    /// Takes the turn to repair (one shard at a time); false if another shard has it.
    pub(crate) fn take_repair_turn(&self) -> bool {
        self.repair_turn
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// Gives the turn to repair back.
    pub(crate) fn end_repair_turn(&self) {
        self.repair_turn.store(false, Ordering::Release);
    }

    /// Shard `shard` repaired its files (a new snapshot and log, named by the manifest alone)
    /// in a repair that began at `mark` (`repair_mark`). When every shard has since the last
    /// failure, the store accepts writes again; returns whether it does.
    pub(crate) fn repaired(&self, shard: usize, mark: u64) -> bool {
        let mut f = self.failure.lock().unwrap_or_else(|e| e.into_inner());
        self.repaired_at[shard].fetch_max(mark, Ordering::Relaxed);
        let calls = self.fail_calls.load(Ordering::Relaxed);
        if !self.is_failed() {
            return true;
        }
        if self
            .repaired_at
            .iter()
            .any(|r| r.load(Ordering::Relaxed) < calls)
        {
            return false;
        }
        let cause = f.take().unwrap_or_default();
        let incidents = self.state.load(Ordering::Relaxed) >> 1;
        self.state.store(incidents << 1, Ordering::Release);
        self.stats.persist.repairs.fetch_add(1, Ordering::Relaxed);
        drop(f);
        self.done_tx.send_modify(|d| d.1 = false);
        tracing::warn!(dir = %self.dir.display(), failure = %cause, "persistence repaired: every shard wrote a new snapshot and log; writes are accepted again");
        true
    }

    /// Takes shard `shard`'s log as `current` (a repair's new log, named by no manifest yet)
    /// for the sync thread, dropping any rotation not completed (the repair replaces its files
    /// as well). Returns the name of that rotation's new log, if one was pending: named by no
    /// manifest, it is removed once the repair's manifest is stored.
    pub(crate) fn replace_log(&self, shard: usize, current: Box<dyn FsFile>) -> Option<String> {
        let mut f = self.sync_file(shard);
        f.current = Some(current);
        let stale = f.rotation.take().map(|r| r.new_log);
        self.shards[shard].rotating.store(false, Ordering::Release);
        stale
    }

    /// Shard `shard` wrote its records up to `lsn`.
    fn written(&self, shard: usize, lsn: Lsn) {
        self.shards[shard].written.store(lsn, Ordering::Release);
    }

    /// Whether every record written is durable.
    fn all_durable(&self) -> bool {
        self.shards
            .iter()
            .all(|s| s.durable.load(Ordering::Acquire) >= s.written.load(Ordering::Acquire))
    }

    /// Waits until every record written before the call is durable, under `always`; at once
    /// otherwise (records are written before `execute` returns). Err: the store failed, so
    /// what the caller was about to acknowledge may not be durable.
    pub(crate) async fn durable(&self) -> Result<(), ()> {
        if self.policy() != AppendFsync::Always || self.all_durable() {
            return Ok(());
        }
        if self.is_failed() {
            return Err(());
        }
        self.stats
            .persist
            .durable_waits
            .fetch_add(1, Ordering::Relaxed);
        let round = self.ask_round();
        let mut rx = self.done_tx.subscribe();
        let ok = match rx
            .wait_for(|(done, failed)| *done >= round || *failed)
            .await
        {
            Ok(d) => !d.1,
            Err(_) => false,
        };
        if ok {
            Ok(())
        } else {
            Err(())
        }
    }

    /// `durable` for a thread outside the shards (UDP, OCSM): blocks.
    pub(crate) fn durable_blocking(&self) -> Result<(), ()> {
        if self.policy() != AppendFsync::Always || self.all_durable() {
            return Ok(());
        }
        self.sync_now()
    }

    /// Asks for a sync round and blocks until it is done (SAVE, SHUTDOWN, a log rotation).
    pub(crate) fn sync_now(&self) -> Result<(), ()> {
        if self.is_failed() {
            return Err(());
        }
        let round = self.ask_round();
        let mut rx = self.done_tx.subscribe();
        loop {
            let d = *rx.borrow_and_update();
            if d.1 {
                return Err(());
            }
            if d.0 >= round {
                return Ok(());
            }
            // The sync thread sends after each round; a blocking wait on a watch has no API,
            // so poll the condition with a short sleep (rare callers).
            std::thread::sleep(Duration::from_micros(100));
        }
    }

    fn ask_round(&self) -> u64 {
        let mut r = self.rounds.lock().unwrap_or_else(|e| e.into_inner());
        r.requested += 1;
        if r.first_ask.is_none() {
            r.first_ask = Some(Instant::now());
        }
        let wake = r.requested >= r.wake_at;
        if wake {
            r.wake_at = u64::MAX;
        }
        let asked = r.requested;
        // Notified after the lock is released: on one core the woken sync thread preempts
        // the asker, and would otherwise block at once on the lock the asker still holds.
        drop(r);
        if wake {
            self.work.notify_one();
        }
        asked
    }

    /// Shard `shard` rotated its log (`snapshot::begin`, on the shard's thread, which writes
    /// to the new log from now on): the sync thread syncs the new file from now on, and
    /// first completes the rotation (`complete_rotation`), asked for at once. Nothing here
    /// waits for the disk.
    pub(crate) fn rotate(&self, shard: usize, current: Box<dyn FsFile>, rotation: Rotation) {
        let s = &self.shards[shard];
        let mut incoming = s.incoming.lock().unwrap_or_else(|e| e.into_inner());
        debug_assert!(incoming.is_none(), "one rotation at a time per shard");
        *incoming = Some((current, rotation));
        s.rotating.store(true, Ordering::Release);
        drop(incoming);
        self.ask_round();
    }

    /// Locks shard `shard`'s sync state with its incoming rotation taken in. Until it is, the
    /// sync thread syncs the old file, which holds every record written before the rotation.
    fn sync_file(&self, shard: usize) -> std::sync::MutexGuard<'_, SyncFile> {
        let s = &self.shards[shard];
        let mut f = s.file.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((current, rotation)) =
            s.incoming.lock().unwrap_or_else(|e| e.into_inner()).take()
        {
            debug_assert!(f.rotation.is_none(), "one rotation at a time per shard");
            f.current = Some(current);
            f.rotation = Some(rotation);
        }
        f
    }

    /// Makes shard `shard`'s pending rotation durable, if it has one: the old log synced
    /// whole, the new log's header synced, then a manifest naming the new log stored (its
    /// directory fsync makes the new file's name durable too). Called by the sync thread
    /// before it syncs the shard's new log, and by a snapshot's `finish` before it stores its
    /// own manifest (whichever comes first does it). Until it is done, a crash leaves the new
    /// log unnamed: recovery adopts it when it continues the shard's chain (`recover.rs`).
    /// Err: a step failed, which fails the store (records of the new log may have been
    /// acknowledged under `everysec` or `no`, and the manifest may not name it).
    pub(crate) fn complete_rotation(&self, shard: usize) -> Result<(), String> {
        if !self.shards[shard].rotating.load(Ordering::Acquire) {
            // Nothing to complete: no wait for the lock the sync thread holds while it syncs.
            return match self.failure() {
                Some(why) => Err(why),
                None => Ok(()),
            };
        }
        let mut f = self.sync_file(shard);
        self.complete_locked(shard, &mut f)
    }

    fn complete_locked(&self, shard: usize, f: &mut SyncFile) -> Result<(), String> {
        let Some(mut r) = f.rotation.take() else {
            return match self.failure() {
                Some(why) => Err(why),
                None => Ok(()),
            };
        };
        let step = |what: &str, res: std::io::Result<()>| {
            res.map_err(|e| format!("{what} (log rotation of shard {shard}): {e}"))
        };
        let t = Instant::now();
        let synced = step("fdatasync of the old log", r.old.sync_data())
            .and_then(|()| step("fdatasync of the new log", r.new.sync_data()));
        self.stats.persist.fsync_took(t.elapsed());
        let stored = synced.and_then(|()| {
            let mut m = self.manifest.lock().unwrap_or_else(|e| e.into_inner());
            let mut next = m.clone();
            next.generation += 1;
            next.shards[shard].logs.push(r.new_log.clone());
            directkv_persist::manifest::store(&*self.fs, &self.dir, &next)
                .map_err(|e| format!("storing the manifest that names {}: {e}", r.new_log))?;
            self.manifest_stored(&next);
            *m = next;
            Ok(())
        });
        if let Err(e) = &stored {
            self.fail(e.clone());
        }
        self.shards[shard].rotating.store(false, Ordering::Release);
        stored
    }

    /// One round: fdatasync every shard's log that has records not yet durable (a pending
    /// rotation completed first, so a record of a new log is never durable before the old
    /// log is whole and the new one named), the logs after the first by helpers at the same
    /// time (`fanout.rs`).
    fn sync_all(&self) -> bool {
        let todo: Vec<usize> = (0..self.shards.len())
            .filter(|&i| self.needs_sync(i))
            .collect();
        self.fanout.run(&todo, |i| self.sync_shard(i))
    }

    /// Whether shard `shard` has a rotation to complete or records not yet durable.
    fn needs_sync(&self, shard: usize) -> bool {
        let s = &self.shards[shard];
        s.rotating.load(Ordering::Acquire)
            || s.durable.load(Ordering::Acquire) < s.written.load(Ordering::Acquire)
    }

    /// Shard `shard`'s part of a round: its rotation completed, if one is pending, and its
    /// log synced. False: a step failed (and failed the store).
    fn sync_shard(&self, shard: usize) -> bool {
        let s = &self.shards[shard];
        let written = s.written.load(Ordering::Acquire);
        let mut file = self.sync_file(shard);
        if file.rotation.is_some() && self.complete_locked(shard, &mut file).is_err() {
            return false;
        }
        if s.durable.load(Ordering::Acquire) >= written {
            return true;
        }
        let Some(f) = file.current.as_mut() else {
            return true;
        };
        let t = Instant::now();
        let r = f.sync_data();
        self.stats.persist.fsync_took(t.elapsed());
        if let Err(e) = r {
            self.fail(format!("fdatasync of a log: {e}"));
            return false;
        }
        s.durable.fetch_max(written, Ordering::AcqRel);
        true
    }

    /// The sync thread: under `everysec` a round each second, under every policy a round
    /// whenever one is asked for; a last round at stop.
    pub(crate) fn spawn_syncer(self: &Arc<Store>) -> std::io::Result<std::thread::JoinHandle<()>> {
        let mut helpers = Vec::new();
        for n in 1..self.shards.len() {
            let store = self.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("log-sync-{n}"))
                .spawn(move || {
                    let mut seen = 0;
                    store
                        .fanout
                        .serve(|i| store.sync_shard(i), || store.publish_waits(&mut seen));
                });
            match spawned {
                Ok(h) => helpers.push(h),
                Err(e) => {
                    self.fanout.stop();
                    return Err(e);
                }
            }
        }
        let store = self.clone();
        std::thread::Builder::new()
            .name("log-sync".into())
            .spawn(move || {
                store.sync_loop();
                store.fanout.stop();
                for h in helpers {
                    let _ = h.join();
                }
            })
    }

    fn sync_loop(&self) {
        let mut waits_seen = 0;
        let mut last = Instant::now();
        let mut grouping = Grouping::default();
        loop {
            let (target, stop) = {
                let mut r = self.rounds.lock().unwrap_or_else(|e| e.into_inner());
                loop {
                    if r.stop {
                        break;
                    }
                    let now = Instant::now();
                    // Until when a round asked for now would wait for more asks (`None`:
                    // no group commit delay applies).
                    let until = match self.policy() {
                        AppendFsync::Always => grouping.hold_until(
                            r.requested.max(r.done + 1),
                            Duration::from_micros(self.stats.live.group_commit_delay_us()),
                        ),
                        _ => None,
                    }
                    .filter(|u| *u > now);
                    if r.requested > r.done && until.is_none() {
                        break;
                    }
                    // Under `always` and `no` the wait is bounded too, so that a CONFIG SET
                    // to `everysec` takes effect within a second without waking anyone.
                    let left = EVERYSEC_INTERVAL.saturating_sub(last.elapsed());
                    if left.is_zero() {
                        if self.policy() == AppendFsync::Everysec {
                            break;
                        }
                        last = now;
                        continue;
                    }
                    // One wake-up per round: the first ask, or while the delay runs, the ask
                    // that completes the group (the delay's end wakes it otherwise).
                    let (wake_at, timeout) = match until {
                        Some(u) => (grouping.expect(), left.min(u - now)),
                        None => (r.done + 1, left),
                    };
                    r.wake_at = wake_at;
                    r = self
                        .work
                        .wait_timeout(r, timeout)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                    self.publish_waits(&mut waits_seen);
                }
                r.wake_at = u64::MAX;
                self.count_hold(&mut r, &grouping);
                (r.requested, r.stop)
            };
            last = Instant::now();
            if !self.is_failed() {
                self.sync_all();
                self.publish_waits(&mut waits_seen);
            }
            let requested = {
                let mut r = self.rounds.lock().unwrap_or_else(|e| e.into_inner());
                r.done = r.done.max(target);
                r.requested
            };
            let answered = grouping.round_ended(target, requested, Instant::now());
            let st = &self.stats.persist;
            st.sync_rounds.fetch_add(1, Ordering::Relaxed);
            st.sync_round_asks.fetch_add(answered, Ordering::Relaxed);
            let failed = self.is_failed();
            self.done_tx.send_modify(|d| {
                d.0 = d.0.max(target);
                d.1 = failed;
            });
            if stop {
                return;
            }
        }
    }

    /// The group commit delay's counters for the round beginning now: whether it waited
    /// for more asks after its first (`group_commit_delay_us` had not run out when the first
    /// was made and it did not complete the group), how long, and whether it began at the
    /// delay's end with fewer asks than expected. Takes the round's first ask.
    fn count_hold(&self, r: &mut Rounds, grouping: &Grouping) {
        let Some(first) = r.first_ask.take() else {
            return;
        };
        if r.stop || r.requested <= r.done || self.policy() != AppendFsync::Always {
            return;
        }
        let delay = Duration::from_micros(self.stats.live.group_commit_delay_us());
        let Some(until) = grouping.hold_until(r.done + 1, delay) else {
            return;
        };
        if first >= until {
            return;
        }
        let st = &self.stats.persist;
        st.group_commit_waits.fetch_add(1, Ordering::Relaxed);
        if r.requested < grouping.expect() {
            st.group_commit_timeouts.fetch_add(1, Ordering::Relaxed);
        }
        st.group_commit_wait_us
            .fetch_add(first.elapsed().as_micros() as u64, Ordering::Relaxed);
    }

    /// On the sync thread or a helper: adds the calling thread's waits since it last
    /// published (`seen`, its count then) to `sync_thread_waits`.
    fn publish_waits(&self, seen: &mut u64) {
        let now = directkv_sys::cpu::thread_voluntary_switches();
        self.sync_thread_waits
            .fetch_add(now.wrapping_sub(*seen), Ordering::Relaxed);
        *seen = now;
    }

    /// Stops the sync thread after a last round (the server's shards have stopped).
    pub(crate) fn stop_syncer(&self) {
        let mut r = self.rounds.lock().unwrap_or_else(|e| e.into_inner());
        r.stop = true;
        self.work.notify_all();
    }
}

/// The shard's side of its log: appends a record per batch that wrote and writes it out at
/// once. Lives in `ShardCtx` (`RefCell`), used only on the shard's thread.
pub(crate) struct ShardLog {
    pub(crate) writer: LogWriter,
    pub(crate) store: Arc<Store>,
    shard: usize,
}

impl ShardLog {
    pub(crate) fn new(shard: usize, writer: LogWriter, store: Arc<Store>) -> ShardLog {
        ShardLog {
            writer,
            store,
            shard,
        }
    }

    /// Why writes are refused, if they are: the engine's error for them.
    #[inline]
    pub(crate) fn refusing(&self) -> Option<directkv_engine::OpError> {
        if self.store.is_failed() || self.writer.failure().is_some() {
            return Some(directkv_engine::OpError::NotLogged("see the server log"));
        }
        None
    }

    /// Appends the record `encode` writes (it may decline: nothing to log) and writes it out.
    /// Err: it could not be written, the store is failed, and the batch's writes must not be
    /// acknowledged.
    #[inline]
    pub(crate) fn record(
        &mut self,
        encode: impl FnOnce(&mut Vec<u8>) -> bool,
    ) -> Result<(), directkv_engine::OpError> {
        let appended = self.writer.append_if(encode).map_err(|e| self.failed(e))?;
        if appended.is_none() {
            return Ok(());
        }
        self.writer.set_ahead(match self.store.policy() {
            AppendFsync::Always => directkv_persist::log::Ahead::Faults,
            AppendFsync::Everysec | AppendFsync::No => directkv_persist::log::Ahead::Zeros,
        });
        let before = self.writer.file_bytes();
        let lsn = self.writer.write_out().map_err(|e| self.failed(e))?;
        let st = &self.store.stats.persist;
        st.records.fetch_add(1, Ordering::Relaxed);
        st.writes.fetch_add(1, Ordering::Relaxed);
        st.log_bytes
            .fetch_add(self.writer.file_bytes() - before, Ordering::Relaxed);
        self.store.written(self.shard, lsn);
        Ok(())
    }

    #[cold]
    fn failed(&mut self, e: LogError) -> directkv_engine::OpError {
        // The batch ran in memory and its record is not in the log: every later record would
        // replay against a store that differs from the one it was made on, so any failure,
        // a record over the limit included, fails the store.
        self.writer.fail(&e.to_string());
        self.store.fail(e.to_string());
        directkv_engine::OpError::NotLogged("see the server log")
    }
}

/// The log limits the server writes and reads with: a record holds one batch, which a
/// connection's input (`conn_input_bytes_max`) or a transaction (`multi_bytes_max`) bounds,
/// plus the keys evicted around it; 1 GiB leaves room for both at their defaults' maxima.
pub const LOG_RECORD_BYTES_MAX: usize = 1 << 30;

pub(crate) fn log_limits() -> directkv_persist::log::LogLimits {
    directkv_persist::log::LogLimits {
        record_bytes_max: LOG_RECORD_BYTES_MAX,
        pending_bytes_max: LOG_RECORD_BYTES_MAX + directkv_persist::log::RECORD_HEADER_BYTES,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DELAY: Duration = Duration::from_micros(500);

    #[test]
    fn a_lone_client_never_waits() {
        let t = Instant::now();
        let mut g = Grouping::default();
        // No round yet: the first ask begins one at once.
        assert_eq!(g.hold_until(1, DELAY), None);
        // Each round answers the one ask; the next ask is all the next round expects.
        for n in 1..100u64 {
            assert_eq!(g.round_ended(n, n, t), 1);
            assert_eq!(g.hold_until(n + 1, DELAY), None);
        }
    }

    #[test]
    fn alternating_groups_are_merged() {
        let t = Instant::now();
        let mut g = Grouping::default();
        // A round answered A1 A2 while B1 B2 asked: the next waits for A1 A2 too.
        assert_eq!(g.round_ended(2, 4, t), 2);
        assert_eq!(g.expect(), 6);
        assert_eq!(g.hold_until(4, DELAY), Some(t + DELAY));
        assert_eq!(g.hold_until(5, DELAY), Some(t + DELAY));
        assert_eq!(g.hold_until(6, DELAY), None);
        // That round took all four, nobody asked during it: the next waits for four.
        assert_eq!(g.round_ended(6, 6, t), 4);
        assert_eq!(g.expect(), 10);
        assert_eq!(g.hold_until(9, DELAY), Some(t + DELAY));
        assert_eq!(g.hold_until(10, DELAY), None);
    }

    #[test]
    fn a_client_that_stops_asking_is_forgotten_after_one_round() {
        let t = Instant::now();
        let mut g = Grouping::default();
        g.round_ended(4, 4, t);
        // Three of the four come back; the round begins at the limit with three.
        assert!(g.hold_until(7, DELAY).is_some());
        assert_eq!(g.round_ended(7, 7, t), 3);
        assert_eq!(g.hold_until(10, DELAY), None);
    }

    #[test]
    fn no_delay_is_todays_behaviour() {
        let t = Instant::now();
        let mut g = Grouping::default();
        g.round_ended(2, 4, t);
        assert_eq!(g.hold_until(4, Duration::ZERO), None);
    }
}
