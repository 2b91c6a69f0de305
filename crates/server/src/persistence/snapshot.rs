//! Snapshots while serving (issue 22 items 2 and 4): the steps of one shard's snapshot, and
//! the rounds (BGSAVE, SAVE, SHUTDOWN SAVE) that ask every shard for one.
//!
//! ```text
//!   shard i, between two batches (one instant: no record is written in between):
//!     rotate   create log-i-(g+1) (first Lsn = next Lsn, g the manifest's generation),
//!              header written, no wait for the disk; swap the writer; hand the sync thread
//!              the rotation (`Store::rotate`), which it completes in its next round, asked
//!              for at once, before it counts any record of the new log durable:
//!                sync the old log whole, sync the new log's header,
//!                MANIFEST: shard i = old snapshot + old logs + new log   (durable)
//!     begin    ImageWriter::begin: snap-i-(g+1), header Lsn = the old log's last record
//!   then a step at a time, yielding between steps (the shard keeps serving; the engine
//!   copies a bucket before its first write, so the image stays the store at `begin`):
//!     step     ImageWriter::step(engine, SNAPSHOT_STEP_BUCKETS)
//!   at the end:
//!     finish   last block, trailer, fdatasync, directory fsync
//!              the rotation completed first if the sync thread has not done it yet
//!     commit   manifest lock: MANIFEST: shard i = new snapshot + new log only  (durable)
//!     remove   the old snapshot and the old logs
//! ```
//!
//! **Crashes.** Each step leaves a directory that recovery (`recover.rs`) loads to the same
//! store: before the rotation's manifest rename, the old manifest names the old files, and
//! the new log, which may hold records acknowledged under `everysec` or `no` (written, not
//! yet durable), continues the shard's chain: recovery adopts it (names it, then loads it);
//! a power loss in that window loses at most what `everysec` may (the rotation's round
//! comes at once), and under `always` no reply of a record in the new log leaves before the
//! round that named it; between the rotation and the commit,
//! the old files plus the new log (records continue from the old log's last); after the
//! commit, the new snapshot (which includes every record of the old logs) and the new log.
//! A half-written snapshot is never named. The test `crash_at_every_step_loads_the_same_keys`
//! crashes at every file operation of a snapshot, and
//! `crash_at_every_step_with_the_rotation_completed_between_batches` with the rotation's
//! steps between two batches, as the sync thread takes them.
//!
//! **Failures.** An error writing the image aborts it (the engine stops copying), removes the
//! partial file and keeps the old files: the store is as before, with one more log in its
//! chain. An error storing a manifest after its rename may leave either manifest in place,
//! and a log that cannot be synced may have lost records, and an error completing a rotation
//! leaves a new log that records went to unnamed, so those fail the store as a log
//! failure does (writes refused with MISCONF, reads served). FLUSHALL replaces the engine
//! during a snapshot: the snapshot is given up (the flush's record is in the new log, so the
//! old files stay right) and reported as failed.
//!
//! **Automatic snapshots** keep the log from growing for ever: a shard snapshots itself when
//! its current log has passed `auto_snapshot_log_bytes` and is at least as large as its last
//! snapshot file (Redis's `auto-aof-rewrite-min-size` with `auto-aof-rewrite-percentage 100`,
//! the base being the image: a snapshot then writes at most as many bytes as the log it
//! lets go). Checked every `AUTO_CHECK_INTERVAL` by the shard's snapshot task, off the batch
//! path. Unlike Redis's rewrite (a forked child, on another core), a snapshot takes its shard's
//! own time, so at a high write rate that rule alone would have a shard snapshot again every
//! second or two; `auto_snapshot_cpu_percent` (default 1) makes the next automatic one wait
//! until the last one's work (its rotation, steps and fdatasync, in CPU time:
//! `snapshot_work_us`) is that share of the time since it began (`shard::snapshot::
//! auto_not_before`). The log grows meanwhile, at most to `LOG_GROWTH_OVER_BUDGET` times the
//! size rule's bytes: then a snapshot starts anyway (`shard::snapshot::budget_over`).
//!
//! Non-goals: fork; a snapshot of several shards at one common instant (each shard's image
//! is consistent with its own log, which is what recovery needs).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use directkv_engine::Engine;
use directkv_persist::image::ImageWriter;
use directkv_persist::log::{LogHeader, LogWriter};
use directkv_persist::manifest::{self, ManifestError, ShardFiles};
use directkv_persist::snapshot::{SnapshotHeader, SnapshotOptions, SnapshotSummary};
use tokio::sync::{watch, Notify};

use super::{log_limits, Rotation, ShardLog, Store};

/// Main buckets of the index one step of a snapshot reads: the granularity at which the
/// shard's task checks the clock within a slice (`shard::snapshot::SNAPSHOT_SLICE`), a few
/// microseconds of work (docs/persistence.md "While one runs").
pub const SNAPSHOT_STEP_BUCKETS: u64 = 16;
/// How often a shard checks whether its log has grown enough for an automatic snapshot.
pub const AUTO_CHECK_INTERVAL: Duration = Duration::from_millis(100);

/// Redis's replies (`bgsaveCommand`, `saveCommand`).
pub const ERR_IN_PROGRESS: &str = "ERR Background save already in progress";
pub const ERR_AUTO_IN_PROGRESS: &str = "ERR Another child process is active (AOF?): can't BGSAVE right now. Use BGSAVE SCHEDULE in order to schedule a BGSAVE whenever possible.";
/// SAVE and BGSAVE with `appendonly no` (Redis would write an RDB file; directkv's snapshots
/// are part of its log's store, so there is nothing to write them into).
pub const ERR_PERSISTENCE_OFF: &str =
    "ERR persistence is off (appendonly no): there is no store to snapshot; start with --appendonly yes";

/// Snapshot progress and totals, rows in `stats::COUNTERS` (section Persistence).
#[derive(Debug, Default)]
pub(crate) struct SnapshotCounters {
    /// Shards taking a snapshot now.
    pub(crate) in_progress: AtomicU64,
    /// Main buckets the running snapshots have emitted, and their total.
    pub(crate) buckets_done: AtomicU64,
    pub(crate) buckets_total: AtomicU64,
    /// Shard snapshots finished (named by the manifest) and given up.
    pub(crate) done: AtomicU64,
    pub(crate) failed: AtomicU64,
    /// Of the finished ones, those a shard took on its own (`auto_snapshot_log_bytes`).
    pub(crate) auto: AtomicU64,
    /// Bytes of the snapshot files written.
    pub(crate) bytes: AtomicU64,
    /// Most bytes a snapshot held besides the store (copies of buckets, the bitmap).
    pub(crate) extra_bytes_peak: AtomicU64,
    /// CPU time snapshots took (rotations and steps on the shards' threads, the images'
    /// fdatasyncs on blocking threads), us.
    pub(crate) work_us: AtomicU64,
}

/// One shard's side: the rounds it was asked for, and its last snapshot's size.
#[derive(Debug, Default)]
struct ShardSide {
    /// The last round this shard was asked to snapshot for.
    asked: AtomicU64,
    wake: Notify,
    running: AtomicBool,
    /// Bytes of the shard's last snapshot file (the base of the automatic rule).
    last_image_bytes: AtomicU64,
    /// Bytes of the shard's current log as its snapshot task last looked (INFO
    /// `aof_current_size`): the size its last automatic decision was made on.
    log_bytes: AtomicU64,
}

/// A round: every shard snapshots once.
#[derive(Debug, Default)]
struct Round {
    id: u64,
    running: bool,
    /// Shards that have not finished this round.
    left: usize,
    ok: bool,
    started: Option<Instant>,
}

/// The snapshot state the server shares: rounds, per-shard requests, INFO's fields.
#[derive(Debug)]
pub(crate) struct Snapshots {
    shards: Vec<ShardSide>,
    round: Mutex<Round>,
    /// (last round finished, whether it succeeded), for SAVE's wait.
    done_tx: watch::Sender<(u64, bool)>,
    /// Unix seconds of the last successful round (the start time until one; Redis's lastsave).
    last_save_unix: AtomicU64,
    last_ok: AtomicBool,
    /// Seconds the last round took (-1: none yet).
    last_secs: AtomicI64,
    /// Rounds that succeeded (Redis's `rdb_saves`).
    saves: AtomicU64,
    /// The log's record count at the last successful round (`rdb_changes_since_last_save`).
    records_at_save: AtomicU64,
}

/// Unix seconds now.
pub(crate) fn unix_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis() as u64
}

/// How a BGSAVE request went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RoundStart {
    /// A new round, with its id.
    New(u64),
    /// A round runs already.
    InProgress,
    /// A shard is taking an automatic snapshot (BGSAVE without SCHEDULE is refused, as Redis
    /// refuses it during an AOF rewrite).
    AutoRunning,
}

impl Snapshots {
    pub(crate) fn new(shards: usize) -> Snapshots {
        let (done_tx, _) = watch::channel((0, true));
        Snapshots {
            shards: (0..shards).map(|_| ShardSide::default()).collect(),
            round: Mutex::new(Round::default()),
            done_tx,
            last_save_unix: AtomicU64::new(unix_secs()),
            last_ok: AtomicBool::new(true),
            last_secs: AtomicI64::new(-1),
            saves: AtomicU64::new(0),
            records_at_save: AtomicU64::new(0),
        }
    }

    /// Starts a round unless one runs; `schedule` (BGSAVE SCHEDULE, SAVE) lets it start while
    /// automatic snapshots run: each shard takes its part when its own is done.
    pub(crate) fn start_round(&self, schedule: bool) -> RoundStart {
        let mut r = self.round.lock().unwrap_or_else(|e| e.into_inner());
        if r.running {
            return RoundStart::InProgress;
        }
        if !schedule
            && self
                .shards
                .iter()
                .any(|s| s.running.load(Ordering::Acquire))
        {
            return RoundStart::AutoRunning;
        }
        r.id += 1;
        r.running = true;
        r.left = self.shards.len();
        r.ok = true;
        r.started = Some(Instant::now());
        let id = r.id;
        drop(r);
        for s in &self.shards {
            s.asked.store(id, Ordering::Release);
            s.wake.notify_one();
        }
        RoundStart::New(id)
    }

    /// Waits until round `id` ends; true when every shard's snapshot succeeded.
    pub(crate) async fn wait(&self, id: u64) -> bool {
        let mut rx = self.done_tx.subscribe();
        let ok = rx
            .wait_for(|(done, _)| *done >= id)
            .await
            .is_ok_and(|d| d.1);
        ok
    }

    /// Shard `shard`'s part of the round it was asked for ended (`ok`); the last one ends
    /// the round.
    fn shard_done(&self, round: u64, ok: bool, records: u64) {
        let mut r = self.round.lock().unwrap_or_else(|e| e.into_inner());
        if !r.running || r.id != round {
            return;
        }
        r.ok &= ok;
        r.left -= 1;
        if r.left > 0 {
            return;
        }
        r.running = false;
        let secs = r.started.map_or(0, |t| t.elapsed().as_secs()) as i64;
        self.last_secs.store(secs, Ordering::Relaxed);
        self.last_ok.store(r.ok, Ordering::Relaxed);
        if r.ok {
            self.saves.fetch_add(1, Ordering::Relaxed);
            self.last_save_unix.store(unix_secs(), Ordering::Relaxed);
            self.records_at_save.store(records, Ordering::Relaxed);
        }
        let (id, ok) = (r.id, r.ok);
        drop(r);
        self.done_tx.send_replace((id, ok));
    }

    /// LASTSAVE: unix seconds of the last successful round (the start time before one).
    pub(crate) fn last_save_unix(&self) -> u64 {
        self.last_save_unix.load(Ordering::Relaxed)
    }

    /// Whether a round runs, and for how long (seconds).
    pub(crate) fn round_running(&self) -> Option<u64> {
        let r = self.round.lock().unwrap_or_else(|e| e.into_inner());
        r.running
            .then(|| r.started.map_or(0, |t| t.elapsed().as_secs()))
    }
}

/// A shard's snapshot between `begin` and `finish`.
pub(crate) struct Running {
    image: ImageWriter,
    path: PathBuf,
    /// The shard's files when the log was rotated, and the new log's name.
    old: ShardFiles,
    new_log: String,
    snap_name: String,
    /// Set when the snapshot repairs a failed store.
    repair: Option<Repair>,
    pub(crate) started: Instant,
}

/// A repair's part of a snapshot (`persistence` module comment): no rotation of the old log,
/// whose files it replaces whole.
struct Repair {
    /// `Store::repair_mark` when it began.
    mark: u64,
    /// The generation in its files' names: its manifest's is at least this.
    generation: u64,
    /// The new log's file: its header is synced before the manifest names it.
    new: Box<dyn directkv_persist::fs::FsFile>,
    /// A rotation's new log that no manifest named, left by the failure: removed at the end.
    stale: Option<String>,
}

/// Why a snapshot did not finish.
#[derive(Debug)]
pub(crate) struct SnapshotFailed(pub(crate) String);

impl std::fmt::Display for SnapshotFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn dir_path(store: &Store, name: &str) -> PathBuf {
    store.dir.join(name)
}

/// Stores `m` as the manifest. An error whose outcome is unknown (the rename happened, or may
/// have: its directory fsync failed) fails the store; an error before the rename leaves the
/// old manifest standing, and only the caller's step is given up.
/// Err carries whether the outcome is unknown (the new manifest may stand).
fn store_manifest(store: &Store, m: &manifest::Manifest) -> Result<(), (SnapshotFailed, bool)> {
    match manifest::store(&*store.fs, &store.dir, m) {
        Ok(()) => Ok(()),
        Err(e) => {
            let unknown = matches!(&e, ManifestError::Io { op, .. } if *op == "fsync directory");
            if unknown {
                store.fail(format!("storing the manifest: {e}"));
            }
            Err((
                SnapshotFailed(format!("storing the manifest: {e}")),
                unknown,
            ))
        }
    }
}

/// Step a and b: rotates shard `shard`'s log and begins the image of `engine` at this point.
/// Call between two batches on the shard's thread, with nothing written to `log` since the
/// last batch's record (records are written out before `execute` returns).
pub(crate) fn begin(
    engine: &mut Engine,
    log: &mut ShardLog,
    shard: usize,
) -> Result<Running, SnapshotFailed> {
    let store = log.store.clone();
    // A failed store: this snapshot is a repair (module comment of `persistence`): the old
    // files are not continued, so nothing waits on them.
    let repair = store.repair_mark();
    let fs = &*store.fs;
    if repair.is_none() {
        // A rotation of this shard still waiting for the disk (a snapshot given up just after
        // it began): completed here, so that the generation below is past it.
        store
            .complete_rotation(shard)
            .map_err(|e| SnapshotFailed(format!("the last log rotation: {e}")))?;
        // Records are written out before `execute` returns (`ShardLog::record`): the old log
        // holds every one, and what the rotation syncs of it is all of them.
        debug_assert_eq!(log.writer.pending_bytes(), 0, "a rotation between batches");
    }
    // After a failed write the writer's next Lsn may be past its last record written (the
    // failed one's): the image holds that batch (it ran in memory), and the new log follows it.
    let first_lsn = log.writer.next_lsn();
    // Names of generation g+1, g the manifest's: unique for this shard, whose last rotation
    // is named (stored at g or before).
    // The view, not the manifest's lock, which another shard's update holds through its
    // fsyncs; this shard's own updates (its last rotation, its last commit) are in it.
    let view = store.manifest_view();
    let mut generation = view.generation + 1;
    if repair.is_some() {
        // A rotation whose manifest the failure stopped holds this generation's log name (and
        // maybe acknowledged records): the repair's files take the next free generation, and
        // its manifest's generation is at least theirs (`finish`).
        while dir_path(&store, &manifest::log_file_name(shard, generation)).exists()
            || dir_path(&store, &manifest::snapshot_file_name(shard, generation)).exists()
        {
            generation += 1;
        }
    }
    let new_log = manifest::log_file_name(shard, generation);
    let path = dir_path(&store, &new_log);
    if path.exists() {
        // Never removed here: it may be a named log (a bug elsewhere, reported as such).
        return Err(SnapshotFailed(format!(
            "the new log {new_log} exists already (generation {generation})"
        )));
    }
    let header = LogHeader {
        shard: shard as u32,
        first_lsn,
    };
    // Created and its header written without waiting for the disk: the waits (the old log
    // synced whole, the new one's header, the manifest naming it) are the sync thread's,
    // done before any record of the new log counts as durable (`Store::complete_rotation`).
    // A file left half made (a full disk) is named by no manifest: removed, so that the next
    // try can take the same name (recovery removes one a crash leaves).
    let writer = LogWriter::create_unsynced(fs, &path, header, log_limits()).map_err(|e| {
        remove_partial(&store, &path);
        SnapshotFailed(format!("creating the new log: {e}"))
    })?;
    let handles = (|| {
        Ok::<_, directkv_persist::log::LogError>((
            log.writer.sync_handle()?,
            writer.sync_handle()?,
            writer.sync_handle()?,
        ))
    })();
    let (old_handle, new_handle, current) = match handles {
        Ok(h) => h,
        Err(e) => {
            drop(writer);
            remove_partial(&store, &path);
            return Err(SnapshotFailed(format!("dup of a log file: {e}")));
        }
    };
    let old = view.shards[shard].clone();
    log.writer = writer;
    let repair = match repair {
        // The sync thread syncs the new log from now on; it is named only with the image.
        Some(mark) => Some(Repair {
            mark,
            generation,
            new: new_handle,
            stale: store.replace_log(shard, current),
        }),
        None => {
            store.rotate(
                shard,
                current,
                Rotation {
                    old: old_handle,
                    new: new_handle,
                    new_log: new_log.clone(),
                },
            );
            None
        }
    };
    let snap_name = manifest::snapshot_file_name(shard, generation);
    let path = dir_path(&store, &snap_name);
    let header = SnapshotHeader {
        shard: shard as u32,
        created_ms: unix_ms(),
        lsn: first_lsn - 1,
        cas_next: 0,
    };
    let image = match ImageWriter::begin(fs, &path, engine, header, SnapshotOptions::default()) {
        Ok(i) => i,
        Err(e) => {
            remove_partial(&store, &path);
            if repair.is_some() {
                // Named by no manifest; the next repair takes the same name.
                remove_partial(&store, &dir_path(&store, &new_log));
            }
            return Err(SnapshotFailed(format!("creating {snap_name}: {e}")));
        }
    };
    Ok(Running {
        image,
        path,
        old,
        new_log,
        snap_name,
        repair,
        started: Instant::now(),
    })
}

fn remove_partial(store: &Store, path: &Path) {
    match store.fs.remove(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        // Recovery removes it (the manifest does not name it).
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "cannot remove a partial snapshot")
        }
    }
}

impl Running {
    /// One step; true when every entry is in the file. On an error the image is given up.
    pub(crate) fn step(
        &mut self,
        engine: &mut Engine,
        store: &Store,
    ) -> Result<bool, SnapshotFailed> {
        self.image.step(engine, SNAPSHOT_STEP_BUCKETS).map_err(|e| {
            remove_partial(store, &self.path);
            SnapshotFailed(format!("writing {}: {e}", self.snap_name))
        })
    }

    /// Where the image stands: (buckets emitted, buckets, extra bytes held).
    pub(crate) fn progress(&self, engine: &Engine) -> Option<(u64, u64, u64)> {
        self.image
            .progress(engine)
            .map(|p| (p.cursor, p.buckets, p.extra_bytes))
    }

    /// Gives the image up (FLUSHALL, stop): the engine stops copying, the file is removed.
    pub(crate) fn abort(self, engine: &mut Engine, store: &Store) {
        self.image.abort(engine);
        remove_partial(store, &self.path);
        if self.repair.is_some() {
            remove_partial(store, &dir_path(store, &self.new_log));
        }
    }

    /// Step c: makes the image durable, names it with the new log alone in the manifest, and
    /// removes the files the old manifest named.
    pub(crate) fn finish(
        self,
        store: &Store,
        shard: usize,
    ) -> Result<SnapshotSummary, SnapshotFailed> {
        let repair_log = self
            .repair
            .is_some()
            .then(|| dir_path(store, &self.new_log));
        let mut may_be_named = false;
        let done = self.finish_steps(store, shard, &mut may_be_named);
        if let (Err(_), Some(path), false) = (&done, repair_log, may_be_named) {
            // A repair given up with the old manifest standing: its new log is named by none
            // (the shard's writes stay refused), and the next try takes the same name.
            remove_partial(store, &path);
        }
        done
    }

    /// `finish`'s steps; `may_be_named` is set when the manifest's update failed after its
    /// rename may have happened (a manifest that names the new files may stand).
    fn finish_steps(
        self,
        store: &Store,
        shard: usize,
        may_be_named: &mut bool,
    ) -> Result<SnapshotSummary, SnapshotFailed> {
        let fs = &*store.fs;
        let summary = match self.image.finish(fs) {
            Ok(s) => s,
            Err(e) => {
                remove_partial(store, &self.path);
                return Err(SnapshotFailed(format!("finishing {}: {e}", self.snap_name)));
            }
        };
        let mut repair = self.repair;
        match &mut repair {
            // A repair: the new log's header durable before the manifest names it (the
            // manifest's directory fsync makes its name durable).
            Some(r) => {
                if let Err(e) = r.new.sync_data() {
                    remove_partial(store, &self.path);
                    return Err(SnapshotFailed(format!("fdatasync of the new log: {e}")));
                }
            }
            // The rotation's manifest first (if the sync thread has not stored it yet): this
            // one replaces its entry, and the old log must be whole and the new one's header
            // durable before a manifest names the new log.
            None => {
                if let Err(e) = store.complete_rotation(shard) {
                    remove_partial(store, &self.path);
                    return Err(SnapshotFailed(format!("the log rotation: {e}")));
                }
            }
        }
        {
            let mut m = store.manifest.lock().unwrap_or_else(|e| e.into_inner());
            let mut next = m.clone();
            next.generation += 1;
            if let Some(r) = &repair {
                // Later files' names (generation + 1) must pass this repair's.
                next.generation = next.generation.max(r.generation);
            }
            next.shards[shard] = ShardFiles {
                snapshot: Some(self.snap_name.clone()),
                logs: vec![self.new_log.clone()],
            };
            if let Err((e, unknown)) = store_manifest(store, &next) {
                // Before the rename (a full disk writing it): the old manifest stands and
                // names neither new file. After it, either may stand: both files are kept.
                if !unknown {
                    remove_partial(store, &self.path);
                } else {
                    *may_be_named = true;
                }
                return Err(e);
            }
            store.manifest_stored(&next);
            *m = next;
        }
        let stale = repair.as_ref().and_then(|r| r.stale.as_ref());
        for name in self.old.snapshot.iter().chain(&self.old.logs).chain(stale) {
            if let Err(e) = fs.remove(&dir_path(store, name)) {
                // Named by no manifest now: recovery removes it.
                tracing::warn!(file = %name, error = %e, "cannot remove a file the snapshot replaced");
            }
        }
        if let Some(r) = repair {
            store.repaired(shard, r.mark);
        }
        Ok(summary)
    }
}

/// What asked for a shard's snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Why {
    /// A round (BGSAVE, SAVE, SHUTDOWN SAVE), by id.
    Round(u64),
    /// The log passed `auto_snapshot_log_bytes`.
    Auto,
    /// The store failed: a snapshot into new files repairs it (`persistence` module comment).
    Repair,
}

impl Snapshots {
    /// What shard `shard` should snapshot for now, if anything: a round it was asked for
    /// after `served` (the last it took part in), else an automatic snapshot when its log
    /// `log_bytes` long passes the rule (`limit` 0: off).
    pub(crate) fn next(
        &self,
        shard: usize,
        served: u64,
        log_bytes: u64,
        limit: u64,
    ) -> Option<Why> {
        let s = &self.shards[shard];
        let asked = s.asked.load(Ordering::Acquire);
        if asked > served {
            return Some(Why::Round(asked));
        }
        let base = s.last_image_bytes.load(Ordering::Relaxed);
        (limit > 0 && log_bytes >= limit && log_bytes >= base).then_some(Why::Auto)
    }

    /// The size of shard `shard`'s last snapshot file (0 before its first).
    pub(crate) fn last_image_bytes(&self, shard: usize) -> u64 {
        self.shards[shard].last_image_bytes.load(Ordering::Relaxed)
    }

    /// Shard `shard`'s current log is `bytes` long (its snapshot task's look before deciding).
    pub(crate) fn publish_log_bytes(&self, shard: usize, bytes: u64) {
        self.shards[shard].log_bytes.store(bytes, Ordering::Relaxed);
    }

    /// Waits until shard `shard` is asked for a round or `timeout` passes.
    pub(crate) async fn asked(&self, shard: usize, timeout: Duration) {
        let _ = tokio::time::timeout(timeout, self.shards[shard].wake.notified()).await;
    }

    pub(crate) fn set_running(&self, shard: usize, running: bool) {
        self.shards[shard].running.store(running, Ordering::Release);
    }

    /// Shard `shard`'s snapshot for `why` ended; `image_bytes` its file's size when it
    /// succeeded; `records` the store's record count (for the round's bookkeeping).
    pub(crate) fn ended(&self, shard: usize, why: Why, image_bytes: Option<u64>, records: u64) {
        if let Some(b) = image_bytes {
            self.shards[shard]
                .last_image_bytes
                .store(b, Ordering::Relaxed);
        }
        if let Why::Round(id) = why {
            self.shard_done(id, image_bytes.is_some(), records);
        }
    }

    /// INFO's Redis fields (`rdb_*`) and directkv's own, appended to `s`.
    pub(crate) fn render(&self, s: &mut String, records_now: u64) {
        use std::fmt::Write;
        let running = self.round_running();
        let changes = records_now.saturating_sub(self.records_at_save.load(Ordering::Relaxed));
        // Redis's sizes of its AOF: here the shards' logs (as their tasks last looked, at most
        // AUTO_CHECK_INTERVAL ago) and the snapshots they are compared with.
        let sum = |f: fn(&ShardSide) -> &AtomicU64| -> u64 {
            self.shards
                .iter()
                .map(|s| f(s).load(Ordering::Relaxed))
                .sum()
        };
        let _ = write!(
            s,
            "aof_current_size:{}\r\naof_base_size:{}\r\n",
            sum(|s| &s.log_bytes),
            sum(|s| &s.last_image_bytes)
        );
        let _ = write!(
            s,
            "rdb_changes_since_last_save:{changes}\r\nrdb_bgsave_in_progress:{}\r\nrdb_last_save_time:{}\r\nrdb_last_bgsave_status:{}\r\nrdb_last_bgsave_time_sec:{}\r\nrdb_current_bgsave_time_sec:{}\r\nrdb_saves:{}\r\n",
            u8::from(running.is_some()),
            self.last_save_unix(),
            if self.last_ok.load(Ordering::Relaxed) { "ok" } else { "err" },
            self.last_secs.load(Ordering::Relaxed),
            running.map_or(-1, |s| s as i64),
            self.saves.load(Ordering::Relaxed),
        );
    }
}

#[cfg(test)]
mod tests {
    //! Crashes at every file operation of a snapshot and of its manifest updates (issue 22
    //! item 5): the shard's steps run here as the shard runs them, over `FaultFs`; after each
    //! crash, recovery (`recover.rs`) must load exactly the acknowledged writes.

    use std::collections::BTreeMap;
    use std::sync::Arc;

    use directkv_engine::{Op, Results};
    use directkv_persist::batch::{encode_record, RecordHead};
    use directkv_persist::fs::{Fault, FaultFs, Fs, RealFs};

    use super::*;
    use crate::config::{AppendFsync, ServerConfig};
    use crate::persistence::recover;

    const KEYS: usize = 300;

    struct TempDir(PathBuf);

    impl TempDir {
        fn new(name: &str) -> TempDir {
            let p = std::env::temp_dir().join(format!("dkv-snap-{}-{name}", std::process::id()));
            let _ = std::fs::remove_dir_all(&p);
            TempDir(p)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn cfg(dir: &Path) -> ServerConfig {
        ServerConfig {
            dir: dir.to_path_buf(),
            shards: 1,
            port: 0,
            memory_bytes: 16 << 20,
            ..ServerConfig::default()
        }
    }

    /// Shard 0 as the server runs it: recovered with the real file system, then served with
    /// `fs` (the steps of a snapshot, and the new logs' writes, go through it).
    fn open(dir: &Path, fs: Arc<dyn Fs>) -> (Engine, ShardLog) {
        let o = recover::open(&cfg(dir), Arc::new(RealFs)).expect("recovery");
        let store = Store::new(dir.to_path_buf(), fs, o.lock, o.manifest, &o.logs, {
            let stats = Arc::new(crate::stats::ServerStats::default());
            stats.live.set_appendfsync(AppendFsync::No);
            stats
        })
        .unwrap();
        let engine = o.engines.into_iter().next().unwrap();
        let log = o.logs.into_iter().next().unwrap();
        (engine, ShardLog::new(0, log, store))
    }

    /// One batch of puts, as `ShardCtx::execute` runs it; true when acknowledged (its record
    /// was written).
    fn put(engine: &mut Engine, log: &mut ShardLog, kvs: &[(Vec<u8>, Vec<u8>)]) -> bool {
        let ops: Vec<Op> = kvs.iter().map(|(k, v)| Op::put(k, v)).collect();
        let mut results = Results::with_capacity(ops.len(), 64);
        if log.refusing().is_some() {
            return false;
        }
        let now = crate::shard::expiry::now_ms();
        engine.set_now(now);
        let cas_before = engine.cas_next();
        engine.execute(&ops, &mut results);
        let head = RecordHead {
            now,
            flush: false,
            cas_before,
            cas_after: engine.cas_next(),
        };
        let e = &*engine;
        log.record(|out| {
            encode_record(
                out,
                &head,
                e.evicted_before_batch(),
                &ops,
                e.evicted_after_batch(),
            )
        })
        .is_ok()
    }

    fn batch(seq: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
        (0..7)
            .map(|i| {
                let k = (seq * 7 + i * 13) % KEYS;
                (
                    format!("k{k}").into_bytes(),
                    format!("v{seq}-{i}").into_bytes(),
                )
            })
            .collect()
    }

    /// Writes batches `from..to`, recording the acknowledged ones in `model`.
    fn write(
        engine: &mut Engine,
        log: &mut ShardLog,
        model: &mut BTreeMap<Vec<u8>, Vec<u8>>,
        seqs: std::ops::Range<usize>,
    ) {
        for seq in seqs {
            let kvs = batch(seq);
            if put(engine, log, &kvs) {
                model.extend(kvs);
            }
        }
    }

    /// A whole snapshot with batches between its steps; Err at the first failed step.
    fn snapshot(
        engine: &mut Engine,
        log: &mut ShardLog,
        model: &mut BTreeMap<Vec<u8>, Vec<u8>>,
        seq: &mut usize,
    ) -> Result<(), SnapshotFailed> {
        snapshot_with(engine, log, model, seq, None)
    }

    /// `snapshot`, with the log rotation completed (as the sync thread does in its round)
    /// after the batch of step `rotation_at` (None: by `finish`).
    fn snapshot_with(
        engine: &mut Engine,
        log: &mut ShardLog,
        model: &mut BTreeMap<Vec<u8>, Vec<u8>>,
        seq: &mut usize,
        rotation_at: Option<usize>,
    ) -> Result<(), SnapshotFailed> {
        let store = log.store.clone();
        let mut run = begin(engine, log, 0)?;
        // About eight steps, a batch between two (copy-before-write included): every file
        // operation of the snapshot and of those batches is a crash point.
        let budget = engine.scan_buckets().div_ceil(8);
        let mut steps = 0;
        loop {
            write(engine, log, model, *seq..*seq + 1);
            *seq += 1;
            if rotation_at == Some(steps) {
                // The sync thread's round: a failure fails the store (later batches refused).
                let _ = store.complete_rotation(0);
            }
            steps += 1;
            match run.image.step(engine, budget) {
                Ok(true) => break,
                Ok(false) => {}
                Err(e) => {
                    // As the shard's task gives a snapshot up.
                    run.abort(engine, &store);
                    return Err(SnapshotFailed(e.to_string()));
                }
            }
        }
        run.finish(&store, 0).map(|_| ())
    }

    fn check(dir: &Path, model: &BTreeMap<Vec<u8>, Vec<u8>>, what: &str) {
        let (mut engine, _log) = open(dir, Arc::new(RealFs));
        for k in 0..KEYS {
            let key = format!("k{k}").into_bytes();
            assert_eq!(
                engine.get(&key).unwrap(),
                model.get(&key).cloned(),
                "{what}: key k{k} differs after recovery"
            );
        }
    }

    /// A store of its own in `name` with batches 0..40 acknowledged (on the real file
    /// system), and the model of what they wrote.
    fn seeded(name: &str) -> (TempDir, BTreeMap<Vec<u8>, Vec<u8>>) {
        let dir = TempDir::new(name);
        let mut model = BTreeMap::new();
        let (mut engine, mut log) = open(&dir.0, Arc::new(RealFs));
        write(&mut engine, &mut log, &mut model, 0..40);
        (dir, model)
    }

    /// Crashes at every file operation of two snapshots (the second replaces a snapshot and a
    /// chain of logs), `rotation_at` of each as `snapshot_with` takes it; after each crash
    /// recovery loads exactly the acknowledged keys, and once no operation crashes the
    /// snapshots completed and the old files are gone.
    fn crash_at_every_step(tag: &str, rotation_at: [Option<usize>; 2]) {
        let mut n = 0u64;
        loop {
            let (dir, mut model) = seeded(&format!("{tag}-{n}"));
            let fs = FaultFs::new(Some(Fault::Crash(n)));
            let mut seq = 40;
            {
                let (mut engine, mut log) = open(&dir.0, Arc::new(fs.clone()));
                let first =
                    snapshot_with(&mut engine, &mut log, &mut model, &mut seq, rotation_at[0]);
                if first.is_ok() {
                    write(&mut engine, &mut log, &mut model, seq..seq + 5);
                    seq += 5;
                    let _ =
                        snapshot_with(&mut engine, &mut log, &mut model, &mut seq, rotation_at[1]);
                }
            }
            check(&dir.0, &model, &format!("crash at operation {n}"));
            if fs.ops_done() < n {
                // Every operation ran before the planned crash: the snapshots completed.
                let m = manifest::load(&RealFs, &dir.0).unwrap().unwrap();
                assert!(m.shards[0].snapshot.is_some(), "{m:?}");
                assert_eq!(m.shards[0].logs.len(), 1, "{m:?}");
                let files = std::fs::read_dir(&dir.0).unwrap().count();
                // MANIFEST, LOCK, the snapshot and the log.
                assert_eq!(files, 4, "old files were not removed");
                break;
            }
            n += 1;
            assert!(n < 10_000, "the snapshot never completes");
        }
        assert!(n > 20, "only {n} operations: the test crashed nothing");
    }

    #[test]
    fn crash_at_every_step_loads_the_same_keys() {
        crash_at_every_step("crash", [None, None]);
    }

    /// `crash_at_every_step_loads_the_same_keys` with the log rotation's waits done between
    /// two batches of the snapshot, as the sync thread does them (the old log synced, the new
    /// one's header, the manifest naming it), rather than by `finish`: a crash at each of
    /// those steps too loads every acknowledged key, nothing else (a crash before the
    /// manifest names the new log: recovery adopts it).
    #[test]
    fn crash_at_every_step_with_the_rotation_completed_between_batches() {
        crash_at_every_step("crash-rot", [Some(1), Some(0)]);
    }

    /// A server killed after a rotation and before its manifest was stored (the sync thread
    /// had not run): the acknowledged records of the new log are loaded, the new log is named
    /// from then on; an unnamed log that does not continue the chain is not adopted.
    #[test]
    fn a_rotation_cut_before_its_manifest_is_adopted_at_recovery() {
        let dir = TempDir::new("adopt");
        let mut model = BTreeMap::new();
        {
            let (mut engine, mut log) = open(&dir.0, Arc::new(RealFs));
            write(&mut engine, &mut log, &mut model, 0..30);
            let run = begin(&mut engine, &mut log, 0).unwrap();
            write(&mut engine, &mut log, &mut model, 30..60);
            let m = log.store.manifest.lock().unwrap().clone();
            assert_eq!(m.shards[0].logs.len(), 1, "not named yet");
            // kill -9: nothing more runs (the partial image is a leftover).
            std::mem::forget(run);
        }
        // A stray log of the shard that does not continue the chain (first Lsn 1).
        let stray = manifest::log_file_name(0, 99);
        LogWriter::create(
            &RealFs,
            &dir.0.join(&stray),
            LogHeader {
                shard: 0,
                first_lsn: 1,
            },
            log_limits(),
        )
        .unwrap();
        // `directkv check` says which unnamed log recovery adopts, and which is a leftover.
        let report = directkv_persist::check::check_dir(&dir.0, false).unwrap();
        let text = report.render();
        let new_log = manifest::log_file_name(0, 2);
        assert!(
            text.lines()
                .any(|l| l.starts_with(&new_log) && l.contains("recovery adds to the chain")),
            "{text}"
        );
        assert!(
            text.lines()
                .any(|l| l.starts_with(&stray) && l.contains("a leftover")),
            "{text}"
        );
        assert!(report.healthy(), "{text}");
        check(
            &dir.0,
            &model,
            "after a kill before the rotation's manifest",
        );
        let m = manifest::load(&RealFs, &dir.0).unwrap().unwrap();
        assert_eq!(m.shards[0].logs.len(), 2, "{m:?}");
        assert!(!dir.0.join(&stray).exists(), "the stray log is a leftover");
        // And again: the store is as it was.
        check(&dir.0, &model, "a second recovery");
    }

    /// A failed store (a batch ran in memory and its record was not written) repaired by a
    /// snapshot into new files, crashed at every file operation of the repair: recovery loads
    /// every acknowledged key; the failed batch's writes are there after a completed repair
    /// (its image holds them) and may be before; writes refused while failed are not. Once
    /// the repair completes, the store takes writes again, into the new log alone.
    #[test]
    fn a_repair_crashed_at_every_step_loads_the_acknowledged_keys() {
        repair_crash("repair", false);
    }

    /// `a_repair_crashed_at_every_step_loads_the_acknowledged_keys` with a snapshot's rotation
    /// pending when the store fails (its new log holds acknowledged records, no manifest names
    /// it yet): the repair's files take the next generation, the pending log is left alone
    /// until the repair's manifest replaces it, and a crash before that adopts it.
    #[test]
    fn a_repair_over_a_pending_rotation_crashed_at_every_step_loads_the_acknowledged_keys() {
        repair_crash("repair-rot", true);
    }

    /// A repair whose Nth write fails (a disk still full), for every N: it is given up
    /// without leaving a file behind (the image, its new log: a leftover image would keep the
    /// disk as full as before), writes stay refused, and the next repair succeeds and leaves
    /// exactly the shard's snapshot and log.
    #[test]
    fn a_repair_failing_at_any_write_leaves_no_file_and_the_next_one_works() {
        let mut n = 0u64;
        loop {
            let (dir, mut model) = seeded(&format!("repair-fail-{n}"));
            let fs = FaultFs::new(Some(Fault::FailWrite(n)));
            let (mut engine, mut log) = open(&dir.0, Arc::new(fs.clone()));
            log.store.fail("an injected write failure".into());
            let mut seq = 40;
            let first = snapshot(&mut engine, &mut log, &mut model, &mut seq);
            let files = || std::fs::read_dir(&dir.0).unwrap().count();
            if first.is_ok() {
                // The planned write came after the repair's last.
                assert!(!log.store.is_failed());
                assert_eq!(files(), 4);
                break;
            }
            assert!(
                log.store.is_failed(),
                "failed at write {n}, yet writes are taken"
            );
            // MANIFEST, LOCK, the old log: nothing of the repair is left.
            let names = || -> Vec<_> {
                std::fs::read_dir(&dir.0)
                    .unwrap()
                    .map(|e| e.unwrap().file_name())
                    .collect()
            };
            assert_eq!(
                files(),
                3,
                "write {n} failed: the repair left a file behind: {:?}",
                names()
            );
            snapshot(&mut engine, &mut log, &mut model, &mut seq)
                .unwrap_or_else(|e| panic!("the repair after write {n} failed: {e}"));
            assert!(!log.store.is_failed());
            write(&mut engine, &mut log, &mut model, seq..seq + 5);
            drop((engine, log));
            assert_eq!(files(), 4, "write {n} failed");
            check(
                &dir.0,
                &model,
                &format!("a repair failed at write {n}, then one completed"),
            );
            n += 1;
            assert!(n < 10_000, "the repair never completes");
        }
        assert!(n > 3, "only {n} writes: the test failed nothing");
    }

    fn repair_crash(tag: &str, rotation_pending: bool) {
        let mut n = 0u64;
        loop {
            let (dir, mut model) = seeded(&format!("{tag}-{n}"));
            let fs = FaultFs::new(Some(Fault::Crash(n)));
            let unlogged = batch(1000);
            let mut seq = 40;
            let repaired = {
                let (mut engine, mut log) = open(&dir.0, Arc::new(fs.clone()));
                if rotation_pending {
                    // A snapshot begun and given up, its rotation not completed: later
                    // batches go to its new log, which no manifest names yet.
                    if let Ok(run) = begin(&mut engine, &mut log, 0) {
                        let store = log.store.clone();
                        run.abort(&mut engine, &store);
                    }
                    write(&mut engine, &mut log, &mut model, seq..seq + 5);
                    seq += 5;
                }
                // The failure: a batch ran, its record was not written.
                let ops: Vec<Op> = unlogged.iter().map(|(k, v)| Op::put(k, v)).collect();
                engine.execute(&ops, &mut Results::with_capacity(ops.len(), 64));
                log.store.fail("an injected write failure".into());
                assert!(
                    !put(&mut engine, &mut log, &batch(seq)),
                    "a write was taken"
                );
                let repaired = snapshot(&mut engine, &mut log, &mut model, &mut seq).is_ok();
                assert_eq!(repaired, !log.store.is_failed(), "crash at operation {n}");
                if repaired {
                    model.extend(unlogged.iter().cloned());
                    write(&mut engine, &mut log, &mut model, seq..seq + 5);
                    assert_eq!(log.store.stats.persist.repairs.load(Ordering::Relaxed), 1);
                }
                repaired
            };
            let (mut engine, _log) = open(&dir.0, Arc::new(RealFs));
            for k in 0..KEYS {
                let key = format!("k{k}").into_bytes();
                let got = engine.get(&key).unwrap();
                let failed = unlogged
                    .iter()
                    .find(|(uk, _)| *uk == key)
                    .map(|kv| kv.1.clone());
                assert!(
                    got == model.get(&key).cloned()
                        || (!repaired && got.is_some() && got == failed),
                    "crash at operation {n}: key k{k} is {got:?} after recovery"
                );
            }
            drop((engine, _log));
            if fs.ops_done() < n {
                // Every operation ran: the repair's snapshot and log are the shard's files.
                assert!(repaired);
                let m = manifest::load(&RealFs, &dir.0).unwrap().unwrap();
                assert_eq!(m.shards[0].logs.len(), 1, "{m:?}");
                let files = std::fs::read_dir(&dir.0).unwrap().count();
                assert_eq!(files, 4, "old files were not removed");
                break;
            }
            n += 1;
            assert!(n < 10_000, "the repair never completes");
        }
        assert!(n > 10, "only {n} operations: the test crashed nothing");
    }

    #[test]
    fn a_failed_image_keeps_the_old_files_and_the_next_snapshot_works() {
        let dir = TempDir::new("fail");
        let mut model = BTreeMap::new();
        let (mut engine, mut log) = open(&dir.0, Arc::new(RealFs));
        write(&mut engine, &mut log, &mut model, 0..50);
        let mut seq = 50;
        snapshot(&mut engine, &mut log, &mut model, &mut seq).unwrap();
        // The image's blocks fail (a full disk) partway: given up, the partial file removed.
        let run = begin(&mut engine, &mut log, 0).unwrap();
        let path = run.path.clone();
        assert!(path.exists());
        run.abort(&mut engine, &log.store);
        assert!(!path.exists(), "the partial image stays");
        write(&mut engine, &mut log, &mut model, seq..seq + 10);
        seq += 10;
        // What the sync thread does in its next round: the rotation named.
        log.store.complete_rotation(0).unwrap();
        let m = log.store.manifest.lock().unwrap().clone();
        assert_eq!(
            m.shards[0].logs.len(),
            2,
            "the rotation's log is in the chain"
        );
        snapshot(&mut engine, &mut log, &mut model, &mut seq).unwrap();
        drop((engine, log));
        check(&dir.0, &model, "after an aborted and a complete snapshot");
    }
}
