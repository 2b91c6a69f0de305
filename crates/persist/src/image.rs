//! An engine's image in a snapshot file, and back (issue 22 items 2 and 3): the glue between
//! the engine's snapshot and load (`directkv_engine::Engine::snapshot_begin` / `snapshot_step`
//! / `load_entries`) and the file format of `snapshot.rs`.
//!
//! ```text
//!   ImageWriter::begin   engine.snapshot_begin() (the point: now, cas_next); create the file
//!   ImageWriter::step    between batches: engine.snapshot_step(budget) -> SnapshotWriter::add
//!   ImageWriter::finish  last block, trailer, fdatasync, directory fsync
//!   write_image          the three in one loop, for a caller with nothing else to run
//!
//!   load_image           snapshot::read -> groups of entries -> engine.load_entries;
//!                        restores cas_next; counts what was loaded and what had expired
//!                        (`load_image_observed`: the same, reporting progress per group)
//! ```
//!
//! The shard calls `step` between its batches with a budget of main buckets; the engine copies
//! a bucket's chain before its first change, so the file is the store at `begin` whatever the
//! batches in between do. An error (a write failing) ends the snapshot in the engine too: the
//! file is then incomplete (no trailer), refused by any reader, and the caller removes it. The
//! manifest is not touched here: naming the file is the caller's step after `finish`.
//!
//! Non-goals: choosing when to snapshot or the step budget (the server); threads.

use std::path::Path;

use directkv_engine::{Engine, SnapEntry, SnapPoint, SnapProgress};

use crate::fs::Fs;
use crate::snapshot::{
    self, Entry, ItemMeta, SnapshotError, SnapshotHeader, SnapshotLimits, SnapshotOptions,
    SnapshotSummary, SnapshotWriter,
};

/// Default step budget of [`write_image`], in main buckets: about 64 KiB of index read per
/// step, so a step costs tens of microseconds and a caller between batches stays responsive.
pub const IMAGE_STEP_BUCKETS_DEFAULT: u64 = 1024;
/// Entries [`load_image`] hands the engine at once (their buckets are prefetched together).
pub const LOAD_BATCH_LEN: usize = 64;

/// A snapshot file being written from an engine, a step at a time.
pub struct ImageWriter {
    writer: SnapshotWriter,
    point: SnapPoint,
    shard: u32,
}

impl ImageWriter {
    /// Starts the engine's snapshot and creates `path` (it must not exist) with `header`
    /// (`shard`, `lsn`: the last log record the image includes, `created_ms`), whose
    /// `cas_next` is replaced by the point's. On an error the engine's snapshot is aborted.
    pub fn begin(
        fs: &dyn Fs,
        path: &Path,
        engine: &mut Engine,
        header: SnapshotHeader,
        opts: SnapshotOptions,
    ) -> Result<ImageWriter, ImageError> {
        let point = engine.snapshot_begin().map_err(|_| ImageError::Busy)?;
        let header = SnapshotHeader {
            cas_next: point.cas_next,
            ..header
        };
        match SnapshotWriter::create(fs, path, header, opts) {
            Ok(writer) => Ok(ImageWriter {
                writer,
                point,
                shard: header.shard,
            }),
            Err(e) => {
                engine.snapshot_abort();
                Err(ImageError::File(e))
            }
        }
    }

    /// The point the image is of.
    pub fn point(&self) -> SnapPoint {
        self.point
    }

    pub fn shard(&self) -> u32 {
        self.shard
    }

    /// Writes the entries of the next `budget_buckets` main buckets (and those copied before
    /// a write since the last step). Returns true when every entry is in the file (then call
    /// [`ImageWriter::finish`]). On an error the engine's snapshot is aborted.
    pub fn step(&mut self, engine: &mut Engine, budget_buckets: u64) -> Result<bool, ImageError> {
        let mut failed = None;
        let writer = &mut self.writer;
        let done = engine.snapshot_step(budget_buckets, &mut |e: SnapEntry<'_>| {
            if failed.is_none() {
                if let Err(err) = writer.add(&entry_of(&e)) {
                    failed = Some(err);
                }
            }
        });
        match failed {
            Some(e) => {
                engine.snapshot_abort();
                Err(ImageError::File(e))
            }
            None => Ok(done),
        }
    }

    /// Where the engine's snapshot stands (`None` once every entry was emitted).
    pub fn progress(&self, engine: &Engine) -> Option<SnapProgress> {
        engine.snapshot_progress()
    }

    /// Writes the last block and the trailer and makes the file and its name durable.
    pub fn finish(self, fs: &dyn Fs) -> Result<SnapshotSummary, ImageError> {
        self.writer.finish(fs).map_err(ImageError::File)
    }

    /// Gives up: aborts the engine's snapshot. The incomplete file stays for the caller to
    /// remove (no reader accepts it: it has no trailer).
    pub fn abort(self, engine: &mut Engine) {
        engine.snapshot_abort();
    }
}

fn entry_of<'a>(e: &SnapEntry<'a>) -> Entry<'a> {
    Entry {
        key: e.key,
        value: e.value,
        deadline: e.deadline,
        meta: (e.cas != 0).then_some(ItemMeta {
            flags: e.flags,
            cas: e.cas,
        }),
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error("a snapshot of this engine is already being taken")]
    Busy,
    #[error(transparent)]
    File(#[from] SnapshotError),
}

/// The whole image of `engine` into `path` ([`ImageWriter::begin`]'s `header`), stepping
/// `budget_buckets` at a time with nothing run in between (a SAVE, tests, tools).
pub fn write_image(
    fs: &dyn Fs,
    path: &Path,
    engine: &mut Engine,
    header: SnapshotHeader,
    opts: SnapshotOptions,
    budget_buckets: u64,
) -> Result<SnapshotSummary, ImageError> {
    let mut w = ImageWriter::begin(fs, path, engine, header, opts)?;
    while !w.step(engine, budget_buckets)? {}
    w.finish(fs)
}

/// What [`load_image`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadSummary {
    pub header: SnapshotHeader,
    pub file: SnapshotSummary,
    /// Keys stored.
    pub loaded: u64,
    /// Entries left out: their deadline was at or before the engine's `now`.
    pub expired: u64,
    /// The engine's `cas_next` after the load: the header's (when not 0).
    pub cas_next: u64,
}

/// Loads the snapshot at `path` into `engine` (empty, or partly loaded: a key present is
/// replaced). Set the engine's `now` first: entries whose deadline is at or before it are
/// left out. Restores `cas_next` from the header (0 there: left as it is). Any damage, an
/// entry over the engine's limits or an arena too small is an error naming the file and the
/// offset of the block; entries before it may have been stored.
pub fn load_image(
    fs: &dyn Fs,
    path: &Path,
    engine: &mut Engine,
    limits: SnapshotLimits,
) -> Result<LoadSummary, SnapshotError> {
    load_image_observed(fs, path, engine, limits, |_| {})
}

/// [`load_image`], calling `observe(entries)` after each group of entries is stored with the
/// entries read so far (expired ones included): recovery's progress line.
pub fn load_image_observed(
    fs: &dyn Fs,
    path: &Path,
    engine: &mut Engine,
    limits: SnapshotLimits,
    mut observe: impl FnMut(u64),
) -> Result<LoadSummary, SnapshotError> {
    let mut batch = LoadBatch::default();
    let mut loaded = 0u64;
    let mut expired = 0u64;
    let lim = engine.limits();
    let mut flush = |batch: &mut LoadBatch, engine: &mut Engine| -> Result<(), String> {
        let r = batch.load(engine);
        batch.clear();
        let c = r?;
        loaded += c.loaded;
        expired += c.expired;
        observe(loaded + expired);
        Ok(())
    };
    let (header, file) = snapshot::read(fs, path, limits, |e| {
        // Limits are checked here, so an error names this entry's block.
        if e.key.is_empty() || e.key.len() > lim.key_len_max {
            return Err(format!(
                "key of {} bytes not in 1..={} (key_len_max)",
                e.key.len(),
                lim.key_len_max
            ));
        }
        if e.value.len() > lim.value_len_max {
            return Err(format!(
                "value of {} bytes over value_len_max {}",
                e.value.len(),
                lim.value_len_max
            ));
        }
        batch.push(e);
        if batch.len() == LOAD_BATCH_LEN {
            flush(&mut batch, engine)?;
        }
        Ok(())
    })?;
    flush(&mut batch, engine).map_err(|reason| SnapshotError::Load {
        path: path.to_path_buf(),
        offset: file.file_bytes,
        reason,
    })?;
    if header.cas_next != 0 {
        engine.set_cas_next(header.cas_next);
    }
    Ok(LoadSummary {
        header,
        file,
        loaded,
        expired,
        cas_next: engine.cas_next(),
    })
}

/// Entries copied out of a block (the reader lends each only for its call), or out of another
/// engine's image (recovery's re-sharding), loaded in groups of at most `LOAD_BATCH_LEN`.
#[derive(Default)]
pub struct LoadBatch {
    bytes: Vec<u8>,
    /// (key end, value end) in `bytes`, deadline, flags, cas.
    entries: Vec<(usize, usize, u64, u32, u64)>,
}

impl LoadBatch {
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn clear(&mut self) {
        self.bytes.clear();
        self.entries.clear();
    }

    fn push(&mut self, e: &Entry) {
        let m = e.meta.unwrap_or(ItemMeta { flags: 0, cas: 0 });
        self.push_parts(e.key, e.value, e.deadline, m.flags, m.cas);
    }

    /// Copies in an entry another engine's image lent (`Engine::snapshot_step`).
    pub fn push_entry(&mut self, e: &SnapEntry) {
        self.push_parts(e.key, e.value, e.deadline, e.flags, e.cas);
    }

    fn push_parts(&mut self, key: &[u8], value: &[u8], deadline: u64, flags: u32, cas: u64) {
        self.bytes.extend_from_slice(key);
        let kend = self.bytes.len();
        self.bytes.extend_from_slice(value);
        self.entries
            .push((kend, self.bytes.len(), deadline, flags, cas));
    }

    /// Stores the entries held (at most `LOAD_BATCH_LEN`) into `engine`
    /// (`Engine::load_entries`); the buffer keeps them until `clear`.
    pub fn load(&self, engine: &mut Engine) -> Result<directkv_engine::LoadCounts, String> {
        let empty = SnapEntry {
            key: &[],
            value: &[],
            deadline: 0,
            flags: 0,
            cas: 0,
        };
        assert!(
            self.entries.len() <= LOAD_BATCH_LEN,
            "a load batch holds at most LOAD_BATCH_LEN"
        );
        let mut group = [empty; LOAD_BATCH_LEN];
        let mut start = 0usize;
        for (slot, &(kend, vend, deadline, flags, cas)) in group.iter_mut().zip(&self.entries) {
            *slot = SnapEntry {
                key: &self.bytes[start..kend],
                value: &self.bytes[kend..vend],
                deadline,
                flags,
                cas,
            };
            start = vend;
        }
        let group = &group[..self.entries.len()];
        engine.load_entries(group).map_err(|(i, err)| {
            format!(
                "storing the key {:?}: {err}",
                String::from_utf8_lossy(&group[i].key[..group[i].key.len().min(64)])
            )
        })
    }
}
