//! An anonymous private memory mapping, advised to use huge pages, unmapped on drop (the
//! memory probe reads random lines of one to measure DRAM latency).

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
}
