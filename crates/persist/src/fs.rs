//! The file-system seam: every write, sync, rename and truncation of the persistence files goes
//! through [`Fs`], so tests can make it fail where a disk or a crash would.
//!
//! ```text
//!   log.rs manifest.rs snapshot.rs ──> dyn Fs ──> RealFs   (std::fs: write(2), fdatasync(2), ...)
//!                                             └─> FaultFs  (tests: RealFs plus one planned fault)
//! ```
//!
//! Goals: a small interface (the handful of operations the persistence code needs, no more), the
//! real implementation a thin layer over `std::fs` (no `unsafe`: std's `File::sync_data` is
//! fdatasync and a directory opened read-only can be fsynced), and a test implementation that
//! fails a write, writes short, fails an fsync, or "crashes" (every operation from the Nth on
//! fails without touching the disk, as if the process had died there).
//! Non-goals: faults on reads (recovery reads what is on the disk; damaged bytes are made by
//! editing files in tests), simulating the loss of unsynced data at power failure (the log's
//! durability argument rests on fdatasync, which the tests cannot observe from user space).

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// An open file of the persistence code.
pub trait FsFile: Send {
    /// One write(2) at the end of what was written so far; may write fewer bytes than given.
    fn write(&mut self, buf: &[u8]) -> io::Result<usize>;
    /// fdatasync(2): the data written so far, and the size, are on stable storage.
    fn sync_data(&mut self) -> io::Result<()>;
    /// Reads up to `buf.len()` bytes at `offset`; fewer only at the end of the file.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;
    /// The file's length in bytes.
    fn file_len(&self) -> io::Result<u64>;
    /// A second handle on the same open file (dup(2)), so another thread can fdatasync it
    /// while this one appends (the server's sync thread).
    fn try_clone(&self) -> io::Result<Box<dyn FsFile>>;
    /// The descriptor of a real file, through which the log may store its records into a
    /// shared mapping instead of a write(2) each (`LogWriter`); `None` (the default, and
    /// `FaultFs`'s files, whose writes are the faults' seam): every record is written.
    fn raw_fd(&self) -> Option<std::os::fd::RawFd> {
        None
    }
}

/// The file operations of the persistence code.
pub trait Fs: Send + Sync {
    /// Creates `path` for writing; fails if it exists.
    fn create_new(&self, path: &Path) -> io::Result<Box<dyn FsFile>>;
    /// Creates or empties `path` for writing (temporary files that are renamed into place).
    fn create_truncate(&self, path: &Path) -> io::Result<Box<dyn FsFile>>;
    /// Opens an existing `path` to append to it.
    fn open_append(&self, path: &Path) -> io::Result<Box<dyn FsFile>>;
    /// Opens an existing `path` for reading.
    fn open_read(&self, path: &Path) -> io::Result<Box<dyn FsFile>>;
    /// Cuts `path` to `len` bytes and syncs it.
    fn truncate(&self, path: &Path, len: u64) -> io::Result<()>;
    /// rename(2): atomically replaces `to`.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// fsync(2) of a directory: the names created, renamed or removed in it are durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// Removes `path`.
    fn remove(&self, path: &Path) -> io::Result<()>;
}

/// The real file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct RealFs;

struct RealFile(File);

impl FsFile for RealFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf)
    }
    fn sync_data(&mut self) -> io::Result<()> {
        self.0.sync_data()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let mut done = 0;
        while done < buf.len() {
            match self.0.read_at(&mut buf[done..], offset + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(done)
    }
    fn file_len(&self) -> io::Result<u64> {
        Ok(self.0.metadata()?.len())
    }
    fn try_clone(&self) -> io::Result<Box<dyn FsFile>> {
        Ok(Box::new(RealFile(self.0.try_clone()?)))
    }
    fn raw_fd(&self) -> Option<std::os::fd::RawFd> {
        Some(std::os::fd::AsRawFd::as_raw_fd(&self.0))
    }
}

impl Fs for RealFs {
    fn create_new(&self, path: &Path) -> io::Result<Box<dyn FsFile>> {
        let f = OpenOptions::new()
            .read(true)
            .append(true)
            .create_new(true)
            .open(path)?;
        Ok(Box::new(RealFile(f)))
    }
    fn create_truncate(&self, path: &Path) -> io::Result<Box<dyn FsFile>> {
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)?;
        Ok(Box::new(RealFile(f)))
    }
    fn open_append(&self, path: &Path) -> io::Result<Box<dyn FsFile>> {
        let f = OpenOptions::new().read(true).append(true).open(path)?;
        Ok(Box::new(RealFile(f)))
    }
    fn open_read(&self, path: &Path) -> io::Result<Box<dyn FsFile>> {
        Ok(Box::new(RealFile(File::open(path)?)))
    }
    fn truncate(&self, path: &Path, len: u64) -> io::Result<()> {
        let f = OpenOptions::new().write(true).open(path)?;
        f.set_len(len)?;
        f.sync_all()
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }
}

/// The fault a [`FaultFs`] injects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The Nth write (counted from 0) fails with ENOSPC and writes nothing.
    FailWrite(u64),
    /// The Nth write writes half its bytes (at least one) and reports that; the next write
    /// fails with ENOSPC, as a disk that fills up mid-write does.
    ShortWrite(u64),
    /// The Nth fdatasync or directory fsync fails with EIO.
    FailSync(u64),
    /// Operations from the Nth on (every call of `Fs` or `FsFile` that changes the disk:
    /// creations, writes, syncs, truncations, renames, removals) fail with EIO and do nothing:
    /// the process "died" before them.
    Crash(u64),
}

#[derive(Debug, Default)]
struct FaultState {
    writes: u64,
    syncs: u64,
    ops: u64,
    /// A short write happened: every later write fails.
    full: bool,
    /// Operations that were let through, for tests that count the steps of an update.
    done: u64,
}

/// A test file system: `RealFs` with one planned [`Fault`]. Clones share the counters.
#[derive(Debug, Clone)]
pub struct FaultFs {
    fault: Option<Fault>,
    state: Arc<Mutex<FaultState>>,
}

fn enospc() -> io::Error {
    io::Error::from_raw_os_error(28)
}

fn eio() -> io::Error {
    io::Error::from_raw_os_error(5)
}

/// What a counted operation may do.
enum Verdict {
    Go,
    Fail(io::Error),
    /// A write that may pass only this many bytes.
    Short(usize),
}

impl FaultFs {
    /// A file system that injects `fault` (None: none; it only counts).
    pub fn new(fault: Option<Fault>) -> FaultFs {
        FaultFs {
            fault,
            state: Arc::default(),
        }
    }

    /// Fills the disk (`true`: every write from now on fails with ENOSPC, as after a
    /// `ShortWrite`) or frees it (`false`: writes pass again), as an operator would.
    pub fn set_full(&self, full: bool) {
        self.state.lock().unwrap().full = full;
    }

    /// Operations let through so far (writes, syncs, creations, renames, truncations, removals).
    pub fn ops_done(&self) -> u64 {
        self.state.lock().unwrap().done
    }

    /// Counts one operation of this kind and decides its fate.
    fn judge(&self, write_len: Option<usize>, sync: bool) -> Verdict {
        let mut s = self.state.lock().unwrap();
        let op = s.ops;
        s.ops += 1;
        let verdict = match (self.fault, write_len) {
            (Some(Fault::Crash(n)), _) if op >= n => Verdict::Fail(eio()),
            (_, Some(_)) if s.full => Verdict::Fail(enospc()),
            (Some(Fault::FailWrite(n)), Some(_)) if s.writes == n => Verdict::Fail(enospc()),
            (Some(Fault::ShortWrite(n)), Some(len)) if s.writes == n => {
                s.full = true;
                Verdict::Short((len / 2).max(1).min(len))
            }
            (Some(Fault::FailSync(n)), None) if sync && s.syncs == n => Verdict::Fail(eio()),
            _ => Verdict::Go,
        };
        if write_len.is_some() {
            s.writes += 1;
        }
        if sync {
            s.syncs += 1;
        }
        if !matches!(verdict, Verdict::Fail(_)) {
            s.done += 1;
        }
        verdict
    }

    fn gate(&self, sync: bool) -> io::Result<()> {
        match self.judge(None, sync) {
            Verdict::Fail(e) => Err(e),
            _ => Ok(()),
        }
    }

    fn wrap(&self, f: io::Result<Box<dyn FsFile>>) -> io::Result<Box<dyn FsFile>> {
        Ok(Box::new(FaultFile {
            inner: f?,
            fs: self.clone(),
        }))
    }
}

struct FaultFile {
    inner: Box<dyn FsFile>,
    fs: FaultFs,
}

impl FsFile for FaultFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self.fs.judge(Some(buf.len()), false) {
            Verdict::Go => self.inner.write(buf),
            Verdict::Short(n) => self.inner.write(&buf[..n]),
            Verdict::Fail(e) => Err(e),
        }
    }
    fn sync_data(&mut self) -> io::Result<()> {
        self.fs.gate(true)?;
        self.inner.sync_data()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.inner.read_at(buf, offset)
    }
    fn file_len(&self) -> io::Result<u64> {
        self.inner.file_len()
    }
    fn try_clone(&self) -> io::Result<Box<dyn FsFile>> {
        Ok(Box::new(FaultFile {
            inner: self.inner.try_clone()?,
            fs: self.fs.clone(),
        }))
    }
}

impl Fs for FaultFs {
    fn create_new(&self, path: &Path) -> io::Result<Box<dyn FsFile>> {
        self.gate(false)?;
        self.wrap(RealFs.create_new(path))
    }
    fn create_truncate(&self, path: &Path) -> io::Result<Box<dyn FsFile>> {
        self.gate(false)?;
        self.wrap(RealFs.create_truncate(path))
    }
    fn open_append(&self, path: &Path) -> io::Result<Box<dyn FsFile>> {
        self.wrap(RealFs.open_append(path))
    }
    fn open_read(&self, path: &Path) -> io::Result<Box<dyn FsFile>> {
        self.wrap(RealFs.open_read(path))
    }
    fn truncate(&self, path: &Path, len: u64) -> io::Result<()> {
        self.gate(false)?;
        RealFs.truncate(path, len)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.gate(false)?;
        RealFs.rename(from, to)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.gate(true)?;
        RealFs.sync_dir(dir)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        self.gate(false)?;
        RealFs.remove(path)
    }
}

/// Writes all of `buf` with as few `write` calls as the file allows: one when it takes
/// everything (the usual case), more after a short write. Returns the bytes written before an
/// error along with it, so the caller knows how much of `buf` reached the file.
pub fn write_all(file: &mut dyn FsFile, buf: &[u8]) -> Result<(), (usize, io::Error)> {
    let mut done = 0;
    while done < buf.len() {
        match file.write(&buf[done..]) {
            Ok(0) => return Err((done, io::Error::from(io::ErrorKind::WriteZero))),
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err((done, e)),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("dkv-fs-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_short_write_is_followed_by_enospc() {
        let d = dir("short");
        let fs = FaultFs::new(Some(Fault::ShortWrite(1)));
        let mut f = fs.create_new(&d.join("f")).unwrap();
        assert_eq!(f.write(b"abcd").unwrap(), 4);
        assert_eq!(f.write(b"efgh").unwrap(), 2);
        assert_eq!(f.write(b"gh").unwrap_err().raw_os_error(), Some(28));
        assert_eq!(std::fs::read(d.join("f")).unwrap(), b"abcdef");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_crash_stops_every_later_operation() {
        let d = dir("crash");
        let fs = FaultFs::new(Some(Fault::Crash(2)));
        let mut f = fs.create_new(&d.join("f")).unwrap();
        f.write(b"ab").unwrap();
        assert!(f.sync_data().is_err());
        assert!(f.write(b"cd").is_err());
        assert!(fs.rename(&d.join("f"), &d.join("g")).is_err());
        assert_eq!(fs.ops_done(), 2);
        assert_eq!(std::fs::read(d.join("f")).unwrap(), b"ab");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
