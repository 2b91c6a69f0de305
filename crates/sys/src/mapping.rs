//! An anonymous private memory mapping, advised to use huge pages, unmapped on drop (the
//! memory probe reads random lines of one to measure DRAM latency); and `populate_write`,
//! which faults a range of any mapping in without changing it (the server's index pre-fault).

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
