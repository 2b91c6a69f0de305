//! An anonymous private memory mapping, advised to use huge pages, unmapped on drop (the
//! memory probe reads random lines of one to measure DRAM latency); and `populate_write`,
//! which faults a range of any mapping in without changing it (the server's index pre-fault);
//! and [`FileWindow`], a shared writable mapping of part of a file, with [`allocate`]
//! (fallocate) and [`write_zeros`] (its pages put in the page cache ahead), through which the
//! persistence log appends records without a write(2) each.

use std::io;

/// `len` bytes of zeroed, writable memory of our own.
pub struct Mapping {
    ptr: *mut u8,
    len: usize,
}

impl Mapping {
    /// Maps `len` bytes (huge pages asked for, best effort: with transparent huge pages off the
    /// mapping uses 4 KiB pages).
    pub fn new(len: usize) -> io::Result<Mapping> {
        // SAFETY: an anonymous mapping at a kernel-chosen address touches no existing memory.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `ptr..ptr+len` is the mapping just created; madvise only changes its policy.
        unsafe { libc::madvise(ptr, len, libc::MADV_HUGEPAGE) };
        Ok(Mapping {
            ptr: ptr.cast::<u8>(),
            len,
        })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The first byte, for callers that read the mapping through raw pointers (the probe's
    /// timed loops, which must not pay for bounds checks).
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr
    }

    /// Writes one byte every `stride` bytes so every page is faulted in and private.
    pub fn touch(&mut self, stride: usize) {
        for offset in (0..self.len).step_by(stride.max(1)) {
            // SAFETY: `offset < len`, inside the writable mapping. Volatile so the stores to
            // memory nothing reads back are not removed.
            unsafe { self.ptr.add(offset).write_volatile(offset as u8 | 1) };
        }
    }
}

/// Faults in `len` bytes from `addr` for writing without changing what they hold
/// (`madvise(MADV_POPULATE_WRITE)`, Linux 5.14): pages not yet present become zeroed private
/// pages (huge ones where the range is advised so), present ones are left as they are. So
/// another thread may run it over memory that its owner is reading and writing: it takes the
/// first-touch page faults off the owner's path (the server's index pre-fault). Errs where
/// the kernel lacks it (EINVAL) or part of the range is not mapped (ENOMEM).
pub fn populate_write(addr: *const u8, len: usize) -> io::Result<()> {
    // SAFETY: MADV_POPULATE_WRITE neither maps, unmaps nor writes data: it faults pages in as
    // a write would (zero-filled if absent, unchanged if present), and fails on any part of
    // the range that is not a writable mapping, so no address can make it corrupt memory.
    let rc = unsafe { libc::madvise(addr as *mut libc::c_void, len, libc::MADV_POPULATE_WRITE) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Makes `fd`'s file at least `offset + len` bytes long with its blocks allocated
/// (`fallocate(2)` mode 0): bytes past the old end read as zeros, and stores through a
/// [`FileWindow`] into the range cannot fail for want of space later (a shared mapping
/// reports that as SIGBUS), so a full disk is an error here instead.
pub fn allocate(fd: std::os::fd::RawFd, offset: u64, len: u64) -> io::Result<()> {
    let (Ok(off), Ok(len)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len)) else {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    };
    loop {
        // SAFETY: fallocate reads no memory of ours; a bad descriptor is an error return.
        let rc = unsafe { libc::fallocate(fd, 0, off, len) };
        if rc == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Bytes [`write_zeros`] writes per system call.
const ZEROS_BYTES: usize = 64 << 10;
static ZEROS: [u8; ZEROS_BYTES] = [0; ZEROS_BYTES];

/// Writes zeros over `fd`'s bytes `offset..offset + len` (pwrite(2)): puts the pages in the
/// page cache, dirty, so that stores through a [`FileWindow`] then find them there. On a
/// range [`allocate`]d before, it cannot fail for want of space. `fd` must not have been
/// opened with O_APPEND: Linux's pwrite appends on such a descriptor, whatever the offset. Cheaper than faulting the
/// pages of an allocated range in through the mapping (`populate_write`), which reads each
/// as a page of its own: 0.71-0.83 against 1.14-1.39 us per 4 KiB page, stores included,
/// on ext4 here.
pub fn write_zeros(fd: std::os::fd::RawFd, offset: u64, len: u64) -> io::Result<()> {
    let (mut at, end) = (offset, offset.saturating_add(len));
    while at < end {
        let n = ((end - at) as usize).min(ZEROS_BYTES);
        let Ok(off) = libc::off_t::try_from(at) else {
            return Err(io::Error::from(io::ErrorKind::InvalidInput));
        };
        // SAFETY: `ZEROS` is a static of at least `n` readable bytes; pwrite only reads them.
        let rc = unsafe { libc::pwrite(fd, ZEROS.as_ptr().cast(), n, off) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if rc == 0 {
            return Err(io::Error::from(io::ErrorKind::WriteZero));
        }
        at += rc as u64;
    }
    Ok(())
}

/// The size of a memory page (sysconf `_SC_PAGESIZE`), to which file mappings are aligned.
pub fn page_size() -> usize {
    // SAFETY: sysconf reads no memory of ours.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(n).unwrap_or(4096).max(1)
}

/// ftruncate(2): cuts (or extends with zeros) `fd`'s file to `len` bytes, without a sync.
pub fn set_len(fd: std::os::fd::RawFd, len: u64) -> io::Result<()> {
    let Ok(len) = libc::off_t::try_from(len) else {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    };
    // SAFETY: ftruncate reads no memory of ours; a bad descriptor is an error return.
    if unsafe { libc::ftruncate(fd, len) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `len` bytes of a file from `offset` (a multiple of the page size) mapped shared and
/// writable: stores land in the file's page cache, where a kill -9 of the process cannot lose
/// them, and fdatasync(2) of the file makes them durable as it does written bytes. Unmapped
/// on drop. The mapping may reach past the file's end; only bytes inside the file may be
/// stored to ([`FileWindow::store`]).
pub struct FileWindow {
    ptr: *mut u8,
    len: usize,
    offset: u64,
}

// SAFETY: the window is plain memory owned by its value (no thread-local state); moving it to
// another thread moves that ownership.
unsafe impl Send for FileWindow {}

impl FileWindow {
    /// Maps `len` bytes of `fd`'s file from `offset` (page-aligned).
    pub fn map(fd: std::os::fd::RawFd, offset: u64, len: usize) -> io::Result<FileWindow> {
        let Ok(off) = libc::off_t::try_from(offset) else {
            return Err(io::Error::from(io::ErrorKind::InvalidInput));
        };
        // SAFETY: a new shared mapping at a kernel-chosen address touches no existing memory;
        // a bad descriptor, offset or length is an error return.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                off,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(FileWindow {
            ptr: ptr.cast::<u8>(),
            len,
            offset,
        })
    }

    /// The file offset of the window's first byte.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The file offset just past the window.
    pub fn end(&self) -> u64 {
        self.offset + self.len as u64
    }

    /// Faults in the pages of file range `at..at + len` (clipped to the window) for writing
    /// ([`populate_write`]): one call instead of a page fault per page on the first stores.
    /// The caller must have made the file at least that long ([`allocate`]).
    pub fn populate(&self, at: u64, len: u64) -> io::Result<()> {
        let start = at.max(self.offset);
        let end = (at + len).min(self.end());
        if start >= end {
            return Ok(());
        }
        // SAFETY: `start - offset` is inside the mapping (clipped above).
        let addr = unsafe { self.ptr.add((start - self.offset) as usize) };
        populate_write(addr, (end - start) as usize)
    }

    /// Copies `bytes` to file offset `at`. Panics unless the range is inside the window; the
    /// caller must have made the file at least `at + bytes.len()` long ([`allocate`]): a store
    /// past the file's end raises SIGBUS.
    pub fn store(&mut self, at: u64, bytes: &[u8]) {
        assert!(
            at >= self.offset && at + bytes.len() as u64 <= self.end(),
            "a store outside the window"
        );
        let start = (at - self.offset) as usize;
        // SAFETY: `start..start + bytes.len()` is inside the live mapping (checked above), which
        // no Rust reference aliases (the window hands out none), and `bytes` is a distinct
        // allocation of the caller's.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.ptr.add(start), bytes.len());
        }
    }
}

impl Drop for FileWindow {
    fn drop(&mut self) {
        // SAFETY: `ptr` and `len` are exactly what mmap returned and was given.
        let rc = unsafe { libc::munmap(self.ptr.cast::<libc::c_void>(), self.len) };
        debug_assert_eq!(rc, 0, "munmap failed");
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `ptr` and `len` are exactly what mmap returned and was given; the mapping is
        // not borrowed past its owner (as_ptr's users hold `&self`).
        let rc = unsafe { libc::munmap(self.ptr.cast::<libc::c_void>(), self.len) };
        debug_assert_eq!(rc, 0, "munmap failed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stores_through_a_file_window_are_the_files_bytes() {
        use std::io::{Read, Seek, Write};
        use std::os::fd::AsRawFd;
        let path = std::env::temp_dir().join(format!("directkv-window-{}", std::process::id()));
        let mut f = std::fs::OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .unwrap();
        f.set_len(0).unwrap();
        f.write_all(b"head").unwrap();
        allocate(f.as_raw_fd(), 4, 8192).unwrap();
        assert_eq!(f.metadata().unwrap().len(), 8196);
        let mut w = FileWindow::map(f.as_raw_fd(), 4096, 1 << 20).unwrap();
        w.store(4096, b"second page");
        drop(w);
        let mut w = FileWindow::map(f.as_raw_fd(), 0, 1 << 20).unwrap();
        w.store(4, b"body");
        drop(w);
        let mut all = Vec::new();
        f.rewind().unwrap();
        f.read_to_end(&mut all).unwrap();
        assert_eq!(&all[..8], b"headbody");
        assert!(all[8..4096].iter().all(|&b| b == 0));
        assert_eq!(&all[4096..4107], b"second page");
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    #[should_panic(expected = "outside the window")]
    fn a_store_outside_the_window_panics() {
        use std::os::fd::AsRawFd;
        let path = std::env::temp_dir().join(format!("directkv-window-o-{}", std::process::id()));
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        allocate(f.as_raw_fd(), 0, 4096).unwrap();
        let mut w = FileWindow::map(f.as_raw_fd(), 0, 4096).unwrap();
        std::fs::remove_file(&path).unwrap();
        w.store(4090, b"12345678");
    }

    #[test]
    fn a_mapping_is_writable_and_readable() {
        let mut m = Mapping::new(1 << 16).unwrap();
        m.touch(4096);
        // SAFETY: offset 4096 is inside the 64 KiB mapping and was written by `touch`.
        let b = unsafe { m.as_ptr().add(4096).read() };
        assert_eq!(b, (4096u32 as u8) | 1);
        assert_eq!(m.len(), 1 << 16);
    }

    #[test]
    fn populate_write_keeps_what_the_pages_hold() {
        let mut m = Mapping::new(1 << 20).unwrap();
        m.touch(8192);
        populate_write(m.as_ptr(), m.len()).unwrap();
        // SAFETY: offsets 8192 (touched) and 4096 (populated, never written) are inside the
        // 1 MiB mapping.
        let (touched, fresh) =
            unsafe { (m.as_ptr().add(8192).read(), m.as_ptr().add(4096).read()) };
        assert_eq!((touched, fresh), ((8192u32 as u8) | 1, 0));
    }
}
