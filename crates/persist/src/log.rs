//! The per-shard log: an append-only file of checksummed, numbered records, a writer built for
//! group commit and a reader that replays the records and says how the file ends.
//!
//! ```text
//!   file   = header(32) record*
//!   header = magic "DKVLOG\r\n" | version u32 | shard u32 | first_lsn u64 | 0u32 | crc32c u32
//!   record = len u32 | lsn u64 | payload_crc u32 | header_crc u32 | payload (len bytes)
//!            (little-endian; header_crc covers the 16 bytes before it, payload_crc the payload;
//!             the first record's lsn is first_lsn and each next one is one more)
//! ```
//!
//! Writer: `append` frames a record into a buffer in memory and returns its [`Lsn`];
//! `write_out` hands everything appended since to the file: on a real file one copy into a
//! shared mapping of it (`Mapped`: no system call but the file's allocation and page faults
//! ahead), otherwise one write(2) (more only after a short write); `sync` adds one fdatasync
//! and returns the durable Lsn. A shard appends each executed batch, and one `write_out`
//! (and, under `appendfsync always`, one `sync`) serves every batch of a group before their
//! replies leave. After any write or sync error the
//! writer refuses everything (`LogError::Failed`): after a failed fsync Linux may have dropped
//! the dirty pages, so retrying could acknowledge data that is not on the disk; the way back is
//! to reopen the file (`LogWriter::open`), which rereads what really is there.
//!
//! Reader ([`scan`], [`replay`]): records are checked in order (header checksum, length within
//! `record_bytes_max`, the record within the file, payload checksum, the expected Lsn). At the
//! first bad record the reader looks for any good record after it (a valid header checksum, an
//! Lsn not yet seen, a valid payload): none means a **torn tail**, the end of a write that a
//! crash cut short, which recovery truncates and reports with the offset and bytes dropped;
//! one means **corruption** in the middle of the log, which no crash makes and recovery
//! refuses, naming the file and offset. The header checksum is what makes a record's length
//! trustworthy: with it good, the search starts after the damaged record, so a torn record
//! whose payload happens to contain bytes that look like a record is not mistaken for
//! corruption; with it bad, the search starts at the next byte.
//!
//! Why crc32c (the `crc32c` crate): it detects every error burst of up to 32 bits, which
//! covers any single bit flip for certain rather than with high probability; the SSE 4.2 and
//! ARMv8 instructions compute it at several GB/s, far above the disk's rate; and it is what
//! ext4, iSCSI, LevelDB and RocksDB use for the same job. xxh3 (already a dependency for the
//! key hash) is faster still but guarantees nothing for a given error pattern, and its 64
//! bits would cost 4 more bytes per checksum.

use std::io;
use std::path::{Path, PathBuf};

use crate::fs::{write_all, Fs, FsFile};

/// The magic bytes that open a log file.
pub const LOG_MAGIC: [u8; 8] = *b"DKVLOG\r\n";
/// The log format's version.
pub const LOG_VERSION: u32 = 1;
/// Bytes of the file header.
pub const LOG_HEADER_BYTES: usize = 32;
/// Bytes of a record's frame before its payload.
pub const RECORD_HEADER_BYTES: usize = 20;

/// Default of `LogLimits::record_bytes_max`: one batch's payload. A batch of writes larger
/// than this cannot be logged as one record, and a batch is all or nothing on replay.
pub const RECORD_BYTES_MAX_DEFAULT: usize = 64 << 20;
/// Default of `LogLimits::pending_bytes_max`: framed bytes appended but not yet written out.
pub const PENDING_BYTES_MAX_DEFAULT: usize = 128 << 20;
/// Bytes the reader asks of the file at a time.
const READ_WINDOW_BYTES: usize = 1 << 20;
/// Capacity the writer's buffer keeps after a `write_out`: a group of large batches once does
/// not leave the shard holding up to `pending_bytes_max` for good.
const PENDING_KEEP_BYTES: usize = 1 << 20;
/// A log on a real file stores its records through a shared mapping of it (`Mapped`): the
/// file is extended (fallocate) by this many bytes at a time, ahead of the records...
pub const LOG_ALLOCATE_BYTES: u64 = 4 << 20;
/// ... and one mapping covers this many bytes of it (a new one is made past its end): the
/// pages of a mapping count in the process's RSS while it lasts (64 MiB showed as +106 MB of
/// RSS in `bench compare`), so it is kept small; a new mapping costs two system calls.
pub const LOG_WINDOW_BYTES: usize = 8 << 20;
/// Pages of a mapped log are put in the page cache (zeros written) this many bytes at a
/// time, ahead of the records.
pub const LOG_POPULATE_BYTES: u64 = 256 << 10;

/// A record's sequence number: the first record of a store is 1, each next one is one more,
/// across log files (a log file's header says its first). 0 is "no record".
pub type Lsn = u64;

/// The log's named limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogLimits {
    /// Payload bytes of one record, checked by the writer before it frames a record and by
    /// the reader before it reads one (so a damaged length cannot make it allocate more).
    /// The reader's must be at least the writer's.
    pub record_bytes_max: usize,
    /// Framed bytes the writer holds between `write_out`s; an append past it is refused
    /// (`LogError::PendingFull`) until the caller writes out. At least one largest record.
    pub pending_bytes_max: usize,
}

impl Default for LogLimits {
    fn default() -> LogLimits {
        LogLimits {
            record_bytes_max: RECORD_BYTES_MAX_DEFAULT,
            pending_bytes_max: PENDING_BYTES_MAX_DEFAULT,
        }
    }
}

impl LogLimits {
    fn check(&self) -> Result<(), LogError> {
        if self.record_bytes_max == 0
            || self.record_bytes_max > u32::MAX as usize
            || self.pending_bytes_max < self.record_bytes_max + RECORD_HEADER_BYTES
        {
            return Err(LogError::Limits(*self));
        }
        Ok(())
    }
}

/// What can go wrong with a log.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("{path}: {op}: {source}")]
    Io {
        path: PathBuf,
        op: &'static str,
        source: io::Error,
    },
    #[error("{path}: corrupt at offset {offset}: {reason}")]
    Corrupt {
        path: PathBuf,
        offset: u64,
        reason: String,
    },
    #[error("{path}: replaying the record with lsn {lsn} at offset {offset}: {reason}")]
    Replay {
        path: PathBuf,
        lsn: Lsn,
        offset: u64,
        reason: String,
    },
    #[error("record of {len} bytes is over record_bytes_max ({max})")]
    RecordTooLarge { len: usize, max: usize },
    #[error("{pending} bytes appended and not written out: pending_bytes_max ({max}) reached")]
    PendingFull { pending: usize, max: usize },
    #[error("{path}: the log refuses writes after an earlier failure ({cause}); reopen it")]
    Failed { path: PathBuf, cause: String },
    #[error("log limits {0:?}: record_bytes_max must be 1..=u32::MAX and pending_bytes_max at least a framed record")]
    Limits(LogLimits),
}

/// The log file's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogHeader {
    pub shard: u32,
    pub first_lsn: Lsn,
}

impl LogHeader {
    fn encode(&self) -> [u8; LOG_HEADER_BYTES] {
        let mut h = [0u8; LOG_HEADER_BYTES];
        h[..8].copy_from_slice(&LOG_MAGIC);
        h[8..12].copy_from_slice(&LOG_VERSION.to_le_bytes());
        h[12..16].copy_from_slice(&self.shard.to_le_bytes());
        h[16..24].copy_from_slice(&self.first_lsn.to_le_bytes());
        let crc = crc32c::crc32c(&h[..28]);
        h[28..].copy_from_slice(&crc.to_le_bytes());
        h
    }

    fn decode(h: &[u8]) -> Result<LogHeader, String> {
        if h[..8] != LOG_MAGIC {
            return Err("not a directkv log (bad magic)".into());
        }
        if crc32c::crc32c(&h[..28]) != u32_at(h, 28) {
            return Err("log header checksum mismatch".into());
        }
        let version = u32_at(h, 8);
        if version != LOG_VERSION {
            return Err(format!(
                "log format version {version}, this build reads {LOG_VERSION}"
            ));
        }
        let first_lsn = u64_at(h, 16);
        if first_lsn == 0 {
            return Err("log header's first lsn is 0".into());
        }
        Ok(LogHeader {
            shard: u32_at(h, 12),
            first_lsn,
        })
    }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

fn io_err<'p>(path: &'p Path, op: &'static str) -> impl FnOnce(io::Error) -> LogError + 'p {
    move |source| LogError::Io {
        path: path.to_path_buf(),
        op,
        source,
    }
}

/// Writes the frame of a record whose payload is `out[at + RECORD_HEADER_BYTES..]`.
fn seal_frame(out: &mut [u8], at: usize, lsn: Lsn) {
    let len = (out.len() - at - RECORD_HEADER_BYTES) as u32;
    let payload_crc = crc32c::crc32c(&out[at + RECORD_HEADER_BYTES..]);
    let h = &mut out[at..at + RECORD_HEADER_BYTES];
    h[..4].copy_from_slice(&len.to_le_bytes());
    h[4..12].copy_from_slice(&lsn.to_le_bytes());
    h[12..16].copy_from_slice(&payload_crc.to_le_bytes());
    let header_crc = crc32c::crc32c(&h[..16]);
    h[16..20].copy_from_slice(&header_crc.to_le_bytes());
}

/// Appends one framed record to `out` (for tests and tools that build logs by hand).
pub fn frame_record(out: &mut Vec<u8>, lsn: Lsn, payload: &[u8]) {
    let at = out.len();
    out.resize(at + RECORD_HEADER_BYTES, 0);
    out.extend_from_slice(payload);
    seal_frame(out, at, lsn);
}

/// The appending side of one shard's log.
pub struct LogWriter {
    path: PathBuf,
    file: Box<dyn FsFile>,
    limits: LogLimits,
    /// Framed records appended since the last `write_out`.
    pending: Vec<u8>,
    next_lsn: Lsn,
    /// The last Lsn whose record is entirely in the file.
    written_lsn: Lsn,
    /// The last Lsn whose record the file system has made durable.
    durable_lsn: Lsn,
    file_bytes: u64,
    /// Set by the first write or sync error: the writer refuses everything after it.
    failed: Option<String>,
    /// Records stored through a mapping of the file instead of written (a real file).
    mapped: Option<Mapped>,
}

/// How a log on a real file takes its records without a write(2) each: the file is
/// allocated ahead (`allocate`, so the mapping's stores cannot run out of space: a full disk
/// is an error of `write_out`, not a SIGBUS) and the records are copied into a shared mapping
/// of it, which puts them in the page cache as write(2) does: a kill -9 cannot lose them and
/// fdatasync makes them durable. A write(2) of a batch's record cost the shard ~2 us of CPU
/// (ext4's write path per call; BENCHMARKS "Session 17"); a copy costs what its bytes do,
/// plus putting the pages ahead in the page cache (`LOG_POPULATE_BYTES` at a time: see
/// `LogWriter::set_ahead`). The file's tail past the last record reads as zeros until it is
/// cut on drop; a crash leaves it, and `scan` takes zeros after the last record for the
/// end of the log (a record never starts with zero bytes: its header checksum is not zero
/// for a zero header).
struct Mapped {
    fd: std::os::fd::RawFd,
    window: Option<directkv_sys::mapping::FileWindow>,
    /// The file's length as allocated: records may be stored up to here.
    allocated: u64,
    /// The pages of the file before this offset are in the page cache for writing.
    populated: u64,
    /// How pages ahead are put there (`LogWriter::set_ahead`).
    ahead: Ahead,
    /// The file opened once more for writing at an offset, for `Ahead::Zeros`: the log's own
    /// descriptor appends (O_APPEND), and Linux's pwrite(2) on such a descriptor appends too,
    /// whatever the offset. `None` if it could not be opened: pages are faulted in instead.
    zeros: Option<std::fs::File>,
}

/// How a mapped log puts the pages ahead of its records in the page cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ahead {
    /// Zeros written over them (pwrite): the cheapest (~0.75 us per 4 KiB page, the store's
    /// fault included, against 1.2-4 us), but the pages are dirty, so the next fdatasync
    /// writes the zeros out too. Right when syncs are rare (`everysec`, `no`).
    Zeros,
    /// Faulted in through the mapping (`MADV_POPULATE_WRITE`): clean until a record lands in
    /// them, so a sync writes only the records' pages. Right when every group of batches is
    /// synced (`always`): the zeros' writes made its fdatasync 10-20% slower.
    Faults,
}

impl std::fmt::Debug for LogWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogWriter")
            .field("path", &self.path)
            .field("next_lsn", &self.next_lsn)
            .field("written_lsn", &self.written_lsn)
            .field("durable_lsn", &self.durable_lsn)
            .field("failed", &self.failed)
            .finish()
    }
}

impl LogWriter {
    /// Creates the log file `path` (it must not exist) for `header`, and makes the file and
    /// its name durable before returning, so a manifest may name it.
    pub fn create(
        fs: &dyn Fs,
        path: &Path,
        header: LogHeader,
        limits: LogLimits,
    ) -> Result<LogWriter, LogError> {
        let mut writer = LogWriter::create_unsynced(fs, path, header, limits)?;
        writer.file.sync_data().map_err(io_err(path, "fdatasync"))?;
        fs.sync_dir(parent(path))
            .map_err(io_err(path, "fsync directory"))?;
        Ok(writer)
    }

    /// [`LogWriter::create`] without its fdatasync and directory fsync: the file exists with
    /// its header written, not yet durable. For a caller that must not wait for the disk (a
    /// shard rotating its log for a snapshot): it makes the file durable later, through a
    /// `sync_handle` and `Fs::sync_dir`, before any manifest names it.
    pub fn create_unsynced(
        fs: &dyn Fs,
        path: &Path,
        header: LogHeader,
        limits: LogLimits,
    ) -> Result<LogWriter, LogError> {
        limits.check()?;
        assert!(header.first_lsn > 0, "lsns start at 1");
        let mut file = fs.create_new(path).map_err(io_err(path, "create"))?;
        write_all(&mut *file, &header.encode()).map_err(|(_, e)| io_err(path, "write")(e))?;
        Ok(LogWriter::at(
            path,
            file,
            limits,
            header.first_lsn,
            LOG_HEADER_BYTES as u64,
        ))
    }

    /// Opens an existing log to append to it: scans it, truncates a torn tail, refuses
    /// corruption, and syncs what it found so nothing appended later is durable before it.
    pub fn open(
        fs: &dyn Fs,
        path: &Path,
        limits: LogLimits,
    ) -> Result<(LogWriter, LogScan), LogError> {
        let scan = replay(fs, path, limits, |_, _| Ok(()))?;
        let w = LogWriter::resume(fs, path, &scan, limits)?;
        Ok((w, scan))
    }

    /// Continues a log that `scan` (a [`replay`] of it, so without corruption) read: cuts a
    /// torn tail, syncs, and appends after the last good record.
    pub fn resume(
        fs: &dyn Fs,
        path: &Path,
        scan: &LogScan,
        limits: LogLimits,
    ) -> Result<LogWriter, LogError> {
        limits.check()?;
        match scan.end {
            // Ends in order, or in a mapped log's allocated tail (zeros), which is cut: the
            // next writer appends after the last record.
            LogEnd::Clean if scan.file_bytes == scan.good_bytes => {}
            LogEnd::Clean | LogEnd::TornTail { .. } => fs
                .truncate(path, scan.good_bytes)
                .map_err(io_err(path, "truncate"))?,
            LogEnd::Corrupt {
                offset, ref reason, ..
            } => {
                return Err(LogError::Corrupt {
                    path: path.to_path_buf(),
                    offset,
                    reason: reason.clone(),
                })
            }
        }
        let mut file = fs.open_append(path).map_err(io_err(path, "open"))?;
        file.sync_data().map_err(io_err(path, "fdatasync"))?;
        Ok(LogWriter::at(
            path,
            file,
            limits,
            scan.next_lsn,
            scan.good_bytes,
        ))
    }

    fn at(
        path: &Path,
        file: Box<dyn FsFile>,
        limits: LogLimits,
        next_lsn: Lsn,
        file_bytes: u64,
    ) -> LogWriter {
        let mapped = file.raw_fd().map(|fd| Mapped {
            fd,
            window: None,
            allocated: file_bytes,
            populated: 0,
            ahead: Ahead::Zeros,
            zeros: std::fs::OpenOptions::new().write(true).open(path).ok(),
        });
        LogWriter {
            path: path.to_path_buf(),
            file,
            limits,
            pending: Vec::new(),
            next_lsn,
            written_lsn: next_lsn - 1,
            durable_lsn: next_lsn - 1,
            file_bytes,
            failed: None,
            mapped,
        }
    }

    fn refuse_if_failed(&self) -> Result<(), LogError> {
        match &self.failed {
            None => Ok(()),
            Some(cause) => Err(LogError::Failed {
                path: self.path.clone(),
                cause: cause.clone(),
            }),
        }
    }

    /// Appends a record holding `payload` to the buffer; returns its Lsn. Nothing reaches the
    /// file before `write_out`.
    pub fn append(&mut self, payload: &[u8]) -> Result<Lsn, LogError> {
        self.append_with(|out| out.extend_from_slice(payload))
    }

    /// Appends a record whose payload `encode` writes at the end of the buffer it is given
    /// (saving the copy of `append`). `encode` must only append.
    pub fn append_with(&mut self, encode: impl FnOnce(&mut Vec<u8>)) -> Result<Lsn, LogError> {
        let lsn = self.append_if(|out| {
            encode(out);
            true
        })?;
        Ok(lsn.expect("an encoder that says yes appends a record"))
    }

    /// Like `append_with`, but `encode` may decline (return false, after appending nothing):
    /// then no record is appended and the answer is `None` (a batch of reads: `batch::encode_record`).
    pub fn append_if(
        &mut self,
        encode: impl FnOnce(&mut Vec<u8>) -> bool,
    ) -> Result<Option<Lsn>, LogError> {
        self.refuse_if_failed()?;
        let at = self.pending.len();
        self.pending.resize(at + RECORD_HEADER_BYTES, 0);
        if !encode(&mut self.pending) {
            self.pending.truncate(at);
            return Ok(None);
        }
        let len = self.pending.len() - at - RECORD_HEADER_BYTES;
        if len > self.limits.record_bytes_max {
            self.pending.truncate(at);
            return Err(LogError::RecordTooLarge {
                len,
                max: self.limits.record_bytes_max,
            });
        }
        if self.pending.len() > self.limits.pending_bytes_max {
            self.pending.truncate(at);
            return Err(LogError::PendingFull {
                pending: at,
                max: self.limits.pending_bytes_max,
            });
        }
        let lsn = self.next_lsn;
        seal_frame(&mut self.pending, at, lsn);
        self.next_lsn += 1;
        Ok(Some(lsn))
    }

    /// Writes every record appended since the last call, in one write(2) when the file takes
    /// it all; returns the last Lsn entirely in the file. On an error the records not written
    /// are not in the log (a part of one may be: a torn tail for the next reader) and the
    /// writer refuses everything after.
    pub fn write_out(&mut self) -> Result<Lsn, LogError> {
        self.refuse_if_failed()?;
        if self.pending.is_empty() {
            return Ok(self.written_lsn);
        }
        let written = match &mut self.mapped {
            Some(m) => m.store(self.file_bytes, &self.pending).map_err(|e| (0, e)),
            None => write_all(&mut *self.file, &self.pending),
        };
        match written {
            Ok(()) => {
                self.file_bytes += self.pending.len() as u64;
                self.pending.clear();
                if self.pending.capacity() > PENDING_KEEP_BYTES {
                    self.pending.shrink_to(PENDING_KEEP_BYTES);
                }
                self.written_lsn = self.next_lsn - 1;
                Ok(self.written_lsn)
            }
            Err((done, e)) => {
                self.file_bytes += done as u64;
                self.failed = Some(format!("write: {e}"));
                Err(io_err(&self.path, "write")(e))
            }
        }
    }

    /// Writes out and fdatasyncs: returns the last durable Lsn. On an error nothing new is
    /// durable as far as the caller may know, and the writer refuses everything after.
    pub fn sync(&mut self) -> Result<Lsn, LogError> {
        self.write_out()?;
        if self.durable_lsn == self.written_lsn {
            return Ok(self.durable_lsn);
        }
        match self.file.sync_data() {
            Ok(()) => {
                self.durable_lsn = self.written_lsn;
                Ok(self.durable_lsn)
            }
            Err(e) => {
                self.failed = Some(format!("fdatasync: {e}"));
                Err(io_err(&self.path, "fdatasync")(e))
            }
        }
    }

    /// A handle on the log file for another thread to fdatasync (`FsFile::sync_data`) while
    /// this writer appends: what it syncs is what was written out before the sync began, so
    /// the syncing thread reads `written_lsn` before it syncs and may call every record up to
    /// it durable after. A failed sync on it must be treated as this writer's failure.
    pub fn sync_handle(&self) -> Result<Box<dyn FsFile>, LogError> {
        self.file.try_clone().map_err(io_err(&self.path, "dup"))
    }

    /// Marks the writer failed (`cause`): a sync of its `sync_handle` failed elsewhere, so no
    /// later record may be acknowledged.
    pub fn fail(&mut self, cause: &str) {
        if self.failed.is_none() {
            self.failed = Some(cause.to_string());
        }
    }

    /// How the pages ahead of the records are put in the page cache, when the log is stored
    /// through a mapping (a log on a real file); the server sets it from its fsync policy.
    pub fn set_ahead(&mut self, ahead: Ahead) {
        if let Some(m) = &mut self.mapped {
            m.ahead = ahead;
        }
    }

    /// The Lsn the next `append` gets.
    pub fn next_lsn(&self) -> Lsn {
        self.next_lsn
    }
    /// The last Lsn entirely written to the file (first Lsn - 1: none).
    pub fn written_lsn(&self) -> Lsn {
        self.written_lsn
    }
    /// The last Lsn made durable by `sync` (first Lsn - 1: none).
    pub fn durable_lsn(&self) -> Lsn {
        self.durable_lsn
    }
    /// Bytes appended and not written out.
    pub fn pending_bytes(&self) -> usize {
        self.pending.len()
    }
    /// Bytes in the file, header included.
    pub fn file_bytes(&self) -> u64 {
        self.file_bytes
    }
    pub fn path(&self) -> &Path {
        &self.path
    }
    /// Why the writer refuses writes, if it does.
    pub fn failure(&self) -> Option<&str> {
        self.failed.as_deref()
    }
}

impl Mapped {
    /// Stores `bytes` at file offset `at` (the end of the records), allocating and mapping
    /// the file ahead as needed.
    fn store(&mut self, at: u64, bytes: &[u8]) -> io::Result<()> {
        use directkv_sys::mapping::{allocate, FileWindow};
        use std::os::fd::AsRawFd;
        let end = at + bytes.len() as u64;
        let page = directkv_sys::mapping::page_size() as u64;
        if end > self.allocated {
            let ahead = end.div_ceil(LOG_ALLOCATE_BYTES) * LOG_ALLOCATE_BYTES;
            self.allocated = match allocate(self.fd, self.allocated, ahead - self.allocated) {
                Ok(()) => ahead,
                // A disk with less than the step free still takes the records it has room
                // for: what this store needs, to the page.
                Err(e) if e.kind() == io::ErrorKind::StorageFull => {
                    let needed = end.div_ceil(page) * page;
                    allocate(self.fd, self.allocated, needed - self.allocated)?;
                    needed
                }
                Err(e) => return Err(e),
            };
        }
        let (mut at, mut rest) = (at, bytes);
        while !rest.is_empty() {
            let window = match &mut self.window {
                Some(w) if at >= w.offset() && at < w.end() => w,
                _ => {
                    self.window = None;
                    // A new mapping has no page faulted in.
                    self.populated = 0;
                    let w = FileWindow::map(self.fd, at / page * page, LOG_WINDOW_BYTES)?;
                    self.window.insert(w)
                }
            };
            let n = rest.len().min((window.end() - at) as usize);
            if at + n as u64 > self.populated {
                // The pages ahead put in the page cache at once, up to the allocated end
                // (`Ahead`): zeros are written past the records only (from `at` or what was
                // put there already), faults may start at `at`'s page (they change nothing).
                // A store into a page not in the cache has its fault read it first, a page at
                // a time: ~4% of a saturated shard under everysec.
                let from = self.populated.max(at);
                let to = ((at + n as u64).div_ceil(LOG_POPULATE_BYTES) * LOG_POPULATE_BYTES)
                    .min(self.allocated);
                let _ = match (self.ahead, &self.zeros) {
                    (Ahead::Zeros, Some(f)) => {
                        directkv_sys::mapping::write_zeros(f.as_raw_fd(), from, to - from)
                    }
                    _ => window.populate(from / page * page, to - from / page * page),
                };
                self.populated = to.min(window.end());
            }
            window.store(at, &rest[..n]);
            at += n as u64;
            rest = &rest[n..];
        }
        Ok(())
    }
}

impl Drop for LogWriter {
    /// A mapped log's allocated tail past its last record is cut, so a log closed in order
    /// (a rotation's old log, a server stopping) is exactly its records. Not synced: the sync
    /// thread's next fdatasync of the file carries it, and a crash before that leaves zeros,
    /// which `scan` reads as the end.
    fn drop(&mut self) {
        if let Some(m) = &mut self.mapped {
            m.window = None;
            if m.allocated > self.file_bytes {
                let _ = directkv_sys::mapping::set_len(m.fd, self.file_bytes);
            }
        }
    }
}

fn parent(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// How a scanned log ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogEnd {
    /// After the last record: at the end of the file, or where only zeros follow (the
    /// allocated tail of a mapped log a crash left; `LogScan::good_bytes` < `file_bytes`).
    Clean,
    /// A partial or damaged last record from `offset` to the end of the file, with no good
    /// record after it: the end of a write cut short. Recovery truncates it.
    TornTail { offset: u64, bytes_dropped: u64 },
    /// A bad record at `offset` with a good one after it, at `next_good`: damage no crash
    /// makes. Recovery refuses it.
    Corrupt {
        offset: u64,
        reason: String,
        next_good: u64,
    },
}

/// What a scan of a log found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogScan {
    pub header: LogHeader,
    /// Good records, from the first.
    pub records: u64,
    /// The Lsn after the last good record.
    pub next_lsn: Lsn,
    /// The offset after the last good record: where the log continues.
    pub good_bytes: u64,
    pub file_bytes: u64,
    pub end: LogEnd,
}

/// A reader's view of a file: a window of bytes refilled on demand.
struct Window<'f> {
    file: &'f dyn FsFile,
    len: u64,
    buf: Vec<u8>,
    start: u64,
}

impl Window<'_> {
    /// The `n` bytes at `off`; the caller checked `off + n <= len`.
    fn get(&mut self, off: u64, n: usize) -> io::Result<&[u8]> {
        let end = off + n as u64;
        debug_assert!(end <= self.len);
        if off < self.start || end > self.start + self.buf.len() as u64 {
            let want = n.max(READ_WINDOW_BYTES).min((self.len - off) as usize);
            self.buf.resize(want, 0);
            let got = self.file.read_at(&mut self.buf, off)?;
            if got < want {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the file shrank while it was read",
                ));
            }
            self.start = off;
        }
        let at = (off - self.start) as usize;
        Ok(&self.buf[at..at + n])
    }
}

/// One frame's state.
enum Frame {
    Good {
        lsn: Lsn,
        len: usize,
    },
    /// Damaged: why, and where a search for a good record after it may start.
    Bad {
        reason: String,
        resume: u64,
    },
    /// The frame reaches past the end of the file.
    Partial,
}

fn frame_at(w: &mut Window, off: u64, limits: &LogLimits) -> io::Result<Frame> {
    if w.len - off < RECORD_HEADER_BYTES as u64 {
        return Ok(Frame::Partial);
    }
    let h = w.get(off, RECORD_HEADER_BYTES)?;
    let (len, lsn, payload_crc) = (u32_at(h, 0) as usize, u64_at(h, 4), u32_at(h, 12));
    if crc32c::crc32c(&h[..16]) != u32_at(h, 16) {
        return Ok(Frame::Bad {
            reason: "record header checksum mismatch".into(),
            resume: off + 1,
        });
    }
    if len > limits.record_bytes_max {
        return Ok(Frame::Bad {
            reason: format!(
                "record length {len} over record_bytes_max ({})",
                limits.record_bytes_max
            ),
            resume: off + 1,
        });
    }
    let end = off + (RECORD_HEADER_BYTES + len) as u64;
    if end > w.len {
        return Ok(Frame::Partial);
    }
    let payload = w.get(off + RECORD_HEADER_BYTES as u64, len)?;
    if crc32c::crc32c(payload) != payload_crc {
        return Ok(Frame::Bad {
            reason: format!("payload checksum mismatch in the record with lsn {lsn}"),
            resume: end,
        });
    }
    Ok(Frame::Good { lsn, len })
}

/// Whether every byte from `off` to the end of the file is zero.
fn zeros_to_end(w: &mut Window, off: u64) -> io::Result<bool> {
    let mut at = off;
    while at < w.len {
        let n = (w.len - at).min(READ_WINDOW_BYTES as u64) as usize;
        if w.get(at, n)?.iter().any(|&b| b != 0) {
            return Ok(false);
        }
        at += n as u64;
    }
    Ok(true)
}

/// The offset of the first good record at or after `from` whose Lsn is `lsn_min` or later.
fn find_good(
    w: &mut Window,
    from: u64,
    lsn_min: Lsn,
    limits: &LogLimits,
) -> io::Result<Option<u64>> {
    let mut p = from;
    let len = w.len;
    while p + RECORD_HEADER_BYTES as u64 <= len {
        let h = w.get(p, RECORD_HEADER_BYTES)?;
        let lsn = u64_at(h, 4);
        // Every record takes at least a header, which bounds how far ahead a real Lsn can be:
        // a cheap filter before the checksum.
        let plausible = lsn >= lsn_min && lsn - lsn_min <= (len - p) / RECORD_HEADER_BYTES as u64;
        if plausible && crc32c::crc32c(&h[..16]) == u32_at(h, 16) {
            if let Frame::Good { .. } = frame_at(w, p, limits)? {
                return Ok(Some(p));
            }
        }
        p += 1;
    }
    Ok(None)
}

/// Reads the log at `path`, calling `apply(lsn, payload)` for each good record in order, and
/// reports how it ends. Corruption is reported in `LogScan::end`, not as an error (the
/// records before it were applied); see [`replay`] for the refusing variant. Errors: the file
/// cannot be read, its header is damaged, or `apply` failed.
pub fn scan(
    fs: &dyn Fs,
    path: &Path,
    limits: LogLimits,
    mut apply: impl FnMut(Lsn, &[u8]) -> Result<(), String>,
) -> Result<LogScan, LogError> {
    let file = fs.open_read(path).map_err(io_err(path, "open"))?;
    let len = file.file_len().map_err(io_err(path, "stat"))?;
    let corrupt = |offset: u64, reason: String| LogError::Corrupt {
        path: path.to_path_buf(),
        offset,
        reason,
    };
    if len < LOG_HEADER_BYTES as u64 {
        return Err(corrupt(
            0,
            format!("{len} bytes, shorter than the log header ({LOG_HEADER_BYTES})"),
        ));
    }
    let mut w = Window {
        file: &*file,
        len,
        buf: Vec::new(),
        start: 0,
    };
    let read = io_err(path, "read");
    let header = match w.get(0, LOG_HEADER_BYTES) {
        Ok(h) => LogHeader::decode(h).map_err(|r| corrupt(0, r))?,
        Err(e) => return Err(read(e)),
    };
    let mut off = LOG_HEADER_BYTES as u64;
    let mut lsn = header.first_lsn;
    let mut records = 0;
    let end = loop {
        if off == len {
            break LogEnd::Clean;
        }
        let frame = frame_at(&mut w, off, &limits).map_err(io_err(path, "read"))?;
        let (reason, resume) = match frame {
            Frame::Good { lsn: l, len: n } if l == lsn => {
                let start = off + RECORD_HEADER_BYTES as u64;
                let payload = w.get(start, n).map_err(io_err(path, "read"))?;
                apply(lsn, payload).map_err(|reason| LogError::Replay {
                    path: path.to_path_buf(),
                    lsn,
                    offset: off,
                    reason,
                })?;
                off = start + n as u64;
                lsn += 1;
                records += 1;
                continue;
            }
            Frame::Good { lsn: l, len: n } => (
                format!("record has lsn {l}, expected {lsn}"),
                off + (RECORD_HEADER_BYTES + n) as u64,
            ),
            Frame::Bad { .. } | Frame::Partial
                if zeros_to_end(&mut w, off).map_err(io_err(path, "read"))? =>
            {
                // The allocated tail of a mapped log that a crash left (`Mapped`): no record
                // was ever stored there.
                break LogEnd::Clean;
            }
            Frame::Bad { reason, resume } => (reason, resume),
            Frame::Partial => {
                break LogEnd::TornTail {
                    offset: off,
                    bytes_dropped: len - off,
                }
            }
        };
        break match find_good(&mut w, resume, lsn, &limits).map_err(io_err(path, "read"))? {
            Some(next_good) => LogEnd::Corrupt {
                offset: off,
                reason,
                next_good,
            },
            None => LogEnd::TornTail {
                offset: off,
                bytes_dropped: len - off,
            },
        };
    };
    Ok(LogScan {
        header,
        records,
        next_lsn: lsn,
        good_bytes: off,
        file_bytes: len,
        end,
    })
}

/// The header of the log at `path` alone (recovery's look at a log the manifest does not
/// name). Errors: the file cannot be read, or its header is short or damaged.
pub fn read_header(fs: &dyn Fs, path: &Path) -> Result<LogHeader, LogError> {
    let file = fs.open_read(path).map_err(io_err(path, "open"))?;
    let mut h = [0u8; LOG_HEADER_BYTES];
    let got = file.read_at(&mut h, 0).map_err(io_err(path, "read"))?;
    let corrupt = |reason: String| LogError::Corrupt {
        path: path.to_path_buf(),
        offset: 0,
        reason,
    };
    if got < LOG_HEADER_BYTES {
        return Err(corrupt(format!(
            "{got} bytes, shorter than the log header ({LOG_HEADER_BYTES})"
        )));
    }
    LogHeader::decode(&h).map_err(corrupt)
}

/// [`scan`] for recovery: corruption is an error naming the file and offset.
pub fn replay(
    fs: &dyn Fs,
    path: &Path,
    limits: LogLimits,
    apply: impl FnMut(Lsn, &[u8]) -> Result<(), String>,
) -> Result<LogScan, LogError> {
    let s = scan(fs, path, limits, apply)?;
    if let LogEnd::Corrupt {
        offset, ref reason, ..
    } = s.end
    {
        return Err(LogError::Corrupt {
            path: path.to_path_buf(),
            offset,
            reason: reason.clone(),
        });
    }
    Ok(s)
}

/// Bytes of payload [`scan_ahead`]'s reading thread gathers before it hands them over.
const AHEAD_CHUNK_BYTES: usize = 256 << 10;
/// Chunks handed over and not yet applied: what bounds [`scan_ahead`]'s memory (about this
/// many times `AHEAD_CHUNK_BYTES`, or `record_bytes_max` for a chunk of one large record).
const AHEAD_CHUNKS: usize = 4;

/// Good records' payloads one after the other, with each record's Lsn and where it ends.
#[derive(Default)]
struct Chunk {
    bytes: Vec<u8>,
    records: Vec<(Lsn, usize)>,
}

/// [`scan`] with the reading and checking on a thread of its own: that thread reads the file
/// and checks every record (the same [`scan`]), and hands the good payloads over in chunks of
/// about `AHEAD_CHUNK_BYTES` (at most `AHEAD_CHUNKS` waiting), while the calling thread runs
/// `apply` on them in order. Recovery uses it so that a shard's loading thread spends its
/// time in the engine: on a machine with a core to spare, reading and checksums cost the
/// load nothing.
///
/// Same answers as [`scan`]: `apply` is called for the same records in the same order, an
/// `apply` error is `LogError::Replay` naming the record's Lsn and offset (and the reading
/// stops soon after: its thread finds the hand-over closed), and how the file ends is
/// [`scan`]'s. When the thread cannot be started, this is [`scan`].
pub fn scan_ahead(
    fs: &dyn Fs,
    path: &Path,
    limits: LogLimits,
    mut apply: impl FnMut(Lsn, &[u8]) -> Result<(), String>,
) -> Result<LogScan, LogError> {
    use std::sync::mpsc;
    let (full_tx, full_rx) = mpsc::sync_channel::<Chunk>(AHEAD_CHUNKS);
    let (free_tx, free_rx) = mpsc::channel::<Chunk>();
    std::thread::scope(|scope| {
        let read = move || {
            let mut chunk = Chunk::default();
            let scanned = scan(fs, path, limits, |lsn, payload| {
                chunk.bytes.extend_from_slice(payload);
                chunk.records.push((lsn, chunk.bytes.len()));
                if chunk.bytes.len() >= AHEAD_CHUNK_BYTES {
                    let next = free_rx.try_recv().unwrap_or_default();
                    full_tx
                        .send(std::mem::replace(&mut chunk, next))
                        .map_err(|_| "the replay stopped".to_string())?;
                }
                Ok(())
            });
            if !chunk.records.is_empty() {
                let _ = full_tx.send(chunk);
            }
            scanned
        };
        let reader = match std::thread::Builder::new()
            .name("log-read".into())
            .spawn_scoped(scope, read)
        {
            Ok(reader) => reader,
            Err(_) => return None,
        };
        // Where the next record starts: records are consecutive from the header on.
        let mut offset = LOG_HEADER_BYTES as u64;
        let mut failed = None;
        'chunks: for mut chunk in full_rx.iter() {
            let mut start = 0;
            for &(lsn, end) in &chunk.records {
                if let Err(reason) = apply(lsn, &chunk.bytes[start..end]) {
                    failed = Some(LogError::Replay {
                        path: path.to_path_buf(),
                        lsn,
                        offset,
                        reason,
                    });
                    break 'chunks;
                }
                offset += (RECORD_HEADER_BYTES + end - start) as u64;
                start = end;
            }
            chunk.bytes.clear();
            chunk.records.clear();
            let _ = free_tx.send(chunk);
        }
        // Closing the hand-over (on an error) stops the reader at its next chunk.
        drop(full_rx);
        let scanned = reader
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        Some(match failed {
            Some(e) => Err(e),
            None => scanned,
        })
    })
    .unwrap_or_else(|| scan(fs, path, limits, apply))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(b: &[u8]) -> String {
        b.iter()
            .map(|x| format!("{x:02x}"))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The test vectors of docs/persistence.md.
    #[test]
    fn the_documented_test_vectors() {
        let h = LogHeader {
            shard: 0,
            first_lsn: 1,
        }
        .encode();
        let mut payload = vec![];
        let head = crate::batch::RecordHead {
            now: 1000,
            flush: false,
            cas_before: 1,
            cas_after: 2,
        };
        let put = [directkv_engine::Op::put(b"k", b"v")];
        crate::batch::encode_record(&mut payload, &head, [], &put, []);
        let mut rec = vec![];
        frame_record(&mut rec, 1, &payload);
        assert_eq!(
            hex(&h),
            "44 4b 56 4c 4f 47 0d 0a 01 00 00 00 00 00 00 00 \
             01 00 00 00 00 00 00 00 00 00 00 00 05 7c 6e bc"
        );
        assert_eq!(
            hex(&rec),
            "2b 00 00 00 01 00 00 00 00 00 00 00 d8 e3 ab 57 6c 14 0a cc \
             03 00 e8 03 00 00 00 00 00 00 01 00 00 00 00 00 00 00 \
             02 00 00 00 00 00 00 00 00 00 00 00 01 00 00 00 \
             81 01 01 6b 76 00 00 00 00"
        );
    }
}
